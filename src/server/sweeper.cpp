#include "server/sweeper.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "redisched/limits.h"
#include "redisched/scheduler.h"
#include "server/async_util.h"
#include "server/census.h"
#include "server/metrics.h"

namespace redisched::server {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Sweeper::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io, Client& c, Census& ce, Metrics& m)
      : strand(asio::make_strand(io)), timer(strand), client(c), census(ce), metrics(m) {}

  // Everything below is on strand but what says otherwise.
  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer timer;  // the loop's sleep; cancelled to wake it
  bool stopped = false;
  Client& client;
  Census& census;
  Metrics& metrics;
  Scheduler* scheduler = nullptr;  // set before start
  Subscription signals;            // set at start, cancelled at stop
  std::promise<void> swept;        // set when run() ends
  std::shared_future<void> ended = swept.get_future().share();
  std::atomic<bool> started{false};

  // The topics to requeue, by when (Redis's clock, ms): at most one entry
  // per topic, the earliest time known.
  std::map<std::string, std::int64_t> watched;
  std::set<std::pair<std::int64_t, std::string>> by_time;
  // Redis's clock minus this host's steady clock (ms), from the last TIME.
  std::int64_t offset_ms = 0;
  bool offset_known = false;
  bool pass_wanted = false;
  // The first pass waits for the subscription (signals sent before it are
  // missed), but no longer than this: one Redis refuses is retried forever.
  Clock::time_point first_pass_by = Clock::now() + std::chrono::seconds(5);
  std::uint64_t passes = 0;
  Clock::time_point last_pass;
  bool subscribed = false;  // Redis confirmed the subscription once
  // A pass that failed is made again at retry_pass_at, later each time.
  bool retry_pass = false;
  Clock::time_point retry_pass_at;
  std::chrono::seconds pass_backoff{0};
  // Topics whose stored formats this server has brought up to date
  // (Client::migrate), each once; and those a pass found still to do.
  std::set<std::string> migrated, to_migrate;
  // Paced (64 topics at a time, 10 times a second at most): at its start,
  // a serve beside many topics does not crowd out its own requests.
  Clock::time_point next_migrations;
  // Flows (docs/redis-api.md, "Flows"): the topics whose outbox holds
  // entries, from the signal or a pass. A topic whose calls failed is
  // moved again a second later. (The signal comes only when an outbox gets
  // its first entry, but every move reads until it finds the outbox empty:
  // an entry added meanwhile, or left by another mover that was killed, is
  // found by the move the first entry's signal started.)
  std::set<std::string> to_move;
  Clock::time_point next_moves;
  // The topics known to use flows, each also heard on its own outbox
  // channel (Client::watch_outbox), which the node that holds it delivers:
  // on a Redis Cluster the sweep channel crosses the bus, where Redis holds
  // a message back 40 ms now and then. At most kOutboxWatchesMax; beyond,
  // the sweep channel alone.
  // (Under watches_mutex, not the strand: stop() ends them from its own
  // thread, before the Client they live on can go.)
  static constexpr std::size_t kOutboxWatchesMax = 10000;
  std::mutex watches_mutex;
  bool watching = true;
  std::map<std::string, Subscription> outbox_watches;

  static std::int64_t steady_ms(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }

  // Topic's reservations may lapse at at_ms: swept then (or sooner, if
  // something said so before).
  void watch(const std::string& topic, std::int64_t at_ms) {
    auto [it, added] = watched.try_emplace(topic, at_ms);
    if (!added) {
      if (it->second <= at_ms) return;
      by_time.erase({it->second, topic});
      it->second = at_ms;
    }
    const bool first = by_time.empty() || at_ms < by_time.begin()->first;
    by_time.emplace(at_ms, topic);
    if (first) timer.cancel();  // the loop sleeps until a later time
  }

  void want_pass() {
    subscribed = true;
    pass_wanted = true;
    timer.cancel();
  }

  // When the earliest watched topic is due (max: none is watched).
  Clock::time_point sweep_time() const {
    if (by_time.empty()) return Clock::time_point::max();
    if (!offset_known) return Clock::time_point::min();  // a TIME first
    // (A ms late: the offset's ms are floored, and early would find nothing.)
    return Clock::time_point(std::chrono::milliseconds(by_time.begin()->first - offset_ms + 1));
  }

  // When the next pass is due without a subscription's word: the first
  // one, if the subscription is not in place by then; and while Redis has
  // never confirmed it (an ACL without the channel, say: it is asked for
  // again and logged), one a minute, which hears what the signal cannot.
  Clock::time_point pass_time() const {
    if (retry_pass) return retry_pass_at;
    if (passes == 0) return first_pass_by;
    if (!subscribed) return last_pass + std::chrono::minutes(1);
    return Clock::time_point::max();
  }

  // When the next migrations are due (max: none is left).
  Clock::time_point migrate_time() const {
    return to_migrate.empty() ? Clock::time_point::max() : next_migrations;
  }

  // When the next outboxes are carried out (max: none is known).
  Clock::time_point move_time() const {
    return to_move.empty() ? Clock::time_point::max() : next_moves;
  }

  void note_outbox(const std::string& topic) {
    if (to_move.insert(topic).second && to_move.size() == 1) timer.cancel();
    const std::lock_guard lock(watches_mutex);
    if (!watching || outbox_watches.size() >= kOutboxWatchesMax || outbox_watches.contains(topic)) {
      return;
    }
    // (Its first signal, on_ready, moves it again: entries made before.)
    auto heard = [weak = weak_from_this(), topic] {
      if (auto self = weak.lock())
        asio::post(self->strand, [self, topic] { self->note_outbox(topic); });
    };
    try {
      outbox_watches.emplace(topic, client.watch_outbox(topic, heard, heard));
    } catch (const Error& e) {  // (a name the Client cannot call: the sweep channel alone)
      spdlog::warn("sweeper: watching the outbox of {}: {}", topic, e.what());
    }
  }

  // When the loop has work next.
  Clock::time_point wake_time() const {
    if (pass_wanted) return Clock::time_point::min();
    return std::min({sweep_time(), pass_time(), migrate_time(), move_time()});
  }

  asio::awaitable<void> run() {
    auto self = shared_from_this();
    while (!stopped) {
      // Each part on its own: a pass that fails (a topic or a node that
      // does not answer) holds back no deadline already known. A part that
      // failed is tried again in a second (a dropped subscription asks for
      // a pass itself once it is back).
      bool failed = false;
      if (pass_wanted || pass_time() <= Clock::now()) {
        pass_wanted = false;
        if (!co_await attempt(pass())) {
          // Again after 1 s, then 2, 4 ... up to a minute: each is a read
          // of every topic.
          failed = true;
          pass_backoff = std::min(std::max(pass_backoff * 2, std::chrono::seconds(1)),
                                  std::chrono::seconds(60));
          retry_pass_at = Clock::now() + pass_backoff;
        } else {
          pass_backoff = std::chrono::seconds(0);
        }
      }
      if (sweep_time() <= Clock::now()) failed |= !co_await attempt(sweep_due());
      if (migrate_time() <= Clock::now()) failed |= !co_await attempt(migrate_some());
      if (move_time() <= Clock::now()) failed |= !co_await attempt(move_some());
      if (!stopped) {
        co_await sleep_until(failed ? Clock::now() + std::chrono::seconds(1) : wake_time());
      }
    }
    swept.set_value();
  }

  // False, logged, when part failed.
  static asio::awaitable<bool> attempt(asio::awaitable<void> part) {
    try {
      co_await std::move(part);
      co_return true;
    } catch (const Error& e) {
      spdlog::warn("sweeper: {}", e.what());
      co_return false;
    }
  }

  asio::awaitable<void> sleep_until(Clock::time_point t) {
    if (t <= Clock::now()) co_return;
    timer.expires_at(t);
    boost::system::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }

  // Every topic read once: those holding reservations are swept now, those
  // with schedules go to the scheduler, and those not yet migrated queue up.
  // A pass that fails is wanted again.
  asio::awaitable<void> pass() {
    std::shared_ptr<const Census::Reading> reading;
    try {
      reading = co_await census.after(Clock::now());
    } catch (const Error&) {
      retry_pass = true;
      throw;
    }
    retry_pass = false;
    std::size_t holding = 0;
    for (const auto& [name, stats] : reading->topics) {
      if (scheduler && stats.schedules > 0) scheduler->add_topic(name);
      if (stats.reserved > 0) {
        watch(name, 0);
        ++holding;
      }
      if (!migrated.contains(name)) to_migrate.insert(name);
      if (stats.outbox > 0) note_outbox(name);
    }
    ++passes;
    last_pass = Clock::now();
    spdlog::debug("sweeper: a pass over {} topics, {} with reservations", reading->topics.size(),
                  holding);
  }

  // Requeues the topics whose time has come (by Redis's clock, read first).
  // Each leaves the watch as its requeue goes out and comes back at the
  // next deadline it answers, so a signal heard meanwhile is kept.
  asio::awaitable<void> sweep_due() {
    const std::int64_t now = co_await client.now_ms_async(asio::use_awaitable);
    offset_ms = now - steady_ms(Clock::now());
    offset_known = true;
    std::vector<std::string> due;
    while (!by_time.empty() && by_time.begin()->first <= now) {
      due.push_back(by_time.begin()->second);
      watched.erase(due.back());
      by_time.erase(by_time.begin());
    }
    auto results = co_await await_each<RequeueResult>(due, [this](const std::string& t) {
      return client.requeue_async(t, static_cast<int>(limits::kBatchMax), asio::deferred);
    });
    for (std::size_t i = 0; i < due.size(); ++i) {
      if (!results[i].ok()) {
        spdlog::warn("sweeper: requeue of {}: {}", due[i], results[i].error().what());
        watch(due[i], now + 1000);  // tried again in a second
        continue;
      }
      const auto& r = results[i].value();  // NOLINT: checked above
      // A deadline still to come by this clock but not by the topic's node
      // (a cluster's nodes, or a clock stepped back): looked at again a
      // little later, not at once in a loop.
      const bool behind =
          r.requeued + r.buried == 0 && r.next_deadline_ms >= 0 && r.next_deadline_ms <= now;
      if (r.next_deadline_ms >= 0) watch(due[i], behind ? now + 100 : r.next_deadline_ms);
      if (r.requeued + r.buried == 0) continue;
      metrics.count("lapsed", due[i], static_cast<std::uint64_t>(r.requeued + r.buried));
      spdlog::debug("sweeper: {} lapsed in {} ({} dead)", r.requeued + r.buried, due[i], r.buried);
    }
  }

  // Carries out the outboxes known to hold entries, 64 topics at a time.
  asio::awaitable<void> move_some() {
    constexpr std::size_t kTopicsAtOnce = 64;
    std::vector<std::string> now;
    while (!to_move.empty() && now.size() < kTopicsAtOnce) {
      now.push_back(to_move.extract(to_move.begin()).value());
    }
    auto results = co_await await_each<MoveResult>(
        now, [this](const std::string& t) { return client.move_outbox_async(t, asio::deferred); });
    bool again = false;
    for (std::size_t i = 0; i < now.size(); ++i) {
      if (!results[i].ok() || results[i].value().failed > 0) {
        spdlog::warn("sweeper: carrying out the outbox of {}: {}", now[i],
                     results[i].ok() ? std::to_string(results[i].value().failed) + " calls failed"
                                     : results[i].error().what());
        to_move.insert(now[i]);
        again = true;
        continue;
      }
      if (results[i].value().moved > 0) {
        metrics.count("moved", now[i], static_cast<std::uint64_t>(results[i].value().moved));
      }
    }
    next_moves = again ? Clock::now() + std::chrono::seconds(1) : Clock::now();
  }

  // Rewrites what topics hold in an older stored format (docs/redis-api.md,
  // "Migrations"), 64 topics at a time, each once per server: after an
  // upgrade the first pass brings every topic up to date, beside the workers
  // (a failure is tried again at the next pass).
  asio::awaitable<void> migrate_some() {
    constexpr std::size_t kTopicsAtOnce = 64;
    std::vector<std::string> now;
    while (!to_migrate.empty() && now.size() < kTopicsAtOnce) {
      now.push_back(to_migrate.extract(to_migrate.begin()).value());
    }
    next_migrations = Clock::now() + std::chrono::milliseconds(100);
    auto results = co_await await_each<Migration>(now, [this](const std::string& t) {
      return client.migrate_async(t, static_cast<int>(limits::kBatchMax), asio::deferred);
    });
    for (std::size_t i = 0; i < now.size(); ++i) {
      if (!results[i].ok()) {  // the next pass tries again
        spdlog::warn("sweeper: migrating {}: {}", now[i], results[i].error().what());
        continue;
      }
      migrated.insert(now[i]);
      const Migration& m = results[i].value();  // NOLINT: checked above
      if (m.rewritten > 0) {
        spdlog::info("sweeper: migrated {}: {} records rewritten ({} read, {} calls)", now[i],
                     m.rewritten, m.read, m.calls);
      }
    }
  }
};

Sweeper::Sweeper(asio::io_context& io, Client& client, Census& census, Metrics& metrics)
    : state_(std::make_shared<State>(io, client, census, metrics)) {}

Sweeper::~Sweeper() { stop(std::chrono::milliseconds(0)); }

void Sweeper::start() {
  state_->started = true;
  std::weak_ptr<State> weak = state_;
  // Signals arrive on a runtime thread: each is handed to the strand.
  state_->signals = state_->client.watch_sweep(
      [weak](const SweepSignal& s) {
        auto self = weak.lock();
        if (!self) return;
        if (s.kind == SweepSignal::Kind::schedules) {
          if (self->scheduler) self->scheduler->add_topic(s.topic);
          return;
        }
        if (s.kind == SweepSignal::Kind::outbox) {
          asio::post(self->strand, [self, s] { self->note_outbox(s.topic); });
          return;
        }
        asio::post(self->strand, [self, s] { self->watch(s.topic, s.at_ms); });
      },
      [weak] {
        if (auto self = weak.lock()) asio::post(self->strand, [self] { self->want_pass(); });
      });
  asio::co_spawn(state_->strand, state_->run(), asio::detached);
}

void Sweeper::run_schedules(Scheduler& scheduler) { state_->scheduler = &scheduler; }

void Sweeper::note_schedules(const std::string& topic) {
  if (state_->scheduler) state_->scheduler->add_topic(topic);
}

void Sweeper::stop(std::chrono::milliseconds wait) {
  state_->signals.cancel();
  {
    std::map<std::string, Subscription> ending;  // (cancelled as it goes, outside the lock)
    {
      const std::lock_guard lock(state_->watches_mutex);
      state_->watching = false;
      ending.swap(state_->outbox_watches);
    }
  }
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
