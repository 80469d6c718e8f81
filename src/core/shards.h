// A topic spread over shard topics (Client::set_shards; docs/redis-api.md,
// "A topic over many shards"): their names, where a job goes, and where a
// new list of shards is placed. No I/O.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redisched/job.h"
#include "redisched/limits.h"

namespace redisched::core {

inline constexpr int kShardsMax = static_cast<int>(limits::kShardsMax);

// "<topic>~<suffix>": '~' is no topic character, so a shard topic never
// meets a topic of the user's.
std::string shard_topic(std::string_view topic, std::string_view suffix);
// The topic a shard topic belongs to (any other topic: itself).
inline std::string_view base_topic(std::string_view topic) {
  return topic.substr(0, topic.find('~'));
}

// The shard of n that holds the job id: CRC-16/XMODEM of the id's bytes,
// modulo n (the same for every client, in any language).
std::size_t shard_index(std::string_view id, std::size_t n);

// Suffixes for n shards of topic, "<generation>-<j>", the k-th chosen so
// that its slot lies in the k-th n-th of Redis Cluster's 16384 slots: on a
// cluster whose primaries hold even runs of slots in order (as
// `redis-cli --cluster create` and `rebalance` leave them) the shards land
// on different primaries, up to one per primary.
std::vector<std::string> place_shards(std::string_view topic, int generation, int n);
// The generation of a list of suffixes place_shards made (0 for none).
int shard_generation(const std::vector<std::string>& suffixes);

// Where a topic's jobs live: its own keys (no shards), or its shards.
struct Layout {
  std::string topic;
  std::vector<std::string> suffixes;         // as redisched_shards lists them
  std::vector<std::string> shards;           // their topics, in that order
  mutable std::atomic<std::size_t> turn{0};  // the shard a reserve asks first, in turn

  Layout(std::string name, std::vector<std::string> list);
  bool spread() const { return !shards.empty(); }
  // The topic that holds (or will hold) the job id.
  const std::string& topic_for(std::string_view id) const {
    return shards.empty() ? topic : shards[shard_index(id, shards.size())];
  }
};
using LayoutPtr = std::shared_ptr<const Layout>;

// A spread topic's stats: the sums of its shards' (n of them).
TopicStats merge_stats(const std::vector<TopicStats>& parts, std::size_t n);
// Adds from's totals (failed, dead, lapsed; its history's) to to's.
void add_totals(TopicStats& to, const TopicStats& from);
// A spread topic's history: its shards' rows summed by time, in time order.
std::vector<HistoryRow> merge_history(std::vector<std::vector<HistoryRow>> parts);
// The earlier of two times where -1 is "none" (a reserve's next, a
// requeue's deadline); 0 ("now") is the earliest.
inline std::int64_t earlier_time(std::int64_t a, std::int64_t b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return a < b ? a : b;
}
// An id for add on a spread topic: "<ms since the epoch>-<16 random hex digits>".
std::string random_job_id();

}  // namespace redisched::core
