// redisched_worker_bench: the Worker runtime end to end, beside the EVALSHA
// ceiling measured in the same run against the same Redis.
//
//  - no-op handler throughput at concurrency 1, 10 and 50 from a prefilled
//    topic, and at 50 with a producer putting the jobs meanwhile;
//  - latency from put of a ready job to its handler's start, idle worker;
//  - lateness of delayed jobs: handler start minus due time, for jobs with
//    due times spread over a few seconds, then again with a million more
//    jobs delayed behind them in the topic.
// Times of handler starts are read from the system clock, which on one host
// is the clock Redis's TIME reads. (redisched_bench --all measures the same
// figures in its own run.)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "bench_util.h"
#include "worker_figures.h"

namespace bench = redisched::bench;

int run(int argc, char** argv);

int main(int argc, char** argv) {
  return redisched::bench::guarded_main("redisched_worker_bench", run, argc, argv);
}

int run(int argc, char** argv) {
  CLI::App app{"redisched worker benchmark: handler throughput, latency and lateness"};
  std::string redis;
  bench::WorkerRun w;
  app.add_option("--redis", redis, "host:port of a Redis to use (default: start one)");
  app.add_option("--jobs", w.jobs, "jobs per throughput figure (a tenth at concurrency 1)")
      ->capture_default_str();
  bench::add_worker_options(app, w);
  int only_concurrency = 0;
  app.add_option("--only-concurrency", only_concurrency,
                 "measure just the no-op throughput at this concurrency (for profiling)");
  bool with_producer = false;
  app.add_flag("--with-producer", with_producer,
               "with --only-concurrency: a producer puts the jobs meanwhile");
  bool only_lateness = false;
  app.add_flag("--only-lateness", only_lateness, "measure just the lateness figures");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<bench::OwnRedis> own;
  const bench::Target target = bench::choose_target(redis, own);
  bench::Admin admin(target);
  if (only_lateness) {
    bench::print_lateness_head();
    bench::print_lateness("due -> handler start",
                          bench::lateness(admin, target, w.delayed, w.span, 0, 50, false));
    bench::print_lateness("due -> async handler start",
                          bench::lateness(admin, target, w.delayed, w.span, 0, 50, true));
    bench::print_idle_memory(bench::idle_memory());
    return 0;
  }
  if (only_concurrency > 0) {
    fmt::print(
        "no-op handler, concurrency {}{}: {:.0f} jobs/s threads, {:.0f} async\n", only_concurrency,
        with_producer ? " + producer" : "",
        bench::noop_throughput(admin, target, only_concurrency, w.jobs, with_producer, false).rate,
        bench::noop_throughput(admin, target, only_concurrency, w.jobs, with_producer, true).rate);
    return 0;
  }
  const double ceiling = bench::evalsha_ceiling(admin, target, w.jobs * 2);
  const bench::WorkerFigures figures = bench::measure_worker(admin, target, w);

  fmt::print("redisched worker benchmark (Redis at {}, {} jobs a throughput figure)\n\n",
             target.url(), w.jobs);
  fmt::print("{:<52} {:>12} {:>10} {:>10} {:>10}\n", "figure", "jobs/s", "/ceiling", "Redis CPU",
             "client CPU");
  fmt::print("{:<52} {:>12.0f} {:>10}\n", "ceiling: EVALSHA minimal put, -P 16 -c 50", ceiling,
             "1.00");
  bench::print_worker(figures, w, ceiling);
  return 0;
}
