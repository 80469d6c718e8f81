// A Redis Cluster of our own: redis-servers started by the one launcher
// (redis_process.h) on ports a cluster accepts, joined by `redis-cli
// --cluster create`. For the tests (tests/testutil/redis_cluster.h adds
// the faults) and the benchmarks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "embedded/redis_process.h"

namespace redisched::embedded {

// primaries × (1 + replicas_per_primary) nodes, the primaries first,
// returned once every node sees the cluster ok. extra_config: more
// redis.conf lines for every node. Throws std::runtime_error saying what
// failed.
std::vector<std::unique_ptr<RedisProcess>> start_cluster(
    int primaries, int replicas_per_primary, const std::vector<std::string>& extra_config = {});

// Whether the node on port sees the cluster ok: every slot served and
// `nodes` nodes known (asked with redis-cli).
bool cluster_ok(int port, int nodes);

}  // namespace redisched::embedded
