#include "cli/session.h"

#include <filesystem>

#include "embedded/redis_process.h"
#include "redisched/client.h"

namespace redisched::cli {

Session::Session(GlobalOptions options) : options_(std::move(options)) {}

Session::~Session() = default;

std::string Session::redis_url() {
  if (!options_.redis_url.empty()) return options_.redis_url;
  if (embedded_) return embedded_->unix_url();
  const std::string sock =
      std::filesystem::absolute(options_.data_dir).lexically_normal().string() + "/redis.sock";
  if (embedded::redis_socket_answers(sock)) return "unix://" + sock;
  embedded_ = std::make_unique<embedded::RedisProcess>(
      embedded::embedded_default(options_.data_dir, "everysec"));
  return embedded_->unix_url();
}

Client& Session::client() {
  if (!client_) {
    ClientOptions o;
    o.redis_url = redis_url();
    o.prefix = options_.prefix;
    o.replicas = options_.replicas;
    o.replica_timeout = Millis{options_.replica_timeout_ms};
    client_ = std::make_unique<Client>(o);
  }
  return *client_;
}

}  // namespace redisched::cli
