// redisched_cluster_bench: the same client calls on one Redis and on a
// Redis Cluster of 3 primaries, started here on this machine, with the jobs
// spread over many topics (so over every primary), and where the CPU went.
//
//  - put, one job per call, `window` calls in flight;
//  - reserve+ack, one job per call, from prefilled topics;
// then the same on one hot topic, on its own and spread over 3 shards
// (Client::set_shards); each with the CPU seconds the redis-servers and this
// process used.
#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "embedded/redis_cluster.h"
#include "redisched/client.h"

namespace {

namespace bench = redisched::bench;
using redisched::Client;
using redisched::ClientOptions;
using redisched::JobSpec;
using redisched::embedded::RedisProcess;

// CPU seconds (user + system) of a process so far.
double cpu_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // fields 3..13
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double own_cpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Figure {
  double jobs_per_s = 0;
  double redis_cpu = 0;  // seconds, all redis-servers
  double own_cpu = 0;    // seconds, this process (the client)
  double seconds = 0;
};

template <class Run>
Figure measure(const std::vector<std::unique_ptr<RedisProcess>>& servers, long jobs, Run run) {
  auto redis_cpu = [&] {
    double s = 0;
    for (const auto& n : servers) s += cpu_of(n->pid());
    return s;
  };
  const double r0 = redis_cpu();
  const double c0 = own_cpu();
  Figure f;
  f.jobs_per_s = run();
  f.seconds = static_cast<double>(jobs) / f.jobs_per_s;
  f.redis_cpu = redis_cpu() - r0;
  f.own_cpu = own_cpu() - c0;
  return f;
}

struct Setup {
  std::string name;
  std::vector<std::unique_ptr<RedisProcess>> servers;
  std::string url;
};

// topics: the jobs go to that many topics in turn; or with hot_shards > 0,
// all to one topic spread over that many shards (1: not spread).
std::vector<Figure> run_setup(Setup& s, long jobs, int topics, int window, bool coalesce,
                              int hot_shards) {
  ClientOptions o;
  o.redis_url = s.url;
  o.coalesce = coalesce;
  Client client(o);
  const std::string hot = fmt::format("hot_{}", hot_shards);
  if (hot_shards > 0) client.set_shards(hot, hot_shards);
  auto topic_of = [&](long i) {
    return hot_shards > 0 ? hot : "bench_" + std::to_string(i % topics);
  };
  std::vector<Figure> out;
  out.push_back(measure(s.servers, jobs, [&] {
    return bench::throughput(jobs, window, [&](long i, auto& done) {
      client.put_async(topic_of(i), bench::job(i), [&done](auto r) {
        r.value();
        done(1);
      });
    });
  }));
  // The jobs put are there: reserve+ack takes them, topic by topic in turn.
  out.push_back(measure(s.servers, jobs, [&] {
    return bench::throughput(jobs, window, [&](long i, auto& done) {
      const std::string topic = topic_of(i);
      client.reserve_async(topic, 1, redisched::Millis(60000), [&client, &done, topic](auto r) {
        auto& res = r.value();
        if (res.jobs.empty()) throw std::runtime_error("ran out of jobs in " + topic);
        client.ack_async(topic, res.jobs[0].id, res.jobs[0].token, redisched::Millis{0},
                         [&done](auto a) {
                           a.value();
                           done(1);
                         });
      });
    });
  }));
  return out;
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  return bench::guarded_main("redisched_cluster_bench", run, argc, argv);
}

int run(int argc, char** argv) {
  CLI::App app{"redisched cluster benchmark: one Redis against a 3-primary Redis Cluster"};
  long jobs = 200000;
  int topics = 64;
  int window = 512;
  int primaries = 3;
  bool no_coalesce = false;
  app.add_option("--jobs", jobs, "jobs per figure")->capture_default_str();
  app.add_flag("--no-coalesce", no_coalesce,
               "send every call alone (ClientOptions::coalesce off): Redis's work per job, not "
               "the batching, sets the pace");
  app.add_option("--topics", topics, "topics the jobs are spread over")->capture_default_str();
  app.add_option("--window", window, "calls in flight")->capture_default_str();
  app.add_option("--primaries", primaries, "primaries of the cluster")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<Setup> setups;
  {
    Setup one{"1 node", {}, ""};
    redisched::embedded::RedisProcessOptions o;
    o.port = -1;
    one.servers.push_back(std::make_unique<RedisProcess>(o));
    one.url = one.servers.front()->url();
    setups.push_back(std::move(one));
  }
  {
    Setup cluster{fmt::format("cluster, {} primaries", primaries), {}, ""};
    cluster.servers = redisched::embedded::start_cluster(primaries, 0);
    cluster.url = cluster.servers.front()->url();
    setups.push_back(std::move(cluster));
  }
  fmt::print(
      "redisched cluster benchmark ({} jobs a figure over {} topics, {} calls in flight, "
      "one Client of one thread and one connection per node, calls {}; {} cores)\n\n",
      jobs, topics, window, no_coalesce ? "each alone" : "coalesced",
      std::thread::hardware_concurrency());
  fmt::print("{:<24} {:<40} {:>10} {:>14} {:>14}\n", "setup", "figure", "jobs/s", "redis CPU s/s",
             "client CPU s/s");
  for (auto& s : setups) {
    for (const int hot : {0, 1, 3}) {
      const auto figures = run_setup(s, jobs, topics, window, !no_coalesce, hot);
      const std::string where = hot == 0   ? fmt::format("{} topics", topics)
                                : hot == 1 ? std::string("1 hot topic")
                                           : fmt::format("1 hot topic, {} shards", hot);
      const char* names[] = {"put", "reserve+ack"};
      for (size_t i = 0; i < figures.size(); ++i) {
        const auto& f = figures[i];
        fmt::print("{:<24} {:<40} {:>10.0f} {:>14.2f} {:>14.2f}\n", s.name,
                   fmt::format("{}, single calls, {}", names[i], where), f.jobs_per_s,
                   f.redis_cpu / f.seconds, f.own_cpu / f.seconds);
      }
    }
  }
  return 0;
}
