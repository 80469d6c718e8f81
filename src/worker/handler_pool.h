// The handlers of one topic: the jobs reserved for them (the local queue),
// the jobs they run, and the verdicts they reach (the finished list).
//
// Threads: a synchronous handler runs on `concurrency` threads of the pool's
// own; an asynchronous one is started on the control shard and may finish
// on any thread. Both meet the control shard here, under one mutex: a batch
// of verdicts is handed over with one post to the control shard.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redisched/worker.h"
#include "worker/calls.h"

namespace redisched::worker {

// What a handler made of its job.
enum class Verdict { ack, fail, bury, release };

struct Finished {
  Reservation job{};
  Verdict verdict = Verdict::ack;
  std::string error{};
  Millis delay{0};
  std::optional<std::string> result{};  // JobContext::set_result
  bool dropped = false;                 // not the pool's to settle (it no longer ran the job)
  std::uint64_t key = 0;
  JobReport report{};  // reported and not yet sent (JobContext::log, ...)
};

class HandlerPool {
 public:
  // One of handler and async_handler is set. finished runs on the control
  // shard when verdicts wait in the finished list; reporting when a
  // handler's report waits to be sent and none did before.
  HandlerPool(TopicCalls& calls, const HandlerOptions& options, Handler handler,
              AsyncHandler async_handler, std::function<void()> finished,
              std::function<void()> reporting = {});
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // ---- control shard
  void start();  // a synchronous handler's threads
  // Hands reserved jobs (Redis's clock read now_ms) to the handlers.
  void add(std::vector<Reservation> jobs, std::int64_t now_ms);
  std::vector<Finished> take_finished();
  // The queued jobs that hold a reservation (for their release); jobs handed
  // out for good (ttr 0) stay queued and run before the threads end.
  std::vector<Reservation> take_waiting();
  // Cancel's deadline: running jobs go back when their handlers return.
  void abandon_running();
  // The shortest time-to-run of the jobs held with a reservation, if any.
  std::optional<Millis> shortest_ttr() const;
  // Running jobs that used a third of their time-to-run by Redis's clock
  // now_ms, marked as being touched.
  std::vector<Reservation> due_for_touch(std::int64_t now_ms);
  // A touch of the job with this token is back: its new deadline, if any.
  void touched(const std::string& id, std::uint64_t token, std::optional<std::int64_t> deadline_ms);
  // The reports of running jobs that wait to be sent (none of whose is in
  // flight), taken: the job's key, id and token, and its report.
  struct PendingReport {
    std::uint64_t key = 0;
    std::string id;
    std::uint64_t token = 0;
    JobReport report;
  };
  std::vector<PendingReport> take_reports();
  // A report is back; unsent: what it held when it could not be sent
  // (kept, before what came since). A verdict held for it is settled now
  // (finished runs). Returns whether reports wait.
  bool reported(std::uint64_t key, std::optional<JobReport> unsent);

  // ---- any thread
  // After take_waiting (and abandon_running or a drain): the threads end,
  // and an asynchronous job still held by its handler is cut off from the
  // pool (its later calls change nothing; its reservation lapses). Waits
  // for such a job's call in progress, e.g. a touch.
  void join();
  void snapshot(std::vector<RunningJob>& out) const;

 private:
  struct Running {
    std::uint64_t key = 0;  // the order it came in (1, 2, ...)
    Reservation job;
    Millis ttr{0};
    int progress = 0;
    std::string note;
    std::int64_t started_ms = 0;  // (the system clock)
    bool abandoned = false;       // cancel's deadline passed while it ran: no heartbeats
    bool touching = false;
    JobReport report;        // waiting to be sent
    bool reporting = false;  // a report of it is in flight
    // Its handler's verdict, held while a report of it is in flight: the
    // verdict goes once that report is back, after it and with what it
    // could not send.
    std::optional<Finished> verdict{};
  };
  class Context;
  friend class Context;
  // What a job's context shares with its pool, so that a context kept past
  // the pool's end (an AsyncJob held by the application) finds it gone.
  struct Life;

  void serve();        // a handler thread
  void start_async();  // control shard
  void finish(Finished f);
  bool job_cancelled(std::uint64_t key) const;
  // Adds to a running job's report (fill(report)); tells reporting_ when
  // it is the first report waiting. note(running), under the same lock,
  // whether or not the job can report (Worker::running() shows it).
  template <class Fill, class Note>
  void add_report(std::uint64_t key, Fill&& fill, Note&& note);
  template <class Fill>
  void add_report(std::uint64_t key, Fill&& fill) {
    add_report(key, std::forward<Fill>(fill), [](Running&) {});
  }

  TopicCalls& calls_;
  const HandlerOptions opts_;
  const Handler handler_;
  const AsyncHandler async_handler_;
  const std::function<void()> on_finished_;
  const std::function<void()> on_reporting_;

  mutable std::mutex mu_;
  std::condition_variable work_;
  std::deque<Running> queue_;                 // reserved, waiting for a handler
  std::map<std::uint64_t, Running> running_;  // by key
  std::uint64_t added_ = 0;                   // jobs added (for their keys)
  std::vector<Finished> finished_;
  bool quit_ = false;
  bool cancelled_ = false;
  bool reports_waiting_ = false;  // on_reporting_ was told, take_reports not yet called
  std::vector<std::thread> threads_;
  std::shared_ptr<Life> life_;
};

}  // namespace redisched::worker
