#include "wire/job_json.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace redisched::wire {

namespace json = boost::json;

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

std::string base64_encode(std::string_view s) {
  std::string out(4 * ((s.size() + 2) / 3), '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view s) {
  if (s.size() % 4 != 0) return std::nullopt;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')) {
      return std::nullopt;
    }
  }
  std::string out(s.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t len = static_cast<size_t>(n);
  if (!s.empty() && s.back() == '=') --len;
  if (s.size() > 1 && s[s.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

void put_body(json::object& o, std::string_view body) {
  if (valid_utf8(body)) {
    o["body"] = body;
  } else {
    o["body_base64"] = base64_encode(body);
  }
}

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
  o["backoff"] =
      json::object{{"kind", j.backoff.kind == BackoffKind::fixed ? "fixed" : "exponential"},
                   {"base", j.backoff.base.count()},
                   {"cap", j.backoff.cap.count()}};
  if (j.error) o["error"] = *j.error;
  if (j.state == JobState::reserved) {
    o["token"] = j.token;
    o["reserved_at"] = j.reserved_at_ms;
    o["deadline"] = j.deadline_ms;
  }
  if (j.state == JobState::dead) o["died"] = j.died_ms;
  if (j.state == JobState::done) {
    o["finished"] = j.finished_ms;
    o["expires"] = j.expires_ms;
  }
  return o;
}

Job job_from_json(const json::object& o) {
  auto field = [&](std::string_view name) -> const json::value& {
    auto it = o.find(name);
    if (it == o.end()) throw std::runtime_error("the job has no \"" + std::string(name) + "\"");
    return it->value();
  };
  auto integer = [&](std::string_view name) -> std::int64_t {
    const auto& v = field(name);
    if (!v.is_int64() && !v.is_uint64()) {
      throw std::runtime_error("\"" + std::string(name) + "\" must be an integer");
    }
    return v.to_number<std::int64_t>();
  };
  Job j;
  const auto& id = field("id");
  if (!id.is_string()) throw std::runtime_error("\"id\" must be a string");
  j.id = std::string(id.as_string());
  const auto& state = field("state");
  auto parsed = state.is_string() ? parse_job_state(state.as_string()) : std::nullopt;
  if (!parsed) throw std::runtime_error("\"state\" must be delayed, ready, reserved, dead or done");
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
  j.priority = static_cast<int>(integer("priority"));
  j.created_ms = integer("created");
  j.due_ms = integer("due");
  j.attempts = static_cast<int>(integer("attempts"));
  j.max_attempts = static_cast<int>(integer("max_attempts"));
  j.ttr = Millis{integer("ttr")};
  if (auto it = o.find("backoff"); it != o.end() && it->value().is_object()) {
    const auto& b = it->value().as_object();
    j.backoff.kind = b.contains("kind") && b.at("kind") == "fixed" ? BackoffKind::fixed
                                                                   : BackoffKind::exponential;
    if (b.contains("base")) j.backoff.base = Millis{b.at("base").to_number<std::int64_t>()};
    if (b.contains("cap")) j.backoff.cap = Millis{b.at("cap").to_number<std::int64_t>()};
  }
  if (auto it = o.find("error"); it != o.end() && it->value().is_string()) {
    j.error = std::string(it->value().as_string());
  }
  if (auto it = o.find("died"); it != o.end()) j.died_ms = it->value().to_number<std::int64_t>();
  return j;
}

json::object stats_json(std::string_view topic, const TopicStats& s) {
  return json::object{{"topic", topic},
                      {"delayed", s.delayed},
                      {"ready", s.ready},
                      {"reserved", s.reserved},
                      {"dead", s.dead},
                      {"done", s.done},
                      {"paused", s.paused},
                      {"next_due", s.next_due_ms},
                      {"failed_total", s.failed_total},
                      {"dead_total", s.dead_total},
                      {"lapsed_total", s.lapsed_total}};
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
  return o;
}

}  // namespace redisched::wire
