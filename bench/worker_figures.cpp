#include "worker_figures.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "redisched/worker.h"

namespace redisched::bench {

namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using Clock = std::chrono::steady_clock;

std::int64_t system_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WorkerOptions worker_options(const Target& target) {
  WorkerOptions o;
  o.client.redis_url = target.url();
  o.client.connections = 2;
  return o;
}

// Puts n jobs numbered from first, 1000 to a call; make(i) gives job i.
template <class Make>
void fill(Client& client, const std::string& topic, long first, long n, Make make) {
  std::vector<JobSpec> specs;
  for (long i = first; i < first + n; ++i) {
    specs.push_back(make(i));
    if (specs.size() == 1000) {
      client.put_many(topic, specs);
      specs.clear();
    }
  }
  if (!specs.empty()) client.put_many(topic, specs);
}

void fill(Client& client, const std::string& topic, long first, long n) {
  fill(client, topic, first, n, job);
}

void wait_acked(const Worker& w, long n) {
  while (static_cast<long>(w.stats().acked) < n) std::this_thread::sleep_for(1ms);
}

// Put one ready job at a time to an idle worker; ms from before the put to
// the handler's start.
Percentiles end_to_end(Admin& admin, const Target& target, int samples) {
  admin.str("FLUSHALL");
  Worker w(worker_options(target));
  const std::string topic = "latency";
  std::vector<double> ms(static_cast<size_t>(samples));
  std::vector<Clock::time_point> put_at(static_cast<size_t>(samples));
  std::atomic<int> started{0};
  w.handle(topic, {.concurrency = 10}, [&](JobContext& ctx) {
    const auto now = Clock::now();
    const auto i = static_cast<size_t>(std::stol(std::string(ctx.body())));
    ms[i] = std::chrono::duration<double, std::milli>(now - put_at[i]).count();
    ++started;
  });
  w.run();
  std::this_thread::sleep_for(200ms);  // idle: subscribed, nothing to do
  for (int i = 0; i < samples; ++i) {
    JobSpec s;
    s.id = fmt::format("l{}", i);
    s.body = std::to_string(i);
    put_at[static_cast<size_t>(i)] = Clock::now();
    const auto before = w.stats();
    w.client().put(topic, s);
    while (started.load() <= i) {
      std::this_thread::yield();
      if (Clock::now() - put_at[static_cast<size_t>(i)] > 5s) {
        const auto st = w.stats();
        throw std::runtime_error(fmt::format(
            "job {} not started within 5 s (wake-ups {}->{}, reserves {}->{}, empty {})", i,
            before.wakeups, st.wakeups, before.reserve_calls, st.reserve_calls, st.empty_reserves));
      }
    }
    std::this_thread::sleep_for(2ms);  // idle again before the next
  }
  w.cancel();
  return percentiles(ms);
}

// The machine's own wake-up lateness, beside the worker's: a bare thread that
// sleeps 0.5 ms at a time and records how much later than asked it woke. On
// a virtual machine a sleeping thread can wake late for reasons outside any
// process (an idle vCPU's timer, a kernel thread holding the CPU).
class WakeProbe {
 public:
  WakeProbe()
      : thread_([this] {
          constexpr auto kNap = std::chrono::microseconds{500};
          while (!stop_.load()) {
            const auto t0 = Clock::now();
            std::this_thread::sleep_for(kNap);
            late_.push_back(
                std::chrono::duration<double, std::milli>(Clock::now() - t0 - kNap).count());
          }
        }) {}
  WakeProbe(const WakeProbe&) = delete;
  WakeProbe& operator=(const WakeProbe&) = delete;
  ~WakeProbe() { stop(); }

  Percentiles stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return late_.empty() ? Percentiles{} : percentiles(late_);
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<double> late_;  // the thread's own until stop() joins it
  std::thread thread_;
};

// The jobs carry a TTR of their own, so a reservation's deadline minus it is
// Redis's clock when the reserve ran (ms).
constexpr Millis kLatenessTtr{60000};

}  // namespace

Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]; };
  return {at(0.50), at(0.99), v.back()};
}

void add_worker_options(CLI::App& app, WorkerRun& run) {
  app.add_option("--samples", run.samples, "ready jobs for the put -> handler latency figure")
      ->capture_default_str();
  app.add_option("--delayed", run.delayed, "delayed jobs for the lateness figures")
      ->capture_default_str();
  app.add_option_function<long>(
         "--span", [&run](long ms) { run.span = Millis{ms}; },
         "ms over which their due times spread")
      ->default_str(std::to_string(run.span.count()));
  app.add_option("--delayed-backlog", run.delayed_backlog,
                 "jobs delayed an hour and more behind them for the second lateness figures "
                 "(0: none)")
      ->capture_default_str();
}

Figure noop_throughput(Admin& admin, const Target& target, int concurrency, long n, bool producer,
                       bool async) {
  admin.str("FLUSHALL");
  Worker w(worker_options(target));
  const std::string topic = "noop";
  if (async) {
    w.handle_async(topic, {.concurrency = concurrency},
                   [](const std::shared_ptr<AsyncJob>& job) { job->done(); });
  } else {
    w.handle(topic, {.concurrency = concurrency}, [](JobContext&) {});
  }
  if (!producer) fill(w.client(), topic, 0, n);
  const double redis0 = admin.cpu_seconds();
  const double client0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  w.run();
  std::thread put;
  if (producer) {
    put = std::thread([&] {
      ClientOptions o;
      o.redis_url = target.url();
      Client c(o);
      fill(c, topic, 0, n);
    });
  }
  wait_acked(w, n);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  Figure f{static_cast<double>(n) / secs, (admin.cpu_seconds() - redis0) / secs,
           (process_cpu_seconds() - client0) / secs};
  if (put.joinable()) put.join();
  w.cancel();
  return f;
}

Lateness lateness(Admin& admin, const Target& target, long n, Millis span, long backlog,
                  int concurrency, bool async) {
  admin.str("FLUSHALL");
  Worker w(worker_options(target));
  const std::string topic = "lateness";
  std::mutex mu;
  std::vector<Late> late;
  late.reserve(static_cast<size_t>(n));
  std::int64_t first_due = 0;
  auto record = [&](const JobContext& ctx) {
    const double start = static_cast<double>(system_us()) / 1000.0;
    const auto& job = ctx.job();
    const auto reserved_at = static_cast<double>(job.deadline_ms - kLatenessTtr.count());
    const auto due = static_cast<double>(job.due_ms);
    std::lock_guard lock(mu);
    late.push_back({start - due, reserved_at - due, start - reserved_at,
                    due - static_cast<double>(first_due)});
  };
  if (async) {
    w.handle_async(topic, {.concurrency = concurrency}, [&](const std::shared_ptr<AsyncJob>& job) {
      record(*job);
      job->done();
    });
  } else {
    w.handle(topic, {.concurrency = concurrency}, record);
  }
  // The backlog: due an hour and more from now, so none is handed out here.
  fill(w.client(), topic, n, backlog, [](long i) {
    JobSpec s = job(i);
    s.delay = Millis{3600000 + i};
    return s;
  });
  first_due = w.client().now_ms() + 1000;
  fill(w.client(), topic, 0, n, [&](long i) {
    JobSpec s = job(i);
    s.due_at_ms = first_due + i * span.count() / n;
    s.ttr = kLatenessTtr;
    return s;
  });
  WakeProbe probe;
  w.run();
  wait_acked(w, n);
  Lateness out;
  out.machine = probe.stop();
  w.cancel();
  auto column = [&](double Late::*field) {
    std::vector<double> v;
    v.reserve(late.size());
    for (const Late& l : late) v.push_back(l.*field);
    return percentiles(std::move(v));
  };
  out.total = column(&Late::total);
  std::vector<double> settled;
  for (const Late& l : late) {
    if (l.due >= Lateness::kSettleMs) settled.push_back(l.total);
  }
  if (!settled.empty()) out.settled = percentiles(std::move(settled));
  out.asked = column(&Late::asked);
  out.delivered = column(&Late::delivered);
  std::sort(late.begin(), late.end(),
            [](const Late& a, const Late& b) { return a.total > b.total; });
  late.resize(std::min<size_t>(late.size(), 5));
  out.worst = std::move(late);
  return out;
}

WorkerFigures measure_worker(Admin& admin, const Target& target, const WorkerRun& run) {
  WorkerFigures f;
  const long few = std::max(run.jobs / 10, 1L);
  for (const bool async : {false, true}) {
    Figure* row = async ? f.async : f.threads;
    row[0] = noop_throughput(admin, target, 1, few, false, async);
    row[1] = noop_throughput(admin, target, 10, run.jobs, false, async);
    row[2] = noop_throughput(admin, target, 50, run.jobs, false, async);
    row[3] = noop_throughput(admin, target, 50, run.jobs, true, async);
  }
  f.put_to_start = end_to_end(admin, target, run.samples);
  f.late = lateness(admin, target, run.delayed, run.span, 0, 50, false);
  f.late_async = lateness(admin, target, run.delayed, run.span, 0, 50, true);
  if (run.delayed_backlog > 0) {
    f.backlog_late = lateness(admin, target, run.delayed, run.span, run.delayed_backlog, 50, false);
    f.backlog_late_async =
        lateness(admin, target, run.delayed, run.span, run.delayed_backlog, 50, true);
  }
  admin.str("FLUSHALL");
  f.idle = idle_memory();
  return f;
}

void print_lateness_head() { fmt::print("{:<60} {:>8} {:>8} {:>8}\n", "ms", "p50", "p99", "max"); }

void print_lateness(const std::string& name, const Lateness& l) {
  auto line = [](const std::string& what, const Percentiles& p) {
    fmt::print("{:<60} {:>8.3f} {:>8.3f} {:>8.3f}\n", what, p.p50, p.p99, p.max);
  };
  line(name, l.total);
  line(fmt::format("  of the jobs due after the first {:.0f} ms", Lateness::kSettleMs), l.settled);
  line("  of it: due -> the reserve that handed it out", l.asked);
  line("  of it: that reserve -> handler start", l.delivered);
  line("  beside it: a bare thread's 0.5 ms sleep, late by", l.machine);
  std::string worst;
  for (const Late& x : l.worst) {
    worst += fmt::format(" {:.1f} ({:.0f} + {:.1f} @{:.0f})", x.total, x.asked, x.delivered, x.due);
  }
  fmt::print("  latest (ms: total (asked + delivered) @due, from the first):{}\n", worst);
}

void print_idle_memory(const IdleMemory& m) {
  fmt::print("{:<60} {:>8.3f} {:>8.3f}\n",
             "the machine: one byte a page of 64 MB, read hot / after 1 s idle", m.hot_ms,
             m.idle_ms);
}

void print_worker(const WorkerFigures& f, const WorkerRun& run, double ceiling) {
  // The CPU columns: cores Redis's main thread and this process (the worker,
  // and the producer's client when there is one) kept busy (Figure).
  auto row = [&](const std::string& name, const Figure& x) {
    fmt::print("{:<52} {:>12.0f} {:>10.2f} {:>10.2f} {:>10.2f}\n", name, x.rate, x.rate / ceiling,
               x.redis_cpu, x.client_cpu);
  };
  static constexpr const char* kRows[] = {"concurrency 1", "concurrency 10", "concurrency 50",
                                          "concurrency 50 + producer"};
  for (int i = 0; i < 4; ++i)
    row(fmt::format("no-op handler (threads), {}", kRows[i]), f.threads[i]);
  for (int i = 0; i < 4; ++i) row(fmt::format("no-op async handler, {}", kRows[i]), f.async[i]);
  fmt::print("\n");
  print_lateness_head();
  fmt::print("{:<60} {:>8.3f} {:>8.3f} {:>8.3f}\n",
             fmt::format("put of a ready job -> handler start ({} jobs)", run.samples),
             f.put_to_start.p50, f.put_to_start.p99, f.put_to_start.max);
  const std::string jobs = fmt::format("{} jobs over {} ms", run.delayed, run.span.count());
  print_lateness(fmt::format("due -> handler start ({})", jobs), f.late);
  print_lateness(fmt::format("due -> async handler start ({})", jobs), f.late_async);
  if (run.delayed_backlog > 0) {
    const std::string behind = fmt::format("{} delayed behind", run.delayed_backlog);
    print_lateness(fmt::format("due -> handler start, {}", behind), f.backlog_late);
    print_lateness(fmt::format("due -> async handler start, {}", behind), f.backlog_late_async);
  }
  print_idle_memory(f.idle);
}

}  // namespace redisched::bench
