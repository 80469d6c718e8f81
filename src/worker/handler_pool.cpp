#include "worker/handler_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include "core/text.h"
#include "redisched/limits.h"
#include "worker/clock_map.h"

namespace redisched::worker {
namespace {

// s as a JSON string (s is UTF-8).
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + '"';
}

}  // namespace

struct HandlerPool::Life {
  explicit Life(HandlerPool* p) : pool(p), topic(p->calls_.topic()) {}
  std::mutex mu;
  std::condition_variable idle;
  HandlerPool* pool;        // null once joined
  int users = 0;            // contexts inside a call to the pool
  const std::string topic;  // for topic() after the pool's end
};

// The handler's view of one job. A synchronous handler's call ends it; an
// asynchronous handler ends it with done() (or by dropping it, a failure).
class HandlerPool::Context final : public AsyncJob {
 public:
  Context(std::shared_ptr<Life> life, Reservation job, std::uint64_t key)
      : life_(std::move(life)), job_(std::move(job)), key_(key) {}
  ~Context() override {
    if (!finished_.load()) {
      fail("the handler dropped the job without done()", false);
      done();
    }
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  std::string_view topic() const override { return life_->topic; }
  const Reservation& job() const override { return job_; }

  std::vector<DependencyState> dependencies() override {
    return use([&](HandlerPool& pool) {
             return pool.calls_.broker().dependencies_now(life_->topic, job_.id);
           })
        .value_or(std::vector<DependencyState>{});
  }

  bool touch(Millis ttr) override {
    if (job_.token == 0) return !cancelled();  // handed out for good: nothing to extend
    return use([&](HandlerPool& pool) {
             if (pool.job_cancelled(key_)) return false;
             auto r = pool.calls_.broker().touch_now(life_->topic, job_.id, job_.token, ttr);
             if (r.outcome != Outcome::ok) return false;
             std::lock_guard lock(pool.mu_);
             if (auto it = pool.running_.find(key_); it != pool.running_.end()) {
               it->second.job.deadline_ms = r.deadline_ms;
             }
             return true;
           })
        .value_or(false);
  }

  void progress(int percent, std::string_view note) override {
    percent = std::clamp(percent, 0, 100);
    const std::string head = "{\"percent\":" + std::to_string(percent);
    std::string value = head + '}';
    // The note, shortened until the value fits (escaping may lengthen it).
    for (std::size_t n = std::min<std::size_t>(note.size(), limits::kProgressMax); n > 0; n /= 2) {
      std::string text = core::printable(note.substr(0, n));
      std::string with = head + ",\"note\":" + json_string(text) + '}';
      if (with.size() <= static_cast<std::size_t>(limits::kProgressMax)) {
        value = std::move(with);
        break;
      }
    }
    const bool heartbeat = use([&](HandlerPool& pool) {
                             pool.add_report(
                                 key_, [&](JobReport& r) { r.progress = value; },
                                 [&](Running& running) {
                                   running.progress = percent;
                                   running.note.assign(note);
                                 });
                             return pool.opts_.overrun == Overrun::heartbeat;
                           }).value_or(false);
    if (heartbeat) touch(Millis{0});
  }

  void progress_json(std::string_view value) override {
    if (value.empty() || value.size() > static_cast<std::size_t>(limits::kProgressMax) ||
        !core::valid_utf8(value)) {
      throw Error(Errc::invalid_argument, "a progress is a JSON value of 1.." +
                                              std::to_string(limits::kProgressMax) +
                                              " bytes of UTF-8");
    }
    use([&](HandlerPool& pool) {
      pool.add_report(key_, [&](JobReport& r) { r.progress.emplace(value); });
      return true;
    });
  }

  void log(std::string_view line) override {
    if (!core::valid_utf8(line)) {
      throw Error(Errc::invalid_argument, "a log line is not UTF-8: " + core::printable(line));
    }
    // The library cuts a line at kLogLineMax and marks it cut: what lies
    // past the next character need not go (a boundary keeps it UTF-8).
    if (auto end = static_cast<std::size_t>(limits::kLogLineMax) + 4; line.size() > end) {
      while ((static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
      line = line.substr(0, end);
    }
    use([&](HandlerPool& pool) {
      pool.add_report(key_, [&](JobReport& r) {
        // (The library keeps the latest kLogLinesMax: older ones need not go.)
        if (r.lines.size() >= static_cast<std::size_t>(limits::kLogLinesMax)) {
          r.lines.erase(r.lines.begin());
        }
        r.lines.emplace_back(line);
      });
      return true;
    });
  }

  void set_result(std::string_view result) override { result_.emplace(result); }

  void release(Millis delay) override {
    verdict_ = Verdict::release;
    delay_ = delay;
  }

  void fail(std::string_view error, bool bury) override {
    verdict_ = bury ? Verdict::bury : Verdict::fail;
    error_.assign(error);
  }

  bool cancelled() const override {
    return use([&](HandlerPool& pool) { return pool.job_cancelled(key_); }).value_or(true);
  }

  void done() override {
    if (finished_.exchange(true)) return;
    use([&](HandlerPool& pool) {
      pool.finish(Finished{std::move(job_), verdict_, std::move(error_), delay_, std::move(result_),
                           false, key_});
      return true;
    });
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
  // Calls fn with the pool while it lives (join waits for the call to end);
  // nothing once it is gone.
  template <class Fn>
  auto use(Fn&& fn) const -> std::optional<decltype(fn(std::declval<HandlerPool&>()))> {
    HandlerPool* pool = nullptr;
    {
      std::lock_guard lock(life_->mu);
      if (life_->pool == nullptr) return std::nullopt;
      pool = life_->pool;
      ++life_->users;
    }
    struct Leave {
      Life& life;
      ~Leave() {
        std::lock_guard lock(life.mu);
        if (--life.users == 0) life.idle.notify_all();
      }
    } leave{*life_};
    return fn(*pool);
  }

  std::shared_ptr<Life> life_;
  Reservation job_;
  Verdict verdict_ = Verdict::ack;
  std::string error_;
  Millis delay_{0};
  std::optional<std::string> result_;
  std::uint64_t key_;
  std::atomic<bool> finished_{false};
};

HandlerPool::HandlerPool(TopicCalls& calls, const HandlerOptions& options, Handler handler,
                         AsyncHandler async_handler, std::function<void()> finished,
                         std::function<void()> reporting)
    : calls_(calls),
      opts_(options),
      handler_(std::move(handler)),
      async_handler_(std::move(async_handler)),
      on_finished_(std::move(finished)),
      on_reporting_(std::move(reporting)),
      life_(std::make_shared<Life>(this)) {}

HandlerPool::~HandlerPool() { join(); }

void HandlerPool::start() {
  if (async_handler_) return;  // runs on the control shard
  threads_.reserve(static_cast<size_t>(opts_.concurrency));
  for (int i = 0; i < opts_.concurrency; ++i) threads_.emplace_back([this] { serve(); });
}

void HandlerPool::add(std::vector<Reservation> jobs, std::int64_t now_ms) {
  const size_t n = jobs.size();
  {
    std::lock_guard lock(mu_);
    for (auto& job : jobs) {
      // Not the token: the shards of a spread topic (Client::set_shards)
      // each count their own, so two jobs of one topic may hold the same.
      const std::uint64_t key = ++added_;
      const Millis ttr{std::max<std::int64_t>(job.deadline_ms - now_ms, 1)};
      queue_.push_back(Running{key, std::move(job), ttr, 0, {}, 0, false, false, {}, false});
    }
  }
  if (async_handler_) {
    start_async();
    return;
  }
  // One waiter per job: notify_all would wake every idle thread (50 at
  // concurrency 50) to find a job or two, which costs both cores far more
  // than the jobs do.
  for (size_t i = 0; i < n; ++i) work_.notify_one();
}

// A handler thread: one job at a time from the local queue.
void HandlerPool::serve() {
  for (;;) {
    Reservation job;
    std::uint64_t key = 0;
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [this] { return quit_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front().job;
      key = queue_.front().key;
      queue_.front().started_ms = wall_ms();
      running_.emplace(key, std::move(queue_.front()));
      queue_.pop_front();
    }
    Context ctx(life_, std::move(job), key);
    ctx.guard([&] { handler_(ctx); });
    ctx.done();
  }
}

void HandlerPool::start_async() {
  std::vector<std::pair<Reservation, std::uint64_t>> jobs;
  {
    std::lock_guard lock(mu_);
    const std::int64_t now = wall_ms();
    for (auto& r : queue_) {
      jobs.emplace_back(r.job, r.key);
      r.started_ms = now;
      running_.emplace(r.key, std::move(r));
    }
    queue_.clear();
  }
  for (auto& [job, key] : jobs) {
    auto ctx = std::make_shared<Context>(life_, std::move(job), key);
    ctx->guard([&] { async_handler_(ctx); });
  }
}

void HandlerPool::finish(Finished f) {
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
    if (it != running_.end()) {
      if (it->second.reporting) {
        it->second.verdict = std::move(f);  // (settled in reported())
        return;
      }
      // What it reported and did not send goes before its verdict.
      f.report = std::move(it->second.report);
      running_.erase(it);
    }
    first = finished_.empty();
    finished_.push_back(std::move(f));
  }
  // One hop to the control shard per batch of verdicts, not per job.
  if (first) calls_.post(on_finished_);
}

std::vector<Finished> HandlerPool::take_finished() {
  std::vector<Finished> done;
  std::lock_guard lock(mu_);
  done.swap(finished_);
  return done;
}

std::vector<Reservation> HandlerPool::take_waiting() {
  std::vector<Reservation> waiting;
  std::lock_guard lock(mu_);
  std::deque<Running> kept;
  for (auto& r : queue_) {
    if (r.job.token == 0) {
      kept.push_back(std::move(r));
    } else {
      waiting.push_back(std::move(r.job));
    }
  }
  queue_.swap(kept);
  return waiting;
}

void HandlerPool::abandon_running() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  for (auto& [key, r] : running_) r.abandoned = true;
}

std::optional<Millis> HandlerPool::shortest_ttr() const {
  std::optional<Millis> shortest;
  auto see = [&](const Running& r) {
    if (r.job.token != 0 && (!shortest || r.ttr < *shortest)) shortest = r.ttr;
  };
  std::lock_guard lock(mu_);
  for (const auto& r : queue_) see(r);
  for (const auto& [key, r] : running_) see(r);
  return shortest;
}

std::vector<Reservation> HandlerPool::due_for_touch(std::int64_t now_ms) {
  std::vector<Reservation> due;
  std::lock_guard lock(mu_);
  for (auto& [key, r] : running_) {
    if (r.job.token != 0 && !r.abandoned && !r.touching &&
        r.job.deadline_ms - now_ms < r.ttr.count() * 2 / 3) {
      r.touching = true;
      due.push_back(r.job);
    }
  }
  return due;
}

void HandlerPool::touched(const std::string& id, std::uint64_t token,
                          std::optional<std::int64_t> deadline_ms) {
  std::lock_guard lock(mu_);
  for (auto& [key, r] : running_) {
    if (r.job.token != token || r.job.id != id) continue;
    r.touching = false;
    if (deadline_ms) r.job.deadline_ms = *deadline_ms;
    return;
  }
}

template <class Fill, class Note>
void HandlerPool::add_report(std::uint64_t key, Fill&& fill, Note&& note) {
  bool first = false;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(key);
    if (it == running_.end()) return;
    note(it->second);
    // (A job handed out for good, ttr 0, has no reservation to report on.)
    // (Nor a job whose handler has finished.)
    if (it->second.job.token == 0 || it->second.verdict) return;
    fill(it->second.report);
    first = !reports_waiting_;
    reports_waiting_ = true;
  }
  if (first && on_reporting_) calls_.post(on_reporting_);
}

std::vector<HandlerPool::PendingReport> HandlerPool::take_reports() {
  std::vector<PendingReport> out;
  std::lock_guard lock(mu_);
  reports_waiting_ = false;
  // (After a cancel's deadline no call starts: the Worker may be ending.)
  if (cancelled_) return out;
  for (auto& [key, r] : running_) {
    if (r.report.empty() || r.abandoned) continue;
    if (r.reporting) {
      reports_waiting_ = true;  // (sent when the one in flight is back)
      continue;
    }
    r.reporting = true;
    out.push_back({key, r.job.id, r.job.token, std::exchange(r.report, {})});
  }
  return out;
}

bool HandlerPool::reported(std::uint64_t key, std::optional<JobReport> unsent) {
  bool settle = false;
  bool waiting = false;
  {
    std::lock_guard lock(mu_);
    auto it = running_.find(key);
    if (it == running_.end()) return reports_waiting_;  // (cut off by close)
    Running& r = it->second;
    r.reporting = false;
    if (unsent) {
      auto& lines = unsent->lines;
      lines.insert(lines.end(), std::make_move_iterator(r.report.lines.begin()),
                   std::make_move_iterator(r.report.lines.end()));
      const auto max = static_cast<std::size_t>(limits::kLogLinesMax);
      if (lines.size() > max)
        lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(max));
      if (r.report.progress) unsent->progress = std::move(r.report.progress);
      r.report = std::move(*unsent);
    }
    if (r.verdict) {
      // Its handler finished while this report was in flight: the verdict
      // goes now, with what is still unsent.
      Finished f = std::move(*r.verdict);
      f.report = std::move(r.report);
      running_.erase(it);
      settle = finished_.empty();
      finished_.push_back(std::move(f));
    } else if (!r.report.empty()) {
      reports_waiting_ = true;
    }
    waiting = reports_waiting_;
  }
  // (Settled here, within the report's call: a Worker's stop, which waits
  // for its calls, then waits for this verdict's call too.)
  if (settle) on_finished_();
  return waiting;
}

void HandlerPool::join() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  // Asynchronous jobs still held: their calls from here on change nothing
  // (the Worker that holds this pool may end next).
  std::unique_lock lock(life_->mu);
  life_->pool = nullptr;
  life_->idle.wait(lock, [this] { return life_->users == 0; });
}

bool HandlerPool::job_cancelled(std::uint64_t key) const {
  std::lock_guard lock(mu_);
  auto it = running_.find(key);
  return cancelled_ || it == running_.end() || it->second.abandoned;
}

void HandlerPool::snapshot(std::vector<RunningJob>& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, r] : running_) {
    if (r.verdict) continue;  // (its handler has finished)
    out.push_back({calls_.topic(), r.job.id, r.job.attempt, r.progress, r.note, r.job.deadline_ms,
                   r.started_ms});
  }
}

}  // namespace redisched::worker
