#include "server/metrics.h"

#include <fmt/format.h>

#include <chrono>

#include "redisched/version.h"

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

namespace {

// A label value as the text format wants it: backslash, quote and newline
// escaped.
std::string label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string Metrics::render(const std::vector<std::pair<std::string, TopicStats>>& topics) const {
  std::string out;
  family(out, "redisched_build_info", "gauge",
         "1, labelled with this server's release and its Functions library version.");
  out += fmt::format("redisched_build_info{{version=\"{}\",library_version=\"{}\"}} 1\n", version(),
                     functions_library_version());
  family(out, "redisched_jobs", "gauge", "Jobs per topic and state, now.");
  for (const auto& [topic, s] : topics) {
    const std::pair<const char*, std::int64_t> states[] = {
        {"delayed", s.delayed}, {"ready", s.ready}, {"reserved", s.reserved},
        {"dead", s.dead},       {"done", s.done},   {"blocked", s.blocked}};
    for (const auto& [state, n] : states) {
      out +=
          fmt::format("redisched_jobs{{topic=\"{}\",state=\"{}\"}} {}\n", label(topic), state, n);
    }
  }
  family(out, "redisched_topic_paused", "gauge", "1 when the topic is paused.");
  for (const auto& [topic, s] : topics) {
    out +=
        fmt::format("redisched_topic_paused{{topic=\"{}\"}} {}\n", label(topic), s.paused ? 1 : 0);
  }
  // The limits, in base units (promtool refuses abbreviated ones).
  const std::pair<const char*, const char*> limit_gauges[] = {
      {"redisched_topic_limit_rate", "Jobs the topic hands out per window at most (0: no limit)."},
      {"redisched_topic_limit_window_seconds", "The window of the topic's rate limit (0: none)."},
      {"redisched_topic_limit_concurrency",
       "Jobs of the topic reserved at once at most (0: no cap)."},
      {"redisched_topic_limit_used", "Jobs handed out in the rate's current window."},
      {"redisched_topic_limit_aging_seconds",
       "Waiting a level of priority is worth under priority aging (0: none)."}};
  for (std::size_t g = 0; g < std::size(limit_gauges); ++g) {
    family(out, limit_gauges[g].first, "gauge", limit_gauges[g].second);
    for (const auto& [topic, s] : topics) {
      const double v =
          g == 0   ? s.limits.rate
          : g == 1 ? (s.limits.rate > 0 ? static_cast<double>(s.limits.window.count()) / 1000 : 0)
          : g == 2 ? s.limits.concurrency
          : g == 3 ? static_cast<double>(s.limit_used)
                   : static_cast<double>(s.limits.aging.count()) / 1000;
      out += fmt::format("{}{{topic=\"{}\"}} {}\n", limit_gauges[g].first, label(topic), v);
    }
  }
  struct Total {
    const char* what;
    std::int64_t TopicStats::*member;
    const char* help;
  };
  const Total totals[] = {
      {"failed", &TopicStats::failed_total, "Jobs whose attempt failed per topic since it began"},
      {"dead", &TopicStats::dead_total, "Jobs that died per topic since it began"},
      {"lapsed", &TopicStats::lapsed_total,
       "Jobs whose reservation lapsed per topic since it began"},
      // the history's (library version 34): what callers that name it counted
      {"put", &TopicStats::put_total, "Jobs put per topic since its history began"},
      {"started", &TopicStats::started_total,
       "Jobs handed out (reserved or pulled) per topic since its history began"},
      {"done", &TopicStats::done_total,
       "Jobs done (acked, or pulled) per topic since its history began"}};
  for (const auto& [what, member, help] : totals) {
    const std::string name = fmt::format("redisched_topic_{}_total", what);
    family(out, name, "counter", fmt::format("{}, by every process (from Redis).", help));
    for (const auto& [topic, s] : topics) {
      out += fmt::format("{}{{topic=\"{}\"}} {}\n", name, label(topic), s.*member);
    }
  }
  family(out, "redisched_topic_wait_seconds_total", "counter",
         "The wait of the jobs started, from due to start, summed per topic since its history "
         "began (divided by redisched_topic_started_total: the mean wait).");
  for (const auto& [topic, s] : topics) {
    out += fmt::format("redisched_topic_wait_seconds_total{{topic=\"{}\"}} {}\n", label(topic),
                       static_cast<double>(s.wait_total_ms) / 1000);
  }
  std::lock_guard lock(mu_);
  family(out, "redisched_events_total", "counter",
         "Jobs put, reserved, acked, failed, dead, released, pulled, kicked, deleted and pushed "
         "through this server, and outbox entries it carried out (moved).");
  for (const auto& [key, n] : counters_) {
    out += fmt::format("redisched_events_total{{event=\"{}\",topic=\"{}\"}} {}\n", label(key.first),
                       label(key.second), n);
  }
  std::string last;
  for (const auto& [key, h] : histograms_) {
    const auto& [name, value] = key;
    const std::string metric = "redisched_" + name + "_seconds";
    if (name != last) {
      family(out, metric, "histogram",
             name == "request" ? "Time to answer a request, by route."
                               : "Time a webhook took to answer a delivery, by topic.");
      last = name;
    }
    const std::string l =
        fmt::format("{}=\"{}\"", name == "request" ? "route" : "topic", label(value));
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", metric, l, kBuckets[i], h.buckets[i]);
    }
    out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", metric, l, h.count);
    out += fmt::format("{}_sum{{{}}} {}\n", metric, l, h.sum);
    out += fmt::format("{}_count{{{}}} {}\n", metric, l, h.count);
  }
  return out;
}

}  // namespace redisched::server
