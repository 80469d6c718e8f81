// The checks of what users hand in that the Functions library cannot see
// (topic names, UTF-8 ids, body sizes): one rule each, for every face (the
// Client, the Worker, the HTTP API, the CLI, import). No I/O, no Redis.
#pragma once

#include <cstddef>
#include <string_view>

#include "redisched/error.h"
#include "redisched/job.h"

namespace redisched::core {

// Topic names: the C++ side's own rule (the library takes any key), as
// they end up in keys, URLs and metric labels.
inline constexpr std::size_t kTopicMax = 128;

// Checks what the library cannot see (topic names, body size) and throws
// Error(Errc::invalid_argument) naming the fault.
void check_topic(std::string_view topic);
// A character of a topic's alphabet: A-Z a-z 0-9 _ - . (what check_topic
// takes, for checks of parts of names: a prefix).
bool valid_topic_char(char c);
// Job ids: 1..256 bytes of well-formed UTF-8 without control characters (the
// library checks length and control characters itself; UTF-8 is checked
// here so that every id is valid JSON and text in every face).
void check_id(std::string_view id);
// The one rule for a backoff, wherever one is given (a job's, a handler's,
// the HTTP API's): base and cap from 0 to ten years; an exponential one's cap
// at least its base (a fixed one waits base; its cap is not used). The
// library checks the same.
void check_backoff(const Backoff& b);
void check_spec(const JobSpec& job, std::size_t max_body);
// Replicas a write waits for (ClientOptions::replicas, JobSpec::replicas):
// 0 to 16; what names the setting in the message.
void check_replicas(int n, std::string_view what);

}  // namespace redisched::core
