// One topic of a Worker: its fetcher (reserve when workers are free, sleep
// on a timer or the wake-up channel when nothing is ready), its handler
// threads, and the settling of their results (acks batched into ackmany).
//
// Threads: everything but the handler threads runs on the Worker's control
// thread (one io_context). Handler threads meet it at the local queue and the
// finished list, under mu_.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redisched/worker.h"
#include "worker/broker.h"
#include "worker/clock_map.h"

namespace redisched::worker {

// What the Worker shares with its topics.
struct Shared {
  Shared(boost::asio::io_context& i, Broker& b) : io(i), broker(b) {}
  boost::asio::io_context& io;  // the control shard
  Broker& broker;
  // Calls to Redis in flight and jobs held, over all topics: cancel waits on them.
  std::mutex mu;
  std::condition_variable changed;
  int calls = 0;
  int held = 0;
  // WorkerStats, counted on the control thread, read from any.
  struct {
    std::atomic<std::uint64_t> reserved{0}, acked{0}, failed{0}, released{0}, stale{0};
    std::atomic<std::uint64_t> reserve_calls{0}, empty_reserves{0}, wakeups{0};
  } stats;
  void count_call(int delta);
  void count_held(int delta);
};

class TopicRunner {
 public:
  // One of handler (run on concurrency threads of its own) and async_handler
  // (run on the control thread) is set.
  TopicRunner(Shared& shared, std::string topic, HandlerOptions options, Handler handler,
              AsyncHandler async_handler);
  ~TopicRunner();
  TopicRunner(const TopicRunner&) = delete;
  TopicRunner& operator=(const TopicRunner&) = delete;

  const std::string& topic() const { return topic_; }

  // ---- on the control thread
  void start();                         // handler threads; fetching starts at look()
  void look();                          // (re)subscribed or woken: reserve if workers are free
  void on_signal(std::int64_t due_ms);  // the wake-up channel said a job is due then
  void stop_taking();                   // no more reserves; local queue released
  void abandon_running();  // cancel's deadline: running jobs go back when their handlers return
  void on_finished();      // settles what the handler threads finished
  void close();            // after join: the last timers stopped
  // ---- any thread
  void join();  // after stop_taking (and abandon_running or a drain): threads end
  void snapshot(std::vector<RunningJob>& out) const;

 private:
  enum class Verdict { ack, fail, bury, release };
  struct Finished {
    Reservation job;
    Verdict verdict = Verdict::ack;
    std::string error;
    Millis delay{0};
    bool dropped = false;  // not ours to settle (unknown key)
    std::uint64_t key = 0;
  };
  struct Running {
    std::uint64_t key = 0;  // in running_: the token, or kOnceKeys + n for a ttr-0 job (token 0)
    Reservation job;
    Millis ttr{0};
    int progress = 0;
    std::string note;
    bool abandoned = false;  // cancel's deadline passed while it ran: no heartbeats
    bool touching = false;
  };
  class Context;
  friend class Context;

  // control thread
  void fetch(int count);
  void on_reserved(Result<ReserveResult> r);
  void arm(std::int64_t due_ms);
  void on_timer();
  void sweep();
  void arm_sweep(std::int64_t deadline_ms);
  void heartbeat();
  void arm_heartbeat();
  void settle(Finished f);
  void flush_acks();
  void release_now(const Reservation& job);
  // Queues reserved jobs for the handlers (mu_ held).
  void enqueue(std::vector<Reservation>& jobs, std::int64_t now_ms);
  // Runs start(callback) until Redis answers (retrying connection failures
  // for a while); then done. Counts as a call in flight.
  template <class T>
  void call(std::function<void(Callback<T>)> start, std::function<void(Result<T>)> done,
            int tries = 0);
  void back_on_control(std::function<void()> fn);
  int free_slots() const;

  // handler threads (or the control thread, for asynchronous handlers)
  void serve();
  void start_async();
  void finish(Finished f);

  Shared& shared_;
  const std::string topic_;
  const HandlerOptions opts_;
  const Handler handler_;
  const AsyncHandler async_handler_;
  ClockMap clock_;

  // control thread
  int held_ = 0;             // reserved and not yet settled here (queued or running)
  int reserves_ = 0;         // reserve calls in flight
  int requested_ = 0;        // the jobs they asked for
  bool busy_ = false;        // the last reserve left jobs behind
  bool look_again_ = false;  // a wake-up came while a reserve was in flight
  int retrying_ = 0;         // calls waiting to be sent again: no reserve meanwhile
  bool sweep_after_retries_ = false;
  bool stopping_ = false;
  boost::asio::steady_timer due_timer_;
  std::int64_t due_at_ = -1;  // what due_timer_ aims at (Redis ms), -1 none
  boost::asio::steady_timer sweep_timer_;
  std::int64_t sweep_at_ = -1;
  boost::asio::steady_timer heartbeat_timer_;
  bool heartbeat_armed_ = false;
  boost::asio::steady_timer retry_timer_;
  Millis retry_backoff_{50};
  std::vector<std::pair<std::string, std::uint64_t>> acks_;  // waiting for ackmany
  bool acking_ = false;

  // shared with handler threads
  mutable std::mutex mu_;
  std::condition_variable work_;
  std::deque<Running> queue_;                 // reserved, waiting for a handler thread
  std::map<std::uint64_t, Running> running_;  // by key
  std::uint64_t once_jobs_ = 0;               // ttr-0 jobs seen (for their keys)
  std::vector<Finished> finished_;
  bool quit_ = false;
  bool cancelled_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace redisched::worker
