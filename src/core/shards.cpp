#include "core/shards.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "redis/cluster.h"
#include "redisched/error.h"

namespace redisched::core {

std::string shard_topic(std::string_view topic, std::string_view suffix) {
  std::string out;
  out.reserve(topic.size() + suffix.size() + 1);
  out.append(topic).append("~").append(suffix);
  return out;
}

std::size_t shard_index(std::string_view id, std::size_t n) { return redis::crc16(id) % n; }

std::vector<std::string> place_shards(std::string_view topic, int generation, int n) {
  if (n < 1 || n > kShardsMax) {
    throw Error(Errc::invalid_argument, "shards must be from 1 to " + std::to_string(kShardsMax));
  }
  std::vector<std::string> out;
  std::set<int> used;
  const std::string prefix = std::to_string(generation) + "-";
  for (int k = 0; k < n; ++k) {
    const int lo = k * redis::kSlots / n;
    const int hi = (k + 1) * redis::kSlots / n;
    for (int j = 0;; ++j) {
      if (used.count(j) != 0) continue;
      // The keys' hash tag is the whole shard topic (core/keys.h), which
      // holds no braces: its slot is its own.
      const int slot = redis::hash_slot(shard_topic(topic, prefix + std::to_string(j)));
      if (slot >= lo && slot < hi) {
        used.insert(j);
        out.push_back(prefix + std::to_string(j));
        break;
      }
    }
  }
  return out;
}

int shard_generation(const std::vector<std::string>& suffixes) {
  int g = 0;
  for (const auto& s : suffixes) {
    const auto dash = s.find('-');
    int v = 0;
    auto [end, ec] =
        std::from_chars(s.data(), s.data() + (dash == std::string::npos ? 0 : dash), v);
    if (ec == std::errc() && v > g) g = v;
  }
  return g;
}

TopicStats merge_stats(const std::vector<TopicStats>& parts, std::size_t n) {
  TopicStats all;
  all.shards = static_cast<std::int64_t>(n);
  all.paused = !parts.empty();
  for (const auto& p : parts) {
    all.delayed += p.delayed;
    all.ready += p.ready;
    all.reserved += p.reserved;
    all.dead += p.dead;
    all.done += p.done;
    all.blocked += p.blocked;
    all.outbox += p.outbox;
    all.paused = all.paused && p.paused;
    all.next_due_ms = earlier_time(all.next_due_ms, p.next_due_ms);
    // (paused while every shard is: until the first shard's pause ends)
    all.pause_end_ms = earlier_time(all.pause_end_ms, p.pause_end_ms);
    add_totals(all, p);
  }
  if (!all.paused) all.pause_end_ms = -1;
  return all;
}

void add_totals(TopicStats& to, const TopicStats& from) {
  to.failed_total += from.failed_total;
  to.dead_total += from.dead_total;
  to.lapsed_total += from.lapsed_total;
  to.put_total += from.put_total;
  to.started_total += from.started_total;
  to.done_total += from.done_total;
  to.wait_total_ms += from.wait_total_ms;
}

std::vector<HistoryRow> merge_history(std::vector<std::vector<HistoryRow>> parts) {
  std::map<std::int64_t, HistoryRow> by_time;
  for (const auto& part : parts) {
    for (const auto& r : part) {
      HistoryRow& a = by_time[r.at_ms];
      a.at_ms = r.at_ms;
      a.put += r.put;
      a.started += r.started;
      a.done += r.done;
      a.failed += r.failed;
      a.dead += r.dead;
      a.lapsed += r.lapsed;
      a.wait_ms += r.wait_ms;
    }
  }
  std::vector<HistoryRow> rows;
  rows.reserve(by_time.size());
  for (auto& [t, r] : by_time) rows.push_back(r);
  return rows;
}

std::string random_job_id() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  char out[48];
  std::snprintf(out, sizeof out, "%lld-%016llx", static_cast<long long>(ms),
                static_cast<unsigned long long>(gen()));
  return out;
}

Layout::Layout(std::string name, std::vector<std::string> list)
    : topic(std::move(name)), suffixes(std::move(list)) {
  // A former shard ("*") holds no jobs of a list of its own.
  if (suffixes.size() == 1 && suffixes.front() == "*") return;
  shards.reserve(suffixes.size());
  for (const auto& s : suffixes) shards.push_back(shard_topic(topic, s));
}

}  // namespace redisched::core
