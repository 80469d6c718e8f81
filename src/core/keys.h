// The keyspace of a topic, built in one place (docs/redis-api.md, "Keyspace").
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace redisched::core {

// The names, in the order every function of lua/redisched.lua takes them
// (all eleven since library version 23: every key a call touches is one of
// its KEYS, as ACL key checks and proxies that route by KEYS expect; the
// twelfth, history, since version 34: the library counts the calls that
// name it in the topic's history; the flows' three since version 35, passed
// with the history: without it, the library names them).
inline constexpr std::array<std::string_view, 15> kKeyNames = {
    "jobs",  "delayed", "ready", "reserved", "dead",    "done", "meta",  "leases",
    "queue", "later",   "gone",  "history",  "blocked", "flow", "outbox"};
inline constexpr std::size_t kKeysWithoutHistory = 11;
using TopicKeys = std::array<std::string, kKeyNames.size()>;

// "<prefix>:{<topic>}:<name>" for each name: the hash tag keeps a topic's
// keys in one Redis Cluster slot.
TopicKeys topic_keys(std::string_view prefix, std::string_view topic);
// Appends "<prefix>:{<topic>}:<name>" to out, of topic_key_size bytes: for
// callers that build many keys into one buffer.
void append_topic_key(std::string& out, std::string_view prefix, std::string_view topic,
                      std::string_view name);
inline std::size_t topic_key_size(std::string_view prefix, std::string_view topic,
                                  std::string_view name) {
  return prefix.size() + topic.size() + 4 + name.size();
}

// The topic's wake-up channel (docs/redis-api.md, "Wake-up signal"): named
// like its ready key, so it lives in the topic's cluster slot.
std::string wake_channel(std::string_view prefix, std::string_view topic);
// Its finished channel (docs/redis-api.md, "Waiting for a job"): named like
// its done key.
std::string finished_channel(std::string_view prefix, std::string_view topic);
// Its schedules' channel (docs/redis-api.md, "Recurring jobs"): named like
// its meta key.
std::string schedules_channel(std::string_view prefix, std::string_view topic);
// Its progress channel (docs/redis-api.md, redisched_progress): named like
// its leases key.
std::string reports_channel(std::string_view prefix, std::string_view topic);
// Its outbox channel (docs/redis-api.md, "Flows"; library version 36): named
// like its outbox key; "outbox" when the outbox gets its first entry.
std::string outbox_channel(std::string_view prefix, std::string_view topic);

// The sweep signal's channel (docs/redis-api.md, "Sweep signal"):
// "<prefix>:sweep", a classic channel every topic's calls publish on.
std::string sweep_channel(std::string_view prefix);

// The worker registry's two keys (docs/redis-api.md, "the worker
// registry"): "<prefix>:{~workers}:alive" and ":entries", in a slot no
// topic's keys share (a topic's name holds no '~').
std::array<std::string, 2> registry_keys(std::string_view prefix);

// The beanstalkd face's id blocks (core/client_access.h): the last block
// taken, and the hash of each block's topic, "<prefix>:{~beanstalk}:block"
// and ":blocks", in a slot no topic's keys share.
std::array<std::string, 2> id_block_keys(std::string_view prefix);

// The topic of a key of that shape, or empty when the key is not one.
std::string_view topic_of_key(std::string_view prefix, std::string_view key);

}  // namespace redisched::core
