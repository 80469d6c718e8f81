#include "testutil/redis_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
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

bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// A cluster node needs its port at most 55535 and the bus port (+10000)
// free too: ports below the kernel's ephemeral range, tried at random.
int free_cluster_port() {
  static std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 29999);
  for (int tries = 0; tries < 1000; ++tries) {
    const int port = pick(random);
    if (port_free(port) && port_free(port + 10000)) return port;
  }
  throw std::runtime_error("no free port pair for a cluster node");
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
    o.die_with_parent = true;
    o.config = {"cluster-enabled yes",
                "cluster-config-file nodes.conf",
                "cluster-node-timeout 1000",
                "cluster-require-full-coverage no",
                "cluster-allow-replica-migration no",
                "repl-diskless-sync-delay 0"};
    // Another process may take the port first: a few tries.
    for (int attempt = 1;; ++attempt) {
      o.port = free_cluster_port();
      try {
        nodes_.push_back(std::make_unique<embedded::RedisProcess>(o));
        break;
      } catch (const std::runtime_error&) {
        if (attempt == 3) throw;
      }
    }
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
      if (killed(n.get())) continue;
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
