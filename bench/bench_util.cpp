#include "bench_util.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace redisched::bench {

using namespace std::chrono_literals;

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

OwnRedis::OwnRedis()
    : process_([] {
        embedded::RedisProcessOptions o;
        o.port = -1;  // a free one
        return o;
      }()) {}

std::vector<std::unique_ptr<embedded::RedisProcess>> start_replicas(const Target& target, int n) {
  std::vector<std::unique_ptr<embedded::RedisProcess>> replicas;
  for (int i = 0; i < n; ++i) {
    embedded::RedisProcessOptions o;
    o.port = -1;
    o.config = {"replicaof " + target.host + " " + std::to_string(target.port)};
    replicas.push_back(std::make_unique<embedded::RedisProcess>(o));
  }
  Admin admin(target);
  admin.str("CONFIG SET repl-diskless-sync-delay 0");
  // Connected is not enough: a replica still syncing acknowledges nothing.
  auto online = [&admin] {
    const std::string info = admin.str("INFO replication");
    int count = 0;
    for (auto at = info.find("state=online"); at != std::string::npos;
         at = info.find("state=online", at + 1)) {
      ++count;
    }
    return count;
  };
  for (int tries = 0; online() < n; ++tries) {
    if (tries == 1000) throw std::runtime_error("the replicas did not sync in 10 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return replicas;
}

Target choose_target(const std::string& redis, std::unique_ptr<OwnRedis>& own) {
  Target target;
  if (redis.empty()) {
    own = std::make_unique<OwnRedis>();
    target.port = own->port();
  } else {
    target.host = redis.substr(0, redis.find(':'));
    target.port = std::stoi(redis.substr(redis.find(':') + 1));
  }
  return target;
}

Admin::Admin(const Target& t) : c_(redisConnect(t.host.c_str(), t.port)) {
  if (c_ == nullptr || c_->err != 0) throw std::runtime_error("cannot connect to " + t.url());
}

Admin::~Admin() { redisFree(c_); }

namespace {
std::string answer(void* reply) {
  auto* r = static_cast<redisReply*>(reply);
  std::string out = r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : "";
  freeReplyObject(r);
  return out;
}
}  // namespace

std::string Admin::str(const char* cmd) { return answer(redisCommand(c_, cmd)); }

std::string Admin::script_load(const std::string& script) {
  return answer(redisCommand(c_, "SCRIPT LOAD %b", script.data(), script.size()));
}

long long Admin::used_memory() {
  const std::string info = str("INFO memory");
  const auto at = info.find("used_memory:");
  return std::stoll(info.substr(at + 12));
}

long long Admin::finish_rehash(const std::string& key) {
  // Each lookup moves one bucket of the old table or steps over up to ten
  // empty ones, and the old table has no more buckets than the hash has
  // entries (it grows when full): HLEN lookups end any move. Sent in chunks
  // so that no script holds the server for long.
  static const std::string step =
      "for _ = 1, tonumber(ARGV[1]) do redis.call('HEXISTS', KEYS[1], '') end return 0";
  auto* len = static_cast<redisReply*>(redisCommand(c_, "HLEN %b", key.data(), key.size()));
  if (len == nullptr || len->type != REDIS_REPLY_INTEGER) {
    if (len != nullptr) freeReplyObject(len);
    throw std::runtime_error("HLEN " + key + " failed");
  }
  const long long steps = len->integer;
  freeReplyObject(len);
  constexpr long long chunk = 1000000;
  // One call even for an empty hash: Redis makes its scripts' client at the
  // first EVAL (about 74 KB), which a caller measuring memory wants out of
  // the way before it starts.
  long long sent = 0;
  do {
    const std::string n = std::to_string(std::min(chunk, steps - sent));
    auto* r = static_cast<redisReply*>(redisCommand(c_, "EVAL %b 1 %b %b", step.data(), step.size(),
                                                    key.data(), key.size(), n.data(), n.size()));
    const bool failed = r == nullptr || r->type == REDIS_REPLY_ERROR;
    const std::string why = r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : "";
    if (r != nullptr) freeReplyObject(r);
    if (failed) throw std::runtime_error("finishing the rehash of " + key + " failed: " + why);
    sent += chunk;
  } while (sent < steps);
  return steps;
}

double Admin::cpu_seconds() {
  const std::string info = str("INFO cpu");
  auto field = [&](const char* name) {
    const auto at = info.find(name);
    if (at == std::string::npos) throw std::runtime_error(std::string("INFO cpu has no ") + name);
    return std::stod(info.substr(at + std::strlen(name)));
  };
  return field("used_cpu_sys_main_thread:") + field("used_cpu_user_main_thread:");
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

double evalsha_ceiling(Admin& admin, const Target& target, long requests) {
  admin.str("FLUSHALL");
  const std::string sha = admin.script_load(
      "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]); "
      "return redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[1])");
  const std::string body(100, 'x');
  const std::string out = run_command(
      fmt::format("redis-benchmark -h {} -p {} -P 16 -c 50 -n {} -r 100000000 --csv EVALSHA {} 2 "
                  "bench:{{c}}:jobs bench:{{c}}:due __rand_int__ {} __rand_int__ 2>/dev/null",
                  target.host, target.port, requests, sha, body));
  admin.str("FLUSHALL");
  // CSV: "test","rps",...  — the second line's second field.
  if (out.find("\n\"") == std::string::npos) {
    throw std::runtime_error("redis-benchmark printed no result: " + out);
  }
  const auto line = out.substr(out.find('\n') + 1);
  const auto first = line.find("\",\"") + 3;
  return std::stod(line.substr(first, line.find('"', first) - first));
}

int guarded_main(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

JobSpec job(long i) {
  JobSpec s;
  s.id = fmt::format("job-{:07}", i);
  s.body.resize(100);
  std::uint64_t x = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& c : s.body) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>('a' + x % 26);
  }
  return s;
}

IdleMemory idle_memory() {
  constexpr size_t kBytes = size_t{64} << 20;
  constexpr size_t kPage = 4096;
  std::vector<unsigned char> buf(kBytes, 1);
  auto read_all = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    unsigned sum = 0;
    for (size_t i = 0; i < kBytes; i += kPage) {
      sum += *static_cast<volatile unsigned char*>(&buf[i]);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (sum != kBytes / kPage) throw std::logic_error("idle_memory: the buffer changed");
    return ms;
  };
  IdleMemory m;
  read_all();  // the first read after writing may still fault
  m.hot_ms = read_all();
  std::this_thread::sleep_for(std::chrono::seconds{1});
  m.idle_ms = read_all();
  return m;
}

double random_read_ns(long mb, long rate, double secs) {
  using Clock = std::chrono::steady_clock;
  const auto bytes = static_cast<size_t>(mb) << 20;
  std::vector<unsigned char> heap(bytes, 1);
  std::uint64_t x = 88172645463325252ULL;  // xorshift64: cheap next to a read
  unsigned long sum = 0;
  long reads = 0;
  Clock::duration busy{};
  constexpr int kBatch = 1000;
  const auto t0 = Clock::now();
  const auto settle = std::chrono::seconds{1};
  const auto end = t0 + settle +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
  long batches = 0;
  for (auto now = t0; now < end; now = Clock::now()) {
    for (int i = 0; i < kBatch; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      sum += heap[x % bytes];
    }
    const auto after = Clock::now();
    if (now >= t0 + settle) {
      busy += after - now;
      reads += kBatch;
    }
    ++batches;
    if (rate > 0) {
      std::this_thread::sleep_until(
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                   static_cast<double>(batches * kBatch) / static_cast<double>(rate))));
    }
  }
  if (sum == 0) throw std::logic_error("random_read_ns: the heap changed");
  return std::chrono::duration<double, std::nano>(busy).count() / static_cast<double>(reads);
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields 14 and 15 (utime, stime), counted after the command's ')'.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace redisched::bench
