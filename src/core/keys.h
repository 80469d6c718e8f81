// The keyspace of a topic, built in one place (docs/redis-api.md, "Keyspace").
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace redisched::core {

// The names, in the order every function of lua/redisched.lua takes them.
inline constexpr std::array<std::string_view, 8> kKeyNames = {
    "jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases"};

// "<prefix>:{<topic>}:<name>" for each name: the hash tag keeps a topic's
// keys in one Redis Cluster slot.
std::array<std::string, 8> topic_keys(std::string_view prefix, std::string_view topic);

// The topic's wake-up channel (docs/redis-api.md, "Wake-up signal"): named
// like its ready key, so it lives in the topic's cluster slot.
std::string wake_channel(std::string_view prefix, std::string_view topic);
// Its finished channel (docs/redis-api.md, "Waiting for a job"): named like
// its done key.
std::string finished_channel(std::string_view prefix, std::string_view topic);
// Its schedules' channel (docs/redis-api.md, "Recurring jobs"): named like
// its meta key.
std::string schedules_channel(std::string_view prefix, std::string_view topic);

// The topic of a key of that shape, or empty when the key is not one.
std::string_view topic_of_key(std::string_view prefix, std::string_view key);

}  // namespace redisched::core
