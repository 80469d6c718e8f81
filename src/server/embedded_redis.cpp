#include "server/embedded_redis.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

namespace redisched::server {
namespace {

namespace fs = std::filesystem;

}  // namespace

bool redis_socket_answers(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    ::close(fd);
    return false;
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const char ping[] = "PING\r\n";
    char buf[16] = {};
    if (::write(fd, ping, sizeof(ping) - 1) == sizeof(ping) - 1) {
      ok = ::read(fd, buf, sizeof(buf)) > 0 && std::strncmp(buf, "+PONG", 5) == 0;
    }
  }
  ::close(fd);
  return ok;
}

namespace {

std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return fs::exists(program) ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = dirs.find(':', start);
    const std::string dir =
        dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

}  // namespace

EmbeddedRedis::EmbeddedRedis(EmbeddedRedisOptions options) : opts_(std::move(options)) {
  if (opts_.appendfsync != "always" && opts_.appendfsync != "everysec" &&
      opts_.appendfsync != "no") {
    throw std::runtime_error("--fsync must be always, everysec or no, got " + opts_.appendfsync);
  }
  const std::string binary = find_in_path(opts_.redis_server);
  if (binary.empty()) {
    throw std::runtime_error(opts_.redis_server +
                             " was not found in PATH: install it (apt-get install redis-server) "
                             "or give --redis URL of a running Redis");
  }
  std::error_code ec;
  fs::create_directories(opts_.data_dir, ec);
  if (ec) throw std::runtime_error("cannot create " + opts_.data_dir + ": " + ec.message());
  dir_ = fs::absolute(opts_.data_dir).lexically_normal().string();
  if (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  socket_ = dir_ + "/redis.sock";
  if (socket_.size() >= sizeof(sockaddr_un{}.sun_path)) {
    throw std::runtime_error("the data directory path is too long for a unix socket: " + dir_);
  }

  // One serve per data directory.
  const std::string lock = dir_ + "/redisched.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) throw std::runtime_error("cannot open " + lock + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw std::runtime_error("another redisched serve is using " + dir_ +
                             " (its lock file is held): stop it, or give another --data-dir");
  }
  ::unlink(socket_.c_str());  // left by a crash: the lock says nobody owns it

  std::vector<std::string> args = {binary,
                                   "--port",
                                   "0",
                                   "--unixsocket",
                                   socket_,
                                   "--unixsocketperm",
                                   "700",
                                   "--dir",
                                   dir_,
                                   "--appendonly",
                                   "yes",
                                   "--appendfsync",
                                   opts_.appendfsync,
                                   "--save",
                                   "",
                                   "--logfile",
                                   dir_ + "/redis.log",
                                   "--daemonize",
                                   "no"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // No orphan: if serve dies, so does its Redis (which writes its AOF).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + opts_.start_timeout;
  while (!redis_socket_answers(socket_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start; see " + dir_ + "/redis.log");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error("redis-server did not answer within the start timeout; see " + dir_ +
                               "/redis.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

EmbeddedRedis::~EmbeddedRedis() { stop(); }

void EmbeddedRedis::stop() {
  if (pid_ > 0) {
    // SIGTERM makes redis-server flush its append-only file and exit.
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 1000; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) break;
      if (i == 999) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

}  // namespace redisched::server
