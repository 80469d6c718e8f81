#include "server/metrics.h"

#include <fmt/format.h>

#include <chrono>

namespace redisched::server {

void Metrics::count(const std::string& event, const std::string& topic, std::uint64_t n) {
  std::lock_guard lock(mu_);
  counters_[{event, topic}] += n;
}

void Metrics::job_event(const std::string& event, const std::string& topic, const std::string& id,
                        std::int64_t due_ms) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  std::lock_guard lock(mu_);
  counters_[{event, topic}] += 1;
  events_.push_back({++event_seq_, now, event, topic, id, due_ms});
  if (events_.size() > 500) events_.pop_front();
}

std::vector<Metrics::Event> Metrics::events_since(std::uint64_t seq) const {
  std::lock_guard lock(mu_);
  std::vector<Event> out;
  for (const auto& e : events_) {
    if (e.seq > seq) out.push_back(e);
  }
  return out;
}

std::map<std::pair<std::string, std::string>, std::uint64_t> Metrics::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void Metrics::observe(const std::string& name, const std::string& label, double seconds) {
  std::lock_guard lock(mu_);
  auto& h = histograms_[{name, label}];
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++h.buckets[i];
  }
  ++h.count;
  h.sum += seconds;
}

std::string Metrics::render(const std::map<std::string, TopicStats>& topics) const {
  std::string out;
  out += "# HELP redisched_jobs Jobs per topic and state, now.\n# TYPE redisched_jobs gauge\n";
  for (const auto& [topic, s] : topics) {
    const std::pair<const char*, std::int64_t> states[] = {{"delayed", s.delayed},
                                                           {"ready", s.ready},
                                                           {"reserved", s.reserved},
                                                           {"dead", s.dead},
                                                           {"done", s.done}};
    for (const auto& [state, n] : states) {
      out += fmt::format("redisched_jobs{{topic=\"{}\",state=\"{}\"}} {}\n", topic, state, n);
    }
  }
  out +=
      "# HELP redisched_topic_paused 1 when the topic is paused.\n"
      "# TYPE redisched_topic_paused gauge\n";
  for (const auto& [topic, s] : topics) {
    out += fmt::format("redisched_topic_paused{{topic=\"{}\"}} {}\n", topic, s.paused ? 1 : 0);
  }
  out +=
      "# HELP redisched_topic_failed Failed attempts per topic, all processes.\n"
      "# TYPE redisched_topic_failed counter\n";
  for (const auto& [topic, s] : topics) {
    out += fmt::format("redisched_topic_failed_total{{topic=\"{}\"}} {}\n", topic, s.failed_total);
    out += fmt::format("redisched_topic_dead_total{{topic=\"{}\"}} {}\n", topic, s.dead_total);
    out += fmt::format("redisched_topic_lapsed_total{{topic=\"{}\"}} {}\n", topic, s.lapsed_total);
  }
  std::lock_guard lock(mu_);
  out +=
      "# HELP redisched_events_total Jobs put, reserved, acked, failed, dead, released, "
      "pulled and pushed through this server.\n# TYPE redisched_events_total counter\n";
  for (const auto& [key, n] : counters_) {
    out += fmt::format("redisched_events_total{{event=\"{}\",topic=\"{}\"}} {}\n", key.first,
                       key.second, n);
  }
  std::string last;
  for (const auto& [key, h] : histograms_) {
    const auto& [name, label] = key;
    if (name != last) {
      out += fmt::format(
          "# HELP redisched_{0}_seconds Latency of {0}.\n"
          "# TYPE redisched_{0}_seconds histogram\n",
          name);
      last = name;
    }
    const std::string l = name == "request" ? "route" : "topic";
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      out += fmt::format("redisched_{}_seconds_bucket{{{}=\"{}\",le=\"{}\"}} {}\n", name, l, label,
                         kBuckets[i], h.buckets[i]);
    }
    out += fmt::format("redisched_{}_seconds_bucket{{{}=\"{}\",le=\"+Inf\"}} {}\n", name, l, label,
                       h.count);
    out += fmt::format("redisched_{}_seconds_sum{{{}=\"{}\"}} {}\n", name, l, label, h.sum);
    out += fmt::format("redisched_{}_seconds_count{{{}=\"{}\"}} {}\n", name, l, label, h.count);
  }
  return out;
}

}  // namespace redisched::server
