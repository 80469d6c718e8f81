// The bookkeeping of one pipelined connection, without I/O (sans-io, like
// the RESP reader): commands queued for the next write, the callers waiting
// for their replies in order, and pub/sub messages told apart from replies.
// The connection writes what take_output() hands it and delivers each reply
// it reads; tests/unit/pipeline_test.cpp drives it without a socket.
//
// Not thread-safe: one connection's thread. Callbacks run inside deliver()
// and fail_all(), and may queue more commands from there.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "redis/reply.h"
#include "redisched/error.h"

namespace redisched::redis {

class Pipeline {
 public:
  using Clock = std::chrono::steady_clock;

  // on_push gets the pub/sub messages (a subscriber connection); without it
  // every reply is a command's.
  explicit Pipeline(std::function<void(const Reply&)> on_push = {});

  // Queues an encoded command for the next write, and its caller.
  void enqueue(std::string_view command, ReplyHandler done, Clock::time_point now = Clock::now());
  bool has_output() const { return !out_.empty(); }
  // Everything queued since the last call, in order, to write at once.
  void take_output(std::string& into);

  // A reply read from Redis: to the oldest waiting caller, or to on_push
  // when it is a pub/sub message, or an sunsubscribe nobody asked for
  // (Redis Cluster ends shard subscriptions of a slot that moved). Throws Error(Errc::protocol) for
  // a reply nobody waits for (the stream is out of step: end the connection).
  void deliver(Reply reply);

  // The connection ended: every waiting caller fails with code and message,
  // in order; unwritten commands are dropped.
  void fail_all(Errc code, const std::string& message);

  std::size_t waiting() const { return waiting_.size(); }
  // When the oldest waiting caller's command was queued, if any (for the
  // command timeout).
  std::optional<Clock::time_point> oldest() const;

  // A pub/sub message (message or smessage), as opposed to a reply.
  static bool is_push(const Reply& r);
  static bool is_unsubscribe(const Reply& r);

 private:
  struct Waiting {
    ReplyHandler done;
    Clock::time_point sent;
  };
  std::function<void(const Reply&)> on_push_;
  std::string out_;
  std::deque<Waiting> waiting_;
};

}  // namespace redisched::redis
