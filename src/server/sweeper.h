// Lapsed reservations back to ready in the background, for every topic,
// at their deadlines (the original design runs REQUEUE on a loop; serve
// requeues a topic only when one of its reservations may have lapsed).
//
// What to look at comes from the sweep signal (docs/redis-api.md, "Sweep
// signal"): a reserve or touch that gives a topic a reservation lapsing
// before its others says when. Each requeue answers the next deadline
// still to come, so a topic is watched until its last reservation ends.
// When the signal's subscription is (re)made, signals may have been
// missed: a pass reads every topic once (the census) and watches those
// that hold reservations. The same pass hands a Scheduler the topics that
// have schedules (later ones come by the signal too), the topics whose
// outbox holds flows to hand over (Client::move_outbox; later ones come by
// the signal too, and once a topic is known to use flows, by its own
// outbox channel as well: Client::watch_outbox), and brings each topic's
// stored format up to date, once per server (Client::migrate).
// An idle serve thus costs Redis nothing however many topics it holds,
// and any number of servers may sweep the same topics: requeue is atomic.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>

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
  Sweeper(boost::asio::io_context& io, Client& client, Census& census, Metrics& metrics);
  ~Sweeper();
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  void start();
  // Any thread; the sweep in progress finishes, and off the sweeper's
  // thread stop() waits up to wait for it (its calls to Redis).
  void stop(std::chrono::milliseconds wait = std::chrono::seconds(2));
  // Runs the schedules of every topic that has some on scheduler (which
  // must outlive the sweeper); before start().
  void run_schedules(Scheduler& scheduler);
  // A topic that has schedules now, before the signal says so. Any thread.
  void note_schedules(const std::string& topic);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace redisched::server
