// The server's route table without a socket: which route and handler a
// method and target reach, the decoded parameters, and the refusals.
#include "server/router.h"

#include <gtest/gtest.h>

#include "server/api.h"
#include "server/fields.h"

namespace redisched::server {
namespace {

using http::verb;

Match match(verb method, std::string_view target) {
  return match_route(api_routes(), method, target);
}

// The status check_params refuses with (an invalid_argument Error is
// answered 400), or 0.
int refused(const Match& m) {
  try {
    check_params(m);
    return 0;
  } catch (const HttpError& e) {
    return static_cast<int>(e.status);
  } catch (const Error& e) {
    return e.code() == Errc::invalid_argument ? 400 : 500;
  }
}

// The status matching or checking refuses a target with, or 0.
int refused(verb method, std::string_view target) {
  try {
    return refused(match(method, target));
  } catch (const HttpError& e) {
    return static_cast<int>(e.status);
  }
}

TEST(RouterTest, AJobsPathGivesItsRouteHandlerAndParameters) {
  auto m = match(verb::put, "/v1/topics/emails/jobs/welcome_42");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->path, "/v1/topics/{topic}/jobs/{id}");
  EXPECT_NE(m.handler, nullptr);
  EXPECT_EQ(m.params.topic, "emails");
  EXPECT_EQ(m.params.id, "welcome_42");
  EXPECT_EQ(refused(m), 0);
}

TEST(RouterTest, PercentEncodedIdsAreDecoded) {
  auto m = match(verb::get, "/v1/topics/t/jobs/a%20b%2Fc");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.id, "a b/c");
}

TEST(RouterTest, AnUnknownPathHasNoRoute) {
  EXPECT_EQ(match(verb::get, "/v1/topics/alpha/bogus").route, nullptr);
  EXPECT_EQ(match(verb::get, "/nothing").route, nullptr);
  EXPECT_EQ(match(verb::get, "/v1/topics/t/jobs/j/ack/more").route, nullptr);
}

TEST(RouterTest, AKnownPathWithAnotherMethodHasNoHandlerAndSaysWhatIsAllowed) {
  auto m = match(verb::delete_, "/");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.handler, nullptr);
  EXPECT_EQ(allowed_methods(*m.route), "GET, HEAD");
  auto ack = match(verb::get, "/v1/topics/t/jobs/j/ack");
  ASSERT_NE(ack.route, nullptr);
  EXPECT_EQ(ack.handler, nullptr);
  EXPECT_EQ(allowed_methods(*ack.route), "POST");
}

TEST(RouterTest, HeadTakesGetsHandler) {
  auto head = match(verb::head, "/healthz");
  auto get = match(verb::get, "/healthz");
  ASSERT_NE(head.handler, nullptr);
  EXPECT_EQ(head.handler, get.handler);
  EXPECT_TRUE(head.route->open);
  EXPECT_FALSE(match(verb::get, "/metrics").route->open);
}

TEST(RouterTest, QueriesAreDecodedAndCheckedAgainstTheRoute) {
  auto pop = match(verb::get, "/pop?topic=a%2Bb");
  ASSERT_NE(pop.handler, nullptr);
  ASSERT_NE(pop.params.find("topic"), nullptr);
  EXPECT_EQ(*pop.params.find("topic"), "a+b");
  EXPECT_EQ(refused(pop), 0) << "the original routes take any query";
  EXPECT_EQ(refused(match(verb::get, "/v1/topics?limit=3")), 400) << "a parameter it does not take";
  EXPECT_EQ(refused(match(verb::get, "/v1/events?topic=a&topic=b")), 400) << "given twice";
}

TEST(RouterTest, BadTopicsAndIdsAreRefused) {
  EXPECT_EQ(refused(verb::get, "/v1/topics/bad%20topic"), 400);
  EXPECT_EQ(refused(verb::get, "/v1/topics/t/jobs/a%01b"), 400) << "a control character";
  EXPECT_EQ(refused(verb::get, "/v1/topics/t/jobs/%ff"), 400) << "not UTF-8";
  EXPECT_EQ(refused(verb::get, "/v1/topics/t/jobs/fine"), 0);
}

TEST(RouterTest, ATargetThatIsNotOneIsRefused) {
  EXPECT_THROW(match(verb::get, "no-slash"), HttpError);
  EXPECT_THROW(match(verb::get, "/v1/topics/%zz"), HttpError);
}

}  // namespace
}  // namespace redisched::server
