#include "core/checks.h"

#include <algorithm>

#include "core/keys.h"
#include "core/text.h"
#include "redisched/error.h"
#include "redisched/limits.h"

namespace redisched::core {

bool valid_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

void check_topic(std::string_view topic) {
  if (topic.empty()) throw Error(Errc::invalid_argument, "topic is empty");
  if (topic.size() > kTopicMax) {
    throw Error(Errc::invalid_argument,
                "topic is longer than " + std::to_string(kTopicMax) + " characters");
  }
  if (!std::all_of(topic.begin(), topic.end(), valid_topic_char)) {
    throw Error(Errc::invalid_argument, "topic '" + printable(topic.substr(0, 40)) +
                                            "' may hold only letters, digits, '_', '-' and '.'");
  }
}

void check_id(std::string_view id) {
  if (id.empty()) throw Error(Errc::invalid_argument, "job id is empty");
  if (id.size() > static_cast<std::size_t>(limits::kIdMax)) {
    throw Error(Errc::invalid_argument,
                "job id is longer than " + std::to_string(limits::kIdMax) + " bytes");
  }
  if (!valid_utf8(id)) {
    throw Error(Errc::invalid_argument,
                "job id is not valid UTF-8: " + printable(id.substr(0, 40)));
  }
  // C0 controls and DEL, and the C1 controls U+0080..U+009F (C2 80..C2 9F).
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    const bool c1 = c == 0xC2 && i + 1 < id.size() && static_cast<unsigned char>(id[i + 1]) < 0xA0;
    if (c < 0x20 || c == 0x7F || c1) {
      throw Error(Errc::invalid_argument, "job id contains a control character");
    }
  }
}

void check_backoff(const Backoff& b) {
  const auto in_range = [](Millis m) { return m.count() >= 0 && m.count() <= limits::kDelayMax; };
  if (!in_range(b.base) || !in_range(b.cap)) {
    throw Error(Errc::invalid_argument, "backoff base and cap must be from 0 to " +
                                            std::to_string(limits::kDelayMax) + " ms");
  }
  if (b.kind == BackoffKind::exponential && b.cap < b.base) {
    throw Error(Errc::invalid_argument, "an exponential backoff's cap must be at least its base");
  }
}

void check_replicas(int n, std::string_view what) {
  constexpr int kReplicasMax = 16;  // more than any deployment has
  if (n < 0 || n > kReplicasMax) {
    throw Error(Errc::invalid_argument, std::string(what) + " must be from 0 to " +
                                            std::to_string(kReplicasMax) + ", got " +
                                            std::to_string(n));
  }
}

void check_spec(const JobSpec& job, std::size_t max_body) {
  if (job.body.size() > max_body) {
    throw Error(Errc::invalid_argument, "body is " + std::to_string(job.body.size()) +
                                            " bytes, over the limit of " +
                                            std::to_string(max_body));
  }
  if (job.id == "*") {
    throw Error(Errc::invalid_argument, "id '*' asks for a generated id: use Client::add");
  }
  if (!job.id.empty()) check_id(job.id);  // empty: Client::add generates one
  if (job.backoff) check_backoff(*job.backoff);
  if (job.replicas) check_replicas(*job.replicas, "replicas");
  if (!job.after.empty()) {
    if (job.after.size() > static_cast<std::size_t>(limits::kDepsMax)) {
      throw Error(Errc::invalid_argument,
                  "a job waits for at most " + std::to_string(limits::kDepsMax) + " jobs");
    }
    if (job.mode != PutMode::create) {
      throw Error(Errc::invalid_argument,
                  "dependencies (JobSpec::after) go with a new job only, not an update");
    }
    for (const auto& d : job.after) {
      check_topic(d.topic);
      check_id(d.id);
    }
  }
  // Everything else (id, numbers, their ranges) the library checks, once.
}

}  // namespace redisched::core
