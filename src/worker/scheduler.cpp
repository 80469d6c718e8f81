#include "redisched/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "core/client_access.h"
#include "core/ticks.h"
#include "redisched/asio.h"
#include "redisched/limits.h"
#include "redisched/runtime.h"

namespace redisched {
namespace {

namespace asio = boost::asio;

// CatchUp::skip still runs a tick missed by less than this (as
// Sidekiq-cron's grace period): a scheduler that woke a little late, or
// came back after a short restart, is not a downtime.
constexpr std::int64_t kSkipGrace = 60'000;
constexpr Millis kRetryMin{100};
constexpr Millis kRetryMax{5000};
// How long stop() waits for the answers of the calls in flight (a Redis that
// does not answer at all must not hold a shutdown for ever).
constexpr std::chrono::seconds kAnswersWait{10};

struct Counters {
  std::atomic<std::uint64_t> put{0}, skipped{0}, lost{0}, errors{0};
};

// One topic's schedules, on the shard of the Client's runtime that holds
// the topic: everything below runs on that thread, one step at a time.
class Ticker : public std::enable_shared_from_this<Ticker> {
 public:
  Ticker(Client& client, std::string topic, std::shared_ptr<Counters> counters)
      : client_(client),
        shard_(client.runtime().shard_of(topic)),
        io_(shard_io(client.runtime(), shard_)),
        topic_(std::move(topic)),
        counters_(std::move(counters)),
        timer_(io_) {}

  void start() {
    std::weak_ptr<Ticker> weak = weak_from_this();
    const auto look = [weak, &io = io_] {
      asio::post(io, [weak] {
        if (auto self = weak.lock()) self->load();
      });
    };
    // Its on_ready (also after a reconnection) makes the first read.
    subscription_ = client_.watch_schedules(
        topic_, [look](const std::string&) { look(); }, look);
  }

  // Any thread. On the ticker's thread it stops at once; elsewhere the
  // future is ready once it stopped and the answers of its calls in flight
  // are in (the counters final, nothing of the ticker running): wait for it.
  std::optional<std::future<void>> stop() {
    subscription_.cancel();
    const auto halt = [self = shared_from_this()] {
      self->stopped_ = true;
      self->timer_.cancel();
    };
    if (client_.runtime().current_shard() == static_cast<int>(shard_)) {
      halt();
      return std::nullopt;
    }
    auto idle = std::make_shared<std::promise<void>>();
    asio::post(io_, [self = shared_from_this(), halt, idle] {
      halt();
      self->idle_ = idle;
      self->note_idle();
    });
    return idle->get_future();
  }

 private:
  // Reads the schedules (one read at a time; one more when asked meanwhile).
  void load() {
    if (stopped_) return;
    if (loading_ || ticking_ > 0) {
      reload_ = true;
      return;
    }
    loading_ = true;
    client_.schedules_async(topic_, [self = shared_from_this()](Result<ScheduleList> r) {
      asio::post(self->io_, [self, r = std::move(r)]() mutable { self->loaded(std::move(r)); });
    });
  }

  // Once stopped, tells stop() when no call is in flight any more.
  void note_idle() {
    if (idle_ && ticking_ == 0 && !loading_) std::exchange(idle_, nullptr)->set_value();
  }

  void loaded(Result<ScheduleList> r) {
    loading_ = false;
    if (stopped_) return note_idle();
    if (!r.ok()) return failed(r.error());
    retry_ = kRetryMin;
    const std::int64_t now = r.value().now_ms;
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
    for (const auto& sc : r.value().schedules) {
      if (sc.spec.paused) continue;
      const core::TickRule* rule = rule_for(sc);
      if (!rule) continue;
      if (sc.next_ms <= now) {
        fire(sc, *rule, now);
      } else {
        earliest = std::min(earliest, sc.next_ms);
      }
    }
    if (ticking_ > 0) return;  // their answers read again
    if (std::exchange(reload_, false)) return load();
    if (earliest == std::numeric_limits<std::int64_t>::max()) return;
    timer_.expires_after(Millis{earliest - now});
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->load();
    });
  }

  // The tick due: the last one at or before now (the only one, unless
  // ticks were missed), and the one after it.
  void fire(const Schedule& sc, const core::TickRule& rule, std::int64_t now) {
    const std::int64_t last = rule.last_at_or_before(sc.next_ms, now);
    std::int64_t next = rule.next_after(last);
    if (next < 0) next = limits::kMsMax;  // a rule that never comes again
    std::optional<std::int64_t> run;
    if (sc.spec.catch_up == CatchUp::last || now - last <= kSkipGrace) run = last;
    // The ticks this call moves past without their job: the missed ones
    // before last, and last itself when it does not run.
    const auto passed =
        static_cast<std::uint64_t>(rule.count_before(sc.next_ms, last)) + (run ? 0 : 1);
    ++ticking_;
    detail::ClientAccess::tick(client_, topic_, sc.name, sc.next_ms, next, run,
                               [self = shared_from_this(), passed](Result<TickOutcome> r) {
                                 asio::post(self->io_, [self, r = std::move(r), passed]() mutable {
                                   self->ticked(std::move(r), passed);
                                 });
                               });
  }

  void ticked(Result<TickOutcome> r, std::uint64_t passed) {
    --ticking_;
    // Counted even once stopped: a tick answered after stop() was put.
    // Only the Scheduler whose call moved next counts the ticks it passed.
    if (r.ok()) {
      const TickOutcome said = r.value();
      if (said == TickOutcome::put || said == TickOutcome::moved) {
        if (said == TickOutcome::put) ++counters_->put;
        counters_->skipped += passed;
      } else if (said == TickOutcome::superseded) {
        ++counters_->lost;
      }
    }
    if (stopped_) return note_idle();
    if (!r.ok()) {
      // Read again after a pause (Redis out of memory, read-only after a
      // failover): no spinning on a write Redis keeps refusing.
      if (ticking_ == 0) return failed(r.error());
      ++counters_->errors;
      return;
    }
    if (ticking_ == 0) load();
  }

  void failed(const Error& e) {
    ++counters_->errors;
    if (retry_ == kRetryMin) {
      spdlog::warn("redisched scheduler: the schedules of topic {}: {} (trying again)", topic_,
                   e.what());
    }
    timer_.expires_after(retry_);
    retry_ = std::min(retry_ * 2, kRetryMax);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->load();
    });
  }

  // The schedule's rule, parsed once per version of it; nullptr (logged
  // once) for one this library cannot read (written by another client).
  const core::TickRule* rule_for(const Schedule& sc) {
    const std::string key = sc.spec.cron + '\n' + sc.spec.time_zone + '\n' +
                            std::to_string(sc.spec.every ? sc.spec.every->count() : 0);
    auto it = rules_.find(sc.name);
    if (it != rules_.end() && it->second.first == key) return &it->second.second;
    try {
      it = rules_.insert_or_assign(sc.name, std::make_pair(key, core::tick_rule(sc.spec))).first;
      return &it->second.second;
    } catch (const Error& e) {
      if (refused_.insert(sc.name + '\n' + key).second) {
        spdlog::error("redisched scheduler: schedule {} of topic {} does not run: {}", sc.name,
                      topic_, e.what());
      }
      return nullptr;
    }
  }

  Client& client_;
  const std::size_t shard_;
  asio::io_context& io_;
  const std::string topic_;
  std::shared_ptr<Counters> counters_;
  asio::steady_timer timer_;
  Subscription subscription_;
  bool stopped_ = false;
  bool loading_ = false, reload_ = false;
  int ticking_ = 0;
  std::shared_ptr<std::promise<void>> idle_;  // stop()'s, once stopped
  Millis retry_ = kRetryMin;
  std::map<std::string, std::pair<std::string, core::TickRule>> rules_;
  std::set<std::string> refused_;
};

}  // namespace

class Scheduler::Impl {
 public:
  explicit Impl(Client& c) : client(c) {}

  Client& client;
  std::shared_ptr<Counters> counters = std::make_shared<Counters>();
  std::mutex mu;
  bool stopped = false;
  std::map<std::string, std::shared_ptr<Ticker>, std::less<>> tickers;
};

Scheduler::Scheduler(Client& client) : impl_(std::make_shared<Impl>(client)) {}

Scheduler::~Scheduler() { stop(); }

void Scheduler::add_topic(std::string_view topic) {
  Client::validate_topic(topic);
  std::lock_guard lock(impl_->mu);
  if (impl_->stopped || impl_->tickers.contains(topic)) return;
  auto t = std::make_shared<Ticker>(impl_->client, std::string(topic), impl_->counters);
  impl_->tickers.emplace(std::string(topic), t);
  t->start();
}

void Scheduler::stop() {
  std::map<std::string, std::shared_ptr<Ticker>, std::less<>> tickers;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopped = true;
    tickers.swap(impl_->tickers);
  }
  // Not under the lock: a ticker's thread may be adding a topic. Every
  // ticker stops first, then they are waited for together (up to
  // kAnswersWait in all).
  std::vector<std::future<void>> stopping;
  for (auto& [topic, t] : tickers) {
    if (auto f = t->stop()) stopping.push_back(std::move(*f));
  }
  const auto until = std::chrono::steady_clock::now() + kAnswersWait;
  for (auto& f : stopping) f.wait_until(until);
}

Scheduler::Stats Scheduler::stats() const {
  const auto& c = *impl_->counters;
  return {c.put.load(), c.skipped.load(), c.lost.load(), c.errors.load()};
}

}  // namespace redisched
