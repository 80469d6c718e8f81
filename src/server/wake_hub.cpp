#include "server/wake_hub.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/keys.h"
#include "redis/subscriber.h"

namespace redisched::server {

namespace asio = boost::asio;

WakeHub::WakeHub(redis::ConnectionConfig config, std::string prefix)
    : prefix_(std::move(prefix)), work_(asio::make_work_guard(io_)) {
  subscriber_ = std::make_unique<redis::Subscriber>(
      io_, std::move(config),
      [this](const std::string& channel, const std::string&) { wake(channel); },
      [this] { wake_all(); });  // (re)subscribed: signals may have been missed
  schedule_trim();
  thread_ = std::thread([this] { io_.run(); });
}

void WakeHub::schedule_trim() {
  trim_timer_.expires_after(std::chrono::seconds(2));
  trim_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    std::vector<std::string> unused;
    {
      std::lock_guard lock(mu_);
      for (auto it = subscribed_.begin(); it != subscribed_.end();) {
        if (waiting_.count(*it) == 0) {
          unused.push_back(*it);
          it = subscribed_.erase(it);
        } else {
          ++it;
        }
      }
    }
    // A watch() after the erase subscribes again: its post comes after this.
    for (const auto& c : unused) subscriber_->unsubscribe(c);
    schedule_trim();
  });
}

std::size_t WakeHub::subscriptions() {
  std::lock_guard lock(mu_);
  return subscribed_.size();
}

WakeHub::~WakeHub() {
  asio::post(io_, [this] {
    trim_timer_.cancel();
    subscriber_->close();
  });
  work_.reset();
  io_.stop();
  thread_.join();
}

std::shared_ptr<WakeHub::Ticket> WakeHub::watch(const std::string& topic,
                                                const asio::any_io_executor& ex) {
  auto t = std::make_shared<Ticket>(ex);
  t->channel = core::wake_channel(prefix_, topic);
  std::lock_guard lock(mu_);
  waiting_[t->channel].insert(t);
  if (subscribed_.insert(t->channel).second) {
    asio::post(io_, [this, channel = t->channel] { subscriber_->subscribe(channel); });
  }
  return t;
}

void WakeHub::forget(const std::shared_ptr<Ticket>& t) {
  std::lock_guard lock(mu_);
  auto it = waiting_.find(t->channel);
  if (it == waiting_.end()) return;
  it->second.erase(t);
  if (it->second.empty()) waiting_.erase(it);
}

asio::awaitable<void> WakeHub::wait(std::shared_ptr<Ticket> t,
                                    std::chrono::steady_clock::time_point until) {
  if (!t->woken) {
    t->timer.expires_at(until);
    boost::system::error_code ignored;
    co_await t->timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  forget(t);
}

void WakeHub::wake(const std::string& channel) {
  std::set<std::shared_ptr<Ticket>> woken;
  {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(channel);
    if (it == waiting_.end()) return;
    woken.swap(it->second);
    waiting_.erase(it);
  }
  for (const auto& t : woken) {
    asio::post(t->timer.get_executor(), [t] {
      t->woken = true;
      t->timer.cancel();
    });
  }
}

void WakeHub::wake_all() {
  std::vector<std::string> channels;
  {
    std::lock_guard lock(mu_);
    for (const auto& [channel, tickets] : waiting_) channels.push_back(channel);
  }
  for (const auto& c : channels) wake(c);
}

}  // namespace redisched::server
