// A redis-server of our own, as a child process: the one launcher behind the
// embedded default of `redisched serve` and the CLI, the tests' servers and
// the benchmarks' (three copies of this used to exist). It starts the
// server, waits until it answers, and stops it (SIGTERM: an append-only file
// is written); it can also freeze and thaw it, and start it again on the same
// port and directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace redisched::embedded {

struct RedisProcessOptions {
  // Where its files go (created); empty: a new temp dir, removed at the end.
  std::string dir;
  // TCP on 127.0.0.1: 0 = none (the unix socket only), -1 = a free port.
  int port = 0;
  // Also listen with TLS (a self-signed certificate made in dir) on a free
  // port; with tls_client_certs, demand a client certificate signed by it.
  bool tls = false;
  bool tls_client_certs = false;
  bool append_only = false;
  std::string appendfsync = "everysec";  // always | everysec | no
  std::vector<std::string> config;       // more redis.conf lines
  // One redis-server per dir: a lock file in it is held while this lives
  // and while its redis-server runs. A second one fails, naming the pid of
  // the first; while only the first's redis-server is left (finishing its
  // append-only file), it waits for it, up to start_timeout.
  bool exclusive = false;
  // The server gets SIGTERM when this process dies (no orphan).
  bool die_with_parent = false;
  // The binary: a name looked up in PATH, or a path. Empty: $REDIS_SERVER,
  // else redis-server.
  std::string redis_server;
  std::chrono::milliseconds start_timeout{10000};
};

// True when a Redis answers PING (or NOAUTH) on the unix socket at path.
bool redis_socket_answers(const std::string& path);

// The embedded default of `redisched serve` (and of a CLI command when no
// serve runs there): data and append-only file in dir, the unix socket
// only, one per dir, never outliving us.
RedisProcessOptions embedded_default(const std::string& dir, const std::string& appendfsync);

class RedisProcess {
 public:
  // Starts it and waits until it answers; throws std::runtime_error saying
  // what to do (install redis-server, stop the other serve, its log...).
  explicit RedisProcess(RedisProcessOptions options);
  ~RedisProcess();  // stops it; removes a temp dir
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  void stop();
  void start();  // again, same port and dir (with append_only, the data comes back)
  void restart() {
    stop();
    start();
  }
  void freeze();  // SIGSTOP: unresponsive until thaw()
  void thaw();

  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }          // 0 without TCP
  int tls_port() const { return tls_port_; }  // 0 without TLS
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  std::string tls_ca() const { return dir_ + "/cert.pem"; }
  std::string url() const;  // redis://127.0.0.1:port, else unix://socket
  std::string unix_url() const { return "unix://" + socket_path(); }

 private:
  void take_dir();
  void write_holders();
  void spawn();
  void wait_until_up();
  RedisProcessOptions opts_;
  std::string dir_;  // absolute
  bool temp_dir_ = false;
  int port_ = 0;
  int tls_port_ = 0;
  int lock_fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace redisched::embedded
