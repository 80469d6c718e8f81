// Jobs as JSON, the one shape the CLI (--json) and the HTTP API share.
// Bodies travel as "body" (text) when they are valid UTF-8, else as
// "body_base64".
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/text.h"
#include "redisched/job.h"

namespace redisched::wire {

using core::printable;  // core/text.h
using core::valid_utf8;
std::string base64_encode(std::string_view s);
// nullopt when s is not base64 as RFC 4648 §4 defines it, padding included.
std::optional<std::string> base64_decode(std::string_view s);

// Sets "body" or "body_base64".
void put_body(boost::json::object& o, std::string_view body);
// The same for any bytes: name, or name + "_base64".
void put_bytes(boost::json::object& o, std::string_view name, std::string_view bytes);

boost::json::object job_json(const Job& j);
// job_json(j) as JSON text (wire::to_text), with the progress's numbers
// spelled as they were stored: a job on its own (get, export). In a list,
// job_json's progress holds its numbers as a double or a 64-bit integer.
std::string job_text(const Job& j);
// A job's attempt history (Job::history): [{"attempt", "outcome", "started",
// "ended", "worker" (when named), "error", "error_cut" (when true)}].
boost::json::array history_json(const std::vector<Attempt>& history);
// A job's log (Job::log): [{"at", "attempt", "line", "cut" (when true)}].
boost::json::array log_json(const std::vector<LogLine>& log);
// The inverse of job_json (for import): o parsed from text, whose progress
// is kept as text spells it. Throws std::runtime_error naming the field at
// fault.
Job job_from_json(const boost::json::object& o, std::string_view text);

// A topic's counts, as the CLI's stats --json and GET /v1/topics/{t} give them.
// One minute's or hour's counts of a topic's history (Client::history):
// {at, put, started, done, failed, dead, lapsed, wait_ms}.
boost::json::object history_row_json(const HistoryRow& r);
// The history's ranges, as the dashboard, GET .../history?range= and
// `redisched history --range` name them: 1h and 24h by the minute, 30d by
// the hour, from the start of the unit (now's included) that many back, to
// now_ms. Empty for another name.
struct HistoryRange {
  std::string name;
  HistoryStep step;
  std::int64_t from_ms, to_ms;
};
std::optional<HistoryRange> history_range(std::string_view name, std::int64_t now_ms);
boost::json::object stats_json(std::string_view topic, const TopicStats& s);
// A worker of the registry (GET /v1/workers, `redisched workers --json`).
boost::json::object worker_json(const WorkerEntry& w);
// A topic's limits: {"rate", "window_ms" (0 without a rate), "concurrency",
// "aging_ms"}.
boost::json::object limits_json(const TopicLimits& l);

// A schedule: its rule, catch_up, paused, next and last_tick (null: none
// yet), next_runs (the next n ticks; left out for a rule this library
// cannot read), and the tick job's body and options as a put takes them.
boost::json::object schedule_json(const Schedule& s, int next_runs = 5);

// A reserved (token != 0) or pulled job.
boost::json::object reservation_json(const Reservation& j, bool reserved);

}  // namespace redisched::wire
