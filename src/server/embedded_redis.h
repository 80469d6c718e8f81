// The embedded default: a redis-server of our own, from PATH, on a unix
// socket, with its data and append-only file in a data directory. One per
// data directory (a lock file says whose it is); stopped with us, and never
// left behind: it gets SIGTERM if this process dies.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace redisched::server {

struct EmbeddedRedisOptions {
  std::string data_dir = "redisched-data";
  std::string appendfsync = "everysec";  // always | everysec | no
  std::string redis_server = "redis-server";
  std::chrono::milliseconds start_timeout{10000};
};

// True when a Redis answers PING on the unix socket at path (a serve's, or
// one starting up).
bool redis_socket_answers(const std::string& path);

class EmbeddedRedis {
 public:
  // Starts it and waits until it answers. Throws std::runtime_error saying
  // what to do: install redis-server, stop the other serve, ...
  explicit EmbeddedRedis(EmbeddedRedisOptions options);
  ~EmbeddedRedis();  // stops it (SHUTDOWN, with its append-only file written)
  EmbeddedRedis(const EmbeddedRedis&) = delete;
  EmbeddedRedis& operator=(const EmbeddedRedis&) = delete;

  // unix:///abs/path/redis.sock
  std::string url() const { return "unix://" + socket_; }
  pid_t pid() const { return pid_; }
  void stop();

 private:
  EmbeddedRedisOptions opts_;
  std::string dir_;  // absolute
  std::string socket_;
  int lock_fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace redisched::server
