// Long-poll reserve: waits for the same wake-up signal as the Worker
// (docs/redis-api.md, "Wake-up signal"), on one subscriber connection for
// the whole server, instead of polling.
//
//   auto t = hub.watch(topic, executor);   // before the reserve, so no signal falls between
//   reserve... nothing? co_await hub.wait(t, until);
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include "redis/connection.h"

namespace redisched::redis {
class Subscriber;
}

namespace redisched::server {

class WakeHub {
 public:
  struct Ticket {
    explicit Ticket(const boost::asio::any_io_executor& ex) : timer(ex) {}
    boost::asio::steady_timer timer;
    bool woken = false;  // on the timer's executor
    std::string channel;
  };

  WakeHub(redis::ConnectionConfig config, std::string prefix);
  ~WakeHub();
  WakeHub(const WakeHub&) = delete;
  WakeHub& operator=(const WakeHub&) = delete;

  std::shared_ptr<Ticket> watch(const std::string& topic, const boost::asio::any_io_executor& ex);
  // Until a signal for the topic (since watch), or until. Then the ticket is
  // forgotten: watch again before the next reserve.
  boost::asio::awaitable<void> wait(std::shared_ptr<Ticket> ticket,
                                    std::chrono::steady_clock::time_point until);
  void forget(const std::shared_ptr<Ticket>& ticket);
  // Wakes every waiter (shutting down, or resubscribed).
  void wake_all();
  // Channels subscribed now: those waited on lately (tests).
  std::size_t subscriptions();

 private:
  void wake(const std::string& channel);
  // Every few seconds: drops the subscriptions no waiter needs, so they are
  // bounded by the topics waited on now, not by every topic ever waited on.
  void schedule_trim();

  std::string prefix_;
  boost::asio::io_context io_;
  std::unique_ptr<redis::Subscriber> subscriber_;
  std::mutex mu_;
  std::unordered_map<std::string, std::set<std::shared_ptr<Ticket>>> waiting_;
  std::set<std::string> subscribed_;  // GUARDED_BY(mu_)
  boost::asio::steady_timer trim_timer_{io_};
  std::thread thread_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
};

}  // namespace redisched::server
