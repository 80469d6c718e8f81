#include "redis/pipeline.h"

#include <algorithm>
#include <utility>

#include "redis/command.h"

namespace redisched::redis {

Pipeline::Pipeline(std::function<void(const Reply&)> on_push) : on_push_(std::move(on_push)) {}

void Pipeline::enqueue(std::string_view command, ReplyHandler done, Clock::time_point now) {
  seal();
  ++unsent_;
  out_ += command;
  waiting_.push_back({std::move(done), now, {}});
}

void Pipeline::enqueue_unsubscribe(std::string_view command, std::string channel, ReplyHandler done,
                                   Clock::time_point now) {
  seal();
  ++unsent_;
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

bool Pipeline::joins(const Open& open, const Batchable& call) {
  return !open.dones.empty() && open.kind == call.kind && open.dones.size() < kMaxCoalesced &&
         open.parts.size() + call.part.size() <= kMaxCoalescedBytes && open.head == call.head &&
         open.tail == call.tail;
}

void Pipeline::enqueue_batchable(Batchable call, ReplyHandler done, Clock::time_point now) {
  if (!joins(open_, call)) {
    seal();
    open_.kind = call.kind;
    open_.head = std::move(call.head);
    open_.head_words = call.head_words;
    open_.tail = std::move(call.tail);
    open_.tail_words = call.tail_words;
    open_.since = now;
    open_.single = std::move(call.single);
  }
  ++unsent_;
  open_.parts += call.part;
  open_.part_words += call.part_words;
  open_.dones.push_back(std::move(done));
}

// The callers of one batched call, waiting for its reply.
struct Pipeline::Coalesced {
  const BatchKind* kind = nullptr;
  std::vector<ReplyHandler> dones;
};

void Pipeline::seal() {
  if (open_.dones.empty()) return;
  Open o = std::exchange(open_, Open{});
  if (o.dones.size() == 1) {
    out_ += o.single;
    waiting_.push_back({std::move(o.dones.front()), o.since, {}});
    return;
  }
  const std::size_t n = o.dones.size();
  const std::string count = std::to_string(n);
  const std::string_view call[] = {"FCALL", o.kind->function()};
  const std::string_view counted[] = {count};
  append_array_header(out_, 2 + o.head_words + 1 + o.part_words + o.tail_words);
  append_words(out_, call);
  out_ += o.head;
  append_words(out_, counted);
  out_ += o.parts;
  out_ += o.tail;
  auto c = std::make_shared<Coalesced>();
  c->kind = o.kind;
  c->dones = std::move(o.dones);
  waiting_.push_back(
      {[c](std::error_code ec, Reply reply) { answer(*c, ec, std::move(reply)); }, o.since, {}});
}

void Pipeline::answer(Coalesced& c, std::error_code ec, Reply reply) {
  const std::size_t n = c.dones.size();
  if (ec) {
    for (auto& done : c.dones) done(ec, reply);
    return;
  }
  if (reply.is_error()) {
    // Refused as a whole: the Client sends alone what the library would
    // refuse (core/coalesce.h), so this is every call's answer (the node
    // moved, is read-only, out of memory...).
    for (auto& done : c.dones) done(std::error_code(), reply);
    return;
  }
  std::vector<Reply> parts;
  if (!c.kind->split(std::move(reply), n, parts) || parts.size() != n) {
    Reply e;
    e.type = Reply::Type::error;
    e.str = "unexpected reply to a batched " + std::string(c.kind->function());
    for (auto& done : c.dones) done(make_error_code(Errc::protocol), e);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) c.dones[i](std::error_code(), std::move(parts[i]));
}

void Pipeline::take_output(std::string& into) {
  seal();
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
  unsent_ = 0;
}

void answer_replicated(Reply reply, int replicas, std::chrono::milliseconds timeout,
                       std::error_code wait_ec, const Reply& wait_reply, const ReplyHandler& done) {
  if (reply.is_error()) return done(std::error_code(), std::move(reply));
  Reply e;
  e.type = Reply::Type::error;
  // The command's own reply goes along: a refusal (it changed nothing) is
  // its caller's answer whatever the replicas did.
  const auto with_reply = [&] { e.elements.push_back(std::move(reply)); };
  if (wait_ec) {
    e.str = "done on the primary, but WAIT failed: " + wait_reply.str;
    with_reply();
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
    with_reply();
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
  seal();
  std::deque<Waiting> failing;
  failing.swap(waiting_);
  out_.clear();
  unsent_ = 0;
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
  if (waiting_.empty()) {
    if (open_.dones.empty()) return std::nullopt;
    return std::max(open_.since, last_reply_);
  }
  return std::max(waiting_.front().sent, last_reply_);
}

}  // namespace redisched::redis
