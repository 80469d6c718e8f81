#include "core/keys.h"

#include <gtest/gtest.h>

namespace redisched::core {
namespace {

TEST(KeysTest, EveryKeyCarriesTheTopicHashTag) {
  auto keys = topic_keys("redisched", "emails");
  EXPECT_EQ(keys[0], "redisched:{emails}:jobs");
  EXPECT_EQ(keys[6], "redisched:{emails}:meta");
  EXPECT_EQ(keys[7], "redisched:{emails}:leases");
  EXPECT_EQ(keys[8], "redisched:{emails}:queue");
  EXPECT_EQ(keys[9], "redisched:{emails}:later");
  EXPECT_EQ(keys[10], "redisched:{emails}:gone");
  for (const auto& k : keys) EXPECT_NE(k.find("{emails}"), std::string::npos) << k;
}

TEST(KeysTest, TopicOfKeyReadsBackTheTopic) {
  EXPECT_EQ(topic_of_key("redisched", "redisched:{emails}:meta"), "emails");
  EXPECT_EQ(topic_of_key("p", "p:{a.b-c}:jobs"), "a.b-c");
  EXPECT_EQ(topic_of_key("redisched", "other:{emails}:meta"), "");
  EXPECT_EQ(topic_of_key("redisched", "redisched:{}:meta"), "");
  EXPECT_EQ(topic_of_key("redisched", "redisched:emails"), "");
}

}  // namespace
}  // namespace redisched::core
