// redisched_bench: the Redis core's throughput beside the Redis ceiling, and
// memory per waiting job, measured in one run against one Redis.
//
// Without --redis it starts a redis-server of its own (from PATH, default
// settings, no persistence) in a temp dir, so every figure comes from the
// same fresh server. The ceiling is redis-benchmark -P 16 -c 50 running
// EVALSHA of a minimal put script (one HSET and one ZADD NX of a new id).
//
// --backlogs 1000,1000000,10000000 adds the single-call figures with that
// many jobs already waiting in the topic (half ready, half delayed, at a
// lower priority than the measured jobs, so the backlog stays in place while
// the measured jobs come and go on top of it), each as a ratio to the
// first backlog's and to a topic of 1,000 jobs measured in alternating
// slices beside it ("paired"), and the memory per waiting job at each size,
// once the jobs hash has finished any move to a grown table that the fill
// left under way (and the memory before that, too).
//
// --worker adds the Worker runtime's figures (redisched_worker_bench's) and
// --all every figure of issue 14, each beside this run's ceiling: the core
// rows, the peers, the worker, memory, and the backlogs at 10^3, 10^6 and
// 10^7. The ceiling is measured again at the end, to show how far the
// machine's speed moved during the run.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "beanstalk.h"
#include "bench_util.h"
#include "bullmq.h"
#include "redisched/client.h"
#include "worker_figures.h"

namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using redisched::Client;
using redisched::JobSpec;
using Clock = std::chrono::steady_clock;
using redisched::bench::Admin;
using redisched::bench::Figure;
using redisched::bench::job;
using redisched::bench::measured;
using redisched::bench::OwnRedis;
using redisched::bench::Target;
using redisched::bench::throughput;

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  return redisched::bench::guarded_main("redisched_bench", run, argc, argv);
}

int run(int argc, char** argv) {
  CLI::App app{"redisched core benchmark: prints jobs/s beside the Redis ceiling"};
  std::string redis;
  long jobs = 200000;
  long memory_jobs = 1000000;
  int window = 512;
  int batch = 100;
  app.add_option("--redis", redis, "host:port of a Redis to use (default: start one)");
  app.add_option("--jobs", jobs, "jobs per throughput figure")->capture_default_str();
  app.add_option("--memory-jobs", memory_jobs, "waiting jobs for the memory figure")
      ->capture_default_str();
  app.add_option("--window", window, "calls in flight")->capture_default_str();
  app.add_option("--batch", batch, "jobs per batched call")->capture_default_str();
  int replicas = 0;
  app.add_option("--replicas", replicas,
                 "writes wait for this many replicas (ClientOptions::replicas); without "
                 "--redis, that many replicas of the benchmark's Redis are started")
      ->capture_default_str();
  std::vector<long> backlogs;
  app.add_option("--backlogs", backlogs,
                 "also measure single calls with this many jobs waiting, e.g. "
                 "1000,1000000,10000000")
      ->delimiter(',');
  bool peers = false;
  app.add_flag("--peers", peers,
               "also measure beanstalkd (from PATH) and BullMQ (bench/peers/bullmq, with "
               "Node.js) in this run, each driven as its own clients drive it");
  bool worker = false;
  app.add_flag("--worker", worker,
               "also measure the Worker runtime (redisched_worker_bench's figures) in this run");
  redisched::bench::WorkerRun worker_run;
  redisched::bench::add_worker_options(app, worker_run);
  bool no_history = false;
  app.add_flag("--no-history", no_history,
               "calls name the topic's eleven keys and count nothing in its history "
               "(ClientOptions::history off): the history's cost, by a run with and one without");
  bool all = false;
  app.add_flag("--all", all,
               "every figure of issue 14 in one run: --peers --worker, and --backlogs "
               "1000,1000000,10000000 unless given");
  CLI11_PARSE(app, argc, argv);
  if (all) {
    peers = worker = true;
    if (backlogs.empty()) backlogs = {1000, 1000000, 10000000};
  }
  worker_run.jobs = jobs;

  std::unique_ptr<OwnRedis> own;
  const Target target = redisched::bench::choose_target(redis, own);
  std::vector<std::unique_ptr<redisched::embedded::RedisProcess>> own_replicas;
  if (own && replicas > 0) own_replicas = redisched::bench::start_replicas(target, replicas);
  Admin admin(target);

  // The ceiling: a minimal put script, as fast as Redis runs scripts.
  const double ceiling = redisched::bench::evalsha_ceiling(admin, target, jobs * 2);

  redisched::ClientOptions options;
  options.redis_url = target.url();
  options.replicas = replicas;
  options.history = !no_history;
  // The prefills put a million jobs at once: their replication takes a while.
  options.replica_timeout = redisched::Millis{20000};
  options.command_timeout = redisched::Millis{60000};
  Client client(options);
  // The same single calls, each sent as itself: what coalescing adds.
  auto alone_options = options;
  alone_options.coalesce = false;
  Client alone(alone_options);
  const std::string topic = "bench";
  admin.str("FLUSHALL");

  auto put_one = [&](Client& c) {
    return [&](long i, auto& done) {
      c.put_async(topic, job(i), [&done](auto r) {
        r.value();
        done(1);
      });
    };
  };
  const Figure put_single =
      measured(admin, [&] { return throughput(jobs, window, put_one(client)); });
  admin.str("FLUSHALL");
  const Figure put_alone =
      measured(admin, [&] { return throughput(jobs, window, put_one(alone)); });
  admin.str("FLUSHALL");
  const long batches = jobs / batch;
  const Figure put_batched = measured(admin, [&] {
    return throughput(batches * 5, 8, [&](long b, auto& done) {
      std::vector<JobSpec> specs;
      for (long i = b * batch; i < (b + 1) * batch; ++i) specs.push_back(job(i));
      client.put_many_async(topic, specs, [&done, n = specs.size()](auto r) {
        r.value();
        done(static_cast<long>(n));
      });
    });
  });

  // reserve+ack, one job per call: prefill, then each reservation's ack
  // starts the next reservation.
  admin.str("FLUSHALL");
  {
    std::vector<JobSpec> specs;
    for (long i = 0; i < jobs + jobs / 2; ++i) specs.push_back(job(i));
    client.put_many(topic, specs);
  }
  // One reservation and its ack, then done(1).
  auto reserve_ack_with = [&](Client& c, const std::string& t) {
    return [&c, &t](long, auto& done) {
      c.reserve_async(t, 1, redisched::Millis(60000), [&c, &t, &done](auto r) {
        auto& res = r.value();
        if (res.jobs.empty()) throw std::runtime_error("ran out of jobs");
        c.ack_async(t, res.jobs[0].id, res.jobs[0].token, redisched::Millis{0}, [&done](auto a) {
          a.value();
          done(1);
        });
      });
    };
  };
  auto reserve_ack_one = reserve_ack_with(client, topic);
  const Figure reserve_single =
      measured(admin, [&] { return throughput(jobs, window, reserve_ack_one); });
  const Figure reserve_alone =
      measured(admin, [&] { return throughput(jobs / 2, window, reserve_ack_with(alone, topic)); });
  admin.str("FLUSHALL");
  {
    std::vector<JobSpec> specs;
    for (long i = 0; i < jobs * 5; ++i) specs.push_back(job(i));
    client.put_many(topic, specs);
  }
  const Figure reserve_batched = measured(admin, [&] {
    return throughput(jobs * 5 / batch, 8, [&](long, auto& done) {
      client.reserve_async(topic, batch, redisched::Millis(60000), [&](auto r) {
        auto& res = r.value();
        std::vector<std::pair<std::string, std::uint64_t>> held;
        for (auto& j : res.jobs) held.emplace_back(j.id, j.token);
        client.ack_many_async(topic, held, redisched::Millis{0}, [&done, n = held.size()](auto a) {
          a.value();
          done(static_cast<long>(n));
        });
      });
    });
  });

  // The peers, on the same machine in the same run.
  redisched::bench::PeerFigures beanstalkd;
  redisched::bench::BullmqFigures bullmq;
  if (peers) {
    beanstalkd = redisched::bench::beanstalkd_figures(jobs, 50);
    bullmq = redisched::bench::bullmq_figures(target, jobs);
  }

  redisched::bench::WorkerFigures workers;
  if (worker) workers = redisched::bench::measure_worker(admin, target, worker_run);

  // Memory per waiting job: ready jobs, then delayed jobs.
  auto memory_per_job = [&](bool delayed) {
    admin.str("FLUSHALL");
    const long long before = admin.used_memory();
    std::vector<JobSpec> specs;
    for (long i = 0; i < memory_jobs; ++i) {
      specs.push_back(job(i));
      if (delayed) specs.back().delay = redisched::Millis(3600000 + i);
      if (specs.size() == 1000) {
        client.put_many(topic, specs);
        specs.clear();
      }
    }
    if (!specs.empty()) client.put_many(topic, specs);
    return static_cast<double>(admin.used_memory() - before) / static_cast<double>(memory_jobs);
  };
  const double mem_ready = memory_per_job(false);
  const double mem_delayed = memory_per_job(true);

  // The same single calls over a backlog of each size.
  struct Backlog {
    long size;
    double put, reserve, bytes, settled, settle_s;
    // Time over this backlog / time over the reference topic's, in the
    // same slices of the same minutes.
    double put_paired, reserve_paired;
  };
  std::vector<Backlog> over;
  const std::string jobs_key = fmt::format("{}:{{{}}}:jobs", options.prefix, topic);
  // Waiting jobs of a topic: half ready, half delayed an hour and more.
  auto fill_backlog = [&](const std::string& t, long size) {
    std::vector<JobSpec> specs;
    for (long i = 0; i < size; ++i) {
      specs.push_back(job(i));
      specs.back().id = fmt::format("backlog-{:08}", i);
      if (i % 2 == 1) specs.back().delay = redisched::Millis(3600000 + i);
      if (specs.size() == 1000) {
        client.put_many(t, specs);
        specs.clear();
      }
    }
    if (!specs.empty()) client.put_many(t, specs);
  };
  // Seconds for n single puts of jobs first.. into topic t, and for n
  // reserve+acks of them.
  auto put_secs = [&](const std::string& t, long first, long n) {
    return static_cast<double>(n) / throughput(n, window, [&](long i, auto& done) {
             JobSpec s = job(first + i);
             s.priority = 1;  // above the backlog: reserve takes these first
             client.put_async(t, s, [&done](auto r) {
               r.value();
               done(1);
             });
           });
  };
  auto reserve_secs = [&](const std::string& t, long n) {
    return static_cast<double>(n) / throughput(n, window, reserve_ack_with(client, t));
  };
  // This machine's speed moves by a third within minutes (the ceilings at
  // a run's start and end), more than a backlog should move a figure. So
  // each size is also measured against a topic of 1,000 jobs in the same
  // server, in alternating slices of the same minutes.
  const std::string reference = topic + "-reference";
  constexpr int slices = 4;
  for (const long size : backlogs) {
    admin.str("FLUSHALL");
    admin.finish_rehash(jobs_key);  // its script's first run costs memory of its own
    const long long before = admin.used_memory();
    fill_backlog(topic, size);
    const double bytes =
        static_cast<double>(admin.used_memory() - before) / static_cast<double>(size);
    // A fill that has just crossed a power of two leaves the jobs hash
    // holding two bucket arrays, which only commands on it free (10^7 crosses
    // 2^23 at 84%). The figures are for a topic that holds this many jobs,
    // not one that has just grown to it: the move is finished first.
    const auto settle_start = std::chrono::steady_clock::now();
    admin.finish_rehash(jobs_key);
    const double settle_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - settle_start).count();
    const double settled =
        static_cast<double>(admin.used_memory() - before) / static_cast<double>(size);
    fill_backlog(reference, 1000);
    double put = 0, put_ref = 0, reserve = 0, reserve_ref = 0;
    for (int s = 0; s < slices; ++s) {
      put_ref += put_secs(reference, s * (jobs / slices), jobs / slices);
      put += put_secs(topic, s * (jobs / slices), jobs / slices);
    }
    for (int s = 0; s < slices; ++s) {
      reserve_ref += reserve_secs(reference, jobs / slices);
      reserve += reserve_secs(topic, jobs / slices);
    }
    const double n = static_cast<double>(jobs / slices * slices);
    over.push_back({size, n / put, n / reserve, bytes, settled, settle_s, put_ref / put,
                    reserve_ref / reserve});
  }
  admin.str("FLUSHALL");
  // What a read of a rarely touched place costs on this machine, the way a
  // job reads the big structures of a backlog.
  double cold_read_ns = 0, hot_read_ns = 0;
  if (!backlogs.empty()) {
    cold_read_ns = redisched::bench::random_read_ns(512, 100000, 2);
    hot_read_ns = redisched::bench::random_read_ns(512, 0, 2);
  }
  // The machine's speed moves for minutes at a time (bench/HISTORY.md): the
  // same ceiling again says how far it moved during the run.
  const double ceiling_end = redisched::bench::evalsha_ceiling(admin, target, jobs * 2);

  fmt::print(
      "redisched core benchmark (Redis at {}, {} jobs a figure, {} calls in flight, "
      "batches of {}, writes wait for {} replicas)\n\n",
      target.url(), jobs, window, batch, replicas);
  fmt::print("{:<44} {:>12} {:>10} {:>10} {:>10}\n", "figure", "jobs/s", "/ceiling", "Redis CPU",
             "client CPU");
  fmt::print("{:<44} {:>12.0f} {:>10}\n", "ceiling: EVALSHA minimal put, -P 16 -c 50", ceiling,
             "1.00");
  auto row = [&](const char* name, double v) {
    fmt::print("{:<44} {:>12.0f} {:>10.2f}\n", name, v, v / ceiling);
  };
  // The CPU columns: cores kept busy while the figure ran (Figure).
  auto figure = [&](const std::string& name, const Figure& f) {
    fmt::print("{:<44} {:>12.0f} {:>10.2f} {:>10.2f} {:>10.2f}\n", name, f.rate, f.rate / ceiling,
               f.redis_cpu, f.client_cpu);
  };
  figure("put, single calls", put_single);
  figure("put, single calls, none coalesced", put_alone);
  figure(fmt::format("put, batched ({} per call)", batch), put_batched);
  figure("reserve+ack, single calls", reserve_single);
  figure("reserve+ack, single calls, none coalesced", reserve_alone);
  figure(fmt::format("reserve+ack, batched ({} per call)", batch), reserve_batched);
  if (peers) {
    row("beanstalkd: put, one job per call, c50", beanstalkd.put);
    row("beanstalkd: reserve+delete, one per call, c50", beanstalkd.reserve_delete);
    row("BullMQ: Queue.add, c50", bullmq.add);
    row("BullMQ: Queue.addBulk of 100, 8 in flight", bullmq.add_bulk);
    row("BullMQ: Worker, no-op, concurrency 50", bullmq.process);
  }
  fmt::print("{:<44} {:>12.0f} {:>10.2f}\n", "ceiling again, at the end of the run", ceiling_end,
             ceiling_end / ceiling);
  if (worker) {
    fmt::print("\nThe Worker runtime, beside the same ceiling:\n");
    redisched::bench::print_worker(workers, worker_run, ceiling);
  }
  fmt::print("\nRedis used_memory per waiting job, {} jobs, 100-byte bodies:\n", memory_jobs);
  fmt::print("  ready   {:>8.1f} bytes\n  delayed {:>8.1f} bytes\n", mem_ready, mem_delayed);
  if (!over.empty()) {
    fmt::print(
        "\nSingle calls over a backlog (half ready, half delayed; ratios to the first row):\n");
    fmt::print("{:>10} {:>12} {:>7} {:>8} {:>12} {:>7} {:>8} {:>14} {:>14}\n", "waiting", "put/s",
               "ratio", "paired", "res+ack/s", "ratio", "paired", "bytes per job", "after filling");
    for (const auto& b : over) {
      fmt::print(
          "{:>10} {:>12.0f} {:>7.2f} {:>8.2f} {:>12.0f} {:>7.2f} {:>8.2f} {:>14.1f} {:>14.1f}\n",
          b.size, b.put, b.put / over.front().put, b.put_paired, b.reserve,
          b.reserve / over.front().reserve, b.reserve_paired, b.settled, b.bytes);
    }
    fmt::print(
        "\"ratio\" is to the first row; \"paired\" to a topic of 1,000 jobs in the same server, "
        "measured in {} alternating slices of the same minutes.\n",
        slices);
    std::string took;
    for (const auto& b : over)
      took += fmt::format("{}{:.1f}", took.empty() ? "" : " / ", b.settle_s);
    fmt::print(
        "Each row is measured once the jobs hash has ended its move to a grown table, if the "
        "fill left one under way; \"after filling\" is the memory before that. Ending it took "
        "{} s.\n",
        took);
    fmt::print(
        "The machine: a read at a random place in 512 MB costs {:.0f} ns at 100,000 reads/s, "
        "{:.0f} ns back to back\n",
        cold_read_ns, hot_read_ns);
  }
  return 0;
}
