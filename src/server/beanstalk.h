// The beanstalkd face of redisched serve (--beanstalk HOST:PORT): beanstalkd
// 1.12's protocol over TCP, each tube a topic, so that beanstalkd's clients
// work unchanged on Redis (docs/beanstalkd.md has the mapping). The
// protocol's framing and parsing are beanstalk_protocol.h; this is the
// listener, the connections and what each command does through the Client.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace redisched {
class Runtime;
}

namespace redisched::server {

struct ApiContext;

struct BeanstalkOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 11300;
  std::size_t max_job_size = 65535;  // beanstalkd's -z and its default
  int max_connections = 10000;       // more are closed at once
  // A command begun (a partial line, or a put's body) must end within this;
  // a connection between commands may stay open and silent for good, as a
  // beanstalkd worker's does.
  std::chrono::milliseconds command_timeout{60000};
};

// Whether address (a name or an IP) means this host only: a name that
// resolves to loopback addresses alone, or a loopback address.
bool loopback_only(const std::string& address);

class BeanstalkServer {
 public:
  // Accepts on the runtime's first shard and serves each connection on one
  // shard, in turn. ctx outlives the server.
  BeanstalkServer(Runtime& runtime, BeanstalkOptions options, ApiContext& ctx);
  ~BeanstalkServer();
  BeanstalkServer(const BeanstalkServer&) = delete;
  BeanstalkServer& operator=(const BeanstalkServer&) = delete;

  // Binds and listens; throws std::runtime_error when it cannot.
  void start();
  std::uint16_t port() const;
  // The drain: stops accepting; puts are answered DRAINING, reserves hand
  // nothing out (a waiting one ends: TIMED_OUT with a timeout, else the
  // connection closes), and connections without reserved jobs close once
  // idle. Any thread.
  void stop();
  // stop(), and closes every connection now; their reserved jobs are
  // released as each session ends. Any thread.
  void abort();
  int connections() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace redisched::server
