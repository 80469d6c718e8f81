// Recurring jobs against a real redis-server: schedules set, read, paused
// and removed through the Client; ticks put exactly once by Schedulers
// racing one another; catch-up after a downtime; a Worker's own Scheduler.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "redisched/scheduler.h"
#include "redisched/worker.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using namespace std::chrono_literals;
using test::unique_topic;
using test::wait_until;

// The tick of a job id "<name>@<tick>".
std::int64_t tick_of(const std::string& id) { return std::stoll(id.substr(id.find('@') + 1)); }

class ScheduleTest : public ::testing::Test {
 protected:
  Client client_{test::client_options()};
  std::string topic_ = unique_topic();
};

TEST_F(ScheduleTest, SetReadPauseResumeAndRemove) {
  ScheduleSpec spec;
  spec.cron = "30 2 * * *";
  spec.time_zone = "Europe/Berlin";
  spec.body = "nightly report";
  spec.priority = 7;
  spec.keep = 1h;
  spec.max_attempts = 2;
  spec.catch_up = CatchUp::last;
  const auto set = client_.set_schedule(topic_, "nightly", spec);
  const auto now = client_.now_ms();
  EXPECT_GT(set.next_ms, now);
  EXPECT_LE(set.next_ms, now + 24 * 3600 * 1000 + 3600 * 1000);
  auto list = client_.schedules(topic_);
  ASSERT_EQ(list.schedules.size(), 1u);
  const auto& sc = list.schedules[0];
  EXPECT_EQ(sc.name, "nightly");
  EXPECT_EQ(sc.spec.cron, "30 2 * * *");
  EXPECT_EQ(sc.spec.time_zone, "Europe/Berlin");
  EXPECT_EQ(sc.spec.body, "nightly report");
  EXPECT_EQ(sc.spec.priority, 7);
  EXPECT_EQ(sc.spec.keep, 1h);
  EXPECT_EQ(sc.spec.max_attempts, 2);
  EXPECT_EQ(sc.spec.catch_up, CatchUp::last);
  EXPECT_EQ(sc.next_ms, set.next_ms);
  EXPECT_EQ(sc.last_tick_ms, 0);
  const auto runs = next_ticks(sc, 3);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0], sc.next_ms);
  EXPECT_NEAR(static_cast<double>(runs[2] - runs[1]), 86'400'000.0, 3'600'000.0) << "a day apart";
  EXPECT_EQ(client_.stats(topic_).schedules, 1);

  // Set again as it is: its next tick stays.
  EXPECT_EQ(client_.set_schedule(topic_, "nightly", spec).next_ms, set.next_ms);
  EXPECT_EQ(client_.pause_schedule(topic_, "nightly"), Outcome::ok);
  EXPECT_EQ(client_.pause_schedule(topic_, "nightly"), Outcome::wrong_state);
  EXPECT_EQ(client_.pause_schedule(topic_, "nothing"), Outcome::not_found);
  EXPECT_EQ(client_.resume_schedule(topic_, "nothing"), Outcome::not_found);
  EXPECT_TRUE(client_.schedules(topic_).schedules[0].spec.paused);
  EXPECT_EQ(client_.resume_schedule(topic_, "nightly"), Outcome::ok);
  EXPECT_FALSE(client_.schedules(topic_).schedules[0].spec.paused);
  // A change: an interval now.
  ScheduleSpec every;
  every.every = 90s;
  every.body = "b";
  EXPECT_EQ(client_.set_schedule(topic_, "nightly", every).spec.every, 90s);
  EXPECT_EQ(client_.stats(topic_).schedules, 1) << "changed, not added";
  EXPECT_TRUE(client_.remove_schedule(topic_, "nightly"));
  EXPECT_FALSE(client_.remove_schedule(topic_, "nightly"));
  EXPECT_TRUE(client_.schedules(topic_).schedules.empty());
  EXPECT_EQ(client_.stats(topic_).schedules, 0);
}

TEST_F(ScheduleTest, BadSchedulesAreRefusedByName) {
  ScheduleSpec spec;
  spec.cron = "61 * * * *";
  EXPECT_REDISCHED_ERROR(client_.set_schedule(topic_, "s", spec), Errc::invalid_argument,
                         "minutes: 61");
  spec.cron = "* * * * *";
  spec.time_zone = "Mars/Base";
  EXPECT_REDISCHED_ERROR(client_.set_schedule(topic_, "s", spec), Errc::invalid_argument,
                         "unknown time zone");
  spec.time_zone = "UTC";
  EXPECT_REDISCHED_ERROR(client_.set_schedule(topic_, "no spaces", spec), Errc::invalid_argument,
                         "schedule name");
  spec.every = 1s;
  EXPECT_REDISCHED_ERROR(client_.set_schedule(topic_, "s", spec), Errc::invalid_argument,
                         "not both");
  ScheduleSpec bad_job;
  bad_job.every = 1s;
  bad_job.priority = 5000;
  EXPECT_REDISCHED_ERROR(client_.set_schedule(topic_, "s", bad_job), Errc::invalid_argument,
                         "PRIORITY");
  EXPECT_TRUE(client_.schedules(topic_).schedules.empty()) << "nothing stored";
}

// Four Schedulers, each on a Client (and connections) of its own, race for
// every tick of a 100 ms schedule; a worker takes the jobs. Every tick from
// the first to the last is put exactly once, or counted skipped where every
// scheduler stalled past it: no second job, no tick unaccounted.
TEST_F(ScheduleTest, EachTickIsPutOnceWhateverHowManySchedulersRace) {
  constexpr auto kEvery = 100ms;
  ScheduleSpec spec;
  spec.every = kEvery;
  spec.body = "tick";
  client_.set_schedule(topic_, "pulse", spec);
  const std::int64_t first = client_.schedules(topic_).schedules.at(0).next_ms;

  std::mutex mu;
  std::vector<std::string> seen;
  WorkerOptions wo;
  wo.client = test::client_options();
  wo.run_schedules = false;  // the four below are the schedulers
  Worker worker(wo);
  worker.handle(topic_, {.concurrency = 4}, [&](JobContext& ctx) {
    std::lock_guard lock(mu);
    seen.emplace_back(ctx.id());
  });
  worker.run();
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<Client>(test::client_options()));
    schedulers.push_back(std::make_unique<Scheduler>(*clients.back()));
  }
  for (auto& s : schedulers) s->add_topic(topic_);
  std::this_thread::sleep_for(2500ms);
  for (auto& s : schedulers) s->stop();
  // (Redis's clock once every scheduler stopped: no tick after it was put.)
  const std::int64_t stopped = client_.now_ms();
  Scheduler::Stats total;
  for (auto& s : schedulers) {
    const auto st = s->stats();
    total.put += st.put;
    total.lost += st.lost;
    total.skipped += st.skipped;
    total.errors += st.errors;
  }
  // Every tick put runs, up to the last one Redis holds. stop() waited for
  // the answers in flight: the stats count every tick put.
  const auto last = client_.schedules(topic_).schedules[0].last_tick_ms;
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard lock(mu);
    return seen.size() >= total.put && std::any_of(seen.begin(), seen.end(), [&](const auto& id) {
             return tick_of(id) == last;
           });
  }));
  worker.cancel();
  std::vector<std::int64_t> ticks;
  for (const auto& id : seen) ticks.push_back(tick_of(id));
  std::sort(ticks.begin(), ticks.end());
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(std::adjacent_find(ticks.begin(), ticks.end()), ticks.end()) << "a tick put twice";
  EXPECT_EQ(ticks.size(), total.put) << "stats final once stop() returned";
  // A gap is a stall of every scheduler past the next tick (a busy
  // machine): the catch-up runs the last tick missed, and the ones before
  // it are counted as skipped, once. No tick is lost without a count.
  std::uint64_t gaps = (ticks.front() - first) / kEvery.count();
  for (std::size_t i = 1; i < ticks.size(); ++i) {
    const std::int64_t step = ticks[i] - ticks[i - 1];
    EXPECT_EQ(step % kEvery.count(), 0) << "a tick off the interval after tick " << i;
    gaps += step / kEvery.count() - 1;
  }
  EXPECT_EQ(total.skipped, gaps) << "every tick from the first: put once, or counted skipped";
  EXPECT_GE(ticks.size() + total.skipped, 15u) << "about 25 ticks in 2.5 s";
  // At most the ticks due from the first until the schedulers stopped
  // (2.5 s asleep, and stop() took longer on a loaded machine: a fixed 27
  // failed once at 28 under the sanitizers).
  EXPECT_LE(ticks.size() + total.skipped,
            static_cast<std::uint64_t>((stopped - first) / kEvery.count() + 1));
  EXPECT_GT(total.lost, 0u) << "the schedulers did race";
  EXPECT_EQ(total.errors, 0u);
  EXPECT_EQ(last, ticks.back());
  std::printf(
      "4 schedulers, %zu ticks of 100 ms: each put once (%llu lost to another, %llu skipped)\n",
      ticks.size(), static_cast<unsigned long long>(total.lost),
      static_cast<unsigned long long>(total.skipped));
  client_.remove_schedule(topic_, "pulse");
}

TEST_F(ScheduleTest, AWorkerRunsTheSchedulesOfItsTopics) {
  ScheduleSpec spec;
  spec.every = 100ms;
  spec.body = "from the schedule";
  spec.priority = 3;
  client_.set_schedule(topic_, "beat", spec);
  WorkerOptions wo;
  wo.client = test::client_options();
  Worker worker(wo);
  std::atomic<int> runs{0};
  std::mutex mu;
  std::vector<Reservation> jobs;
  worker.handle(topic_, {}, [&](JobContext& ctx) {
    std::lock_guard lock(mu);
    jobs.push_back(ctx.job());
    ++runs;
  });
  worker.run();
  ASSERT_TRUE(wait_until([&] { return runs >= 3; }, 5s));
  worker.cancel();
  client_.remove_schedule(topic_, "beat");
  std::lock_guard lock(mu);
  EXPECT_EQ(jobs[0].id.substr(0, 5), "beat@");
  EXPECT_EQ(jobs[0].body, "from the schedule");
  EXPECT_EQ(jobs[0].priority, 3);
  EXPECT_EQ(jobs[0].due_ms, jobs[0].created_ms);
}

// A schedule whose next tick is two hours past, as after a downtime: with
// skip it moves on without a job; with last it puts the last missed tick
// once. (Driven through the library on one node: the test sets NEXT in the
// past, which the Client never does.)
TEST(SchedulerCatchUp, SkipDropsMissedTicksAndLastRunsTheLastOne) {
  auto& redis = test::shared_redis();
  ClientOptions o;
  o.redis_url = "redis://127.0.0.1:" + std::to_string(redis.port());
  Client client(o);
  test::RawRedis raw(redis.port());
  const std::string topic = unique_topic();
  const std::int64_t now = client.now_ms();
  const std::int64_t hour = 3'600'000;
  // Ticks every hour from there: the last missed one 5 minutes ago, past
  // the grace of skip.
  const std::int64_t first = now - 2 * hour - 300'000;
  for (const char* mode : {"skip", "last"}) {
    auto r = raw.fcall(
        "schedule", topic,
        {mode, "b", "EVERY", std::to_string(hour), "NEXT", std::to_string(first), "CATCHUP", mode});
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << (r->str ? r->str : "");
  }
  Scheduler scheduler(client);
  scheduler.add_topic(topic);
  ASSERT_TRUE(wait_until([&] {
    auto list = client.schedules(topic);
    return std::all_of(list.schedules.begin(), list.schedules.end(),
                       [&](const Schedule& s) { return s.next_ms > now; });
  }));
  scheduler.stop();
  const std::int64_t last_missed = first + 2 * hour;
  EXPECT_FALSE(client.get(topic, "skip@" + std::to_string(last_missed)));
  EXPECT_EQ(client.stats(topic).ready, 1);
  auto job = client.get(topic, "last@" + std::to_string(last_missed));
  ASSERT_TRUE(job) << "the last missed tick, once";
  for (const auto& s : client.schedules(topic).schedules) {
    EXPECT_EQ(s.next_ms, last_missed + hour) << s.name;
  }
  EXPECT_EQ(scheduler.stats().put, 1u);
  EXPECT_EQ(scheduler.stats().skipped, 5u)
      << "skip passed its three ticks without a job, last the two before the one it ran";
}

}  // namespace
}  // namespace redisched
