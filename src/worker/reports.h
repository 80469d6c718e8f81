// Sends what a topic's handlers report (JobContext::log, progress_json,
// progress): gathered for kInterval after the first report waits, then one
// call per job with its latest progress and its lines since the last, and
// one report of a job in flight at a time, so its lines keep their order.
// A job that reports nothing costs nothing here. Control shard only.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include "worker/calls.h"
#include "worker/handler_pool.h"

namespace redisched::worker {

class Reports {
 public:
  static constexpr Millis kInterval{250};

  Reports(TopicCalls& calls, HandlerPool& pool) : calls_(calls), pool_(pool), timer_(calls.io()) {}

  // A report waits: sent within kInterval.
  void arm();
  void cancel() { timer_.cancel(); }

 private:
  void send();

  TopicCalls& calls_;
  HandlerPool& pool_;
  boost::asio::steady_timer timer_;
  bool armed_ = false;
};

}  // namespace redisched::worker
