#include "embedded/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace redisched::embedded {
namespace {

namespace fs = std::filesystem;

// PING on a connected socket: +PONG, or -NOAUTH when a password is set
// (either way it is serving).
bool answers(int fd, const sockaddr* addr, socklen_t len) {
  bool ok = false;
  if (::connect(fd, addr, len) == 0) {
    const char ping[] = "PING\r\n";
    char buf[16] = {};
    if (::write(fd, ping, sizeof(ping) - 1) == sizeof(ping) - 1 && ::read(fd, buf, 7) > 0) {
      ok = std::strncmp(buf, "+PONG", 5) == 0 || std::strncmp(buf, "-NOAUTH", 7) == 0;
    }
  }
  ::close(fd);
  return ok;
}

bool port_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return answers(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return fs::exists(program) ? program : "";
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

std::string log_of(const std::string& dir) {
  std::ifstream in(dir + "/redis.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > 4000) text = "..." + text.substr(text.size() - 4000);
  return text;
}

}  // namespace

bool redis_socket_answers(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return answers(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
}

RedisProcessOptions embedded_default(const std::string& dir, const std::string& appendfsync) {
  RedisProcessOptions o;
  o.dir = dir;
  o.port = 0;
  o.append_only = true;
  o.appendfsync = appendfsync;
  o.exclusive = true;
  o.die_with_parent = true;
  return o;
}

RedisProcess::RedisProcess(RedisProcessOptions options) : opts_(std::move(options)) {
  if (opts_.appendfsync != "always" && opts_.appendfsync != "everysec" &&
      opts_.appendfsync != "no") {
    throw std::runtime_error("appendfsync must be always, everysec or no, got " +
                             opts_.appendfsync);
  }
  if (opts_.dir.empty()) {
    char tmpl[] = "/tmp/redisched-redis-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    opts_.dir = tmpl;
    temp_dir_ = true;
  }
  std::error_code ec;
  fs::create_directories(opts_.dir, ec);
  if (ec) throw std::runtime_error("cannot create " + opts_.dir + ": " + ec.message());
  dir_ = fs::absolute(opts_.dir).lexically_normal().string();
  if (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (socket_path().size() >= sizeof(sockaddr_un{}.sun_path)) {
    throw std::runtime_error("the data directory path is too long for a unix socket: " + dir_);
  }
  if (opts_.exclusive) take_dir();
  if (opts_.tls) {
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
        " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
        dir_ + "/key.pem -out " + dir_ + "/cert.pem 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      throw std::runtime_error("openssl could not make a certificate");
    }
  }
  // Another process may take a free port before the server binds it: try a
  // few fresh ones before giving up.
  for (int attempt = 1;; ++attempt) {
    port_ = opts_.port == -1 ? free_port() : opts_.port;
    tls_port_ = opts_.tls ? free_port() : 0;
    try {
      start();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 3 || opts_.port != -1) {
        if (lock_fd_ >= 0) ::close(lock_fd_);
        throw;
      }
    }
  }
}

namespace {

// The pids in a data dir's lock file: the redisched that took it, and its
// redis-server (-1 where not written yet).
std::pair<pid_t, pid_t> lock_holders(int fd) {
  char buf[64] = {};
  const auto n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  long owner = -1;
  long server = -1;
  if (n > 0) std::sscanf(buf, "%ld %ld", &owner, &server);  // NOLINT: a fixed format of our own
  return {static_cast<pid_t>(owner), static_cast<pid_t>(server)};
}

bool alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

// One redis-server per data dir: an flock on redisched.lock in it, taken
// here and inherited by the redis-server we start, so that it is held until
// both have exited. A holder that is gone while its redis-server still
// writes its append-only file (it gets SIGTERM when we die) is waited for.
void RedisProcess::take_dir() {
  const std::string lock = dir_ + "/redisched.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) throw std::runtime_error("cannot open " + lock + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + opts_.start_timeout;
  while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const auto [owner, server] = lock_holders(lock_fd_);
    const bool running = alive(owner);
    if (running || std::chrono::steady_clock::now() > deadline) {
      ::close(lock_fd_);
      lock_fd_ = -1;
      throw std::runtime_error("another redisched serve is using " + dir_ +
                               (running ? " (pid " + std::to_string(owner) + ")"
                                        : " (it exited, but its redis-server, pid " +
                                              std::to_string(server) + ", still runs)") +
                               ": stop it, or give another --data-dir");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  write_holders();
}

void RedisProcess::write_holders() {
  if (lock_fd_ < 0) return;
  const std::string text = std::to_string(::getpid()) + " " + std::to_string(pid_) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 ||
      ::pwrite(lock_fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    throw std::runtime_error("cannot write " + dir_ + "/redisched.lock: " + std::strerror(errno));
  }
}

RedisProcess::~RedisProcess() {
  stop();
  if (lock_fd_ >= 0) ::close(lock_fd_);
  if (temp_dir_) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

std::string RedisProcess::url() const {
  return port_ > 0 ? "redis://127.0.0.1:" + std::to_string(port_) : unix_url();
}

void RedisProcess::start() {
  std::ofstream conf(dir_ + "/redis.conf");
  conf << "port " << port_ << "\n"
       << "bind 127.0.0.1\n"
       << "unixsocket " << socket_path() << "\n"
       << "unixsocketperm 700\n"
       << "dir " << dir_ << "\n"
       << "save \"\"\n"
       << "appendonly " << (opts_.append_only ? "yes" : "no") << "\n"
       << "appendfsync " << opts_.appendfsync << "\n"
       << "logfile " << dir_ << "/redis.log\n"
       << "daemonize no\n";
  if (opts_.tls) {
    conf << "tls-port " << tls_port_ << "\n"
         << "tls-cert-file " << dir_ << "/cert.pem\n"
         << "tls-key-file " << dir_ << "/key.pem\n"
         << "tls-ca-cert-file " << dir_ << "/cert.pem\n"
         << "tls-auth-clients " << (opts_.tls_client_certs ? "yes" : "no") << "\n";
  }
  for (const auto& line : opts_.config) conf << line << "\n";
  conf.close();
  ::unlink(socket_path().c_str());  // left by a crash
  spawn();
  write_holders();
  wait_until_up();
}

void RedisProcess::spawn() {
  std::string name = opts_.redis_server;
  if (name.empty()) {
    const char* env = std::getenv("REDIS_SERVER");
    name = env != nullptr ? env : "redis-server";
  }
  const std::string binary = find_in_path(name);
  if (binary.empty()) {
    throw std::runtime_error(name +
                             " was not found in PATH: install it (apt-get install redis-server) "
                             "or give --redis URL of a running Redis");
  }
  std::string conf = dir_ + "/redis.conf";
  std::string program = binary;
  char* argv[] = {program.data(), conf.data(), nullptr};
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    if (opts_.die_with_parent) {
      // No orphan: if we die, so does the server (which writes its AOF).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
    }
    // Signals as a process of its own: serve blocks SIGTERM in its threads,
    // and exec keeps the mask.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // It holds the data dir's lock as long as it runs, whoever else exits.
    if (lock_fd_ >= 0) ::fcntl(lock_fd_, F_SETFD, 0);
    // Its output must not hold our stdout open (scripts read it to the end).
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execv(argv[0], argv);
    ::_exit(127);
  }
}

void RedisProcess::wait_until_up() {
  const auto deadline = std::chrono::steady_clock::now() + opts_.start_timeout;
  for (;;) {
    if (port_ > 0 ? port_answers(port_) : redis_socket_answers(socket_path())) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start; its log (" + dir_ + "/redis.log):\n" +
                               log_of(dir_));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error("redis-server did not answer in time; its log (" + dir_ +
                               "/redis.log):\n" + log_of(dir_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void RedisProcess::stop() {
  if (pid_ <= 0) return;
  // SIGTERM makes redis-server write its append-only file and exit.
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 1000; ++i) {
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

void RedisProcess::freeze() { ::kill(pid_, SIGSTOP); }
void RedisProcess::thaw() { ::kill(pid_, SIGCONT); }

}  // namespace redisched::embedded
