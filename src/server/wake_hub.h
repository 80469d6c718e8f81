// Long-poll reserve: waits for the same wake-up signal as the Worker
// (docs/redis-api.md, "Wake-up signal") through the Client's watch(), one
// subscription per topic waited on, shared by every waiter on it, instead of
// polling. A topic nobody waits on is unwatched within a few seconds.
//
//   auto t = hub.watch(topic, executor);   // before the reserve, so no signal falls between
//   reserve... nothing? co_await hub.wait(t, until);
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "redisched/client.h"

namespace redisched::server {

class OneShot;

class WakeHub {
 public:
  struct Ticket {
    std::string topic;
    std::shared_ptr<OneShot> woken;  // on the waiter's executor
  };

  // The trim timer runs on ex.
  WakeHub(Client& client, const boost::asio::any_io_executor& ex);
  ~WakeHub();
  WakeHub(const WakeHub&) = delete;
  WakeHub& operator=(const WakeHub&) = delete;

  // Any thread; ex is the waiter's.
  std::shared_ptr<Ticket> watch(const std::string& topic, const boost::asio::any_io_executor& ex);
  // The same, firing woken: one event for a waiter on several topics (a
  // beanstalkd reserve on its watch list). forget each ticket after.
  std::shared_ptr<Ticket> watch(const std::string& topic, std::shared_ptr<OneShot> woken);
  // Until a signal for the topic (since watch), or until. Then the ticket is
  // forgotten: watch again before the next reserve.
  boost::asio::awaitable<void> wait(std::shared_ptr<Ticket> ticket,
                                    std::chrono::steady_clock::time_point until);
  void forget(const std::shared_ptr<Ticket>& ticket);
  // Wakes every waiter (shutting down).
  void wake_all();
  // Topics watched now: those waited on lately (tests).
  std::size_t subscriptions();

 private:
  struct Watched {
    Subscription subscription;
    std::set<std::shared_ptr<Ticket>> waiting;
  };
  void wake(const std::string& topic);
  void schedule_trim();

  Client& client_;
  std::mutex mu_;
  std::map<std::string, Watched> topics_;  // GUARDED_BY(mu_)
  std::shared_ptr<boost::asio::steady_timer> trim_timer_;
  std::shared_ptr<bool> alive_;  // the trim timer's handler checks it
};

}  // namespace redisched::server
