// Puts a topic's lapsed reservations (this worker's or anyone's) back: a
// requeue when the earliest deadline known passes, and again at the next
// deadline Redis reports. Control shard only.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>

#include "worker/calls.h"
#include "worker/clock_map.h"

namespace redisched::worker {

class LapseSweeper {
 public:
  // requeued runs when a sweep put jobs back (they are ready again).
  LapseSweeper(TopicCalls& calls, const ClockMap& clock, std::function<void()> requeued)
      : calls_(calls), clock_(clock), requeued_(std::move(requeued)), timer_(calls.io()) {}

  // A reservation may lapse at deadline_ms: a sweep just after it.
  void arm(std::int64_t deadline_ms);
  void sweep();
  // Calls that waited to be sent again are done: a sweep put off for them runs.
  void retries_done();
  void stop();  // no sweeps from here on

 private:
  TopicCalls& calls_;
  const ClockMap& clock_;
  const std::function<void()> requeued_;
  boost::asio::steady_timer timer_;
  std::int64_t at_ = -1;  // what timer_ aims at (Redis ms), -1 none
  bool put_off_ = false;
  bool stopped_ = false;
};

}  // namespace redisched::worker
