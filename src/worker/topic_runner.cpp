#include "worker/topic_runner.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <cmath>
#include <utility>

#include "core/limits.h"

namespace redisched::worker {
namespace {

namespace asio = boost::asio;
using Steady = std::chrono::steady_clock;

constexpr int kReserveMax = static_cast<int>(limits::kBatchMax);  // the library's limit per call
constexpr int kReservesInFlight = 2;
constexpr int kSplitMin = 10;  // smaller batches cost Redis more per job than they save
constexpr Millis kRetryMin{50};
constexpr Millis kRetryMax{2000};
// A settling call (ack, fail, release, touch) is retried this many times
// while Redis is unreachable, backing off; after that the reservation is left
// to lapse and the job is handed out again (at-least-once).
constexpr int kSettleTries = 30;
constexpr Millis kHeartbeatMin{20};
constexpr Millis kHeartbeatMax{10000};

bool transient(const Error& e) { return e.code() == Errc::connection || e.code() == Errc::timeout; }

}  // namespace

void Shared::count_call(int delta) {
  std::lock_guard lock(mu);
  calls += delta;
  changed.notify_all();
}

void Shared::count_held(int delta) {
  std::lock_guard lock(mu);
  held += delta;
  changed.notify_all();
}

// ------------------------------------------------------------ handler side

// The handler's view of one job. A synchronous handler's call ends it; an
// asynchronous handler ends it with done() (or by dropping it, a failure).
class TopicRunner::Context final : public AsyncJob {
 public:
  Context(TopicRunner& runner, Reservation job, std::uint64_t key)
      : runner_(runner), job_(std::move(job)), key_(key) {}
  ~Context() override {
    if (!finished_.load()) {
      fail("the handler dropped the job without done()", false);
      done();
    }
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  std::string_view topic() const override { return runner_.topic_; }
  const Reservation& job() const override { return job_; }

  bool touch(Millis ttr) override {
    if (cancelled()) return false;
    if (job_.token == 0) return true;  // handed out for good: no reservation to extend
    auto r = runner_.shared_.broker.touch_now(runner_.topic_, job_.id, job_.token, ttr);
    if (r.outcome != Outcome::ok) return false;
    std::lock_guard lock(runner_.mu_);
    if (auto it = runner_.running_.find(key_); it != runner_.running_.end()) {
      it->second.job.deadline_ms = r.deadline_ms;
    }
    return true;
  }

  void progress(int percent, std::string_view note) override {
    {
      std::lock_guard lock(runner_.mu_);
      if (auto it = runner_.running_.find(key_); it != runner_.running_.end()) {
        it->second.progress = std::clamp(percent, 0, 100);
        it->second.note.assign(note);
      }
    }
    if (runner_.opts_.overrun == Overrun::heartbeat) touch(Millis{0});
  }

  void release(Millis delay) override {
    verdict_ = Verdict::release;
    delay_ = delay;
  }

  void fail(std::string_view error, bool bury) override {
    verdict_ = bury ? Verdict::bury : Verdict::fail;
    error_.assign(error);
  }

  bool cancelled() const override {
    std::lock_guard lock(runner_.mu_);
    auto it = runner_.running_.find(key_);
    return runner_.cancelled_ || it == runner_.running_.end() || it->second.abandoned;
  }

  void done() override {
    if (finished_.exchange(true)) return;
    runner_.finish(Finished{std::move(job_), verdict_, std::move(error_), delay_, false, key_});
  }

  // Runs the handler; a throw fails the job with its text.
  template <class Call>
  void guard(Call&& call) {
    try {
      call();
    } catch (const std::exception& e) {
      fail(*e.what() != 0 ? e.what() : "the handler threw", false);
      done();
    } catch (...) {
      fail("the handler threw a non-exception", false);
      done();
    }
  }

 private:
  TopicRunner& runner_;
  Reservation job_;
  Verdict verdict_ = Verdict::ack;
  std::string error_;
  Millis delay_{0};
  std::uint64_t key_;
  std::atomic<bool> finished_{false};
};

TopicRunner::TopicRunner(Shared& shared, std::string topic, HandlerOptions options, Handler handler,
                         AsyncHandler async_handler)
    : shared_(shared),
      topic_(std::move(topic)),
      opts_(options),
      handler_(std::move(handler)),
      async_handler_(std::move(async_handler)),
      due_timer_(shared.io),
      sweep_timer_(shared.io),
      heartbeat_timer_(shared.io),
      retry_timer_(shared.io) {}

TopicRunner::~TopicRunner() { join(); }

void TopicRunner::start() {
  if (async_handler_) return;  // runs on the control thread
  threads_.reserve(static_cast<size_t>(opts_.concurrency));
  for (int i = 0; i < opts_.concurrency; ++i) threads_.emplace_back([this] { serve(); });
}

// A handler thread: one job at a time from the local queue.
void TopicRunner::serve() {
  for (;;) {
    Reservation job;
    std::uint64_t key = 0;
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [this] { return quit_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front().job;
      key = queue_.front().key;
      running_.emplace(key, std::move(queue_.front()));
      queue_.pop_front();
    }
    Context ctx(*this, std::move(job), key);
    ctx.guard([&] { handler_(ctx); });
    ctx.done();
  }
}

// Starts asynchronous handlers on the jobs just queued (control thread).
void TopicRunner::start_async() {
  std::vector<std::pair<Reservation, std::uint64_t>> jobs;
  {
    std::lock_guard lock(mu_);
    for (auto& r : queue_) {
      jobs.emplace_back(r.job, r.key);
      running_.emplace(r.key, std::move(r));
    }
    queue_.clear();
  }
  for (auto& [job, key] : jobs) {
    auto ctx = std::make_shared<Context>(*this, std::move(job), key);
    ctx->guard([&] { async_handler_(ctx); });
  }
}

void TopicRunner::finish(Finished f) {
  bool first = false;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(f.key);
    f.dropped = it == running_.end();
    if (!f.dropped && it->second.abandoned) {
      // Cancelled while it ran: its handler has returned, so the job may go
      // back for another worker now, whatever the handler said.
      f.verdict = Verdict::release;
      f.delay = Millis{0};
    }
    if (it != running_.end()) running_.erase(it);
    first = finished_.empty();
    finished_.push_back(std::move(f));
  }
  // One hop to the control thread per batch of results, not per job.
  if (first) asio::post(shared_.io, [this] { on_finished(); });
}

// ------------------------------------------------------------ control side

int TopicRunner::free_slots() const { return opts_.concurrency + opts_.prefetch - held_; }

void TopicRunner::back_on_control(std::function<void()> fn) {
  asio::post(shared_.io, std::move(fn));
}

template <class T>
void TopicRunner::call(std::function<void(Callback<T>)> start, std::function<void(Result<T>)> done,
                       int tries) {
  if (tries == 0) shared_.count_call(+1);
  auto finish = [this, start, done, tries](Result<T> r) mutable {
    if (!r.ok() && transient(r.error()) && tries + 1 < kSettleTries) {
      // While a call waits to be sent again, no reserve goes out: after Redis
      // is back, the acks and fails of jobs held go first, so none lapses
      // and runs again meanwhile.
      if (tries == 0) ++retrying_;
      auto timer = std::make_shared<asio::steady_timer>(
          shared_.io, std::min(kRetryMin * (1 << std::min(tries, 6)), kRetryMax));
      timer->async_wait([this, timer, start = std::move(start), done = std::move(done),
                         tries](boost::system::error_code) mutable {
        call<T>(std::move(start), std::move(done), tries + 1);
      });
      return;
    }
    done(std::move(r));
    shared_.count_call(-1);
    if (tries > 0 && --retrying_ == 0) {
      if (std::exchange(sweep_after_retries_, false)) sweep();
      look();
    }
  };
  try {
    start([this, finish = std::move(finish)](Result<T> r) mutable {
      back_on_control(
          [finish = std::move(finish), r = std::move(r)]() mutable { finish(std::move(r)); });
    });
  } catch (const Error& e) {
    finish(Result<T>(e));
  }
}

// Reserves for the free workers. While the topic is busy (the last reserve
// filled up), two reserves share the free slots, so that Redis works on one
// while the answer to the other is handled here; an idle topic sends one.
void TopicRunner::look() {
  if (stopping_ || free_slots() <= 0) return;  // a worker that frees up looks again
  if (retrying_ > 0) return;                   // the last of them looks again
  int free = free_slots() - requested_;
  // A reserve in flight may have run before what woke us: look once more
  // when it is back.
  if (free <= 0 || reserves_ >= kReservesInFlight || (reserves_ > 0 && !busy_)) {
    look_again_ = true;
    return;
  }
  look_again_ = false;
  if (busy_ && reserves_ == 0 && free >= 2 * kSplitMin) {
    fetch(free / 2);
    free -= free / 2;
  }
  fetch(free);
}

void TopicRunner::fetch(int count) {
  count = std::min(count, kReserveMax);
  ++reserves_;
  requested_ += count;
  ++shared_.stats.reserve_calls;
  shared_.count_call(+1);
  shared_.broker.reserve(topic_, count, opts_.ttr.value_or(Millis{0}),
                         [this, count](Result<ReserveResult> r) {
                           back_on_control([this, count, r = std::move(r)]() mutable {
                             --reserves_;
                             requested_ -= count;
                             on_reserved(std::move(r));
                             shared_.count_call(-1);
                           });
                         });
}

void TopicRunner::on_reserved(Result<ReserveResult> r) {
  if (!r.ok()) {
    if (stopping_) return;
    spdlog::warn("redisched worker: reserve on topic {} failed: {}", topic_, r.error().what());
    retry_timer_.expires_after(retry_backoff_);
    retry_backoff_ = std::min(retry_backoff_ * 2, kRetryMax);
    retry_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) look();
    });
    return;
  }
  retry_backoff_ = kRetryMin;
  ReserveResult& res = r.value();
  clock_.observe(res.now_ms);
  const int n = static_cast<int>(res.jobs.size());
  shared_.stats.reserved += static_cast<std::uint64_t>(n);
  if (n == 0) ++shared_.stats.empty_reserves;
  if (n > 0 && stopping_) {
    // Cancelled while the reserve was on its way: straight back, but for
    // jobs handed out for good (ttr 0), which still run.
    std::vector<Reservation> once;
    for (auto& job : res.jobs) {
      if (job.token == 0) {
        once.push_back(std::move(job));
      } else {
        release_now(job);
      }
    }
    if (once.empty()) return;
    res.jobs = std::move(once);
  }
  if (!res.jobs.empty()) {
    const int taken = static_cast<int>(res.jobs.size());
    held_ += taken;
    shared_.count_held(taken);
    std::int64_t first_deadline = -1;
    for (const auto& job : res.jobs) {
      if (job.token != 0 && (first_deadline < 0 || job.deadline_ms < first_deadline)) {
        first_deadline = job.deadline_ms;
      }
    }
    {
      std::lock_guard lock(mu_);
      enqueue(res.jobs, res.now_ms);
    }
    if (async_handler_) {
      start_async();
    } else if (taken == 1) {
      work_.notify_one();
    } else {
      work_.notify_all();
    }
    if (first_deadline >= 0) arm_sweep(first_deadline);
    arm_heartbeat();
  }
  if (stopping_) return;
  busy_ = res.next_ms == 0;
  if (res.next_ms == 0 || look_again_) {
    look();
  } else if (res.next_ms > 0) {
    arm(res.next_ms);
  }
}

void TopicRunner::enqueue(std::vector<Reservation>& jobs, std::int64_t now_ms) {
  // Tokens are below 2^53: keys from 2^62 on cannot meet one.
  constexpr std::uint64_t kOnceKeys = std::uint64_t{1} << 62;
  for (auto& job : jobs) {
    const std::uint64_t key = job.token != 0 ? job.token : kOnceKeys + ++once_jobs_;
    const Millis ttr{std::max<std::int64_t>(job.deadline_ms - now_ms, 1)};
    queue_.push_back(Running{key, std::move(job), ttr, 0, {}, false, false});
  }
}

void TopicRunner::arm(std::int64_t due_ms) {
  if (due_at_ >= 0 && due_at_ <= due_ms) return;  // an earlier wake-up is set
  due_at_ = due_ms;
  due_timer_.expires_at(clock_.local_time(due_ms));
  due_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_timer();
  });
}

void TopicRunner::on_timer() {
  due_at_ = -1;
  if (stopping_) return;
  if (free_slots() > 0) {
    look();
  } else {
    sweep();  // every worker busy: only lapsed reservations need a hand
  }
}

void TopicRunner::on_signal(std::int64_t due_ms) {
  ++shared_.stats.wakeups;
  if (stopping_) return;
  // Within a millisecond counts as now: the clock estimate errs early.
  if (!clock_.known() || due_ms <= clock_.redis_now() + 1) {
    look();
  } else {
    arm(due_ms);
  }
}

void TopicRunner::sweep() {
  if (stopping_) return;
  // Not while acks and fails wait to be sent again: a requeue first would
  // hand their jobs out again. The last of them to go sweeps.
  if (retrying_ > 0) {
    sweep_after_retries_ = true;
    return;
  }
  // One try: a sweep that fails is tried again later, never before the
  // settling calls that wait for Redis too.
  shared_.count_call(+1);
  shared_.broker.requeue(topic_, kReserveMax, [this](Result<RequeueResult> r) {
    back_on_control([this, r = std::move(r)]() mutable {
      shared_.count_call(-1);
      if (!r.ok()) {
        spdlog::warn("redisched worker: requeue on topic {} failed: {}", topic_, r.error().what());
        if (!stopping_) arm_sweep(clock_.redis_now() + kRetryMax.count());
        return;
      }
      if (r.value().requeued > 0) look();
      if (r.value().next_deadline_ms > 0) arm_sweep(r.value().next_deadline_ms);
    });
  });
}

// Reservations (ours or anyone's) can lapse at deadline_ms: a sweep then.
void TopicRunner::arm_sweep(std::int64_t deadline_ms) {
  if (stopping_ || (sweep_at_ >= 0 && sweep_at_ <= deadline_ms)) return;
  sweep_at_ = deadline_ms;
  sweep_timer_.expires_at(clock_.local_time(deadline_ms + 1));
  sweep_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    sweep_at_ = -1;
    sweep();
  });
}

void TopicRunner::arm_heartbeat() {
  if (opts_.overrun != Overrun::heartbeat || heartbeat_armed_) return;
  Millis tick = kHeartbeatMax;
  bool any = false;
  {
    std::lock_guard lock(mu_);
    for (const auto& r : queue_) {
      if (r.job.token != 0) tick = std::min(tick, r.ttr / 3), any = true;
    }
    for (const auto& [key, r] : running_) {
      if (r.job.token != 0) tick = std::min(tick, r.ttr / 3), any = true;
    }
  }
  if (!any) return;
  heartbeat_armed_ = true;
  heartbeat_timer_.expires_after(std::clamp(tick, kHeartbeatMin, kHeartbeatMax));
  heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
    heartbeat_armed_ = false;
    if (!ec) heartbeat();
  });
}

// Extends the reservations of running jobs that have used a third of their
// time-to-run.
void TopicRunner::heartbeat() {
  const std::int64_t now = clock_.redis_now();
  std::vector<Reservation> due;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, r] : running_) {
      if (r.job.token != 0 && !r.abandoned && !r.touching &&
          r.job.deadline_ms - now < r.ttr.count() * 2 / 3) {
        r.touching = true;
        due.push_back(r.job);
      }
    }
  }
  for (const auto& job : due) {
    call<TouchResult>(
        [this, job](Callback<TouchResult> cb) {
          shared_.broker.touch(topic_, job.id, job.token, Millis{0}, std::move(cb));
        },
        [this, key = job.token](Result<TouchResult> r) {
          std::lock_guard lock(mu_);
          auto it = running_.find(key);
          if (it == running_.end()) return;
          it->second.touching = false;
          if (r.ok() && r.value().outcome == Outcome::ok) {
            it->second.job.deadline_ms = r.value().deadline_ms;
          }
        });
  }
  arm_heartbeat();
}

void TopicRunner::on_finished() {
  std::vector<Finished> done;
  {
    std::lock_guard lock(mu_);
    done.swap(finished_);
  }
  if (done.empty()) return;
  for (auto& f : done) settle(std::move(f));
  flush_acks();
  held_ -= static_cast<int>(done.size());
  shared_.count_held(-static_cast<int>(done.size()));
  look();
}

namespace {
Millis retry_delay(const Backoff& b, int attempt) {
  if (b.kind == BackoffKind::fixed) return b.base;
  const double d = static_cast<double>(b.base.count()) * std::pow(2.0, std::max(attempt - 1, 0));
  return d >= static_cast<double>(b.cap.count()) ? b.cap : Millis{static_cast<std::int64_t>(d)};
}
constexpr auto kErrorMax = static_cast<size_t>(limits::kErrorMax);
}  // namespace

void TopicRunner::settle(Finished f) {
  if (f.dropped) return;
  const Reservation& job = f.job;
  if (job.token == 0) {  // handed out for good (ttr 0): nothing to settle
    ++shared_.stats.acked;
    return;
  }
  switch (f.verdict) {
    case Verdict::ack:
      acks_.emplace_back(job.id, job.token);
      return;
    case Verdict::release:
      call<Outcome>(
          [this, job, delay = f.delay](Callback<Outcome> cb) {
            shared_.broker.release(topic_, job.id, job.token, delay, std::move(cb));
          },
          [this](Result<Outcome> r) {
            if (r.ok() && r.value() == Outcome::ok) {
              ++shared_.stats.released;
            } else {
              ++shared_.stats.stale;
            }
          });
      return;
    case Verdict::fail:
    case Verdict::bury: {
      // The handler's max_attempts goes with the call: it becomes the job's
      // own, and the library decides between retry and dead by it.
      const bool bury = f.verdict == Verdict::bury;
      std::optional<Millis> delay;
      if (opts_.backoff) delay = retry_delay(*opts_.backoff, job.attempt);
      if (f.error.size() > kErrorMax) f.error.resize(kErrorMax);
      call<FailResult>(
          [this, job, bury, delay, error = std::move(f.error)](Callback<FailResult> cb) {
            shared_.broker.fail(topic_, job.id, job.token, error, bury, delay, opts_.max_attempts,
                                std::move(cb));
          },
          [this](Result<FailResult> r) {
            if (r.ok() && r.value().outcome == Outcome::ok) {
              ++shared_.stats.failed;
            } else {
              ++shared_.stats.stale;
            }
          });
      return;
    }
  }
}

// One ackmany at a time per topic: results that finish meanwhile wait and go
// together in the next one.
void TopicRunner::flush_acks() {
  if (acking_ || acks_.empty()) return;
  acking_ = true;
  auto batch = std::make_shared<std::vector<std::pair<std::string, std::uint64_t>>>();
  batch->swap(acks_);
  call<std::vector<Outcome>>(
      [this, batch](Callback<std::vector<Outcome>> cb) {
        shared_.broker.ack_many(topic_, *batch, opts_.keep_finished, std::move(cb));
      },
      [this, batch](Result<std::vector<Outcome>> r) {
        acking_ = false;
        if (r.ok()) {
          for (Outcome o : r.value()) {
            if (o == Outcome::ok) {
              ++shared_.stats.acked;
            } else {
              ++shared_.stats.stale;
            }
          }
        } else {
          spdlog::warn("redisched worker: {} acks on topic {} failed: {}", batch->size(), topic_,
                       r.error().what());
        }
        flush_acks();
      });
}

void TopicRunner::release_now(const Reservation& job) {
  call<Outcome>(
      [this, job](Callback<Outcome> cb) {
        shared_.broker.release(topic_, job.id, job.token, Millis{0}, std::move(cb));
      },
      [this](Result<Outcome> r) {
        if (r.ok() && r.value() == Outcome::ok) ++shared_.stats.released;
      });
}

void TopicRunner::stop_taking() {
  stopping_ = true;
  due_timer_.cancel();
  sweep_timer_.cancel();
  retry_timer_.cancel();
  // Waiting jobs go back, but for those handed out for good (ttr 0), which
  // stay queued: the handler threads run them before they end.
  std::deque<Running> waiting;
  {
    std::lock_guard lock(mu_);
    std::deque<Running> kept;
    for (auto& r : queue_) (r.job.token == 0 ? kept : waiting).push_back(std::move(r));
    queue_.swap(kept);
  }
  for (const auto& r : waiting) release_now(r.job);
  held_ -= static_cast<int>(waiting.size());
  shared_.count_held(-static_cast<int>(waiting.size()));
}

void TopicRunner::abandon_running() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  for (auto& [key, r] : running_) r.abandoned = true;
}

void TopicRunner::close() {
  due_timer_.cancel();
  sweep_timer_.cancel();
  heartbeat_timer_.cancel();
  retry_timer_.cancel();
}

void TopicRunner::join() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void TopicRunner::snapshot(std::vector<RunningJob>& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, r] : running_) {
    out.push_back({topic_, r.job.id, r.job.attempt, r.progress, r.note, r.job.deadline_ms});
  }
}

}  // namespace redisched::worker
