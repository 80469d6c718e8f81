#include "testutil/redis_cluster.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "embedded/redis_cluster.h"
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

RedisCluster::RedisCluster(int primaries, int replicas_per_primary)
    : nodes_(embedded::start_cluster(primaries, replicas_per_primary)) {}

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
  for (const auto& n : nodes_) {
    while (!embedded::cluster_ok(n->port(), static_cast<int>(nodes_.size()))) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("the cluster did not come up in 30 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

std::vector<int> RedisCluster::primary_ports() const {
  std::vector<int> out;
  for (const auto& n : nodes_) {
    if (killed(n.get())) continue;
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
  return owner_port_as_seen_by(r, slot);
}

int RedisCluster::owner_port_as_seen_by(RawRedis& r, std::uint16_t slot) {
  auto slots = r.call({"CLUSTER", "SLOTS"});
  for (size_t i = 0; i < slots->elements; ++i) {
    const redisReply* range = slots->element[i];
    if (range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
      return static_cast<int>(range->element[2]->element[1]->integer);
    }
  }
  throw std::runtime_error("no primary serves slot " + std::to_string(slot));
}

void RedisCluster::move_slot(std::uint16_t slot, int to_port, int batch, int pause_ms,
                             const std::function<void()>& before_handover) {
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
  if (before_handover) before_handover();
  // The new owner first, then the old, then everyone else (as redis-cli does).
  to.call({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  from.call({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  for (int port : primary_ports()) {
    if (port == from_port || port == to_port) continue;
    RawRedis other(port);
    other.call({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  }
}

bool RedisCluster::killed(const embedded::RedisProcess* n) const {
  return std::find(killed_.begin(), killed_.end(), n) != killed_.end();
}

embedded::RedisProcess& RedisCluster::node(int port) {
  for (auto& n : nodes_) {
    if (n->port() == port) return *n;
  }
  throw std::runtime_error("no node on port " + std::to_string(port));
}

int RedisCluster::replica_of(int primary_port) const {
  for (const auto& n : nodes_) {
    if (killed(n.get())) continue;
    RawRedis r(n->port());
    auto role = r.call({"ROLE"});
    if (role->type == REDIS_REPLY_ARRAY && role->elements >= 3 &&
        std::string(role->element[0]->str) == "slave" &&
        role->element[2]->integer == primary_port) {
      return n->port();
    }
  }
  throw std::runtime_error("the primary on " + std::to_string(primary_port) + " has no replica");
}

// Every live node sees the node on port serve slot.
void RedisCluster::wait_until_primary(int port, std::uint16_t slot) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    bool agreed = true;
    for (const auto& n : nodes_) {
      if (killed(n.get())) continue;
      RawRedis r(n->port());
      try {
        if (owner_port_as_seen_by(r, slot) != port) agreed = false;
      } catch (const std::runtime_error&) {
        agreed = false;
      }
    }
    if (agreed) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("the cluster did not agree on the new primary in 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int RedisCluster::fail_over(int primary_port) {
  const std::uint16_t slot = any_slot_of(primary_port);
  const int replica = replica_of(primary_port);
  RawRedis r(replica);
  auto ok = r.call({"CLUSTER", "FAILOVER"});
  if (ok->type == REDIS_REPLY_ERROR)
    throw std::runtime_error("CLUSTER FAILOVER: " + std::string(ok->str));
  wait_until_primary(replica, slot);
  return replica;
}

void RedisCluster::freeze(int port) { node(port).freeze(); }
void RedisCluster::thaw(int port) { node(port).thaw(); }

int RedisCluster::kill_primary(int primary_port) {
  const std::uint16_t slot = any_slot_of(primary_port);
  const int replica = replica_of(primary_port);
  embedded::RedisProcess& victim = node(primary_port);
  ::kill(victim.pid(), SIGKILL);
  killed_.push_back(&victim);
  wait_until_primary(replica, slot);
  return replica;
}

void RedisCluster::restart_killed() {
  for (auto* n : killed_) n->restart();  // reaps the killed process first
  killed_.clear();
  wait_until_ok();
}

std::uint16_t RedisCluster::any_slot_of(int primary_port) const {
  RawRedis r(primary_port);
  auto slots = r.call({"CLUSTER", "SLOTS"});
  for (size_t i = 0; i < slots->elements; ++i) {
    const redisReply* range = slots->element[i];
    if (range->element[2]->element[1]->integer == primary_port) {
      return static_cast<std::uint16_t>(range->element[0]->integer);
    }
  }
  throw std::runtime_error("the node on " + std::to_string(primary_port) + " serves no slot");
}

long RedisCluster::errors_given(int port, const std::string& kind) {
  RawRedis r(port);
  auto info = r.call({"INFO", "errorstats"});
  const std::string count = field_of(info->str, "errorstat_" + kind);  // count=N
  return count.rfind("count=", 0) == 0 ? std::stol(count.substr(6)) : 0;
}

}  // namespace redisched::test
