#include "server/sweeper.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "redisched/limits.h"
#include "redisched/scheduler.h"
#include "server/async_util.h"
#include "server/census.h"
#include "server/metrics.h"

namespace redisched::server {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Sweeper::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io, Client& c, Census& ce, Metrics& m, std::chrono::milliseconds p,
        std::chrono::milliseconds a)
      : strand(asio::make_strand(io)),
        timer(strand),
        client(c),
        census(ce),
        metrics(m),
        period(p),
        topics_age(a) {}

  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer timer;  // on strand
  bool stopped = false;      // on strand
  Client& client;
  Census& census;
  Metrics& metrics;
  std::chrono::milliseconds period, topics_age;
  std::mutex mu;
  // Noted topics, until census readings surely show them.
  std::map<std::string, Clock::time_point> noted;  // GUARDED_BY(mu)
  Scheduler* scheduler = nullptr;                  // set before start
  std::promise<void> swept;                        // set when sweep() ends
  std::shared_future<void> ended = swept.get_future().share();
  std::atomic<bool> started{false};
  // Topics whose stored formats this server has brought up to date
  // (Client::migrate), on strand: each is migrated once per server.
  std::set<std::string> migrated;

  asio::awaitable<void> sweep() {
    auto self = shared_from_this();
    while (!stopped) {
      try {
        const auto reading = co_await census.after(Clock::now() - topics_age);
        std::set<std::string> names;
        {
          std::lock_guard lock(mu);
          const auto old = Clock::now() - 2 * topics_age;
          std::erase_if(noted, [&](const auto& n) { return n.second < old; });
          for (const auto& n : noted) names.insert(n.first);
        }
        for (const auto& [name, stats] : reading->topics) {
          names.insert(name);
          if (scheduler && stats.schedules > 0) scheduler->add_topic(name);
        }
        const std::vector<std::string> topics(names.begin(), names.end());
        auto results = co_await await_each<RequeueResult>(topics, [this](const std::string& t) {
          return client.requeue_async(t, static_cast<int>(limits::kBatchMax), asio::deferred);
        });
        for (std::size_t i = 0; i < topics.size(); ++i) {
          if (!results[i].ok()) continue;      // the next sweep tries again
          const auto& r = results[i].value();  // NOLINT: checked above
          if (r.requeued + r.buried == 0) continue;
          metrics.count("lapsed", topics[i], static_cast<std::uint64_t>(r.requeued + r.buried));
          spdlog::debug("sweeper: {} lapsed in {} ({} dead)", r.requeued + r.buried, topics[i],
                        r.buried);
        }
        co_await migrate_some(topics);
      } catch (const Error& e) {
        spdlog::warn("sweeper: {}", e.what());
      }
      if (stopped) break;
      timer.expires_after(period);
      boost::system::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    }
    swept.set_value();
  }

  // Rewrites what topics hold in an older stored format (docs/redis-api.md,
  // "Migrations"), a few topics a sweep, each once: after an upgrade the
  // first sweeps bring every topic up to date, beside the workers.
  asio::awaitable<void> migrate_some(const std::vector<std::string>& topics) {
    constexpr std::size_t kTopicsPerSweep = 64;
    std::vector<std::string> due;
    for (const auto& t : topics) {
      if (due.size() == kTopicsPerSweep) break;
      if (!migrated.contains(t)) due.push_back(t);
    }
    if (due.empty()) co_return;
    auto results = co_await await_each<Migration>(due, [this](const std::string& t) {
      return client.migrate_async(t, static_cast<int>(limits::kBatchMax), asio::deferred);
    });
    for (std::size_t i = 0; i < due.size(); ++i) {
      if (!results[i].ok()) {  // the next sweep tries again
        spdlog::warn("sweeper: migrating {}: {}", due[i], results[i].error().what());
        continue;
      }
      migrated.insert(due[i]);
      const Migration& m = results[i].value();  // NOLINT: checked above
      if (m.rewritten > 0) {
        spdlog::info("sweeper: migrated {}: {} records rewritten ({} read, {} calls)", due[i],
                     m.rewritten, m.read, m.calls);
      }
    }
  }
};

Sweeper::Sweeper(asio::io_context& io, Client& client, Census& census, Metrics& metrics,
                 std::chrono::milliseconds period, std::chrono::milliseconds topics_age)
    : state_(std::make_shared<State>(io, client, census, metrics, period, topics_age)) {}

Sweeper::~Sweeper() { stop(std::chrono::milliseconds(0)); }

void Sweeper::start() {
  state_->started = true;
  asio::co_spawn(state_->strand, state_->sweep(), asio::detached);
}

void Sweeper::note(const std::string& topic) {
  std::lock_guard lock(state_->mu);
  state_->noted[topic] = Clock::now();
}

void Sweeper::run_schedules(Scheduler& scheduler) { state_->scheduler = &scheduler; }

void Sweeper::note_schedules(const std::string& topic) {
  if (state_->scheduler) state_->scheduler->add_topic(topic);
}

void Sweeper::stop(std::chrono::milliseconds wait) {
  asio::post(state_->strand, [s = state_] {
    s->stopped = true;
    s->timer.cancel();
  });
  // Not from the strand's own thread: the sweep could not end while it waits.
  if (state_->started && !state_->strand.get_inner_executor().running_in_this_thread()) {
    state_->ended.wait_for(wait);
  }
}

}  // namespace redisched::server
