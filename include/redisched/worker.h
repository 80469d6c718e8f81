// redisched::Worker: runs handlers for the jobs of one or more topics, as
// koda does: register a handler per topic with a number of workers, run,
// cancel (at once or after a drain). (koda's own calls and defaults:
// redisched/compat/koda.h.)
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
  // Keep each acknowledged job this long (state done): get() shows it
  // finished (koda's Finished) with its result (JobContext::set_result), and
  // a put of its id meanwhile is refused as existing, so a producer that
  // retries a put whose answer it lost does not make the job again. A job
  // put with a longer JobSpec::keep is kept that long. 0 = removed at once
  // (unless the job asks to be kept).
  Millis keep_finished{0};
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
  // Reports progress (0..100, and a note): kept for Worker::running(),
  // counted as a heartbeat, and stored with the job as progress_json()
  // stores {"percent":40} or {"percent":40,"note":"..."}.
  virtual void progress(int percent, std::string_view note = {}) = 0;
  // Stores the job's progress, a JSON value (a number, or a small object;
  // 1..limits::kProgressMax bytes of UTF-8, else this throws
  // Errc::invalid_argument; its JSON is the library's to check, and a
  // refused one is logged): get() shows the latest as Job::progress.
  // Reports (this, progress() and log()) are gathered and sent every
  // 250 ms, one call per job with the latest progress and the lines since
  // the last, and before the job's fail, release or kept ack. An ack
  // without keep removes the job, and what it had not sent yet with it.
  virtual void progress_json(std::string_view value) = 0;
  // Adds a line to the job's log (UTF-8, else this throws
  // Errc::invalid_argument; a line over limits::kLogLineMax bytes is cut):
  // get() shows the latest limits::kLogLinesMax as Job::log. Lines that
  // pile up faster than they are sent keep the latest kLogLinesMax.
  virtual void log(std::string_view line) = 0;
  // The job's result, given with its ack: to the jobs waiting for it
  // (JobSpec::after; JobContext::dependencies() there), and stored with it
  // while it is kept (its JobSpec::keep, or HandlerOptions::keep_finished,
  // and at least the topic's retry window, for a job that may come to wait
  // for it; with a window of 0 and neither keep, not at all): get() and
  // Client::wait() return it
  // as Job::result. At most the Client's max_body bytes; a larger one
  // fails the job (its error says why).
  virtual void set_result(std::string_view result) = 0;
  // The jobs this one waited for (JobSpec::after), each with its outcome
  // and value (a done one's result: what its ack gave, a Worker's
  // set_result; a failed one's error), in
  // the order its put named them; empty for a job put without. Reads
  // them from Redis and waits for the answer: call it off the runtime's
  // threads (an asynchronous handler's own thread, not a callback).
  virtual std::vector<DependencyState> dependencies() = 0;
  // After the handler returns, put the job back (not an attempt), due after
  // delay, instead of acknowledging it.
  virtual void release(Millis delay = Millis{0}) = 0;
  // After the handler returns, fail the job with this error (as throwing
  // does); dead at once with bury.
  virtual void fail(std::string_view error, bool bury = false) = 0;
  // True once the worker's cancel reached its deadline with this handler
  // still running: it should stop. Its job stays reserved (heartbeats stop)
  // until the handler returns, then goes back to ready (not an attempt),
  // whatever the handler says; if the handler outlives the reservation, the
  // job lapses and is handed out again. It is never handed to another
  // worker while this handler runs and its reservation holds.
  virtual bool cancelled() const = 0;
};

using Handler = std::function<void(JobContext&)>;

// A job handed to an asynchronous handler. It ends with done(): acked, or
// what release() or fail() asked for. done() may be called from any thread,
// once; a job dropped without it fails. (touch() waits for Redis's answer,
// so call it off the runtime's threads: there it is refused.)
class AsyncJob : public JobContext {
 public:
  virtual void done() = 0;
};

// Called on the worker's control shard, where it must not block: it starts
// the work and arranges for job->done(). Concurrency then counts jobs in
// flight without a thread each, for handlers that are themselves
// asynchronous (an HTTP call, another queue). A throw fails the job.
using AsyncHandler = std::function<void(std::shared_ptr<AsyncJob> job)>;

struct WorkerOptions {
  // The worker's own Client (not used by Worker(Client&, ...)).
  ClientOptions client{};
  // run_until_signal's drain: how long in-flight jobs may take to finish
  // after SIGINT/SIGTERM before they are released.
  Millis shutdown_timeout{10000};
  // Run the recurring jobs (Client::set_schedule) of the topics handled
  // here, with a Scheduler of the worker's: every worker may, a tick is put
  // once however many run.
  bool run_schedules = true;
  // Keep an entry in the worker registry (Client::workers, GET /v1/workers,
  // `redisched workers`): its topics (the first 1000), concurrency and
  // running jobs (1000 at most), beaten every beat_interval, alive for
  // three of them, deleted when it stops. 1 s .. 20 min; 0: no entry.
  Millis beat_interval{5000};
  // Carry out the outboxes of the topics handled here (Client::move_outbox),
  // which hand flows (JobSpec::after) over between topics: when the sweep
  // signal names one, and each of them when the signal's subscription is
  // made (again); a move that failed is made again move_interval later.
  // Any number of workers and servers may, each entry's call is made once
  // in effect. 0: never (a serve, or the application, moves them).
  Millis move_interval{10000};
};

// A job a handler is working on, as Worker::running() reports it.
struct RunningJob {
  std::string topic;
  std::string id;
  int attempt = 0;
  int progress = 0;
  std::string note;
  std::int64_t deadline_ms = 0;
  std::int64_t started_ms = 0;  // when its handler started it (this host's clock)
};

// Counters since the worker started, per process.
struct WorkerStats {
  std::uint64_t reserved = 0, acked = 0, failed = 0, released = 0, stale = 0;
  std::uint64_t reserve_calls = 0, empty_reserves = 0, wakeups = 0;
};

class Canceller;

// Threads: the worker's control loop (reserving, timers, settling, and the
// asynchronous handlers) runs on a shard of its Client's runtime, beside
// whatever else runs there; a synchronous handler runs on `concurrency`
// threads of its own. Its public calls may come from any thread, but
// cancel() (and the destructor, when still running) not from a handler nor
// from a thread of the runtime: it waits for both.
class Worker {
 public:
  // With a Client of its own, made from options.client (and its runtime:
  // one thread unless options.client.runtime shares one).
  explicit Worker(WorkerOptions options = {});
  // On client (and its runtime), which must outlive the worker: many
  // workers, the server and the application share its connections.
  explicit Worker(Client& client, WorkerOptions options = {});
  ~Worker();  // cancels (at once) if still running
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The worker's Client (its connections are shared by every topic).
  Client& client();

  // Registers the handler of a topic; before run(). A synchronous handler
  // runs on options.concurrency threads of its own.
  void handle(std::string topic, HandlerOptions options, Handler handler);
  void handle_async(std::string topic, HandlerOptions options, AsyncHandler handler);
  // Carries out topic's outbox too (unless WorkerOptions::move_interval is
  // 0), though no handler here runs its jobs: a batch's topic, or the topic
  // of jobs that others wait for and that another process works on;
  // before run() (which still needs a handler).
  void move_outbox_of(std::string topic);

  // Starts working and returns at once, with a handle to stop it (koda's
  // Work() and its canceller).
  Canceller run();
  // Stops taking jobs (reserved ones not yet started go back at once).
  // Jobs in flight may finish within drain_timeout (0 without one) and are
  // settled as their handlers say; handlers still running then see
  // cancelled(), and their jobs go back to ready when they return (JobContext::
  // cancelled). Returns when every synchronous handler has returned and
  // Redis has its answers. (koda's Cancel instead marks jobs in flight failed
  // at once, while their handlers may still run.)
  void cancel();
  void cancel(Millis drain_timeout);
  // run(), then until SIGINT or SIGTERM, then cancel(shutdown_timeout).
  void run_until_signal();
  bool running() const;
  // Its id, "<host>:<pid>:<8 hex digits>": the name each of its reserves
  // gives (ReserveOptions::worker: a job's reservation and attempt history
  // show it), and its entry's in the worker registry
  // (WorkerOptions::beat_interval).
  std::string id() const;

  std::vector<RunningJob> running_jobs() const;
  WorkerStats stats() const;

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
