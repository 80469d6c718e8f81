#include "testutil/redis_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

namespace redisched::test {

namespace {

embedded::RedisProcessOptions process_options(const RedisServer::Options& o) {
  embedded::RedisProcessOptions p;
  p.port = -1;  // a free one
  p.tls = o.tls;
  p.tls_client_certs = o.tls_client_certs;
  p.append_only = o.append_only;
  p.appendfsync = "always";
  if (!o.extra_config.empty()) p.config.push_back(o.extra_config);
  return p;
}

}  // namespace

RedisServer::RedisServer(Options options) : process_(process_options(options)) {}

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
