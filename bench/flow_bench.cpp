// redisched_flow_bench: flows end to end (issue 36, docs/flows.md), through
// the Client and a Worker that runs the jobs and moves the outboxes, beside
// plain jobs in the same run against the same Redis.
//
//  - put rate: a flow of 1 parent and --children children (the parent's
//    put names them all; the children go in put_many calls) against as
//    many plain jobs put the same way;
//  - from the last child's ack to the parent's handler, per flow: for
//    --rounds flows of 1 parent and --children children, and for --flows
//    flows of 1 parent and --fan children, put one after another.
// "The last child's ack" is read as its handler's return (the Worker acks
// after it): the figure includes that ack's trip, the mover's read of the
// outbox, its resolve on the parent's topic, the parent's reserve and its
// hand-off to a handler. Times are this host's steady clock.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "embedded/redis_cluster.h"
#include "redisched/client.h"
#include "redisched/worker.h"
#include "worker_figures.h"

namespace bench = redisched::bench;
using redisched::Client;
using redisched::JobContext;
using redisched::JobSpec;
using Clock = std::chrono::steady_clock;

namespace {

int run(int argc, char** argv);

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::vector<JobSpec> jobs_of(const std::string& prefix, long n) {
  std::vector<JobSpec> out;
  out.reserve(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) out.push_back({.id = prefix + std::to_string(i), .body = "x"});
  return out;
}

// Seconds to put jobs in put_many calls of 1000.
double put_all(Client& client, const std::string& topic, const std::vector<JobSpec>& jobs) {
  const auto start = Clock::now();
  for (std::size_t at = 0; at < jobs.size(); at += 1000) {
    const auto n = std::min<std::size_t>(1000, jobs.size() - at);
    client.put_many(topic, std::span<const JobSpec>(jobs.data() + at, n));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Flows run by one Worker: children's handlers note when they return, the
// parents' when they start.
class FlowRun {
 public:
  explicit FlowRun(const std::string& url) : client_(options(url)) {
    redisched::WorkerOptions wo;
    wo.client = options(url);
    worker_ = std::make_unique<redisched::Worker>(wo);
    worker_->handle("kids", {.concurrency = 16}, [this](JobContext& job) {
      const std::lock_guard lock(mu_);
      auto& last = kid_end_[parent_of(std::string(job.id()))];
      last = std::max(last, Clock::now());
    });
    worker_->handle("parents", {.concurrency = 4}, [this](JobContext& job) {
      const auto now = Clock::now();
      const std::lock_guard lock(mu_);
      parent_start_[std::string(job.id())] = now;
    });
    worker_->run();
  }
  ~FlowRun() { worker_->cancel(redisched::Millis{5000}); }
  FlowRun(const FlowRun&) = delete;
  FlowRun& operator=(const FlowRun&) = delete;

  // Puts flow name (1 parent, n children) and waits for its parent's
  // handler; ms from its last child's return to that start.
  double one(const std::string& name, long n) {
    JobSpec parent{.id = name, .body = "p"};
    for (long i = 0; i < n; ++i) parent.after.push_back({"kids", name + ":" + std::to_string(i)});
    client_.put("parents", parent);
    put_all(client_, "kids", jobs_of(name + ":", n));
    for (;;) {
      {
        const std::lock_guard lock(mu_);
        if (auto it = parent_start_.find(name); it != parent_start_.end()) {
          return ms_between(kid_end_.at(name), it->second);
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

 private:
  static redisched::ClientOptions options(const std::string& url) {
    redisched::ClientOptions o;
    o.redis_url = url;
    return o;
  }
  static std::string parent_of(const std::string& kid) { return kid.substr(0, kid.find(':')); }

  Client client_;
  std::unique_ptr<redisched::Worker> worker_;
  std::mutex mu_;
  std::map<std::string, Clock::time_point> kid_end_, parent_start_;
};

int run(int argc, char** argv) {
  CLI::App app{"redisched flow benchmark: a flow's put rate, and last child -> parent"};
  std::string redis;
  long children = 10000;
  int rounds = 5;
  int flows = 1000;
  long fan = 3;
  app.add_option("--redis", redis, "host:port of a Redis to use (default: start one)");
  app.add_option("--children", children, "children of the big flow")->capture_default_str();
  app.add_option("--rounds", rounds, "big flows, one after another")->capture_default_str();
  app.add_option("--flows", flows, "small flows, one after another")->capture_default_str();
  app.add_option("--fan", fan, "children of a small flow")->capture_default_str();
  int cluster = 0;
  app.add_option("--cluster", cluster,
                 "run on a Redis Cluster of this many primaries, started here")
      ->check(CLI::Range(0, 16));
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<bench::OwnRedis> own;
  std::vector<std::unique_ptr<redisched::embedded::RedisProcess>> nodes;
  std::string url;
  if (cluster > 0) {
    nodes = redisched::embedded::start_cluster(cluster, 0);
    url = nodes.front()->url();
  } else {
    url = bench::choose_target(redis, own).url();
  }

  // The put rate: the flow's jobs against as many plain ones, twice each,
  // alternating (the better of each pair).
  double plain_s = 1e9, flow_s = 1e9;
  {
    redisched::ClientOptions o;
    o.redis_url = url;
    Client client(o);
    for (int round = 0; round < 2; ++round) {
      const std::string tag = std::to_string(round);
      plain_s = std::min(plain_s, put_all(client, "plain" + tag, jobs_of("j", children + 1)));
      JobSpec parent{.id = "p", .body = "p"};
      for (long i = 0; i < children; ++i)
        parent.after.push_back({"fkids" + tag, std::to_string(i)});
      const auto start = Clock::now();
      client.put("fparents" + tag, parent);
      const double parent_s = std::chrono::duration<double>(Clock::now() - start).count();
      flow_s = std::min(flow_s, parent_s + put_all(client, "fkids" + tag, jobs_of("", children)));
    }
  }

  std::vector<double> big, small;
  {
    FlowRun flow(url);
    for (int i = 0; i < rounds; ++i) big.push_back(flow.one("big" + std::to_string(i), children));
    for (int i = 0; i < flows; ++i) small.push_back(flow.one("small" + std::to_string(i), fan));
  }

  fmt::print("redisched flow benchmark ({}; one Worker runs the jobs and moves)\n\n",
             cluster > 0 ? fmt::format("a Redis Cluster of {} primaries", cluster) : "one Redis");
  const double jobs = static_cast<double>(children + 1);
  fmt::print("put, {} jobs in put_many calls of 1000 (best of 2):\n", children + 1);
  fmt::print("  {:<44} {:>10.0f} jobs/s\n", "plain jobs", jobs / plain_s);
  fmt::print("  {:<44} {:>10.0f} jobs/s ({:.2f} of plain)\n",
             fmt::format("1 parent after {} children", children), jobs / flow_s, plain_s / flow_s);
  fmt::print("\nlast child's return -> parent's handler, ms: p50 p99 max\n");
  const auto b = bench::percentiles(big);
  fmt::print("  {:<44} {:8.2f} {:8.2f} {:8.2f}\n",
             fmt::format("1 parent, {} children ({} flows)", children, rounds), b.p50, b.p99,
             b.max);
  const auto s = bench::percentiles(small);
  fmt::print("  {:<44} {:8.2f} {:8.2f} {:8.2f}\n",
             fmt::format("1 parent, {} children ({} flows)", fan, flows), s.p50, s.p99, s.max);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return redisched::bench::guarded_main("redisched_flow_bench", run, argc, argv);
}
