// Upgrades under load (issue 33): a topic written by library version 8, 9
// or 17, then a Worker of this version (its Client loads this library over
// the old one, and migrates the topic when a call meets version 8's data)
// working it, with or without a migrator beside it (another program, 10 records
// and members a call, a few calls in before the Worker starts). Every job
// is worked (the ones the old library held reserved too, once their
// reservations lapse), the dead one stays dead, and nothing of an older
// format is left.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/keys.h"
#include "redisched/client.h"
#include "redisched/version.h"
#include "redisched/worker.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using namespace std::chrono_literals;
using test::RawRedis;
using test::RedisServer;
using test::wait_until;

constexpr const char* kUpgradeTopic = "upgraded";
constexpr int kJobs = 1500;

std::string fixture(int version) {
  std::ifstream in(std::string(REDISCHED_FIXTURES_DIR) + "/redisched_v" + std::to_string(version) +
                   ".lua");
  std::stringstream code;
  code << in.rdbuf();
  return code.str();
}

// A call of the old library: the eight keys every version takes.
std::vector<std::string> old_call(const std::string& op, std::vector<std::string> args) {
  std::vector<std::string> words = {"FCALL", "redisched_" + op, "8"};
  for (const char* name :
       {"jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases"}) {
    words.push_back(std::string("redisched:{") + kUpgradeTopic + "}:" + name);
  }
  words.insert(words.end(), args.begin(), args.end());
  return words;
}

// (version, whether Client::migrate runs beside the Worker)
class UpgradeTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(UpgradeTest, WorkersRunWhileTheTopicIsMigratedAndNoJobIsLost) {
  const int version = std::get<0>(GetParam());
  const bool migrator = std::get<1>(GetParam());
  RedisServer server;
  RawRedis raw(server.port());
  auto loaded = raw.call({"FUNCTION", "LOAD", "REPLACE", fixture(version)});
  ASSERT_EQ(loaded->type, REDIS_REPLY_STRING) << (loaded->str ? loaded->str : "");
  // Bodies over 64 bytes keep the jobs hash a hash table, so that a
  // migration of 10 records a call takes many calls.
  const std::string body(100, 'b');
  std::set<std::string> expected;
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "j" + std::to_string(i);
    std::vector<std::string> args = {id, body, "PRIORITY", std::to_string(i % 5)};
    if (i % 3 == 0) args.insert(args.end(), {"DELAY", std::to_string(200 + i % 400)});
    auto r = raw.call(old_call("put", args));
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << (r->str ? r->str : "");
    expected.insert(id);
  }
  // Held by a worker of the old version that went away: they lapse.
  auto held = raw.call(old_call("reserve", {"20", "TTR", "300"}));
  ASSERT_EQ(held->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(held->elements, 3u + 20u);
  // One that died under the old version: it stays dead.
  raw.call(old_call("put", {"doomed", body, "PRIORITY", "1000", "ATTEMPTS", "1"}));
  auto doomed = raw.call(old_call("reserve", {"1"}));
  ASSERT_EQ(doomed->elements, 4u);
  const std::string token = doomed->element[3]->element[2]->type == REDIS_REPLY_INTEGER
                                ? std::to_string(doomed->element[3]->element[2]->integer)
                                : doomed->element[3]->element[2]->str;
  raw.call(old_call("fail", {"doomed", token, "kaput", "DEAD"}));

  WorkerOptions options;
  options.client.redis_url = server.url();
  Worker worker(options);
  std::mutex mu;
  std::map<std::string, int> worked;
  worker.handle(kUpgradeTopic, {.concurrency = 4}, [&](JobContext& ctx) {
    std::lock_guard lock(mu);
    ++worked[std::string(ctx.id())];
  });
  Client& client = worker.client();
  ASSERT_EQ(client.library_version(), functions_library_version()) << "loaded over the old one";
  // The migrator: another program (as a client in another language would,
  // or `redisched migrate --limit 10`), 10 records and members a call; a
  // few calls in before the Worker starts, and on beside it.
  std::atomic<int> calls{0};
  std::atomic<std::int64_t> rewritten{0};
  auto migrate = [&] {
    RawRedis own(server.port());
    const auto keys = core::topic_keys("redisched", kUpgradeTopic);
    std::vector<std::string> call = {"FCALL", "redisched_migrate", std::to_string(keys.size())};
    for (const auto& k : keys) call.push_back(k);
    call.insert(call.end(), {"LIMIT", "10"});
    for (;;) {
      auto r = own.call(call);
      if (r->type != REDIS_REPLY_ARRAY) {
        ADD_FAILURE() << "migrate: " << (r->str ? r->str : "?");
        return;
      }
      ++calls;
      rewritten += r->element[1]->integer;
      if (r->element[0]->integer == 1) return;
    }
  };
  std::thread migrating;
  if (migrator) {
    migrating = std::thread(migrate);
    ASSERT_TRUE(wait_until([&] { return calls >= 3; }));
  }
  worker.run();
  if (migrating.joinable()) migrating.join();
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard lock(mu);
        return worked.size() == expected.size();
      },
      30s));
  worker.cancel();

  for (const auto& id : expected) EXPECT_TRUE(worked.contains(id)) << id;
  EXPECT_FALSE(worked.contains("doomed"));
  const TopicStats s = client.stats(kUpgradeTopic);
  EXPECT_EQ(s.delayed + s.ready + s.reserved, 0);
  EXPECT_EQ(s.dead, 1);
  auto dead = client.get(kUpgradeTopic, "doomed");
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead->error, "kaput");
  // Version 8 wrote format 1 records, rewritten by the migrator or by the
  // Worker's calls that met them (1,000 a call), which marks the topic;
  // 9 and 17 wrote format 2: nothing to rewrite.
  if (migrator) {
    EXPECT_GT(calls, 2) << "the migration went in parts";
  }
  if (version != 8) {
    EXPECT_EQ(rewritten, 0);
  }
  auto marked =
      raw.call({"HGET", std::string("redisched:{") + kUpgradeTopic + "}:meta", "migrated"});
  if (version == 8 || migrator) {
    ASSERT_EQ(marked->type, REDIS_REPLY_STRING);
    EXPECT_EQ(std::string(marked->str), "26");
  }
  auto rec = raw.call({"HGET", std::string("redisched:{") + kUpgradeTopic + "}:jobs", "doomed"});
  ASSERT_EQ(rec->type, REDIS_REPLY_STRING);
  EXPECT_NE(static_cast<unsigned char>(rec->str[0]) & 128, 0) << "format 2";
  EXPECT_EQ(client.migrate(kUpgradeTopic).calls, 1) << "marked done: answered at once";
}

INSTANTIATE_TEST_SUITE_P(FromVersion, UpgradeTest,
                         ::testing::Combine(::testing::Values(8, 9, 17), ::testing::Bool()),
                         [](const auto& p) {
                           return "v" + std::to_string(std::get<0>(p.param)) +
                                  (std::get<1>(p.param) ? "_with_migrator" : "_workers_alone");
                         });

}  // namespace
}  // namespace redisched
