#include "bench_util.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

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

OwnRedis::OwnRedis() {
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

OwnRedis::~OwnRedis() {
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  std::filesystem::remove_all(dir_);
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

}  // namespace redisched::bench
