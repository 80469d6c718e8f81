// Prometheus metrics of one server process: counters by topic, latency
// histograms, and (at scrape time) the current counts of every topic.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "redisched/job.h"

namespace redisched::server {

class Metrics {
 public:
  // What happened to jobs through this server: put, reserved, acked,
  // failed, dead, released, pulled, pushed (webhook deliveries).
  void count(const std::string& event, const std::string& topic, std::uint64_t n = 1);
  // count(), and the job's event in the recent list (the dashboard's live feed).
  void job_event(const std::string& event, const std::string& topic, const std::string& id,
                 std::int64_t due_ms = 0);

  struct Event {
    std::uint64_t seq;
    std::int64_t at_ms;  // this host's clock
    std::string event, topic, id;
    std::int64_t due_ms;
  };
  // Events after seq (oldest first; at most the last 500 are kept).
  std::vector<Event> events_since(std::uint64_t seq) const;
  // Every (event, topic) counter.
  std::map<std::pair<std::string, std::string>, std::uint64_t> counters() const;
  // Seconds, into the histogram of name (labels: route or topic). Label
  // values come from a bounded set (route templates, topics), never from
  // what a request sent.
  void observe(const std::string& name, const std::string& label, double seconds);

  // The text format (version 0.0.4, as `promtool check metrics` reads it),
  // with the current counts per state of these topics.
  std::string render(const std::vector<std::pair<std::string, TopicStats>>& topics) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1,    2.5};
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> counters_;  // (event, topic)
  std::map<std::pair<std::string, std::string>, Histogram> histograms_;    // (name, label)
  std::deque<Event> events_;
  std::uint64_t event_seq_ = 0;
};

}  // namespace redisched::server
