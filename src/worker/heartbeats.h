// Keeps the reservations of a topic's running jobs alive (Overrun::heartbeat):
// a job that used a third of its time-to-run is touched, and a timer at a
// third of the shortest time-to-run held looks again. Control shard only.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include "worker/calls.h"
#include "worker/clock_map.h"
#include "worker/handler_pool.h"

namespace redisched::worker {

class Heartbeats {
 public:
  Heartbeats(TopicCalls& calls, HandlerPool& pool, const ClockMap& clock, bool enabled)
      : calls_(calls), pool_(pool), clock_(clock), enabled_(enabled), timer_(calls.io()) {}

  // After jobs were added: the timer runs while jobs with a reservation are held.
  void arm();
  void cancel() { timer_.cancel(); }

 private:
  void beat();

  TopicCalls& calls_;
  HandlerPool& pool_;
  const ClockMap& clock_;
  const bool enabled_;
  boost::asio::steady_timer timer_;
  bool armed_ = false;
};

}  // namespace redisched::worker
