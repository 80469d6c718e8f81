#include "server/fields.h"

#include <boost/json/parse.hpp>
#include <charconv>
#include <cmath>
#include <vector>

#include "core/checks.h"
#include "core/text.h"
#include "redisched/limits.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace redisched::server {

namespace json = boost::json;

void bad_request(std::string message) {
  throw HttpError{http::status::bad_request, "invalid_argument", std::move(message)};
}

HttpError http_error(const Error& e) {
  switch (e.code()) {
    case Errc::invalid_argument:
      return {http::status::bad_request, "invalid_argument", e.what()};
    case Errc::conflict:
      return {http::status::conflict, "conflict", e.what()};
    case Errc::connection:
    case Errc::timeout:
    case Errc::closed:
    case Errc::auth:
      return {http::status::service_unavailable, "unavailable", e.what()};
    case Errc::ok:  // (no error is made of it)
    case Errc::protocol:
    case Errc::server:
    case Errc::bad_format:
      break;
  }
  return {http::status::internal_server_error, "internal", e.what()};
}

namespace {

std::string quoted(std::string_view name) { return "\"" + std::string(name) + "\""; }

// What a refused value was, briefly (for the message).
std::string shown(const json::value& v) {
  std::string s = wire::to_text(v);
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return s;
}

// Doubles hold integers exactly up to 2^53.
constexpr double kExactDouble = 9007199254740992.0;

}  // namespace

json::object json_object(std::string_view body) {
  if (body.empty()) return {};
  boost::system::error_code ec;
  // Boost.JSON checks UTF-8 in strings and refuses comments, trailing
  // commas and depth over 32 by default.
  json::value v = json::parse(body, ec);
  if (ec) bad_request("malformed JSON: " + ec.message());
  // A key given twice (Boost.JSON keeps the last) says two things, and a
  // number past a double's range (1E400) reads as infinity: both refused.
  const auto scan = wire::scan_json(body);
  if (!scan.duplicate.empty()) {
    bad_request("the key \"" + core::printable(scan.duplicate) + "\" is given twice");
  }
  if (scan.out_of_range) bad_request("a number is past a double's range");
  if (!v.is_object()) bad_request("the body must be a JSON object");
  return std::move(v.as_object());
}

void only_fields(const json::object& o, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : o) {
    bool known = false;
    for (auto a : allowed) known = known || key == a;
    if (!known) bad_request("unknown field " + quoted(wire::printable(key)));
  }
}

std::optional<std::int64_t> int_field(const json::object& o, std::string_view name, std::int64_t lo,
                                      std::int64_t hi) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  const json::value& v = it->value();
  auto out_of_range = [&]() -> std::int64_t {
    bad_request(quoted(name) + " must be an integer from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", got " + shown(v));
  };
  std::int64_t n = 0;
  if (v.is_int64()) {
    n = v.as_int64();
  } else if (v.is_uint64()) {
    return out_of_range();  // above INT64_MAX
  } else if (v.is_double()) {
    const double d = v.as_double();
    if (!(std::abs(d) <= kExactDouble) || d != std::trunc(d)) return out_of_range();
    n = static_cast<std::int64_t>(d);
  } else {
    bad_request(quoted(name) + " must be an integer, got " + shown(v));
  }
  if (n < lo || n > hi) return out_of_range();
  return n;
}

std::optional<std::string> string_field(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  if (!it->value().is_string()) bad_request(quoted(name) + " must be a string");
  return std::string(it->value().as_string());
}

std::optional<bool> bool_field(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  if (!it->value().is_bool()) bad_request(quoted(name) + " must be true or false");
  return it->value().as_bool();
}

std::optional<std::int64_t> seconds_field(const json::object& o, std::string_view name,
                                          Seconds kind, std::int64_t max_ms) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  const json::value& v = it->value();
  const std::string range =
      quoted(name) + " must be a number of seconds up to " + std::to_string(max_ms / 1000);
  if (kind == Seconds::whole) {
    if (v.is_uint64() && !v.is_int64()) bad_request(range + ", got " + shown(v));
    if (!v.is_int64()) bad_request(quoted(name) + " must be a whole number of seconds");
    const std::int64_t s = std::max<std::int64_t>(v.as_int64(), 0);
    if (s > max_ms / 1000) bad_request(range + ", got " + shown(v));
    return s * 1000;
  }
  double seconds = 0;
  if (v.is_number()) {
    seconds = v.to_number<double>();
  } else if (v.is_string()) {
    std::string_view s = v.as_string();
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), seconds);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      bad_request(quoted(name) + " must be a number of seconds, got " + shown(v));
    }
  } else {
    bad_request(quoted(name) + " must be a number of seconds, got " + shown(v));
  }
  if (!std::isfinite(seconds) || seconds * 1000 > static_cast<double>(max_ms)) {
    bad_request(range + ", got " + shown(v));
  }
  return seconds <= 0 ? 0 : std::llround(seconds * 1000);
}

ScheduleSpec schedule_spec(const json::object& o) {
  only_fields(o, {"cron", "time_zone", "every_ms", "catch_up", "paused", "body", "body_base64",
                  "priority", "ttr_ms", "attempts", "backoff", "keep_ms"});
  ScheduleSpec s;
  s.cron = string_field(o, "cron").value_or("");
  if (auto z = string_field(o, "time_zone")) s.time_zone = *z;
  if (auto e = int_field(o, "every_ms", 1, limits::kDelayMax)) s.every = Millis{*e};
  if (s.cron.empty() && !s.every) bad_request("give \"cron\" or \"every_ms\"");
  if (!s.cron.empty() && s.every) bad_request("give \"cron\" or \"every_ms\", not both");
  const auto catch_up = string_field(o, "catch_up").value_or("skip");
  if (catch_up == "last") {
    s.catch_up = CatchUp::last;
  } else if (catch_up != "skip") {
    bad_request("\"catch_up\" must be skip or last");
  }
  s.paused = bool_field(o, "paused").value_or(false);
  // The tick job's fields, read as a put's.
  json::object job;
  for (const char* f :
       {"body", "body_base64", "priority", "ttr_ms", "attempts", "backoff", "keep_ms"}) {
    if (auto it = o.find(f); it != o.end()) job[f] = it->value();
  }
  JobSpec j = job_spec(job);
  s.body = std::move(j.body);
  s.priority = j.priority;
  s.ttr = j.ttr;
  s.max_attempts = j.max_attempts;
  s.backoff = j.backoff;
  s.keep = j.keep;
  return s;
}

// A put's "after": [{topic, id, on_failure}, ...] (library version 35).
std::vector<Dependency> dependencies(const json::value& v) {
  if (!v.is_array() || v.as_array().empty()) {
    bad_request("\"after\" must be an array of {topic, id, on_failure}, not empty");
  }
  const auto& a = v.as_array();
  if (a.size() > static_cast<std::size_t>(limits::kDepsMax)) {
    bad_request("\"after\" names at most " + std::to_string(limits::kDepsMax) + " jobs");
  }
  std::vector<Dependency> out;
  out.reserve(a.size());
  for (const auto& e : a) {
    if (!e.is_object()) bad_request("each of \"after\" must be an object {topic, id, on_failure}");
    const auto& d = e.as_object();
    only_fields(d, {"topic", "id", "on_failure"});
    Dependency dep;
    dep.topic = string_field(d, "topic").value_or("");
    dep.id = string_field(d, "id").value_or("");
    if (dep.topic.empty() || dep.id.empty())
      bad_request("each of \"after\" needs a topic and an id");
    const auto policy = string_field(d, "on_failure").value_or("fail");
    auto p = parse_on_failure(policy);
    if (!p) bad_request("\"on_failure\" must be fail, ignore or drop");
    dep.on_failure = *p;
    out.push_back(std::move(dep));
  }
  return out;
}

// A batch's change (library version 36): members to add, seal, keep_ms.
BatchChange batch_change(const json::object& o) {
  only_fields(o, {"add", "seal", "keep_ms"});
  BatchChange c;
  if (auto it = o.find("add"); it != o.end() && !it->value().is_null()) {
    if (!it->value().is_array()) bad_request("\"add\" must be an array of {topic, id}");
    const auto& a = it->value().as_array();
    if (a.size() > static_cast<std::size_t>(limits::kDepsMax)) {
      bad_request("\"add\" names at most " + std::to_string(limits::kDepsMax) + " jobs a call");
    }
    c.add.reserve(a.size());
    for (const auto& e : a) {
      if (!e.is_object()) bad_request("each of \"add\" must be an object {topic, id}");
      const auto& m = e.as_object();
      only_fields(m, {"topic", "id"});
      JobRef ref{string_field(m, "topic").value_or(""), string_field(m, "id").value_or("")};
      if (ref.topic.empty() || ref.id.empty())
        bad_request("each of \"add\" needs a topic and an id");
      c.add.push_back(std::move(ref));
    }
  }
  c.seal = bool_field(o, "seal").value_or(false);
  if (auto k = int_field(o, "keep_ms", 1, limits::kDelayMax)) c.keep = Millis{*k};
  return c;
}

JobSpec job_spec(const json::object& o) {
  only_fields(o, {"body", "body_base64", "delay_ms", "due_at_ms", "priority", "ttr_ms", "attempts",
                  "backoff", "keep_ms", "mode", "replicas", "after"});
  JobSpec s;
  if (auto it = o.find("after"); it != o.end() && !it->value().is_null()) {
    s.after = dependencies(it->value());
  }
  auto text = string_field(o, "body");
  auto b64 = string_field(o, "body_base64");
  if (text && b64) bad_request("give \"body\" or \"body_base64\", not both");
  if (b64) {
    auto decoded = wire::base64_decode(*b64);
    if (!decoded) bad_request("\"body_base64\" is not base64 (RFC 4648, with its padding)");
    s.body = std::move(*decoded);
  } else if (text) {
    s.body = std::move(*text);
  }
  if (auto d = int_field(o, "delay_ms", 0, limits::kDelayMax)) s.delay = Millis{*d};
  if (auto at = int_field(o, "due_at_ms", 0, limits::kMsMax)) s.due_at_ms = *at;
  if (s.delay && s.due_at_ms) bad_request("give \"delay_ms\" or \"due_at_ms\", not both");
  if (auto p = int_field(o, "priority", limits::kPrioMin, limits::kPrioMax)) s.priority = *p;
  if (auto t = int_field(o, "ttr_ms", 0, limits::kTtrMax)) s.ttr = Millis{*t};
  if (auto a = int_field(o, "attempts", 1, limits::kAttemptsMax)) {
    s.max_attempts = static_cast<int>(*a);
  }
  if (auto r = int_field(o, "replicas", 0, 16)) s.replicas = static_cast<int>(*r);
  if (auto k = int_field(o, "keep_ms", 0, limits::kDelayMax)) s.keep = Millis{*k};
  if (auto it = o.find("backoff"); it != o.end() && !it->value().is_null()) {
    if (!it->value().is_object()) {
      bad_request("\"backoff\" must be an object {kind, base_ms, cap_ms}");
    }
    const auto& b = it->value().as_object();
    only_fields(b, {"kind", "base_ms", "cap_ms"});
    Backoff backoff;
    auto kind = string_field(b, "kind").value_or("exponential");
    if (kind == "fixed") {
      backoff.kind = BackoffKind::fixed;
    } else if (kind != "exponential") {
      bad_request("\"backoff.kind\" must be fixed or exponential");
    }
    backoff.base = Millis{int_field(b, "base_ms", 0, limits::kDelayMax).value_or(1000)};
    backoff.cap =
        Millis{int_field(b, "cap_ms", 0, limits::kDelayMax)
                   .value_or(backoff.kind == BackoffKind::fixed ? backoff.base.count() : 600000)};
    try {
      core::check_backoff(backoff);
    } catch (const Error& e) {
      bad_request(std::string("\"backoff\": ") + e.what());
    }
    s.backoff = backoff;
  }
  auto mode = string_field(o, "mode").value_or("create");
  if (mode == "replace") {
    s.mode = PutMode::replace;
  } else if (mode == "upsert") {
    s.mode = PutMode::upsert;
  } else if (mode == "debounce") {
    s.mode = PutMode::debounce;
  } else if (mode != "create") {
    bad_request("\"mode\" must be create, replace, upsert or debounce");
  }
  return s;
}

}  // namespace redisched::server
