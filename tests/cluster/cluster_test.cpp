// The Client and the Worker on a real Redis Cluster (3 primaries with a
// replica each, tests/testutil/redis_cluster.h): every call on topics of
// every primary, wake-ups through shard channels, and a topic whose slot
// moves while producers and workers run.
#include "redis/cluster.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "redisched/client.h"
#include "redisched/worker.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_cluster.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using test::wait_until;

test::RedisCluster* g_cluster = nullptr;

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { g_cluster = new test::RedisCluster(3, 1); }
  void TearDown() override {
    delete g_cluster;
    g_cluster = nullptr;
  }
};

ClientOptions on_cluster() {
  ClientOptions o;
  o.redis_url = g_cluster->url();
  return o;
}

// A topic named base_n whose slot a primary other than the ones in `taken`
// serves, so that topics land on every primary.
std::string topic_on_new_primary(const std::string& base, std::set<int>& taken) {
  for (int n = 0;; ++n) {
    std::string topic = base + "_" + std::to_string(n);
    const int port = g_cluster->owner_port(redis::hash_slot(topic));
    if (taken.insert(port).second) return topic;
  }
}

std::vector<std::string> topics_on_every_primary(const std::string& base) {
  std::set<int> taken;
  std::vector<std::string> out;
  for (size_t i = 0; i < g_cluster->primary_ports().size(); ++i) {
    out.push_back(topic_on_new_primary(base, taken));
  }
  return out;
}

TEST(Cluster, EveryCallWorksOnTopicsOfEveryPrimary) {
  Client client(on_cluster());
  const auto topics = topics_on_every_primary("calls");
  ASSERT_EQ(topics.size(), 3u);
  for (const auto& topic : topics) {
    SCOPED_TRACE(topic);
    JobSpec a{.id = "a", .body = "first"};
    JobSpec b{.id = "b", .body = "second"};
    EXPECT_EQ(client.put(topic, a), PutOutcome::created);
    EXPECT_EQ(client.put(topic, b), PutOutcome::created);
    auto got = client.get(topic, "a");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->body, "first");
    auto r = client.reserve(topic, 2);
    ASSERT_EQ(r.jobs.size(), 2u);
    EXPECT_EQ(client.ack(topic, r.jobs[0].id, r.jobs[0].token), Outcome::ok);
    EXPECT_EQ(client.fail(topic, r.jobs[1].id, r.jobs[1].token, "broke", true).outcome,
              Outcome::ok);
    auto s = client.stats(topic);
    EXPECT_EQ(s.dead, 1);
    EXPECT_EQ(s.ready, 0);
    EXPECT_TRUE(client.remove(topic, "b"));
  }
  // Listing covers every primary.
  const auto listed = client.topics();
  for (const auto& topic : topics) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), topic), listed.end()) << topic;
  }
  // The Functions library was loaded on every primary as it was first seen.
  for (int port : g_cluster->primary_ports()) {
    test::RawRedis raw(port);
    auto v = raw.call({"FCALL", "redisched_version", "0"});
    EXPECT_EQ(v->type, REDIS_REPLY_INTEGER) << "port " << port;
  }
}

TEST(Cluster, WorkersWakeForDelayedJobsOnEveryPrimary) {
  const auto topics = topics_on_every_primary("wake");
  Worker worker(WorkerOptions{.client = on_cluster()});
  std::mutex mu;
  std::map<std::string, std::chrono::steady_clock::time_point> ran;
  for (const auto& topic : topics) {
    worker.handle(topic, {.concurrency = 1}, [&](JobContext& ctx) {
      std::lock_guard lock(mu);
      ran[std::string(ctx.topic())] = std::chrono::steady_clock::now();
    });
  }
  [[maybe_unused]] auto cancel = worker.run();
  std::this_thread::sleep_for(300ms);  // subscribed, idle, nothing due
  Client producer(on_cluster());
  const auto put_at = std::chrono::steady_clock::now();
  for (const auto& topic : topics) {
    producer.put(topic, JobSpec{.id = "later", .body = "x", .delay = Millis{200}});
  }
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard lock(mu);
        return ran.size() == topics.size();
      },
      5s));
  for (const auto& [topic, at] : ran) {
    EXPECT_GE(at - put_at, 190ms) << topic << " ran before it was due";
    EXPECT_LT(at - put_at, 1500ms) << topic << " was not woken in time";
  }
}

// A busy topic's slot moves to another primary, its keys a few at a time,
// while a producer puts and a worker runs: every job runs, and runs once.
TEST(Cluster, ATopicWhoseSlotMovesUnderLoadLosesAndRepeatsNothing) {
  const std::string topic = "moving";
  const auto slot = redis::hash_slot(topic);
  const int from = g_cluster->owner_port(slot);
  int to = 0;
  for (int p : g_cluster->primary_ports()) {
    if (p != from) to = p;
  }
  constexpr int kJobs = 3000;
  std::mutex mu;
  std::map<std::string, int> runs;
  Worker worker(WorkerOptions{.client = on_cluster()});
  worker.handle(topic, {.concurrency = 8}, [&](JobContext& ctx) {
    std::lock_guard lock(mu);
    ++runs[ctx.job().id];
  });
  [[maybe_unused]] auto cancel = worker.run();
  std::atomic<int> put{0};
  std::thread producer([&] {
    Client client(on_cluster());
    for (int i = 0; i < kJobs; ++i) {
      for (;;) {
        try {
          client.put(topic, JobSpec{.id = "job_" + std::to_string(i), .body = "b"});
          break;
        } catch (const Error& e) {
          ADD_FAILURE() << "put " << i << ": " << e.what();
          return;
        }
      }
      ++put;
    }
  });
  ASSERT_TRUE(wait_until([&] { return put > kJobs / 4; }, 20s));
  auto redirects = [&] {
    return test::RedisCluster::errors_given(from, "ASK") +
           test::RedisCluster::errors_given(from, "MOVED") +
           test::RedisCluster::errors_given(to, "TRYAGAIN");
  };
  const long before = redirects();
  g_cluster->move_slot(slot, to, 2, 20);
  EXPECT_EQ(g_cluster->owner_port(slot), to);
  producer.join();
  std::printf("slot move: ASK %ld, MOVED %ld (from the old owner), TRYAGAIN %ld (the new)\n",
              test::RedisCluster::errors_given(from, "ASK"),
              test::RedisCluster::errors_given(from, "MOVED"),
              test::RedisCluster::errors_given(to, "TRYAGAIN"));
  EXPECT_GT(redirects(), before) << "the clients met the move";
  EXPECT_TRUE(wait_until(
      [&] {
        std::lock_guard lock(mu);
        return runs.size() == static_cast<size_t>(kJobs);
      },
      30s));
  std::lock_guard lock(mu);
  int twice = 0;
  for (const auto& [id, n] : runs) twice += n > 1 ? 1 : 0;
  EXPECT_EQ(static_cast<int>(runs.size()), kJobs) << "jobs lost";
  EXPECT_EQ(twice, 0) << "jobs that ran twice";
  Client client(on_cluster());
  EXPECT_EQ(client.stats(topic).ready, 0);
}

}  // namespace
}  // namespace redisched

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new redisched::ClusterEnvironment());
  return RUN_ALL_TESTS();
}
