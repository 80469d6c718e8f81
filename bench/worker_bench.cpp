// redisched_worker_bench: the Worker runtime end to end, beside the EVALSHA
// ceiling measured in the same run against the same Redis.
//
//  - no-op handler throughput at concurrency 1, 10 and 50 from a prefilled
//    topic, and at 50 with a producer putting the jobs meanwhile;
//  - latency from put of a ready job to its handler's start, idle worker;
//  - lateness of delayed jobs: handler start minus due time, for jobs with
//    due times spread over a few seconds.
// Times of handler starts are read from the system clock, which on one host
// is the clock Redis's TIME reads.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "redisched/worker.h"

namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using redisched::JobContext;
using redisched::JobSpec;
using redisched::Millis;
using redisched::Worker;
using redisched::WorkerOptions;
using Clock = std::chrono::steady_clock;
namespace bench = redisched::bench;

std::int64_t system_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WorkerOptions worker_options(const bench::Target& target) {
  WorkerOptions o;
  o.client.redis_url = target.url();
  o.client.connections = 2;
  return o;
}

void fill(redisched::Client& client, const std::string& topic, long first, long n) {
  std::vector<JobSpec> specs;
  for (long i = first; i < first + n; ++i) {
    specs.push_back(bench::job(i));
    if (specs.size() == 1000) {
      client.put_many(topic, specs);
      specs.clear();
    }
  }
  if (!specs.empty()) client.put_many(topic, specs);
}

void wait_acked(const Worker& w, long n) {
  while (static_cast<long>(w.stats().acked) < n) std::this_thread::sleep_for(1ms);
}

// No-op handlers at the given concurrency over n prefilled jobs (or, with
// producer, jobs put by another thread meanwhile). Returns jobs/s.
bench::Figure noop_throughput(bench::Admin& admin, const bench::Target& target, int concurrency,
                              long n, bool producer, bool async = false) {
  admin.str("FLUSHALL");
  Worker w(worker_options(target));
  const std::string topic = "noop";
  if (async) {
    w.handle_async(topic, {.concurrency = concurrency},
                   [](const std::shared_ptr<redisched::AsyncJob>& job) { job->done(); });
  } else {
    w.handle(topic, {.concurrency = concurrency}, [](JobContext&) {});
  }
  if (!producer) fill(w.client(), topic, 0, n);
  const double redis0 = admin.cpu_seconds();
  const double client0 = bench::process_cpu_seconds();
  const auto t0 = Clock::now();
  w.run();
  std::thread put;
  if (producer) {
    put = std::thread([&] {
      redisched::ClientOptions o;
      o.redis_url = target.url();
      redisched::Client c(o);
      fill(c, topic, 0, n);
    });
  }
  wait_acked(w, n);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  bench::Figure f{static_cast<double>(n) / secs, (admin.cpu_seconds() - redis0) / secs,
                  (bench::process_cpu_seconds() - client0) / secs};
  if (put.joinable()) put.join();
  w.cancel();
  return f;
}

struct Percentiles {
  double p50 = 0, p99 = 0, max = 0;
};

Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]; };
  return {at(0.50), at(0.99), v.back()};
}

// Put one ready job at a time to an idle worker; ms from before the put to
// the handler's start.
Percentiles end_to_end(bench::Admin& admin, const bench::Target& target, int samples) {
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

// Where a late job's time went: asked = Redis's clock at the reserve that
// handed it out minus its due time (the worker asked late: its timer, or no
// free slot, or Redis busy before it ran the call); delivered = handler start
// minus that reserve (the reply's trip, parsing, the hand-off to a handler).
struct Late {
  double total = 0, asked = 0, delivered = 0;
};

struct Lateness {
  Percentiles total, asked, delivered;
  std::vector<Late> worst;  // the latest jobs, latest first
  Percentiles machine;      // WakeProbe's, over the same time
};

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

// n delayed jobs with due times spread evenly over span, starting a second
// from now; ms from each due time to its handler's start, split as Late says.
Lateness lateness(bench::Admin& admin, const bench::Target& target, long n, Millis span,
                  int concurrency, bool async) {
  admin.str("FLUSHALL");
  Worker w(worker_options(target));
  const std::string topic = "lateness";
  std::mutex mu;
  std::vector<Late> late;
  late.reserve(static_cast<size_t>(n));
  auto record = [&](const JobContext& ctx) {
    const double start = static_cast<double>(system_us()) / 1000.0;
    const auto& job = ctx.job();
    const auto reserved_at = static_cast<double>(job.deadline_ms - kLatenessTtr.count());
    const auto due = static_cast<double>(job.due_ms);
    std::lock_guard lock(mu);
    late.push_back({start - due, reserved_at - due, start - reserved_at});
  };
  if (async) {
    w.handle_async(topic, {.concurrency = concurrency},
                   [&](const std::shared_ptr<redisched::AsyncJob>& job) {
                     record(*job);
                     job->done();
                   });
  } else {
    w.handle(topic, {.concurrency = concurrency}, record);
  }
  const std::int64_t first_due = w.client().now_ms() + 1000;
  std::vector<JobSpec> specs;
  for (long i = 0; i < n; ++i) {
    JobSpec s = bench::job(i);
    s.due_at_ms = first_due + i * span.count() / n;
    s.ttr = kLatenessTtr;
    specs.push_back(std::move(s));
    if (specs.size() == 1000) {
      w.client().put_many(topic, specs);
      specs.clear();
    }
  }
  if (!specs.empty()) w.client().put_many(topic, specs);
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
  out.asked = column(&Late::asked);
  out.delivered = column(&Late::delivered);
  std::sort(late.begin(), late.end(),
            [](const Late& a, const Late& b) { return a.total > b.total; });
  late.resize(std::min<size_t>(late.size(), 5));
  out.worst = std::move(late);
  return out;
}

void print_lateness(const std::string& name, const Lateness& l) {
  auto line = [](const std::string& what, const Percentiles& p) {
    fmt::print("{:<52} {:>8.3f} {:>8.3f} {:>8.3f}\n", what, p.p50, p.p99, p.max);
  };
  line(name, l.total);
  line("  of it: due -> the reserve that handed it out", l.asked);
  line("  of it: that reserve -> handler start", l.delivered);
  line("  beside it: a bare thread's 0.5 ms sleep, late by", l.machine);
  std::string worst;
  for (const Late& x : l.worst) {
    worst += fmt::format(" {:.1f} ({:.0f} + {:.1f})", x.total, x.asked, x.delivered);
  }
  fmt::print("  latest (ms: total (asked + delivered)):{}\n", worst);
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  return redisched::bench::guarded_main("redisched_worker_bench", run, argc, argv);
}

int run(int argc, char** argv) {
  CLI::App app{"redisched worker benchmark: handler throughput, latency and lateness"};
  std::string redis;
  long jobs = 200000;
  int samples = 2000;
  long delayed = 10000;
  int span_ms = 5000;
  app.add_option("--redis", redis, "host:port of a Redis to use (default: start one)");
  app.add_option("--jobs", jobs, "jobs per throughput figure (a tenth at concurrency 1)")
      ->capture_default_str();
  app.add_option("--samples", samples, "ready jobs for the latency figure")->capture_default_str();
  app.add_option("--delayed", delayed, "delayed jobs for the lateness figure")
      ->capture_default_str();
  app.add_option("--span", span_ms, "ms over which their due times spread")->capture_default_str();
  int only_concurrency = 0;
  app.add_option("--only-concurrency", only_concurrency,
                 "measure just the no-op throughput at this concurrency (for profiling)");
  bool only_lateness = false;
  app.add_flag("--only-lateness", only_lateness, "measure just the lateness figures");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<bench::OwnRedis> own;
  const bench::Target target = bench::choose_target(redis, own);
  bench::Admin admin(target);
  if (only_lateness) {
    fmt::print("{:<52} {:>8} {:>8} {:>8}\n", "ms", "p50", "p99", "max");
    print_lateness("due -> handler start",
                   lateness(admin, target, delayed, Millis{span_ms}, 50, false));
    print_lateness("due -> async handler start",
                   lateness(admin, target, delayed, Millis{span_ms}, 50, true));
    return 0;
  }
  if (only_concurrency > 0) {
    fmt::print("no-op handler, concurrency {}: {:.0f} jobs/s threads, {:.0f} async\n",
               only_concurrency, noop_throughput(admin, target, only_concurrency, jobs, false).rate,
               noop_throughput(admin, target, only_concurrency, jobs, false, true).rate);
    return 0;
  }
  const double ceiling = bench::evalsha_ceiling(admin, target, jobs * 2);
  const bench::Figure c1 = noop_throughput(admin, target, 1, std::max(jobs / 10, 1L), false);
  const bench::Figure c10 = noop_throughput(admin, target, 10, jobs, false);
  const bench::Figure c50 = noop_throughput(admin, target, 50, jobs, false);
  const bench::Figure c50p = noop_throughput(admin, target, 50, jobs, true);
  const bench::Figure a1 = noop_throughput(admin, target, 1, std::max(jobs / 10, 1L), false, true);
  const bench::Figure a10 = noop_throughput(admin, target, 10, jobs, false, true);
  const bench::Figure a50 = noop_throughput(admin, target, 50, jobs, false, true);
  const bench::Figure a50p = noop_throughput(admin, target, 50, jobs, true, true);
  const Percentiles e2e = end_to_end(admin, target, samples);
  const Lateness late = lateness(admin, target, delayed, Millis{span_ms}, 50, false);
  const Lateness late_async = lateness(admin, target, delayed, Millis{span_ms}, 50, true);

  fmt::print("redisched worker benchmark (Redis at {}, {} jobs a throughput figure)\n\n",
             target.url(), jobs);
  // The CPU columns: cores Redis's main thread and this process (the worker,
  // and the producer's client when there is one) kept busy (bench::Figure).
  fmt::print("{:<52} {:>12} {:>10} {:>10} {:>10}\n", "figure", "jobs/s", "/ceiling", "Redis CPU",
             "client CPU");
  fmt::print("{:<52} {:>12.0f} {:>10}\n", "ceiling: EVALSHA minimal put, -P 16 -c 50", ceiling,
             "1.00");
  auto row = [&](const std::string& name, const bench::Figure& f) {
    fmt::print("{:<52} {:>12.0f} {:>10.2f} {:>10.2f} {:>10.2f}\n", name, f.rate, f.rate / ceiling,
               f.redis_cpu, f.client_cpu);
  };
  row("no-op handler (threads), concurrency 1", c1);
  row("no-op handler (threads), concurrency 10", c10);
  row("no-op handler (threads), concurrency 50", c50);
  row("no-op handler (threads), concurrency 50 + producer", c50p);
  row("no-op async handler, concurrency 1", a1);
  row("no-op async handler, concurrency 10", a10);
  row("no-op async handler, concurrency 50", a50);
  row("no-op async handler, concurrency 50 + producer", a50p);
  fmt::print("\n{:<52} {:>8} {:>8} {:>8}\n", "ms", "p50", "p99", "max");
  fmt::print("{:<52} {:>8.3f} {:>8.3f} {:>8.3f}\n",
             fmt::format("put of a ready job -> handler start ({} jobs)", samples), e2e.p50,
             e2e.p99, e2e.max);
  print_lateness(fmt::format("due -> handler start ({} jobs over {} ms)", delayed, span_ms), late);
  print_lateness(fmt::format("due -> async handler start ({} jobs over {} ms)", delayed, span_ms),
                 late_async);
  return 0;
}
