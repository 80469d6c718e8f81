#include "server/wake_hub.h"

#include "server/async_util.h"

namespace redisched::server {

namespace asio = boost::asio;

WakeHub::WakeHub(Client& client, const asio::any_io_executor& ex)
    : client_(client),
      trim_timer_(std::make_shared<asio::steady_timer>(ex)),
      alive_(std::make_shared<bool>(true)) {
  schedule_trim();
}

WakeHub::~WakeHub() {
  *alive_ = false;
  trim_timer_->cancel();
  std::map<std::string, Watched> gone;
  std::lock_guard lock(mu_);
  gone.swap(topics_);
}

// Every two seconds: unwatch the topics no waiter needs, so that the
// subscriptions are bounded by the topics waited on now.
void WakeHub::schedule_trim() {
  trim_timer_->expires_after(std::chrono::seconds(2));
  trim_timer_->async_wait(
      [this, alive = alive_, timer = trim_timer_](boost::system::error_code ec) {
        if (ec || !*alive) return;
        std::vector<Subscription> unused;  // ended outside the lock
        {
          std::lock_guard lock(mu_);
          for (auto it = topics_.begin(); it != topics_.end();) {
            if (it->second.waiting.empty()) {
              unused.push_back(std::move(it->second.subscription));
              it = topics_.erase(it);
            } else {
              ++it;
            }
          }
        }
        schedule_trim();
      });
}

std::shared_ptr<WakeHub::Ticket> WakeHub::watch(const std::string& topic,
                                                const asio::any_io_executor& ex) {
  return watch(topic, OneShot::make(ex));
}

std::shared_ptr<WakeHub::Ticket> WakeHub::watch(const std::string& topic,
                                                std::shared_ptr<OneShot> woken) {
  auto t = std::make_shared<Ticket>(Ticket{topic, std::move(woken)});
  std::lock_guard lock(mu_);
  auto& w = topics_[topic];
  w.waiting.insert(t);
  if (!w.subscription) {
    // A signal wakes the topic's waiters; so does a (re)subscription, since
    // signals sent before it were lost.
    w.subscription = client_.watch(
        topic, [this, topic](std::int64_t) { wake(topic); }, [this, topic] { wake(topic); });
  }
  return t;
}

void WakeHub::forget(const std::shared_ptr<Ticket>& t) {
  std::lock_guard lock(mu_);
  auto it = topics_.find(t->topic);
  if (it != topics_.end()) it->second.waiting.erase(t);
}

asio::awaitable<void> WakeHub::wait(std::shared_ptr<Ticket> t,
                                    std::chrono::steady_clock::time_point until) {
  co_await t->woken->wait(until);
  forget(t);
}

void WakeHub::wake(const std::string& topic) {
  std::set<std::shared_ptr<Ticket>> woken;
  {
    std::lock_guard lock(mu_);
    auto it = topics_.find(topic);
    if (it == topics_.end()) return;
    woken.swap(it->second.waiting);
  }
  for (const auto& t : woken) t->woken->fire();
}

void WakeHub::wake_all() {
  std::vector<std::string> topics;
  {
    std::lock_guard lock(mu_);
    for (const auto& [topic, w] : topics_) topics.push_back(topic);
  }
  for (const auto& t : topics) wake(t);
}

std::size_t WakeHub::subscriptions() {
  std::lock_guard lock(mu_);
  return topics_.size();
}

}  // namespace redisched::server
