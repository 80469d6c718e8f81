// Lapsed reservations back to ready in the background, for every topic the
// server can see (the original design runs REQUEUE on a loop; so does
// serve). Each period, one requeue call per topic, all at once on the
// pipeline; a requeue with nothing lapsed costs Redis one range read. Any
// number of servers may sweep the same topics: requeue is atomic. The same
// readings hand the topics that have schedules to a Scheduler (any number
// of servers may run them too: each tick is put once), and bring each
// topic's stored format up to date, once per server (Client::migrate).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <memory>

#include "redisched/client.h"

namespace redisched::server {

class Census;
class Metrics;
}  // namespace redisched::server
namespace redisched {
class Scheduler;
}
namespace redisched::server {

class Sweeper {
 public:
  // Topics come from census readings at most topics_age old.
  Sweeper(boost::asio::io_context& io, Client& client, Census& census, Metrics& metrics,
          std::chrono::milliseconds period = std::chrono::seconds(1),
          std::chrono::milliseconds topics_age = std::chrono::seconds(5));
  ~Sweeper();
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  void start();
  // Any thread; the sweep in progress finishes, and off the sweeper's
  // thread stop() waits up to wait for it (its calls to Redis).
  void stop(std::chrono::milliseconds wait = std::chrono::seconds(2));
  // A topic this server just handed jobs out of: swept from the next sweep
  // on, before any census reading shows it. Any thread.
  void note(const std::string& topic);
  // Runs the schedules of every topic that has some on scheduler (which
  // must outlive the sweeper); before start().
  void run_schedules(Scheduler& scheduler);
  // A topic that has schedules now, before a census reading shows it. Any
  // thread.
  void note_schedules(const std::string& topic);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace redisched::server
