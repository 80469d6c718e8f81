#include "server/census.h"

#include <boost/asio/this_coro.hpp>
#include <set>

#include "server/async_util.h"

namespace redisched::server {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

asio::awaitable<std::shared_ptr<const Census::Reading>> Census::after(Clock::time_point since) {
  const auto ex = co_await asio::this_coro::executor;
  for (;;) {
    auto waiter = OneShot::make(ex);
    bool start = false;
    {
      std::lock_guard lock(mu_);
      if (last_ && last_->started >= since) co_return last_;
      if (failure_ && failed_at_ >= since) throw *failure_;
      // The reading under way serves only if it started late enough; else
      // the one after it (started when this one ends).
      waiting_.push_back(waiter);
      if (!reading_) {
        reading_ = true;
        reading_started_ = Clock::now();
        ++count_;
        start = true;
      }
    }
    // Outside the lock: the Client may call back before it returns.
    if (start) start_reading();
    co_await waiter->wait(Clock::time_point::max());
  }
}

std::uint64_t Census::readings() const {
  std::lock_guard lock(mu_);
  return count_;
}

void Census::start_reading() {
  Clock::time_point started;
  {
    std::lock_guard lock(mu_);
    started = reading_started_;
  }
  client_.topics_async([this, started](Result<std::vector<std::string>> names) {
    if (!names.ok()) return finish(nullptr, names.error());
    struct Gather {
      std::mutex mu;
      std::shared_ptr<Reading> reading = std::make_shared<Reading>();
      std::size_t pending = 0;
      std::optional<Error> failure;
      // Topics the Client refuses to name (put by another client, or by
      // hand, with characters it does not take): left out of the reading
      // rather than failing it.
      std::set<std::string> unnamed;
    };
    auto g = std::make_shared<Gather>();
    g->reading->started = started;
    g->reading->topics.reserve(names.value().size());
    for (auto& name : names.value()) g->reading->topics.emplace_back(std::move(name), TopicStats{});
    g->pending = g->reading->topics.size();
    if (g->pending == 0) return finish(g->reading, std::nullopt);
    for (auto& [name, stats] : g->reading->topics) {
      Callback<TopicStats> done = [this, g, &name = name, &stats = stats](Result<TopicStats> r) {
        bool last = false;
        {
          std::lock_guard lock(g->mu);
          if (r.ok()) {
            stats = r.value();
          } else if (r.error().code() == Errc::invalid_argument) {
            g->unnamed.insert(name);
          } else if (!g->failure) {
            g->failure = r.error();
          }
          last = --g->pending == 0;
        }
        if (!last) return;
        if (g->failure) return finish(nullptr, g->failure);
        std::erase_if(g->reading->topics,
                      [&](const auto& t) { return g->unnamed.contains(t.first); });
        finish(g->reading, std::nullopt);
      };
      try {
        client_.stats_async(name, done);
      } catch (const Error& e) {
        done(e);
      }
    }
  });
}

void Census::finish(std::shared_ptr<const Reading> r, std::optional<Error> failure) {
  std::vector<std::shared_ptr<OneShot>> woken;
  {
    std::lock_guard lock(mu_);
    reading_ = false;
    if (r) {
      last_ = std::move(r);
      failure_.reset();
    } else {
      failure_ = std::move(failure);
      failed_at_ = reading_started_;
    }
    woken.swap(waiting_);
  }
  // Each waiter looks again: served, or it starts the next reading.
  for (const auto& w : woken) w->fire();
}

}  // namespace redisched::server
