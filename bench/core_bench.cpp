// redisched_bench: the Redis core's throughput beside the Redis ceiling, and
// memory per waiting job, measured in one run against one Redis.
//
// Without --redis it starts a redis-server of its own (from PATH, default
// settings, no persistence) in a temp dir, so every figure comes from the
// same fresh server. The ceiling is redis-benchmark -P 16 -c 50 running
// EVALSHA of a minimal put script (one HSET and one ZADD NX of a new id).
#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redisched/client.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using redisched::Client;
using redisched::JobSpec;
using Clock = std::chrono::steady_clock;

std::string run_command(const std::string& cmd) {
  std::string out;
  std::array<char, 4096> buf{};
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

// A redis-server for the run, on a free TCP port in a temp dir.
class OwnRedis {
 public:
  OwnRedis() {
    char tmpl[] = "/tmp/redisched-bench-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    std::string port = std::to_string(port_);
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     port,
                                     "--bind",
                                     "127.0.0.1",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--logfile",
                                     dir_ + "/redis.log"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its output must not hold our stdout open.
    posix_spawn_file_actions_t io;
    posix_spawn_file_actions_init(&io);
    posix_spawn_file_actions_addopen(&io, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&io, 2, "/dev/null", O_WRONLY, 0);
    const int spawned = ::posix_spawnp(&pid_, "redis-server", &io, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&io);
    if (spawned != 0) {
      throw std::runtime_error("cannot start redis-server (apt-get install redis-server)");
    }
    for (int i = 0; i < 500; ++i) {
      if (run_command("redis-cli -p " + port + " PING 2>/dev/null").find("PONG") == 0) return;
      std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("redis-server did not start");
  }
  ~OwnRedis() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  OwnRedis(const OwnRedis&) = delete;
  OwnRedis& operator=(const OwnRedis&) = delete;
  int port() const { return port_; }

 private:
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
};

struct Target {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string url() const { return "redis://" + host + ":" + std::to_string(port); }
};

// A plain connection for INFO, FLUSHALL, SCRIPT LOAD.
class Admin {
 public:
  explicit Admin(const Target& t) : c_(redisConnect(t.host.c_str(), t.port)) {
    if (c_ == nullptr || c_->err != 0) throw std::runtime_error("cannot connect to " + t.url());
  }
  ~Admin() { redisFree(c_); }
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;
  std::string str(const char* cmd) { return answer(redisCommand(c_, cmd)); }
  std::string script_load(const std::string& script) {
    return answer(redisCommand(c_, "SCRIPT LOAD %b", script.data(), script.size()));
  }
  static std::string answer(void* reply) {
    auto* r = static_cast<redisReply*>(reply);
    std::string out = r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : "";
    freeReplyObject(r);
    return out;
  }
  long long used_memory() {
    const std::string info = str("INFO memory");
    const auto at = info.find("used_memory:");
    return std::stoll(info.substr(at + 12));
  }

 private:
  redisContext* c_;
};

// Runs total operations with window of them in flight. start(i, done)
// begins operation i and calls done(jobs) when it completes (on the
// client's thread), jobs being how many jobs it covered. Returns jobs/s.
template <class Start>
double throughput(long total, int window, Start start) {
  std::atomic<long> next{0};
  std::atomic<long> finished{0};
  std::atomic<long> jobs{0};
  std::promise<void> all_done;
  std::function<void()> launch;
  std::function<void(long)> on_done = [&](long n) {
    jobs += n;
    if (++finished == total) {
      all_done.set_value();
      return;
    }
    launch();
  };
  launch = [&] {
    const long i = next++;
    if (i < total) start(i, on_done);
  };
  const auto t0 = Clock::now();
  for (int w = 0; w < window; ++w) launch();
  all_done.get_future().wait();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(jobs.load()) / secs;
}

// 100-byte bodies that differ from job to job, as real payloads do (a
// constant body would measure Lua's string hashing, which samples only some
// bytes, at its worst).
JobSpec job(long i, const std::string& body) {
  JobSpec s;
  s.id = fmt::format("job-{:07}", i);
  s.body = body;
  std::uint64_t x = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& c : s.body) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>('a' + x % 26);
  }
  return s;
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redisched_bench: %s\n", e.what());
    return 1;
  }
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
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<OwnRedis> own;
  Target target;
  if (redis.empty()) {
    own = std::make_unique<OwnRedis>();
    target.port = own->port();
  } else {
    target.host = redis.substr(0, redis.find(':'));
    target.port = std::stoi(redis.substr(redis.find(':') + 1));
  }
  Admin admin(target);
  const std::string body(100, 'x');

  // The ceiling: a minimal put script, as fast as Redis runs scripts.
  admin.str("FLUSHALL");
  const std::string sha = admin.script_load(
      "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]); "
      "return redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[1])");
  const std::string out = run_command(
      fmt::format("redis-benchmark -h {} -p {} -P 16 -c 50 -n {} -r 100000000 --csv EVALSHA {} 2 "
                  "bench:{{c}}:jobs bench:{{c}}:due __rand_int__ {} __rand_int__ 2>/dev/null",
                  target.host, target.port, jobs * 2, sha, body));
  double ceiling = 0;
  {
    // CSV: "test","rps",...  — the second line's second field.
    if (out.find("\n\"") == std::string::npos) {
      throw std::runtime_error("redis-benchmark printed no result: " + out);
    }
    const auto line = out.substr(out.find('\n') + 1);
    const auto first = line.find("\",\"") + 3;
    ceiling = std::stod(line.substr(first, line.find('"', first) - first));
  }

  redisched::ClientOptions options;
  options.redis_url = target.url();
  Client client(options);
  const std::string topic = "bench";
  admin.str("FLUSHALL");

  const double put_single = throughput(jobs, window, [&](long i, auto& done) {
    client.put_async(topic, job(i, body), [&done](auto r) {
      r.value();
      done(1);
    });
  });
  admin.str("FLUSHALL");
  const long batches = jobs / batch;
  const double put_batched = throughput(batches * 5, 8, [&](long b, auto& done) {
    std::vector<JobSpec> specs;
    for (long i = b * batch; i < (b + 1) * batch; ++i) specs.push_back(job(i, body));
    client.put_many_async(topic, specs, [&done, n = specs.size()](auto r) {
      r.value();
      done(static_cast<long>(n));
    });
  });

  // reserve+ack, one job per call: prefill, then each reservation's ack
  // starts the next reservation.
  admin.str("FLUSHALL");
  {
    std::vector<JobSpec> specs;
    for (long i = 0; i < jobs; ++i) specs.push_back(job(i, body));
    client.put_many(topic, specs);
  }
  const double reserve_single = throughput(jobs, window, [&](long, auto& done) {
    client.reserve_async(topic, 1, redisched::Millis(60000), [&](auto r) {
      auto& res = r.value();
      if (res.jobs.empty()) throw std::runtime_error("ran out of jobs");
      client.ack_async(topic, res.jobs[0].id, res.jobs[0].token, redisched::Millis{0},
                       [&done](auto a) {
                         a.value();
                         done(1);
                       });
    });
  });
  admin.str("FLUSHALL");
  {
    std::vector<JobSpec> specs;
    for (long i = 0; i < jobs * 5; ++i) specs.push_back(job(i, body));
    client.put_many(topic, specs);
  }
  const double reserve_batched = throughput(jobs * 5 / batch, 8, [&](long, auto& done) {
    client.reserve_async(topic, batch, redisched::Millis(60000), [&](auto r) {
      auto& res = r.value();
      std::vector<std::pair<std::string, std::uint64_t>> held;
      for (auto& j : res.jobs) held.emplace_back(j.id, j.token);
      client.ack_many_async(topic, held, [&done, n = held.size()](auto a) {
        a.value();
        done(static_cast<long>(n));
      });
    });
  });

  // Memory per waiting job: ready jobs, then delayed jobs.
  auto memory_per_job = [&](bool delayed) {
    admin.str("FLUSHALL");
    const long long before = admin.used_memory();
    std::vector<JobSpec> specs;
    for (long i = 0; i < memory_jobs; ++i) {
      specs.push_back(job(i, body));
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
  admin.str("FLUSHALL");

  fmt::print(
      "redisched core benchmark (Redis at {}, {} jobs a figure, {} calls in flight, "
      "batches of {})\n\n",
      target.url(), jobs, window, batch);
  fmt::print("{:<44} {:>12} {:>10}\n", "figure", "jobs/s", "/ceiling");
  fmt::print("{:<44} {:>12.0f} {:>10}\n", "ceiling: EVALSHA minimal put, -P 16 -c 50", ceiling,
             "1.00");
  auto row = [&](const char* name, double v) {
    fmt::print("{:<44} {:>12.0f} {:>10.2f}\n", name, v, v / ceiling);
  };
  row("put, single calls", put_single);
  row(fmt::format("put, batched ({} per call)", batch).c_str(), put_batched);
  row("reserve+ack, single calls", reserve_single);
  row(fmt::format("reserve+ack, batched ({} per call)", batch).c_str(), reserve_batched);
  fmt::print("\nRedis used_memory per waiting job, {} jobs, 100-byte bodies:\n", memory_jobs);
  fmt::print("  ready   {:>8.1f} bytes\n  delayed {:>8.1f} bytes\n", mem_ready, mem_delayed);
  return 0;
}
