// What the benchmarks share: a redis-server of their own, a plain admin
// connection, the EVALSHA ceiling, and job bodies.
#pragma once

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "embedded/redis_process.h"
#include "redisched/job.h"

namespace redisched::bench {

// CPU seconds (user + system) a process has used so far (/proc/PID/stat).
double cpu_seconds(pid_t pid);

// Runs a shell command and returns what it printed.
std::string run_command(const std::string& cmd);

// A redis-server for the run (the project's launcher: from PATH, no
// persistence, a free TCP port in a temp dir); stopped and removed at the end.
class OwnRedis {
 public:
  OwnRedis();
  int port() const { return process_.port(); }
  pid_t pid() const { return process_.pid(); }

 private:
  embedded::RedisProcess process_;
};

struct Target {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string url() const { return "redis://" + host + ":" + std::to_string(port); }
};

// The Redis of --redis host:port, or (empty) a new OwnRedis kept in own.
Target choose_target(const std::string& redis, std::unique_ptr<OwnRedis>& own);

// n replicas of the Redis at target (redis-servers of our own), returned
// once the primary counts them in sync.
std::vector<std::unique_ptr<embedded::RedisProcess>> start_replicas(const Target& target, int n);

// A plain connection for INFO, FLUSHALL, SCRIPT LOAD.
class Admin {
 public:
  explicit Admin(const Target& t);
  ~Admin();
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;
  std::string str(const char* cmd);
  std::string script_load(const std::string& script);
  long long used_memory();
  // Ends a grown hash's move to its new table, if one is under way. Redis moves a hash object's
  // entries one bucket per command on that hash, never in the background (its active rehashing
  // covers only the keyspace's own tables), so a hash that just crossed a power of two holds both
  // tables for millions of commands. Returns the HEXISTS sent.
  long long finish_rehash(const std::string& key);
  // CPU seconds Redis's main thread has used (INFO cpu): the thread that
  // runs every command and script.
  double cpu_seconds();

 private:
  redisContext* c_;
};

// The ceiling: redis-benchmark -P 16 -c 50 running EVALSHA of a minimal put
// script (one HSET of a 100-byte body, one ZADD NX of a new id), requests
// calls. Flushes the database. Returns calls/s.
double evalsha_ceiling(Admin& admin, const Target& target, long requests);

// main() of a benchmark: runs run(argc, argv), and prints "name: what"
// and returns 1 for an exception.
int guarded_main(const char* name, int (*run)(int, char**), int argc, char** argv);

// Job i with a 100-byte body of letters that differ from job to job, as real
// payloads do (a constant body would measure Lua's string hashing, which
// samples only some bytes, at its worst).
JobSpec job(long i);

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
  const auto t0 = std::chrono::steady_clock::now();
  for (int w = 0; w < window; ++w) launch();
  all_done.get_future().wait();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(jobs.load()) / secs;
}

// The machine's cost of memory that sat idle (ms to read one byte of each
// 4 KB page of 64 MB): right after writing it, and again after a second
// untouched. On a virtual machine whose host reclaims or tracks idle guest
// memory, the second is far slower, with no page fault in the guest; any
// process that wakes after an idle second pays it for what it touches.
struct IdleMemory {
  double hot_ms = 0, idle_ms = 0;
};
IdleMemory idle_memory();

// The machine's cost of memory that is not touched often: ns per read of
// one byte at a random place in a heap of mb megabytes, with the reads
// coming at rate per second (0: back to back), over secs seconds, after one
// second to settle. Counts only the reads, not the waits between them. A
// large backlog in Redis is read this way: each job touches a few random
// places of the topic's big structures.
double random_read_ns(long mb, long rate, double secs);

// CPU seconds this process has used, all threads.
double process_cpu_seconds();

// A throughput figure with what it cost: the cores Redis's main thread and
// this process (the client) kept busy meanwhile (1.0 = one core all along).
// A side near 1.0 is the bound; both well under it means each waits on the
// other.
struct Figure {
  double rate = 0;  // jobs/s
  double redis_cpu = 0;
  double client_cpu = 0;
};

template <class Run>
Figure measured(Admin& admin, Run run) {
  const double redis0 = admin.cpu_seconds();
  const double client0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  Figure f;
  f.rate = run();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  f.client_cpu = (process_cpu_seconds() - client0) / secs;
  f.redis_cpu = (admin.cpu_seconds() - redis0) / secs;
  return f;
}

}  // namespace redisched::bench
