// Settles what a topic's handlers decided: acks go in batches (one ackmany
// in flight per topic; the acks that come meanwhile go together in the
// next), releases and fails one call each, all retried while Redis is
// unreachable. Control shard only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "worker/calls.h"
#include "worker/handler_pool.h"

namespace redisched::worker {

class Settler {
 public:
  Settler(TopicCalls& calls, const HandlerOptions& options) : calls_(calls), opts_(options) {}

  // Sends f's verdict, or keeps an ack for the next flush().
  void settle(Finished f);
  // Sends the acks kept, unless an ackmany is in flight (its answer does).
  void flush();
  // Gives back a reservation the worker will not run.
  void release_now(const Reservation& job);
  // Acks kept for the next ackmany (one is in flight): a reserve sent now
  // goes out before them.
  bool holding() const { return !acks_.empty(); }
  // Runs after each ackmany's answer, once the acks kept meanwhile are sent.
  void on_acked(std::function<void()> f) { on_acked_ = std::move(f); }

 private:
  TopicCalls& calls_;
  const HandlerOptions opts_;
  std::vector<std::pair<std::string, std::uint64_t>> acks_;  // waiting for ackmany
  bool acking_ = false;
  std::function<void()> on_acked_;
};

// The delay before a failed job's next attempt under the handler's backoff.
Millis retry_delay(const Backoff& backoff, int attempt);

}  // namespace redisched::worker
