// What every CLI command shares: the global options, and the Redis it talks
// to, found and connected once, when the command first needs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace redisched {
class Client;
namespace embedded {
class RedisProcess;
}
}  // namespace redisched

namespace redisched::cli {

struct GlobalOptions {
  std::string redis_url;  // empty: the embedded default in data_dir
  std::string data_dir = "redisched-data";
  std::string prefix = "redisched";
  int replicas = 0;  // ClientOptions::replicas
  std::int64_t replica_timeout_ms = 1000;
  bool json = false;
};

class Session {
 public:
  explicit Session(GlobalOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const GlobalOptions& options() const { return options_; }
  bool json() const { return options_.json; }
  // --redis, else the Redis of a serve running on --data-dir, else a
  // redis-server started there for this command (stopped with the session).
  std::string redis_url();
  // A Client on redis_url(), made at the first call.
  Client& client();

 private:
  GlobalOptions options_;
  std::unique_ptr<embedded::RedisProcess> embedded_;
  std::unique_ptr<Client> client_;
};

// What the parsed subcommand does; returns the exit status.
using Action = std::function<int(Session&)>;

}  // namespace redisched::cli
