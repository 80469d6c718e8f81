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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/batch.h"
#include "redis/reply.h"
#include "redisched/error.h"

namespace redisched::redis {

class Pipeline {
 public:
  using Clock = std::chrono::steady_clock;

  // on_push gets the pub/sub messages (a subscriber connection); without it
  // every reply is a command's.
  explicit Pipeline(std::function<void(const Reply&)> on_push = {});
  // One connection's callers: not to be copied.
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Queues an encoded command for the next write, and its caller.
  void enqueue(std::string_view command, ReplyHandler done, Clock::time_point now = Clock::now());
  // The same for a write that answers once `replicas` replicas have it.
  // One WAIT covers every such write of a batch: take_output puts it behind
  // them, and each caller gets its command's reply once the count is
  // enough for it, or Errc::timeout (answer_replicated).
  void enqueue_replicated(std::string_view command, int replicas, std::chrono::milliseconds timeout,
                          ReplyHandler done, Clock::time_point now = Clock::now());
  // The same for SUNSUBSCRIBE of channel on a subscriber connection: its
  // reply is told apart from the sunsubscribe Redis sends unasked (a slot
  // moved) by the channel it names.
  void enqueue_unsubscribe(std::string_view command, std::string channel, ReplyHandler done,
                           Clock::time_point now = Clock::now());
  // Queues a call that may go out coalesced with the ones of its kind queued
  // right before or after it (redis/batch.h). Any other command queued in
  // between ends the batch, so commands keep their order. An error reply to
  // a batched call is every caller's answer: the caller sends alone what
  // Redis could refuse for one call only.
  void enqueue_batchable(Batchable call, ReplyHandler done, Clock::time_point now = Clock::now());
  bool has_output() const { return !out_.empty() || !open_.dones.empty(); }
  // Callers queued since the last take_output (a batched call counts each).
  std::size_t unsent() const { return unsent_; }
  // Everything queued since the last call, in order, to write at once.
  void take_output(std::string& into);

  // A reply read from Redis: to the oldest waiting caller, or to on_push
  // when it is a pub/sub message, or an sunsubscribe the oldest caller did
  // not ask for (Redis Cluster ends shard subscriptions of a slot that
  // moved). Throws Error(Errc::protocol) for a reply nobody waits for (the
  // stream is out of step: end the connection).
  void deliver(Reply reply, Clock::time_point now = Clock::now());

  // The connection ended: every waiting caller fails with code and message,
  // in order; unwritten commands are dropped.
  void fail_all(Errc code, const std::string& message);

  std::size_t waiting() const { return waiting_.size(); }
  // Since when the oldest waiting caller waits without Redis answering
  // anything: the later of its command's queueing and the last reply, if
  // any caller waits (for the command timeout; a WAIT holds the commands
  // behind it, which is progress, not a hang).
  std::optional<Clock::time_point> oldest() const;

  // A pub/sub message (message or smessage), as opposed to a reply.
  static bool is_push(const Reply& r);
  static bool is_unsubscribe(const Reply& r);

 private:
  struct Waiting {
    ReplyHandler done;
    Clock::time_point sent;
    std::string unsubscribing;  // the channel of an SUNSUBSCRIBE
  };
  // A write waiting for replicas: its own answer, kept until WAIT's.
  struct Replicated {
    int replicas = 0;
    ReplyHandler done;
    bool answered = false;  // its command failed with the connection
    Reply reply;
  };
  // The batch still open for more calls: the calls queued last, all of one
  // kind, not yet written.
  struct Open {
    const BatchKind* kind = nullptr;
    std::string head;
    int head_words = 0;
    std::string tail;
    int tail_words = 0;
    std::string parts;
    int part_words = 0;
    std::string single;  // the first call alone, if it stays alone
    std::vector<ReplyHandler> dones;
    Clock::time_point since;
  };
  // Ends the open batch: into the output as one command.
  void seal();
  struct Coalesced;  // the callers of a batched call
  static void answer(Coalesced& batch, std::error_code ec, Reply reply);
  static bool joins(const Open& open, const Batchable& call);

  std::function<void(const Reply&)> on_push_;
  Open open_;
  std::string out_;
  std::size_t unsent_ = 0;
  std::deque<Waiting> waiting_;
  Clock::time_point last_reply_{};
  // The replicated writes queued since the last take_output, and what
  // their WAIT asks for (the most replicas and the longest timeout).
  std::vector<std::shared_ptr<Replicated>> replicated_;
  int wait_replicas_ = 0;
  std::chrono::milliseconds wait_timeout_{0};
};

// The answer of a write that waited for replicas: its error reply as it
// was; else its reply if WAIT counted at least `replicas`, or Errc::timeout
// saying the write is on the primary only, with the write's own reply as
// the error reply's one element (a refusal changed nothing: its caller
// answers it as such). (A WAIT asks for the most
// replicas of its batch; each write compares the count with its own.)
void answer_replicated(Reply reply, int replicas, std::chrono::milliseconds timeout,
                       std::error_code wait_ec, const Reply& wait_reply, const ReplyHandler& done);

}  // namespace redisched::redis
