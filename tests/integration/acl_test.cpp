// A Client and a Worker as Redis ACL users limited to one topic (issue 33:
// every key a call touches is one of its KEYS). One user holds the key
// pattern ~P:{T}:*, the other the topic's eleven keys by name, and may
// neither load the library nor run a dangerous command. Each runs
// jobs through every key: the ready and delayed lists, the retry window, a
// retained job and a dead one; and each is refused another topic.
#include <gtest/gtest.h>

#include <string>

#include "core/keys.h"
#include "redisched/client.h"
#include "redisched/worker.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using namespace std::chrono_literals;
using test::job;
using test::RedisServer;
using test::wait_until;

constexpr const char* kAclTopic = "tenant";

// The users: alice by pattern, with every command; bob by name, without
// FUNCTION (Redis checks the commands a function sends too, so a user needs
// the data commands the library uses: +@all -@dangerous is the simple way).
std::string acl_users() {
  const std::string channels = " &redisched:{tenant}:*";
  std::string by_name;
  for (const auto& k : core::topic_keys("redisched", kAclTopic)) by_name += " ~" + k;
  return "user alice on >wonder ~redisched:{tenant}:*" + channels + " +@all\n" +
         "user bob on >builder" + by_name + channels + " +@all -@dangerous -function\n";
}

ClientOptions as_user(const RedisServer& server, const std::string& user_and_password) {
  ClientOptions o;
  o.redis_url = "redis://" + user_and_password + "@127.0.0.1:" + std::to_string(server.port());
  return o;
}

class AclTest : public ::testing::TestWithParam<const char*> {
 protected:
  RedisServer server_{{.extra_config = acl_users()}};
  // bob may not load the library: the default user does, as an operator would.
  Client admin_{as_user(server_, "default:")};
};

TEST_P(AclTest, AUserLimitedToOneTopicRunsJobsThroughEveryKey) {
  Client client(as_user(server_, GetParam()));
  JobSpec later = job("later");
  later.delay = 150ms;
  JobSpec kept = job("kept");
  kept.keep = 60s;
  JobSpec doomed = job("doomed");
  doomed.max_attempts = 1;
  for (const auto& spec : {job("now"), later, kept, doomed}) {
    EXPECT_EQ(client.put(kAclTopic, spec), PutOutcome::created) << spec.id;
  }

  WorkerOptions options;
  options.client = as_user(server_, GetParam());
  Worker worker(options);
  worker.handle(kAclTopic, {.concurrency = 2}, [](JobContext& ctx) {
    if (ctx.id() == "doomed") {
      ctx.log("looked up the mailbox");  // (a report: the record and the progress channel)
      throw std::runtime_error("no such mailbox");
    }
  });
  worker.run();
  ASSERT_TRUE(wait_until([&] { return worker.stats().acked == 3 && worker.stats().failed == 1; }))
      << "acked " << worker.stats().acked << ", failed " << worker.stats().failed;
  worker.cancel();

  auto done = client.wait(kAclTopic, "kept", 5s);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, JobState::done);
  EXPECT_FALSE(client.get(kAclTopic, "now")) << "acked without KEEP";
  EXPECT_EQ(client.put(kAclTopic, job("now")), PutOutcome::exists) << "within its retry window";
  const TopicStats s = client.stats(kAclTopic);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.done, 1);
  EXPECT_EQ(s.delayed + s.ready + s.reserved, 0);
  const auto doomed_job = client.get(kAclTopic, "doomed");
  ASSERT_TRUE(doomed_job);
  ASSERT_EQ(doomed_job->log.size(), 1u) << "its report went before its failure";
  EXPECT_EQ(doomed_job->log[0].text, "looked up the mailbox");

  // Another topic's keys are no one's but the operator's.
  EXPECT_REDISCHED_ERROR(client.put("other", job("x")), Errc::server, "NOPERM");
  EXPECT_EQ(admin_.stats("other").ready, 0);
}

INSTANTIATE_TEST_SUITE_P(Users, AclTest, ::testing::Values("alice:wonder", "bob:builder"),
                         [](const auto& p) {
                           return std::string(p.param).substr(0, p.param[0] == 'a' ? 5 : 3);
                         });

}  // namespace
}  // namespace redisched
