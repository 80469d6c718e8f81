#include "core/keys.h"

namespace redisched::core {

void append_topic_key(std::string& out, std::string_view prefix, std::string_view topic,
                      std::string_view name) {
  out.append(prefix).append(":{").append(topic).append("}:").append(name);
}

TopicKeys topic_keys(std::string_view prefix, std::string_view topic) {
  TopicKeys keys;
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i].reserve(topic_key_size(prefix, topic, kKeyNames[i]));
    append_topic_key(keys[i], prefix, topic, kKeyNames[i]);
  }
  return keys;
}

std::string_view topic_of_key(std::string_view prefix, std::string_view key) {
  if (key.size() < prefix.size() + 4 || key.substr(0, prefix.size()) != prefix ||
      key.substr(prefix.size(), 2) != ":{") {
    return {};
  }
  key.remove_prefix(prefix.size() + 2);
  const size_t close = key.find("}:");
  if (close == std::string_view::npos || close == 0) return {};
  return key.substr(0, close);
}

std::array<std::string, 2> registry_keys(std::string_view prefix) {
  const std::string base = std::string(prefix) + ":{~workers}:";
  return {base + "alive", base + "entries"};
}

std::array<std::string, 2> id_block_keys(std::string_view prefix) {
  const std::string base = std::string(prefix) + ":{~beanstalk}:";
  return {base + "block", base + "blocks"};
}

std::string wake_channel(std::string_view prefix, std::string_view topic) {
  return topic_keys(prefix, topic)[2];
}

std::string finished_channel(std::string_view prefix, std::string_view topic) {
  return topic_keys(prefix, topic)[5];
}

std::string schedules_channel(std::string_view prefix, std::string_view topic) {
  return topic_keys(prefix, topic)[6];
}

std::string reports_channel(std::string_view prefix, std::string_view topic) {
  return topic_keys(prefix, topic)[7];
}

std::string outbox_channel(std::string_view prefix, std::string_view topic) {
  return topic_keys(prefix, topic)[14];
}

std::string sweep_channel(std::string_view prefix) { return std::string(prefix) + ":sweep"; }

}  // namespace redisched::core
