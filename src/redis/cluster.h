// Redis Cluster's rules, without I/O: which slot a key lives in, where a
// redirection points, and the slot map CLUSTER SHARDS describes
// (https://redis.io/docs/reference/cluster-spec/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.h"

namespace redisched::redis {

inline constexpr int kSlots = 16384;

// CRC-16/XMODEM of the bytes (Redis Cluster's key hash; also where a job of
// a spread topic goes, core/shards.h).
std::uint16_t crc16(std::string_view bytes);

// The slot of a key: CRC16 (XMODEM) of its hash tag (the first {...} that
// is not empty) or of the whole key, modulo 16384.
std::uint16_t hash_slot(std::string_view key);

// A MOVED or ASK error reply: the slot and the node (host:port) to ask.
struct Redirect {
  bool ask = false;  // ASK: this one command, after ASKING; MOVED: the slot moved
  std::uint16_t slot = 0;
  std::string host;
  std::uint16_t port = 0;
};
std::optional<Redirect> parse_redirect(std::string_view error);

// An error reply that says the cluster cannot answer now, but may soon
// (TRYAGAIN during a slot migration, CLUSTERDOWN during a failover).
bool cluster_busy(std::string_view error);

// An answer to CLUSTER SHARDS that means a single node: cluster support
// off, or CLUSTER not there or not allowed (which no cluster client can do
// without). LOADING, BUSY and the like mean: ask again.
bool cluster_disabled(std::string_view error);

// One primary and the slot ranges it serves (inclusive).
struct ShardPrimary {
  std::string host;  // the endpoint clients should use
  std::uint16_t port = 0;
  std::uint16_t tls_port = 0;  // 0: none
  std::vector<std::pair<std::uint16_t, std::uint16_t>> slots;
};

// The primaries of a CLUSTER SHARDS reply (Redis 7) that serve slots and
// are online. Throws Error (Errc::protocol) for a reply of another shape.
std::vector<ShardPrimary> parse_cluster_shards(const Reply& reply);

}  // namespace redisched::redis
