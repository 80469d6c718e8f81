#include "testutil/redis_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "testutil/redis_cluster.h"

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
RedisCluster* g_shared_cluster = nullptr;

class SharedRedisEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (on_cluster()) {
      g_shared_cluster = new RedisCluster(3, 0);  // no replicas: the fault tests have them
    } else {
      g_shared = new RedisServer();
    }
  }
  void TearDown() override {
    delete g_shared;
    g_shared = nullptr;
    delete g_shared_cluster;
    g_shared_cluster = nullptr;
  }
};
}  // namespace

bool on_cluster() {
  const char* target = std::getenv("REDISCHED_TEST_TARGET");
  return target != nullptr && std::string_view(target) == "cluster";
}

RedisServer& shared_redis() {
  if (on_cluster()) {
    throw std::runtime_error("this test needs a single redis-server (SKIP_ON_CLUSTER)");
  }
  if (g_shared == nullptr) throw std::runtime_error("the shared redis-server is not running");
  return *g_shared;
}

std::vector<int> target_ports() {
  if (on_cluster()) {
    if (g_shared_cluster == nullptr) throw std::runtime_error("the shared cluster is not running");
    return g_shared_cluster->primary_ports();
  }
  return {shared_redis().port()};
}

std::string target_url() {
  if (on_cluster()) {
    if (g_shared_cluster == nullptr) throw std::runtime_error("the shared cluster is not running");
    return g_shared_cluster->url();
  }
  return shared_redis().url();
}

std::string unique_topic() {
  static std::atomic<int> n{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? info->name() : "topic";
  return name + "_" + std::to_string(n++);
}

::testing::Environment* make_shared_redis_environment() { return new SharedRedisEnvironment(); }

}  // namespace redisched::test
