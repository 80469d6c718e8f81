#include "wire/job_json.h"

#include <openssl/evp.h>

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
