// wire/json_text: the user's JSON (a progress, a compat body) comes back as
// it was spelled, and what we write is JSON.
#include "wire/json_text.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <limits>

namespace redisched::wire {
namespace {

TEST(JsonText, AMemberKeepsItsNumbersAsSpelled) {
  const auto s = scan_json(R"({"token":7, "progress" : {"f": 0.1, "big": 123456789012345678901234,
    "e": 1e3, "list": [1.50, -0.0, "x\u00e9", true, null, {}]}, "log":[]})",
                           "progress");
  ASSERT_TRUE(s.member);
  EXPECT_EQ(
      *s.member,
      R"({"f":0.1,"big":123456789012345678901234,"e":1e3,"list":[1.50,-0.0,"xé",true,null,{}]})");
  EXPECT_TRUE(s.duplicate.empty());
  EXPECT_FALSE(s.out_of_range);
  EXPECT_EQ(scan_json(R"({"progress":0.25})", "progress").member, "0.25") << "a scalar member";
  EXPECT_EQ(scan_json(R"({"a":{"progress":1}})", "progress").member, std::nullopt)
      << "a top-level member only";
  EXPECT_EQ(scan_json(R"({"a":1})", "progress").member, std::nullopt);
  EXPECT_EQ(scan_json(R"({"":1})").member, std::nullopt) << "no member asked for";
}

TEST(JsonText, RefusalsAreFound) {
  EXPECT_EQ(scan_json(R"({"a":1,"b":{"c":1,"c":2}})").duplicate, "c");
  EXPECT_TRUE(scan_json(R"({"a":[1E400]})").out_of_range);
  EXPECT_EQ(scan_json(R"({"progress":1,"progress":2})", "progress").member, std::nullopt);
  EXPECT_EQ(compact_json("1E400"), std::nullopt);
  EXPECT_EQ(compact_json("0x10"), std::nullopt) << "not JSON";
  EXPECT_EQ(compact_json("[1] x"), std::nullopt) << "text after the value";
  EXPECT_EQ(compact_json(" [ 1 , 2.50 ] "), "[1,2.50]");
  EXPECT_EQ(compact_json(R"("a\"b")"), R"("a\"b")");
}

TEST(JsonText, DoublesAreWrittenShortAndAsJson) {
  EXPECT_EQ(boost::json::serialize(boost::json::value(0.1)), "1E-1") << "why to_text exists";
  EXPECT_EQ(
      to_text(boost::json::parse(R"({"a":[0.1,1.5,-2,18446744073709551615,1e30,true,null,"é"]})")),
      R"({"a":[0.1,1.5,-2,18446744073709551615,1e+30,true,null,"é"]})");
  EXPECT_EQ(to_text(boost::json::value(std::numeric_limits<double>::infinity())), "null");
  EXPECT_EQ(to_text(boost::json::parse("[5.0,-0.0,1e2]")), "[5.0,-0.0,100.0]")
      << "doubles stay doubles";
  EXPECT_EQ(to_text(boost::json::parse(R"({"s":"a\nb"})")), R"({"s":"a\nb"})");
}

TEST(JsonText, ARawMemberIsSplicedIn) {
  EXPECT_EQ(to_text_with(boost::json::object{{"id", "j"}}, "progress", "0.1"),
            R"({"id":"j","progress":0.1})");
  EXPECT_EQ(to_text_with(boost::json::object{}, "contents", "[1]"), R"({"contents":[1]})");
}

}  // namespace
}  // namespace redisched::wire
