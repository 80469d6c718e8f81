// Scoped tokens (server/access.h): the --tokens file's grammar, finding a
// token, and which calls each role and prefix may make.
#include "server/access.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace redisched::server {
namespace {

constexpr const char* kFile =
    "# role token [prefix]\n"
    "\n"
    "read     reader-0123456789abcdef\n"
    "produce  producer-0123456789abcdef  shop.\n"
    "consume  consumer-0123456789abcdef\n"
    "  admin  admin-0123456789abcdef\n";

void expect_refused(const std::string& text, const std::string& says) {
  try {
    Access::parse("", text, "tokens");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokens:1: "), std::string::npos) << e.what();
  }
}

TEST(AccessTest, TheFileGrantsARoleAndAPrefixPerToken) {
  const Access a = Access::parse("s3cret", kFile, "tokens");
  EXPECT_FALSE(a.open());
  const Grant* single = a.find("s3cret");
  ASSERT_NE(single, nullptr);
  EXPECT_EQ(single->role, Role::admin);
  EXPECT_EQ(single->prefix, "");
  const Grant* producer = a.find("producer-0123456789abcdef");
  ASSERT_NE(producer, nullptr);
  EXPECT_EQ(producer->role, Role::produce);
  EXPECT_EQ(producer->prefix, "shop.");
  EXPECT_EQ(a.find("producer-0123456789abcde"), nullptr) << "a prefix of a token";
  EXPECT_EQ(a.find("producer-0123456789abcdefX"), nullptr);
  EXPECT_EQ(a.find(""), nullptr);
  EXPECT_EQ(a.from_header("bearer admin-0123456789abcdef"), a.find("admin-0123456789abcdef"));
  EXPECT_EQ(a.from_header("Basic admin-0123456789abcdef"), nullptr);
  EXPECT_EQ(a.from_header("Bearer "), nullptr);
  EXPECT_TRUE(Access().open());
  EXPECT_TRUE(Access::parse("", "# nothing\n", "tokens").open());
}

TEST(AccessTest, ABadLineIsRefusedNamingItsPlace) {
  expect_refused("writer token-0123456789abcdef\n", "unknown role 'writer'");
  expect_refused("read\n", "ROLE TOKEN [TOPIC_PREFIX]");
  expect_refused("read short\n", "at least 16 visible ASCII");
  expect_refused("read token-0123456789abcdef p extra\n", "more than ROLE TOKEN");
  expect_refused(
      "read token-01234567\xc3\xa9"
      "89abcdef\n",
      "visible ASCII");
  try {
    Access::parse("", "read token-0123456789abcdef\nadmin token-0123456789abcdef\n", "tokens");
    ADD_FAILURE() << "a token granted twice";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens:2: this token is granted twice"),
              std::string::npos)
        << e.what();
  }
}

TEST(AccessTest, EachRoleCoversItsCallsAndAPrefixItsTopics) {
  const Grant read{"r", Role::read, ""};
  const Grant produce{"p", Role::produce, ""};
  const Grant consume{"c", Role::consume, ""};
  const Grant admin{"a", Role::admin, ""};
  for (const Grant* g : {&read, &produce, &consume, &admin}) {
    EXPECT_FALSE(refusal(*g, Role::read, "t")) << to_string(g->role);
    EXPECT_FALSE(refusal(*g, Role::read, "")) << "no prefix: the topic-less routes too";
  }
  EXPECT_TRUE(refusal(read, Role::produce, "t"));
  EXPECT_TRUE(refusal(read, Role::consume, "t"));
  EXPECT_FALSE(refusal(produce, Role::produce, "t"));
  EXPECT_TRUE(refusal(produce, Role::consume, "t"));
  EXPECT_TRUE(refusal(consume, Role::produce, "t"));
  EXPECT_FALSE(refusal(consume, Role::consume, "t"));
  for (const Grant* g : {&read, &produce, &consume}) EXPECT_TRUE(refusal(*g, Role::admin, "t"));
  for (Role need : {Role::read, Role::produce, Role::consume, Role::admin}) {
    EXPECT_FALSE(refusal(admin, need, "t"));
  }
  EXPECT_EQ(*refusal(read, Role::produce, "t"),
            "this token's role is read; this call needs produce (or admin)");

  const Grant shop{"s", Role::produce, "shop."};
  EXPECT_FALSE(refusal(shop, Role::produce, "shop.orders"));
  EXPECT_FALSE(refusal(shop, Role::read, "shop."));
  EXPECT_EQ(*refusal(shop, Role::produce, "shopping"),
            "this token is limited to topics starting with 'shop.'");
  EXPECT_TRUE(refusal(shop, Role::read, "")) << "a route naming no topic: all of them";
  EXPECT_TRUE(refusal(shop, Role::consume, "shop.orders")) << "the role first";
}

}  // namespace
}  // namespace redisched::server
