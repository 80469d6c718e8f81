// redisched::Scheduler: runs the recurring jobs of topics (Client::
// set_schedule). At each tick it puts the tick's job, once however many
// Schedulers run in however many processes: the Functions library's
// redisched_tick lets the first one through and tells the others.
//
//   redisched::Scheduler scheduler(client);
//   scheduler.add_topic("reports");  // its schedules tick from now on
//
// A Worker runs one for the topics it handles (WorkerOptions::
// run_schedules), `redisched serve` one for every topic with schedules; run
// one yourself only where neither runs. How it waits: a timer aimed at the
// earliest next tick Redis holds, and the topic's schedules channel, which
// says when a schedule changed: no polling.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "redisched/client.h"

namespace redisched {

class Scheduler {
 public:
  // On client's runtime; client must outlive the Scheduler.
  explicit Scheduler(Client& client);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs topic's schedules from now on (a topic added again: nothing).
  // Any thread.
  void add_topic(std::string_view topic);
  // No tick starts once it returns. Any thread; it waits for the answers
  // of the ticks in flight (up to 10 s in all), so that stats() is final:
  // not for those of its own thread's ticks, when it runs on the runtime.
  void stop();

  // Counts since it started, of its own ticks.
  struct Stats {
    std::uint64_t put = 0;  // ticks that put their job
    // Ticks passed without a job: those missed while no Scheduler ran but
    // the last (CatchUp), and that one too when skip's grace is over.
    std::uint64_t skipped = 0;
    std::uint64_t lost = 0;    // ticks another Scheduler made first
    std::uint64_t errors = 0;  // calls that failed (retried)
  };
  Stats stats() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace redisched
