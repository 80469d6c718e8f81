// No answer runs on its caller's stack (docs/architecture.md): debug builds
// assert it at every hand-over to the link (client_detail::Sending). Here a
// link that keeps the rule, and one that breaks it by answering inline.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <memory>

#include "core/client_access.h"
#include "redisched/asio.h"
#include "redisched/client.h"
#include "testutil/fake_link.h"
#include "testutil/replies.h"

namespace redisched {
namespace {

constexpr std::int64_t kVersion = 42;

// A Client over a fake Redis that answers PING, SCAN (no keys), and
// kVersion to anything else; post hands each answer over, given the Client's runtime.
std::unique_ptr<Client> over_fake(
    const std::function<void(Runtime&, std::function<void()>)>& post) {
  ClientOptions options;
  options.runtime = std::make_shared<Runtime>(1);
  auto link = std::make_unique<test::FakeLink>(
      [](const std::vector<std::string>& words) {
        if (!words.empty() && words[0] == "PING") {
          return test::text("PONG", redis::Reply::Type::status);
        }
        if (!words.empty() && words[0] == "SCAN")
          return test::array({test::text("0"), test::array({})});
        return test::integer(kVersion);
      },
      [rt = options.runtime, post](std::function<void()> f) { post(*rt, std::move(f)); });
  return detail::ClientAccess::over_link(options, std::move(link));
}

TEST(InlineAnswerTest, ALinkThatAnswersLaterServesTheClient) {
  auto client = over_fake([](Runtime& rt, std::function<void()> f) {
    boost::asio::post(shard_io(rt, 0), std::move(f));
  });
  EXPECT_EQ(client->library_version(), kVersion);
  EXPECT_EQ(client->topics(), std::vector<std::string>{}) << "a link of one node, answered later";
}

TEST(InlineAnswerTest, AnAnswerOnItsCallersStackIsCaughtInDebugBuilds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // (In a release build the statement just runs: the inline answer works.)
  EXPECT_DEBUG_DEATH(
      {
        auto client = over_fake([](Runtime&, std::function<void()> f) { f(); });
        (void)client->library_version();
      },
      "an answer ran before its call returned");
}

}  // namespace
}  // namespace redisched
