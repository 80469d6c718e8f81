#include "redis/pipeline.h"

namespace redisched::redis {

Pipeline::Pipeline(std::function<void(const Reply&)> on_push) : on_push_(std::move(on_push)) {}

void Pipeline::enqueue(std::string_view command, ReplyHandler done, Clock::time_point now) {
  out_ += command;
  waiting_.push_back({std::move(done), now});
}

void Pipeline::take_output(std::string& into) {
  into.clear();
  into.swap(out_);
}

bool Pipeline::is_push(const Reply& r) {
  return r.type == Reply::Type::array && r.elements.size() == 3 &&
         (r.elements[0].str == "smessage" || r.elements[0].str == "message");
}

void Pipeline::deliver(Reply reply) {
  if (on_push_ && (is_push(reply) || (waiting_.empty() && is_unsubscribe(reply)))) {
    on_push_(reply);
    return;
  }
  if (waiting_.empty()) throw Error(Errc::protocol, "a reply nobody asked for");
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
  for (auto& w : failing) {
    Reply r;
    r.type = Reply::Type::error;
    r.str = message;
    w.done(make_error_code(code), std::move(r));
  }
}

std::optional<Pipeline::Clock::time_point> Pipeline::oldest() const {
  if (waiting_.empty()) return std::nullopt;
  return waiting_.front().sent;
}

}  // namespace redisched::redis
