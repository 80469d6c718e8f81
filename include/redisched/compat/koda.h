// koda's vocabulary over redisched::Worker, with koda's defaults, for code
// coming from koda (docs/worker.md, "Coming from koda", maps every call).
//
//   redisched::compat::Koda koda({.client = {.redis_url = url}});
//   koda.submit("newsletter", 100, "urgent: we are live!");
//   koda.register_handler("newsletter", 10, [](redisched::JobContext& job) { ... });
//   koda.work_forever();
//
// Worker::handle keeps the library's defaults (5 attempts, exponential
// backoff); register_handler keeps koda's (1 attempt, no wait).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "redisched/worker.h"

namespace redisched::compat {

// koda's Queue settings, for register_handler: its defaults, its meaning.
struct KodaQueue {
  // Attempts before a job is dead (koda: MaxAttempts, default 1: no retry).
  int max_attempts = 1;
  // The wait before each retry (koda: RetryInterval, default 0).
  Millis retry_interval{0};
};

class Koda {
 public:
  // Over a Worker of its own (koda's Configure and NewClient).
  explicit Koda(WorkerOptions options = {})
      : own_(std::make_unique<Worker>(std::move(options))), worker_(*own_) {}
  // Over worker, which must outlive it.
  explicit Koda(Worker& worker) : worker_(worker) {}

  Worker& worker() { return worker_; }

  // koda's Submit: a job due now with a priority (koda: 0..100; here up to
  // 1000), under a generated id, which is returned.
  std::string submit(std::string_view topic, int priority, std::string_view payload) {
    return worker_.client().add(topic, {.body = std::string(payload), .priority = priority});
  }
  // koda's SubmitDelayed: a job due after delay, with a priority among the
  // jobs due with it.
  std::string submit_delayed(std::string_view topic, Millis delay, std::string_view payload,
                             int priority = 0) {
    return worker_.client().add(
        topic, {.body = std::string(payload), .delay = delay, .priority = priority});
  }
  // koda's Register(queue, numWorkers, handler): a failed job is dead after
  // queue.max_attempts (1), retried after queue.retry_interval.
  void register_handler(std::string topic, int workers, Handler handler, KodaQueue queue = {}) {
    worker_.handle(
        std::move(topic),
        {.concurrency = workers,
         .max_attempts = queue.max_attempts,
         .backoff = Backoff{BackoffKind::fixed, queue.retry_interval, queue.retry_interval}},
        std::move(handler));
  }
  // koda's Work(): starts, returns the Canceller.
  Canceller work() { return worker_.run(); }
  // koda's WorkForever(): until SIGINT or SIGTERM, then a drain
  // (WorkerOptions::shutdown_timeout).
  void work_forever() { worker_.run_until_signal(); }

 private:
  std::unique_ptr<Worker> own_;
  Worker& worker_;
};

}  // namespace redisched::compat
