// A real Redis Cluster for tests: 3 primaries with a replica each, made of
// the project's redis-server launcher (embedded/redis_process.h) on free
// ports in temp dirs and joined by `redis-cli --cluster create`; stopped and
// removed at the end. It can move one slot between primaries (the
// MIGRATING/IMPORTING protocol, so clients meet ASK and then MOVED).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "embedded/redis_process.h"

namespace redisched::test {

class RawRedis;

class RedisCluster {
 public:
  // Starts and joins the nodes and waits until every node sees the cluster
  // ok; throws std::runtime_error saying what failed.
  explicit RedisCluster(int primaries = 3, int replicas_per_primary = 1);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // redis://127.0.0.1:<port of the first primary>: a seed.
  std::string url() const;
  std::vector<int> ports() const;
  // The port of the primary that serves slot (asked of the cluster now).
  int owner_port(std::uint16_t slot) const;
  // The ports of the primaries, in the order the cluster lists them.
  std::vector<int> primary_ports() const;
  // Moves slot (its keys included) to the primary on to_port; keys move in
  // batches of batch, pausing pause_ms between them, so that clients meet
  // the migration halfway. before_handover runs once every key moved and
  // before the new owner takes the slot (clients meet ASK, then TRYAGAIN
  // for the keys that exist nowhere).
  void move_slot(std::uint16_t slot, int to_port, int batch = 10, int pause_ms = 0,
                 const std::function<void()>& before_handover = {});
  // The port of a replica of the primary on primary_port.
  int replica_of(int primary_port) const;
  // A manual failover (CLUSTER FAILOVER on a replica of the primary on
  // primary_port): the replica takes over once it caught up; returns its
  // port, after every node sees it as the slot's owner.
  int fail_over(int primary_port);
  // SIGKILL of the primary on primary_port; returns once its replica took
  // over (every live node agrees). restart_killed() brings the node back
  // (it rejoins as a replica).
  int kill_primary(int primary_port);
  void restart_killed();
  // SIGSTOP and SIGCONT of the node on port: unresponsive meanwhile (shorter
  // than the cluster's node timeout, it is not failed over).
  void freeze(int port);
  void thaw(int port);
  // How many error replies of a kind (MOVED, ASK, TRYAGAIN...) the node on
  // port gave (INFO errorstats).
  static long errors_given(int port, const std::string& kind);

 private:
  void wait_until_ok() const;
  void wait_until_primary(int port, std::uint16_t slot) const;
  std::uint16_t any_slot_of(int primary_port) const;
  static int owner_port_as_seen_by(RawRedis& r, std::uint16_t slot);
  embedded::RedisProcess& node(int port);
  bool killed(const embedded::RedisProcess* n) const;
  std::vector<std::unique_ptr<embedded::RedisProcess>> nodes_;
  std::vector<embedded::RedisProcess*> killed_;
};

}  // namespace redisched::test
