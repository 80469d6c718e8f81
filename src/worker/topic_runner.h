// One topic of a Worker. The runner itself is the fetcher: it reserves when
// handlers are free, and sleeps on a timer aimed at the next due time or on
// the wake-up channel when nothing is ready. Its parts do the rest:
//
//   HandlerPool   the handlers, the jobs they hold and their verdicts
//   Settler       acks (batched), releases and fails
//   Heartbeats    touches of running jobs (Overrun::heartbeat)
//   Reports       what handlers report (log lines, progress), gathered
//   LapseSweeper  requeues of lapsed reservations
//   TopicCalls    the calls to Redis: counted, back on the shard, retried
//
// Threads: everything but the handlers runs on the Worker's control shard.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "redisched/worker.h"
#include "worker/calls.h"
#include "worker/clock_map.h"
#include "worker/handler_pool.h"
#include "worker/heartbeats.h"
#include "worker/lapse_sweeper.h"
#include "worker/reports.h"
#include "worker/settler.h"

namespace redisched::worker {

class TopicRunner {
 public:
  // One of handler (run on concurrency threads of its own) and async_handler
  // (run on the control shard) is set.
  TopicRunner(Shared& shared, std::string topic, HandlerOptions options, Handler handler,
              AsyncHandler async_handler);
  ~TopicRunner() { join(); }  // the handler threads end before the parts they use
  TopicRunner(const TopicRunner&) = delete;
  TopicRunner& operator=(const TopicRunner&) = delete;

  const std::string& topic() const { return calls_.topic(); }
  int concurrency() const { return opts_.concurrency; }

  // ---- on the control shard
  void start();                         // handler threads; fetching starts at look()
  void look();                          // (re)subscribed or woken: reserve if handlers are free
  void on_signal(std::int64_t due_ms);  // the wake-up channel said a job is due then
  void stop_taking();                   // no more reserves; local queue released
  void abandon_running();  // cancel's deadline: running jobs go back when their handlers return
  void on_finished();      // settles what the handlers finished
  void close();            // after join: the last timers stopped
  // ---- any thread
  void join() { pool_.join(); }  // after stop_taking (and abandon_running or a drain)
  void snapshot(std::vector<RunningJob>& out) const { pool_.snapshot(out); }

 private:
  void fetch(int count);
  void on_reserved(Result<ReserveResult> r);
  void arm(std::int64_t due_ms);
  void on_timer();
  int free_slots() const;

  const HandlerOptions opts_;
  TopicCalls calls_;
  ClockMap clock_;
  HandlerPool pool_;
  Settler settler_;
  Heartbeats heartbeats_;
  Reports reports_;
  LapseSweeper sweeper_;

  int held_ = 0;             // reserved and not yet settled here (queued or running)
  int reserves_ = 0;         // reserve calls in flight
  int requested_ = 0;        // the jobs they asked for
  bool busy_ = false;        // the last reserve left jobs behind
  bool look_again_ = false;  // a wake-up came while a reserve was in flight, or while staggering_
  bool reserved_ahead_of_acks_ = false;  // a reserve went out before acks kept back
  bool stopping_ = false;
  // Between the two reserves of a busy topic: the second waits for
  // stagger_timer_, half of reserve_rtt_ (from fetch() to the answer back
  // on this shard, of the last reserve that succeeded), 20 us to 2 ms.
  bool staggering_ = false;
  std::chrono::steady_clock::duration reserve_rtt_{};
  boost::asio::steady_timer stagger_timer_;
  boost::asio::steady_timer due_timer_;
  std::int64_t due_at_ = -1;  // what due_timer_ aims at (Redis ms), -1 none
  boost::asio::steady_timer retry_timer_;
  Millis retry_backoff_ = TopicCalls::kRetryMin;
};

}  // namespace redisched::worker
