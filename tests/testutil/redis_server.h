// A real redis-server for tests (the project's one launcher,
// embedded/redis_process.h): on a free port and a unix socket in a temp dir,
// no snapshots, an append-only file on request; stopped and removed at the
// end.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embedded/redis_process.h"

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
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return process_.port(); }
  const std::string& dir() const { return process_.dir(); }
  std::string socket_path() const { return process_.socket_path(); }
  std::string url() const { return process_.url(); }
  std::string unix_url() const { return process_.unix_url(); }
  // With Options::tls: the TLS port and the certificate to trust.
  int tls_port() const { return process_.tls_port(); }
  std::string tls_ca() const { return process_.tls_ca(); }

  // Stops the server (SIGTERM, then SIGKILL) and starts it again on the same
  // port and dir: with append_only, the data comes back.
  void restart() { process_.restart(); }
  void stop() { process_.stop(); }
  void start() { process_.start(); }
  // The SIGSTOP/SIGCONT pair, to make the server unresponsive.
  void freeze() { process_.freeze(); }
  void thaw() { process_.thaw(); }

 private:
  embedded::RedisProcess process_;
};

// The Redis the suites run against, started by tests/testutil/main.cpp for
// the binary: one redis-server, or with REDISCHED_TEST_TARGET=cluster in the
// environment a Redis Cluster of 3 primaries (the same tests, two targets).
bool on_cluster();
// Its URL (on a cluster, a seed).
std::string target_url();
// The ports of its nodes that hold keys (one, or the cluster's primaries).
std::vector<int> target_ports();
// The single server: for tests that look at one node's keys, restart it or
// replicate it; they skip on a cluster (SKIP_ON_CLUSTER) and say why.
RedisServer& shared_redis();

#define SKIP_ON_CLUSTER(why)                                    \
  do {                                                          \
    if (::redisched::test::on_cluster()) GTEST_SKIP() << (why); \
  } while (0)

// A topic name no other test uses: <test name>_<n>.
std::string unique_topic();

}  // namespace redisched::test
