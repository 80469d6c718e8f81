#include "redis/pipeline.h"

#include <algorithm>

#include "redis/command.h"

namespace redisched::redis {

Pipeline::Pipeline(std::function<void(const Reply&)> on_push) : on_push_(std::move(on_push)) {}

void Pipeline::enqueue(std::string_view command, ReplyHandler done, Clock::time_point now) {
  out_ += command;
  waiting_.push_back({std::move(done), now, {}});
}

void Pipeline::enqueue_unsubscribe(std::string_view command, std::string channel, ReplyHandler done,
                                   Clock::time_point now) {
  out_ += command;
  waiting_.push_back({std::move(done), now, std::move(channel)});
}

void Pipeline::enqueue_replicated(std::string_view command, int replicas,
                                  std::chrono::milliseconds timeout, ReplyHandler done,
                                  Clock::time_point now) {
  auto r = std::make_shared<Replicated>();
  r->replicas = replicas;
  r->done = std::move(done);
  enqueue(
      command,
      [r](std::error_code ec, Reply reply) {
        // The connection failed before the command's reply: answer now, in
        // order with the commands around it; its WAIT, if written, fails too.
        if (ec) {
          r->answered = true;
          return r->done(ec, std::move(reply));
        }
        r->reply = std::move(reply);
      },
      now);
  replicated_.push_back(std::move(r));
  wait_replicas_ = std::max(wait_replicas_, replicas);
  wait_timeout_ = std::max(wait_timeout_, timeout);
}

void Pipeline::take_output(std::string& into) {
  if (!replicated_.empty()) {
    const std::string replicas = std::to_string(wait_replicas_);
    const std::string timeout = std::to_string(wait_timeout_.count());
    enqueue(encode_command({"WAIT", replicas, timeout}),
            [writes = std::move(replicated_), timeout = wait_timeout_](std::error_code ec,
                                                                       Reply reply) {
              for (const auto& w : writes) {
                if (!w->answered)
                  answer_replicated(std::move(w->reply), w->replicas, timeout, ec, reply, w->done);
              }
            });
    replicated_.clear();
    wait_replicas_ = 0;
    wait_timeout_ = std::chrono::milliseconds{0};
  }
  into.clear();
  into.swap(out_);
}

void answer_replicated(Reply reply, int replicas, std::chrono::milliseconds timeout,
                       std::error_code wait_ec, const Reply& wait_reply, const ReplyHandler& done) {
  if (reply.is_error()) return done(std::error_code(), std::move(reply));
  Reply e;
  e.type = Reply::Type::error;
  if (wait_ec) {
    e.str = "done on the primary, but WAIT failed: " + wait_reply.str;
    return done(wait_ec, std::move(e));
  }
  if (wait_reply.type != Reply::Type::integer) {
    e.str = "ERR WAIT answered " + (wait_reply.is_error() ? wait_reply.str : "no count");
    return done(std::error_code(), std::move(e));
  }
  if (wait_reply.integer < replicas) {
    e.str = "done on the primary, but only " + std::to_string(wait_reply.integer) + " of " +
            std::to_string(replicas) + " replicas had it within " +
            std::to_string(timeout.count()) + " ms (a failover may lose it)";
    return done(make_error_code(Errc::timeout), std::move(e));
  }
  done(std::error_code(), std::move(reply));
}

bool Pipeline::is_push(const Reply& r) {
  return r.type == Reply::Type::array && r.elements.size() == 3 &&
         (r.elements[0].str == "smessage" || r.elements[0].str == "message");
}

void Pipeline::deliver(Reply reply, Clock::time_point now) {
  if (on_push_ && (is_push(reply) ||
                   (is_unsubscribe(reply) && (waiting_.empty() || waiting_.front().unsubscribing !=
                                                                      reply.elements[1].str)))) {
    on_push_(reply);
    return;
  }
  if (waiting_.empty()) throw Error(Errc::protocol, "a reply nobody asked for");
  last_reply_ = now;
  // Off the queue before the call: the callback may queue more.
  Waiting w = std::move(waiting_.front());
  waiting_.pop_front();
  w.done(std::error_code(), std::move(reply));
}

bool Pipeline::is_unsubscribe(const Reply& r) {
  return r.type == Reply::Type::array && r.elements.size() == 3 &&
         r.elements[0].str == "sunsubscribe";
}

void Pipeline::fail_all(Errc code, const std::string& message) {
  std::deque<Waiting> failing;
  failing.swap(waiting_);
  out_.clear();
  // Replicated writes not yet written are among `failing` and answer there,
  // in order; their WAIT never goes out.
  replicated_.clear();
  wait_replicas_ = 0;
  wait_timeout_ = std::chrono::milliseconds{0};
  for (auto& w : failing) {
    Reply r;
    r.type = Reply::Type::error;
    r.str = message;
    w.done(make_error_code(code), std::move(r));
  }
}

std::optional<Pipeline::Clock::time_point> Pipeline::oldest() const {
  if (waiting_.empty()) return std::nullopt;
  return std::max(waiting_.front().sent, last_reply_);
}

}  // namespace redisched::redis
