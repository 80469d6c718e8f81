#include "testutil/redis_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace redisched::test {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool port_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (ok) {
    const char ping[] = "PING\r\n";
    char buf[16] = {};
    // +PONG, or -NOAUTH when a password is set: either way it is serving.
    ok = ::write(fd, ping, sizeof(ping) - 1) == sizeof(ping) - 1 && ::read(fd, buf, 7) > 0 &&
         (std::string(buf).rfind("+PONG", 0) == 0 || std::string(buf).rfind("-NOAUTH", 0) == 0);
  }
  ::close(fd);
  return ok;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

RedisServer::RedisServer(Options options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/redisched-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  port_ = free_port();
  if (options_.tls) {
    tls_port_ = free_port();
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
        " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
        dir_ + "/key.pem -out " + dir_ + "/cert.pem 2>/dev/null";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("openssl could not make a certificate");
  }
  // Another process may take a free port before the server binds it: try
  // a few fresh ones before giving up.
  for (int attempt = 1;; ++attempt) {
    try {
      start();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 3) throw;
      port_ = free_port();
      if (options_.tls) tls_port_ = free_port();
    }
  }
}

RedisServer::~RedisServer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisServer::start() {
  std::ofstream conf(dir_ + "/redis.conf");
  conf << "port " << port_ << "\n"
       << "bind 127.0.0.1\n"
       << "unixsocket " << socket_path() << "\n"
       << "unixsocketperm 700\n"
       << "dir " << dir_ << "\n"
       << "save \"\"\n"
       << "appendonly " << (options_.append_only ? "yes" : "no") << "\n"
       << "appendfsync always\n"
       << "logfile " << dir_ << "/redis.log\n"
       << "daemonize no\n"
       << options_.extra_config << "\n";
  if (options_.tls) {
    conf << "tls-port " << tls_port_ << "\n"
         << "tls-cert-file " << dir_ << "/cert.pem\n"
         << "tls-key-file " << dir_ << "/key.pem\n"
         << "tls-ca-cert-file " << dir_ << "/cert.pem\n"
         << "tls-auth-clients " << (options_.tls_client_certs ? "yes" : "no") << "\n";
  }
  conf.close();
  const char* bin = std::getenv("REDIS_SERVER");
  std::string server = bin != nullptr ? bin : "redis-server";
  std::string conf_path = dir_ + "/redis.conf";
  std::vector<char*> argv = {server.data(), conf_path.data(), nullptr};
  if (::posix_spawnp(&pid_, server.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    throw std::runtime_error("cannot start " + server +
                             " (install it: apt-get install redis-server)");
  }
  wait_until_up();
}

void RedisServer::wait_until_up() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (port_answers(port_)) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start:\n" + read_file(dir_ + "/redis.log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop();
  throw std::runtime_error("redis-server did not answer within 10 s:\n" +
                           read_file(dir_ + "/redis.log"));
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 500; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::restart() {
  stop();
  start();
}

void RedisServer::freeze() { ::kill(pid_, SIGSTOP); }
void RedisServer::thaw() { ::kill(pid_, SIGCONT); }

namespace {
RedisServer* g_shared = nullptr;

class SharedRedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { g_shared = new RedisServer(); }
  void TearDown() override {
    delete g_shared;
    g_shared = nullptr;
  }
};
}  // namespace

RedisServer& shared_redis() {
  if (g_shared == nullptr) throw std::runtime_error("the shared redis-server is not running");
  return *g_shared;
}

std::string unique_topic() {
  static std::atomic<int> n{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? info->name() : "topic";
  return name + "_" + std::to_string(n++);
}

::testing::Environment* make_shared_redis_environment() { return new SharedRedisEnvironment(); }

}  // namespace redisched::test
