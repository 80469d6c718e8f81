// The RESP reader without a socket: replies built from bytes however they
// are split, nested arrays, every type, and bytes that are not RESP.
#include "redis/resp_reader.h"

#include <gtest/gtest.h>

#include "redisched/error.h"

namespace redisched::redis {
namespace {

using Type = Reply::Type;

TEST(RespReader, BuildsEveryTypeFromBytesSplitAnywhere) {
  static constexpr char kBytes[] =
      "+OK\r\n-ERR "
      "no\r\n:-42\r\n$5\r\nhe\0lo\r\n$-1\r\n*3\r\n:1\r\n*2\r\n$1\r\na\r\n*0\r\n$0\r\n\r\n";
  const std::string with_nul(kBytes, sizeof kBytes - 1);
  for (size_t split = 0; split <= with_nul.size(); ++split) {
    RespReader reader;
    std::vector<Reply> got;
    reader.feed(with_nul.data(), split);
    while (auto r = reader.next()) got.push_back(std::move(*r));
    reader.feed(with_nul.data() + split, with_nul.size() - split);
    while (auto r = reader.next()) got.push_back(std::move(*r));
    ASSERT_EQ(got.size(), 6u) << "split at " << split;
    EXPECT_EQ(got[0].type, Type::status);
    EXPECT_EQ(got[0].str, "OK");
    EXPECT_EQ(got[1].type, Type::error);
    EXPECT_EQ(got[1].str, "ERR no");
    EXPECT_EQ(got[2].integer, -42);
    EXPECT_EQ(got[3].str, std::string("he\0lo", 5));
    EXPECT_EQ(got[4].type, Type::nil);
    ASSERT_EQ(got[5].elements.size(), 3u);
    EXPECT_EQ(got[5].elements[0].integer, 1);
    ASSERT_EQ(got[5].elements[1].elements.size(), 2u);
    EXPECT_EQ(got[5].elements[1].elements[0].str, "a");
    EXPECT_EQ(got[5].elements[1].elements[1].type, Type::array);
    EXPECT_TRUE(got[5].elements[1].elements[1].elements.empty());
    EXPECT_EQ(got[5].elements[2].type, Type::string);
  }
}

TEST(RespReader, RefusesBytesThatAreNotRespAndHugeArrays) {
  for (const std::string bad : {"?what\r\n", ":12x\r\n", "*99999999999\r\n", "*70000\r\n"}) {
    RespReader reader;
    EXPECT_THROW(
        {
          reader.feed(bad.data(), bad.size());
          reader.next();
        },
        Error)
        << bad;
  }
}

}  // namespace
}  // namespace redisched::redis
