// The Worker runtime's figures, measured end to end against one Redis:
// no-op handler throughput, put -> handler latency, and the lateness of
// delayed jobs. redisched_worker_bench prints them alone;
// redisched_bench --all prints them in its own run, beside its ceiling.
#pragma once

#include <string>
#include <vector>

#include "bench_util.h"
#include "redisched/job.h"

namespace CLI {
class App;
}

namespace redisched::bench {

struct Percentiles {
  double p50 = 0, p99 = 0, max = 0;
};
// Of samples, taken by value (sorted here); v must not be empty.
Percentiles percentiles(std::vector<double> v);

// Where a late job's time went: asked = Redis's clock at the reserve that
// handed it out minus its due time (the worker asked late: its timer, or no
// free slot, or Redis busy before it ran the call); delivered = handler start
// minus that reserve (the reply's trip, parsing, the hand-off to a handler).
struct Late {
  double total = 0, asked = 0, delivered = 0;
  double due = 0;  // ms after the first job's due time
};

struct Lateness {
  Percentiles total, asked, delivered;
  // total over the jobs due after the first kSettleMs: the worker busy,
  // without the first reserve after the idle wait (IdleMemory).
  Percentiles settled;
  static constexpr double kSettleMs = 100;
  std::vector<Late> worst;  // the latest jobs, latest first
  Percentiles machine;      // a bare sleeping thread's, over the same time
};

// What to measure. delayed_backlog jobs due an hour and more later wait in
// the lateness topic for its second pair of figures (0: no second pair).
struct WorkerRun {
  long jobs = 200000;  // a throughput figure's (a tenth at concurrency 1)
  int samples = 2000;  // ready jobs for put -> handler start
  long delayed = 10000;
  Millis span{5000};  // over which their due times spread
  long delayed_backlog = 1000000;
};

// --samples, --delayed, --span and --delayed-backlog, into run.
void add_worker_options(CLI::App& app, WorkerRun& run);

struct WorkerFigures {
  // No-op handlers at concurrency 1, 10, 50, and 50 with a producer.
  Figure threads[4];
  Figure async[4];
  Percentiles put_to_start;
  Lateness late, late_async;
  Lateness backlog_late, backlog_late_async;  // with delayed_backlog waiting
  IdleMemory idle;
};

// No-op handlers at the given concurrency over n prefilled jobs (or, with
// producer, jobs put by another client meanwhile).
Figure noop_throughput(Admin& admin, const Target& target, int concurrency, long n, bool producer,
                       bool async);

// n delayed jobs with due times spread evenly over span, starting a second
// from now, with backlog jobs due an hour and more later in the same topic;
// ms from each due time to its handler's start, split as Late says.
Lateness lateness(Admin& admin, const Target& target, long n, Millis span, long backlog,
                  int concurrency, bool async);

WorkerFigures measure_worker(Admin& admin, const Target& target, const WorkerRun& run);

// The rows, each throughput beside ceiling.
void print_worker(const WorkerFigures& f, const WorkerRun& run, double ceiling);

// A lateness figure's rows (ms: p50 p99 max) under a "ms p50 p99 max" head.
void print_lateness_head();
void print_lateness(const std::string& name, const Lateness& l);
void print_idle_memory(const IdleMemory& m);

}  // namespace redisched::bench
