// redisched::Worker: runs handlers for the jobs of one or more topics, as
// koda does: register a handler per topic with a number of workers, run,
// cancel (at once or after a drain).
//
//   redisched::Worker worker({.client = {.redis_url = "redis://127.0.0.1:6379"}});
//   worker.handle("email", {.concurrency = 10}, [](redisched::JobContext& job) {
//     send_email(job.body());  // returning acks; throwing fails (and retries)
//   });
//   worker.run_until_signal();  // SIGINT/SIGTERM: drain, then return
//
// How it waits: one reserve per topic hands out jobs for all its free
// workers. When nothing is ready, the topic sleeps on a local timer aimed at
// the earliest due time Redis reported, and on the topic's wake-up channel
// (docs/redis-api.md, "Wake-up signal"), which says when a job became ready
// or was scheduled earlier: no polling, and a due job starts within a
// millisecond or two. Lapsed reservations (a crashed worker's jobs) come
// back at their deadline, swept by whichever worker sees them first.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "redisched/client.h"
#include "redisched/job.h"

namespace redisched {

// What a handler does when its job outlives the reservation's time-to-run.
enum class Overrun {
  heartbeat,  // extend the reservation while the handler runs (the default)
  abandon,    // let it lapse: the job is handed out again, this result is dropped
};

struct HandlerOptions {
  // Jobs of this topic in flight at once (handler threads).
  int concurrency = 1;
  // Jobs reserved ahead of free workers, to hide the round trip to Redis
  // (they count against their ttr while they wait).
  int prefetch = 0;
  // Time-to-run of a reservation, for jobs put without their own.
  std::optional<Millis> ttr{};
  // When set, these override the job's own attempts and backoff: after
  // max_attempts failed attempts the job is dead; between them it waits
  // backoff (fixed like koda's RetryInterval, or exponential with a cap).
  // (A lapsed reservation still counts against the job's own attempts.)
  std::optional<int> max_attempts{};
  std::optional<Backoff> backoff{};
  Overrun overrun = Overrun::heartbeat;
};

// What a handler gets: the job, and ways to act on its reservation. Valid
// for the handler's call only.
class JobContext {
 public:
  virtual ~JobContext() = default;

  virtual std::string_view topic() const = 0;
  virtual const Reservation& job() const = 0;
  std::string_view id() const { return job().id; }
  std::string_view body() const { return job().body; }
  int attempt() const { return job().attempt; }

  // Extends the reservation to now + ttr (0 = its own ttr). Returns false
  // when the reservation is no longer this worker's.
  virtual bool touch(Millis ttr = Millis{0}) = 0;
  // Reports progress (0..100, and a note): kept for Worker::running() and
  // counted as a heartbeat.
  virtual void progress(int percent, std::string_view note = {}) = 0;
  // After the handler returns, put the job back (not an attempt), due after
  // delay, instead of acknowledging it.
  virtual void release(Millis delay = Millis{0}) = 0;
  // After the handler returns, fail the job with this error (as throwing
  // does); dead at once with bury.
  virtual void fail(std::string_view error, bool bury = false) = 0;
  // True once the worker is cancelled: a long handler should stop (its job
  // has already been released for another worker).
  virtual bool cancelled() const = 0;
};

using Handler = std::function<void(JobContext&)>;

// A job handed to an asynchronous handler. It ends with done(): acked, or
// what release() or fail() asked for. done() may be called from any thread,
// once; a job dropped without it fails. (touch() waits for Redis's answer,
// so call it off the worker's thread.)
class AsyncJob : public JobContext {
 public:
  virtual void done() = 0;
};

// Called on the worker's control thread, where it must not block: it starts
// the work and arranges for job->done(). Concurrency then counts jobs in
// flight without a thread each, for handlers that are themselves
// asynchronous (an HTTP call, another queue). A throw fails the job.
using AsyncHandler = std::function<void(std::shared_ptr<AsyncJob> job)>;

struct WorkerOptions {
  ClientOptions client{};
  // run_until_signal's drain: how long in-flight jobs may take to finish
  // after SIGINT/SIGTERM before they are released.
  Millis shutdown_timeout{10000};
};

// A job a handler is working on, as Worker::running() reports it.
struct RunningJob {
  std::string topic;
  std::string id;
  int attempt = 0;
  int progress = 0;
  std::string note;
  std::int64_t deadline_ms = 0;
};

// Counters since the worker started, per process.
struct WorkerStats {
  std::uint64_t reserved = 0, acked = 0, failed = 0, released = 0, stale = 0;
  std::uint64_t reserve_calls = 0, empty_reserves = 0, wakeups = 0;
};

class Canceller;

class Worker {
 public:
  explicit Worker(WorkerOptions options = {});
  ~Worker();  // cancels (at once) if still running
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The worker's Client (its connections are shared by every topic).
  Client& client();

  // Registers the handler of a topic; before run(). A synchronous handler
  // runs on options.concurrency threads of its own.
  void handle(std::string topic, HandlerOptions options, Handler handler);
  void handle_async(std::string topic, HandlerOptions options, AsyncHandler handler);

  // Starts working and returns at once, with a handle to stop it (koda's
  // Work() and its canceller).
  Canceller run();
  // Stops taking jobs. Without a timeout, jobs in flight are released at
  // once (their handlers see cancelled(); their results are dropped); with
  // one, they may finish within it, then the rest are released. Returns
  // when every handler has returned and Redis has its answers.
  void cancel();
  void cancel(Millis drain_timeout);
  // run(), then until SIGINT or SIGTERM, then cancel(shutdown_timeout).
  void run_until_signal();
  bool running() const;

  std::vector<RunningJob> running_jobs() const;
  WorkerStats stats() const;

  // ---- koda's vocabulary, for the common case
  // A job due now with a priority (koda: 0..100; here up to 1000), under a
  // generated id, which is returned.
  std::string submit(std::string_view topic, int priority, std::string_view payload);
  std::string submit_delayed(std::string_view topic, Millis delay, std::string_view payload);
  void register_handler(std::string topic, int workers, Handler handler);
  void work_forever() { run_until_signal(); }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// What run() returns: cancel() or cancel(drain_timeout) stop the worker, as
// Worker::cancel does. Valid while the Worker lives.
class Canceller {
 public:
  explicit Canceller(Worker& worker) : worker_(&worker) {}
  void cancel() { worker_->cancel(); }
  void cancel(Millis drain_timeout) { worker_->cancel(drain_timeout); }

 private:
  Worker* worker_;
};

}  // namespace redisched
