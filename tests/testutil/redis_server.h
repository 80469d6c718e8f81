// A real redis-server for tests: started on a free port with a unix socket
// in a temp dir (no snapshots; append-only file on request), stopped and
// removed at the end.
#pragma once

#include <sys/types.h>

#include <string>

namespace redisched::test {

class RedisServer {
 public:
  struct Options {
    bool append_only = false;
    std::string extra_config;       // lines added to redis.conf
    bool tls = false;               // also listen with TLS (a self-signed certificate)
    bool tls_client_certs = false;  // and demand a client certificate (signed by the same)
  };
  // Starts the server; throws std::runtime_error (with the server's log)
  // when it does not come up. The binary is $REDIS_SERVER or redis-server.
  explicit RedisServer(Options options);
  RedisServer() : RedisServer(Options{}) {}
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  std::string unix_url() const { return "unix://" + socket_path(); }
  // With Options::tls: the TLS port and the certificate to trust.
  int tls_port() const { return tls_port_; }
  std::string tls_ca() const { return dir_ + "/cert.pem"; }

  // Stops the server (SIGTERM, then SIGKILL) and starts it again on the same
  // port and dir: with append_only, the data comes back.
  void restart();
  void stop();
  void start();
  // The SIGSTOP/SIGCONT pair, to make the server unresponsive.
  void freeze();
  void thaw();

 private:
  void wait_until_up();
  Options options_;
  std::string dir_;
  int port_ = 0;
  int tls_port_ = 0;
  pid_t pid_ = -1;
};

// The server every test of this binary shares (started by tests/testutil/main.cpp).
RedisServer& shared_redis();

// A topic name no other test uses: <test name>_<n>.
std::string unique_topic();

}  // namespace redisched::test
