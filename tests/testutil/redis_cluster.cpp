#include "testutil/redis_cluster.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "testutil/raw_redis.h"

namespace redisched::test {
namespace {

std::string field_of(const std::string& info, const std::string& name) {
  const auto at = info.find(name + ":");
  if (at == std::string::npos) return {};
  const auto start = at + name.size() + 1;
  return info.substr(start, info.find_first_of("\r\n", start) - start);
}

std::string node_id(int port) {
  RawRedis r(port);
  auto id = r.call({"CLUSTER", "MYID"});
  return id->str;
}

}  // namespace

RedisCluster::RedisCluster(int primaries, int replicas_per_primary) {
  const int total = primaries * (1 + replicas_per_primary);
  for (int i = 0; i < total; ++i) {
    embedded::RedisProcessOptions o;
    o.port = -1;
    o.die_with_parent = true;
    o.config = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                "cluster-node-timeout 1000", "cluster-require-full-coverage no",
                "cluster-allow-replica-migration no"};
    nodes_.push_back(std::make_unique<embedded::RedisProcess>(o));
  }
  std::string cmd = "redis-cli --cluster create";
  for (const auto& n : nodes_) cmd += " 127.0.0.1:" + std::to_string(n->port());
  cmd += " --cluster-replicas " + std::to_string(replicas_per_primary) + " --cluster-yes";
  cmd += " > " + nodes_.front()->dir() + "/create.log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    throw std::runtime_error("redis-cli --cluster create failed; see " + nodes_.front()->dir() +
                             "/create.log");
  }
  wait_until_ok();
}

RedisCluster::~RedisCluster() = default;

std::string RedisCluster::url() const {
  return "redis://127.0.0.1:" + std::to_string(primary_ports().front());
}

std::vector<int> RedisCluster::ports() const {
  std::vector<int> out;
  for (const auto& n : nodes_) out.push_back(n->port());
  return out;
}

void RedisCluster::wait_until_ok() const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    bool ok = true;
    for (const auto& n : nodes_) {
      RawRedis r(n->port());
      auto info = r.call({"CLUSTER", "INFO"});
      if (field_of(info->str, "cluster_state") != "ok" ||
          field_of(info->str, "cluster_slots_ok") != "16384" ||
          field_of(info->str, "cluster_known_nodes") != std::to_string(nodes_.size())) {
        ok = false;
        break;
      }
    }
    if (ok) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("the cluster did not come up in 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<int> RedisCluster::primary_ports() const {
  std::vector<int> out;
  for (const auto& n : nodes_) {
    RawRedis r(n->port());
    auto role = r.call({"ROLE"});
    if (role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
        std::string(role->element[0]->str) == "master") {
      out.push_back(n->port());
    }
  }
  return out;
}

int RedisCluster::owner_port(std::uint16_t slot) const {
  RawRedis r(primary_ports().front());
  auto slots = r.call({"CLUSTER", "SLOTS"});
  for (size_t i = 0; i < slots->elements; ++i) {
    const redisReply* range = slots->element[i];
    if (range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
      return static_cast<int>(range->element[2]->element[1]->integer);
    }
  }
  throw std::runtime_error("no primary serves slot " + std::to_string(slot));
}

void RedisCluster::move_slot(std::uint16_t slot, int to_port, int batch, int pause_ms) {
  const int from_port = owner_port(slot);
  if (from_port == to_port) return;
  const std::string s = std::to_string(slot);
  const std::string from_id = node_id(from_port);
  const std::string to_id = node_id(to_port);
  RawRedis from(from_port);
  RawRedis to(to_port);
  to.call({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id});
  from.call({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id});
  for (;;) {
    auto keys = from.call({"CLUSTER", "GETKEYSINSLOT", s, std::to_string(batch)});
    if (keys->elements == 0) break;
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0",
                                        "5000",    "KEYS"};
    for (size_t i = 0; i < keys->elements; ++i) migrate.emplace_back(keys->element[i]->str);
    auto r = from.call(migrate);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("MIGRATE: " + std::string(r->str));
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  // The new owner first, then the old, then everyone else (as redis-cli does).
  to.call({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  from.call({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  for (int port : primary_ports()) {
    if (port == from_port || port == to_port) continue;
    RawRedis other(port);
    other.call({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  }
}

long RedisCluster::errors_given(int port, const std::string& kind) {
  RawRedis r(port);
  auto info = r.call({"INFO", "errorstats"});
  const std::string count = field_of(info->str, "errorstat_" + kind);  // count=N
  return count.rfind("count=", 0) == 0 ? std::stol(count.substr(6)) : 0;
}

}  // namespace redisched::test
