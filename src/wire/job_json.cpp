#include "wire/job_json.h"

#include <openssl/evp.h>

#include <boost/json/parse.hpp>
#include <stdexcept>

#include "core/checks.h"
#include "redisched/limits.h"
#include "wire/json_text.h"

namespace redisched::wire {

namespace json = boost::json;

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string base64_encode(std::string_view s) {
  std::string out(4 * ((s.size() + 2) / 3), '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view s) {
  // RFC 4648 §4, strictly: whole quanta, the standard alphabet, padding only
  // at the end and only as much as the last quantum needs, and no bits set
  // past the data (so every text decodes from exactly one encoding).
  if (s.size() % 4 != 0) return std::nullopt;
  const size_t pad = s.ends_with("==") ? 2 : s.ends_with("=") ? 1 : 0;
  for (size_t i = 0; i < s.size() - pad; ++i) {
    if (base64_value(s[i]) < 0) return std::nullopt;
  }
  if (pad == 2 && (base64_value(s[s.size() - 3]) & 0x0F) != 0) return std::nullopt;
  if (pad == 1 && (base64_value(s[s.size() - 2]) & 0x03) != 0) return std::nullopt;
  std::string out(s.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);  // EVP_DecodeBlock counts padding as zero bytes
  return out;
}

void put_bytes(json::object& o, std::string_view name, std::string_view bytes) {
  if (valid_utf8(bytes)) {
    o[name] = bytes;
  } else {
    o[std::string(name) + "_base64"] = base64_encode(bytes);
  }
}

void put_body(json::object& o, std::string_view body) { put_bytes(o, "body", body); }

json::object job_json(const Job& j) {
  json::object o;
  o["id"] = j.id;
  o["state"] = to_string(j.state);
  put_body(o, j.body);
  o["priority"] = j.priority;
  o["created"] = j.created_ms;
  o["due"] = j.due_ms;
  o["attempts"] = j.attempts;
  o["max_attempts"] = j.max_attempts;
  o["ttr"] = j.ttr.count();
  o["own_ttr"] = j.own_ttr;
  o["backoff"] =
      json::object{{"kind", j.backoff.kind == BackoffKind::fixed ? "fixed" : "exponential"},
                   {"base", j.backoff.base.count()},
                   {"cap", j.backoff.cap.count()}};
  if (j.error) o["error"] = printable(*j.error);
  if (j.keep.count() > 0) o["keep"] = j.keep.count();
  if (j.result) put_bytes(o, "result", *j.result);
  if (j.state == JobState::reserved) {
    o["token"] = j.token;
    o["reserved_at"] = j.reserved_at_ms;
    o["deadline"] = j.deadline_ms;
    if (!j.worker.empty()) o["worker"] = printable(j.worker);
  }
  if (j.state == JobState::dead) o["died"] = j.died_ms;
  if (j.state == JobState::done) {
    o["finished"] = j.finished_ms;
    o["expires"] = j.expires_ms;
  }
  if (!j.history.empty()) o["history"] = history_json(j.history);
  if (j.progress) {
    // The library checked the value's JSON; one its parser took and ours
    // does not (e.g. a hexadecimal number) goes as a string.
    boost::system::error_code ec;
    json::value v = json::parse(j.progress->value, ec);
    o["progress"] = ec ? json::value(j.progress->value) : std::move(v);
    o["progress_attempt"] = j.progress->attempt;
    o["progress_at"] = j.progress->at_ms;
  }
  if (!j.log.empty()) {
    o["log"] = log_json(j.log);
    o["log_total"] = j.log_total;
  }
  if (j.deps_total > 0) {
    o["deps_total"] = j.deps_total;
    o["deps_left"] = j.deps_left;
  }
  if (!j.deps.empty()) {
    json::array deps;
    for (const auto& d : j.deps) {
      json::object e{{"topic", d.topic},
                     {"id", printable(d.id)},
                     {"on_failure", to_string(d.on_failure)},
                     {"outcome", to_string(d.outcome)}};
      if (!d.value.empty()) put_bytes(e, "value", d.value);
      deps.emplace_back(std::move(e));
    }
    o["deps"] = std::move(deps);
  }
  if (j.batch) {
    o["batch"] = json::object{{"sealed", j.batch->sealed},
                              {"total", j.batch->total},
                              {"done", j.batch->done},
                              {"failed", j.batch->failed},
                              {"pending", j.batch->pending()}};
  }
  return o;
}

std::string job_text(const Job& j) {
  auto o = job_json(j);
  if (j.progress) {
    if (auto spelled = compact_json(j.progress->value)) {
      o.erase("progress");
      return to_text_with(o, "progress", *spelled);
    }
  }
  return to_text(o);
}

json::array log_json(const std::vector<LogLine>& log) {
  json::array out;
  out.reserve(log.size());
  for (const LogLine& l : log) {
    json::object e{{"at", l.at_ms}, {"attempt", l.attempt}, {"line", printable(l.text)}};
    if (l.cut) e["cut"] = true;
    out.push_back(std::move(e));
  }
  return out;
}

json::array history_json(const std::vector<Attempt>& history) {
  json::array out;
  out.reserve(history.size());
  for (const Attempt& a : history) {
    json::object e{{"attempt", a.attempt},
                   {"outcome", to_string(a.outcome)},
                   {"started", a.started_ms},
                   {"ended", a.ended_ms}};
    if (!a.worker.empty()) e["worker"] = printable(a.worker);
    put_bytes(e, "error", a.error);  // (error_base64 for bytes that are no UTF-8)
    if (a.error_cut) e["error_cut"] = true;
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// The fields of an object of an export's arrays ("history[2]",
// "log[0]"), each read by name with where in its errors.
class Entry {
 public:
  Entry(const json::value& v, std::string where) : where_(std::move(where)) {
    if (!v.is_object()) throw std::runtime_error("\"" + where_ + "\" must be an object");
    e_ = &v.as_object();
  }
  bool has(std::string_view name) const { return e_->contains(name); }
  const json::value& field(std::string_view name) const {
    auto it = e_->find(name);
    if (it == e_->end()) {
      throw std::runtime_error("\"" + where_ + "\" has no \"" + std::string(name) + "\"");
    }
    return it->value();
  }
  std::int64_t integer(std::string_view name, std::int64_t lo, std::int64_t hi) const {
    const auto& f = field(name);
    if (!f.is_int64() || f.as_int64() < lo || f.as_int64() > hi) {
      throw std::runtime_error("\"" + where_ + "." + std::string(name) +
                               "\" must be an integer from " + std::to_string(lo) + " to " +
                               std::to_string(hi));
    }
    return f.as_int64();
  }
  std::string text(std::string_view name) const {
    const auto& f = field(name);
    if (!f.is_string()) {
      throw std::runtime_error("\"" + where_ + "." + std::string(name) + "\" must be a string");
    }
    return std::string(f.as_string());
  }
  [[noreturn]] void bad(std::string_view name, std::string_view why) const {
    throw std::runtime_error("\"" + where_ + "." + std::string(name) + "\" " + std::string(why));
  }
  bool flag(std::string_view name) const {  // false when absent
    auto it = e_->find(name);
    if (it == e_->end()) return false;
    if (!it->value().is_bool()) {
      throw std::runtime_error("\"" + where_ + "." + std::string(name) +
                               "\" must be true or false");
    }
    return it->value().as_bool();
  }

 private:
  const json::object* e_ = nullptr;
  std::string where_;
};

// An entry of "history" (history_json's), as import reads it. The library
// checks the ranges again.
Attempt attempt_from_json(const Entry& e) {
  Attempt a;
  a.attempt = static_cast<int>(e.integer("attempt", 1, limits::kAttemptsMax));
  const std::string outcome = e.text("outcome");
  if (outcome != "failed" && outcome != "lapsed") {
    e.bad("outcome", "must be failed or lapsed");
  }
  a.outcome = outcome == "lapsed" ? AttemptOutcome::lapsed : AttemptOutcome::failed;
  a.started_ms = e.integer("started", 0, limits::kMsMax);
  a.ended_ms = e.integer("ended", 0, limits::kMsMax);
  if (e.has("worker")) a.worker = e.text("worker");
  if (e.has("error_base64")) {
    auto bytes = base64_decode(e.text("error_base64"));
    if (!bytes) e.bad("error_base64", "is not base64");
    a.error = std::move(*bytes);
  } else {
    a.error = e.text("error");
  }
  a.error_cut = e.flag("error_cut");
  return a;
}

// A line of "log" (log_json's), as import reads it.
LogLine log_line_from_json(const Entry& e) {
  LogLine l;
  l.at_ms = e.integer("at", 0, limits::kMsMax);
  l.attempt = static_cast<int>(e.integer("attempt", 1, limits::kAttemptsMax));
  l.text = e.text("line");
  l.cut = e.flag("cut");
  return l;
}

// An export's array name (at most max entries), each read by read.
template <class T, class Read>
std::vector<T> entries_from_json(const json::object& o, std::string_view name, std::int64_t max,
                                 Read read) {
  std::vector<T> out;
  auto it = o.find(name);
  if (it == o.end()) return out;
  if (!it->value().is_array())
    throw std::runtime_error("\"" + std::string(name) + "\" must be an array");
  const auto& a = it->value().as_array();
  if (a.size() > static_cast<std::size_t>(max)) {
    throw std::runtime_error("\"" + std::string(name) + "\" holds more than " +
                             std::to_string(max) + " entries");
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    out.push_back(read(Entry(a[i], std::string(name) + "[" + std::to_string(i) + "]")));
  }
  return out;
}

}  // namespace

Job job_from_json(const json::object& o, std::string_view text) {
  auto scan = scan_json(text, "progress");
  if (!scan.duplicate.empty()) {
    throw std::runtime_error("the key \"" + printable(scan.duplicate) + "\" is given twice");
  }
  if (scan.out_of_range) throw std::runtime_error("a number is past a double's range");
  auto field = [&](std::string_view name) -> const json::value& {
    auto it = o.find(name);
    if (it == o.end()) throw std::runtime_error("the job has no \"" + std::string(name) + "\"");
    return it->value();
  };
  // Whole numbers only, and none that would wrap on the way to its field
  // (the library checks each field's own range when the job is restored).
  auto integer = [&](std::string_view name, std::int64_t lo = INT64_MIN,
                     std::int64_t hi = INT64_MAX) -> std::int64_t {
    const auto& v = field(name);
    if (!v.is_int64() || v.as_int64() < lo || v.as_int64() > hi) {
      throw std::runtime_error("\"" + std::string(name) + "\" must be an integer from " +
                               std::to_string(lo) + " to " + std::to_string(hi));
    }
    return v.as_int64();
  };
  auto small = [&](std::string_view name, std::int64_t lo, std::int64_t hi) {
    return static_cast<int>(integer(name, lo, hi));
  };
  Job j;
  const auto& id = field("id");
  if (!id.is_string()) throw std::runtime_error("\"id\" must be a string");
  j.id = std::string(id.as_string());
  core::check_id(j.id);
  const auto& state = field("state");
  auto parsed = state.is_string() ? parse_job_state(state.as_string()) : std::nullopt;
  if (!parsed || *parsed == JobState::blocked) {
    // (a blocked job's dependencies live in other topics' keys: an export
    // does not carry them)
    throw std::runtime_error("\"state\" must be delayed, ready, reserved, dead or done");
  }
  j.state = *parsed;
  if (auto it = o.find("body_base64"); it != o.end()) {
    auto body = it->value().is_string() ? base64_decode(it->value().as_string()) : std::nullopt;
    if (!body) throw std::runtime_error("\"body_base64\" is not base64");
    j.body = std::move(*body);
  } else {
    const auto& body = field("body");
    if (!body.is_string()) throw std::runtime_error("\"body\" must be a string");
    j.body = std::string(body.as_string());
  }
  j.priority = integer("priority", limits::kPrioMin, limits::kPrioMax);
  j.created_ms = integer("created", 0, limits::kMsMax);
  j.due_ms = integer("due", 0, limits::kMsMax);
  j.attempts = small("attempts", 0, limits::kAttemptsMax);
  j.max_attempts = small("max_attempts", 1, limits::kAttemptsMax);
  j.ttr = Millis{integer("ttr", 0, limits::kTtrMax)};
  // Exports older than own_ttr said nothing: the ttr they give is kept as the job's.
  if (auto it = o.find("own_ttr"); it != o.end()) {
    if (!it->value().is_bool()) throw std::runtime_error("\"own_ttr\" must be true or false");
    j.own_ttr = it->value().as_bool();
  }
  if (auto it = o.find("backoff"); it != o.end()) {
    if (!it->value().is_object()) throw std::runtime_error("\"backoff\" must be an object");
    const auto& b = it->value().as_object();
    auto kind = b.find("kind");
    if (kind != b.end()) {
      if (kind->value() != "fixed" && kind->value() != "exponential") {
        throw std::runtime_error("\"backoff.kind\" must be fixed or exponential");
      }
      j.backoff.kind = kind->value() == "fixed" ? BackoffKind::fixed : BackoffKind::exponential;
    }
    for (auto [name, out] : {std::pair{"base", &j.backoff.base}, {"cap", &j.backoff.cap}}) {
      auto f = b.find(name);
      if (f == b.end()) continue;
      if (!f->value().is_int64() || f->value().as_int64() < 0 ||
          f->value().as_int64() > limits::kDelayMax) {
        throw std::runtime_error("\"backoff." + std::string(name) +
                                 "\" must be an integer from 0 to " +
                                 std::to_string(limits::kDelayMax));
      }
      *out = Millis{f->value().as_int64()};
    }
  }
  if (auto it = o.find("error"); it != o.end()) {
    if (!it->value().is_string()) throw std::runtime_error("\"error\" must be a string");
    j.error = std::string(it->value().as_string());
    if (j.error->size() > static_cast<std::size_t>(limits::kErrorMax)) {
      throw std::runtime_error("\"error\" is over " + std::to_string(limits::kErrorMax) + " bytes");
    }
  }
  if (o.contains("died")) j.died_ms = integer("died", 0, limits::kMsMax);
  if (o.contains("keep")) j.keep = Millis{integer("keep", 0, limits::kDelayMax)};
  j.history = entries_from_json<Attempt>(o, "history", limits::kHistoryMax, attempt_from_json);
  j.log = entries_from_json<LogLine>(o, "log", limits::kLogLinesMax, log_line_from_json);
  if (o.contains("log_total")) j.log_total = integer("log_total", 0, 4294967295);
  if (auto it = o.find("progress"); it != o.end()) {
    j.progress.emplace();
    if (!scan.member) throw std::runtime_error("\"progress\" could not be read");
    j.progress->value = std::move(*scan.member);
    j.progress->attempt = small("progress_attempt", 1, limits::kAttemptsMax);
    j.progress->at_ms = integer("progress_at", 0, limits::kMsMax);
  }
  return j;
}

json::object worker_json(const WorkerEntry& w) {
  json::array topics, running;
  for (const auto& t : w.topics) {
    topics.push_back(json::object{{"topic", t.topic}, {"concurrency", t.concurrency}});
  }
  for (const auto& r : w.running) {
    running.push_back(json::object{{"topic", r.topic}, {"id", r.id}, {"started", r.started_ms}});
  }
  return json::object{{"id", w.id},
                      {"host", w.host},
                      {"pid", w.pid},
                      {"version", w.version},
                      {"started", w.started_ms},
                      {"beat", w.beat_ms},
                      {"expires", w.expires_ms},
                      {"topics", std::move(topics)},
                      {"running", std::move(running)}};
}

json::object history_row_json(const HistoryRow& r) {
  return json::object{{"at", r.at_ms},      {"put", r.put},        {"started", r.started},
                      {"done", r.done},     {"failed", r.failed},  {"dead", r.dead},
                      {"lapsed", r.lapsed}, {"wait_ms", r.wait_ms}};
}

std::optional<HistoryRange> history_range(std::string_view name, std::int64_t now_ms) {
  constexpr std::int64_t kMinute = 60000, kHour = 60 * kMinute;
  const auto back = [&](HistoryStep step, std::int64_t unit, std::int64_t units) {
    return HistoryRange{std::string(name), step, now_ms - now_ms % unit - (units - 1) * unit,
                        now_ms};
  };
  if (name == "1h") return back(HistoryStep::minute, kMinute, 60);
  if (name == "24h") return back(HistoryStep::minute, kMinute, 1440);
  if (name == "30d") return back(HistoryStep::hour, kHour, 720);
  return std::nullopt;
}

json::object stats_json(std::string_view topic, const TopicStats& s) {
  return json::object{{"topic", topic},
                      {"delayed", s.delayed},
                      {"ready", s.ready},
                      {"reserved", s.reserved},
                      {"dead", s.dead},
                      {"done", s.done},
                      {"paused", s.paused},
                      {"pause_end", s.pause_end_ms},
                      {"next_due", s.next_due_ms},
                      {"failed_total", s.failed_total},
                      {"dead_total", s.dead_total},
                      {"lapsed_total", s.lapsed_total},
                      {"put_total", s.put_total},
                      {"started_total", s.started_total},
                      {"done_total", s.done_total},
                      {"wait_total_ms", s.wait_total_ms},
                      {"limits", limits_json(s.limits)},
                      {"limit_used", s.limit_used},
                      {"shards", s.shards},
                      {"blocked", s.blocked},
                      {"outbox", s.outbox}};
}

json::object limits_json(const TopicLimits& l) {
  return json::object{{"rate", l.rate},
                      {"window_ms", l.rate > 0 ? l.window.count() : 0},
                      {"concurrency", l.concurrency},
                      {"aging_ms", l.aging.count()}};
}

json::object schedule_json(const Schedule& s, int next_runs) {
  json::object o;
  o["name"] = s.name;
  if (s.spec.every) {
    o["every_ms"] = s.spec.every->count();
  } else {
    o["cron"] = s.spec.cron;
    o["time_zone"] = s.spec.time_zone;
  }
  o["catch_up"] = s.spec.catch_up == CatchUp::last ? "last" : "skip";
  o["paused"] = s.spec.paused;
  o["next"] = s.next_ms;
  o["last_tick"] = s.last_tick_ms > 0 ? json::value(s.last_tick_ms) : json::value(nullptr);
  try {
    json::array runs;
    for (auto t : next_ticks(s, next_runs)) runs.push_back(t);
    o["next_runs"] = std::move(runs);
  } catch (const Error&) {
    // A rule this library cannot read: no runs to show.
  }
  put_body(o, s.spec.body);
  o["priority"] = s.spec.priority;
  if (s.spec.ttr) o["ttr_ms"] = s.spec.ttr->count();
  if (s.spec.max_attempts) o["attempts"] = *s.spec.max_attempts;
  if (s.spec.backoff) {
    o["backoff"] =
        json::object{{"kind", s.spec.backoff->kind == BackoffKind::fixed ? "fixed" : "exponential"},
                     {"base_ms", s.spec.backoff->base.count()},
                     {"cap_ms", s.spec.backoff->cap.count()}};
  }
  if (s.spec.keep.count() > 0) o["keep_ms"] = s.spec.keep.count();
  return o;
}

json::object reservation_json(const Reservation& j, bool reserved) {
  json::object o;
  o["id"] = j.id;
  put_body(o, j.body);
  if (reserved) o["token"] = j.token;
  o["attempt"] = j.attempt;
  o["max_attempts"] = j.max_attempts;
  o["priority"] = j.priority;
  o["created"] = j.created_ms;
  o["due"] = j.due_ms;
  if (reserved) o["deadline"] = j.deadline_ms;
  if (reserved && j.keep.count() > 0) o["keep"] = j.keep.count();
  return o;
}

}  // namespace redisched::wire
