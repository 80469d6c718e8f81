// One topic spread over shard topics (Client::set_shards): every call of
// the Client on it, on one node and on the cluster (where its shards land
// on different primaries), and clients that learn of the spread late.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "redisched/client.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using test::job;

// The ids a shard topic holds, read from whichever node has its slot, and
// that node's port.
struct Held {
  std::set<std::string> ids;
  int port = 0;
};
Held held_by(const std::string& shard) {
  Held out;
  for (int port : test::target_ports()) {
    auto r = test::RawRedis(port).call({"HKEYS", "redisched:{" + shard + "}:jobs"});
    if (r->type != REDIS_REPLY_ARRAY) continue;  // MOVED: another node's slot
    out.port = port;
    for (size_t i = 0; i < r->elements; ++i) out.ids.insert(r->element[i]->str);
  }
  return out;
}

class ShardsTest : public ::testing::Test {
 protected:
  Client client_{test::client_options()};
  std::string topic_ = test::unique_topic();
};

// A job's own replicas need a replica_timeout shorter than command_timeout.
// put_many refuses such a batch at once, before any part goes out: on a
// spread topic its parts answer together, on one thread (FanIn), and a
// part refused on its own would answer on another.
TEST_F(ShardsTest, AJobsOwnReplicasWithoutAReplicaTimeoutAreRefusedBeforeAnyPart) {
  ClientOptions o = test::client_options();
  o.command_timeout = Millis{500};  // the default replica_timeout (1 s) is no shorter
  Client c(o);
  c.set_shards(topic_, 4);
  std::vector<JobSpec> many;
  for (int i = 0; i < 8; ++i) many.push_back(job("j" + std::to_string(i)));
  many[3].replicas = 1;
  EXPECT_REDISCHED_ERROR(c.put_many(topic_, many), Errc::invalid_argument,
                         "shorter than command_timeout");
  EXPECT_REDISCHED_ERROR(c.put(topic_, many[3]), Errc::invalid_argument,
                         "shorter than command_timeout");
  EXPECT_EQ(c.stats(topic_).ready, 0) << "no part was put";
  many[3].replicas.reset();
  EXPECT_EQ(c.put_many(topic_, many).size(), 8u);
}

// The history (library version 34): each shard counts its own calls, and
// Client::history sums them by minute; a Client with history off counts
// nothing but reads what others counted.
TEST_F(ShardsTest, HistoryCountsEveryShardAndSumsThem) {
  client_.set_shards(topic_, 3);
  std::vector<JobSpec> many;
  for (int i = 0; i < 30; ++i) many.push_back(job("h" + std::to_string(i)));
  client_.put_many(topic_, many);
  auto r = client_.reserve(topic_, 10);
  ASSERT_EQ(r.jobs.size(), 10u);
  for (const auto& j : r.jobs) EXPECT_EQ(client_.ack(topic_, j.id, j.token), Outcome::ok);
  ClientOptions quiet_options = test::client_options();
  quiet_options.history = false;
  Client quiet(quiet_options);
  quiet.put(topic_, job("uncounted"));
  const auto total = quiet.history(topic_, HistoryStep::total);
  ASSERT_EQ(total.size(), 1u);
  EXPECT_EQ(std::tie(total[0].put, total[0].started, total[0].done),
            std::make_tuple(std::int64_t{30}, std::int64_t{10}, std::int64_t{10}));
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const auto minutes = client_.history(topic_, HistoryStep::minute, now - 3600000, now + 60000);
  std::int64_t put = 0;
  for (const auto& row : minutes) put += row.put;
  EXPECT_EQ(put, 30) << "the minutes hold what the total holds";
  EXPECT_LE(minutes.size(), 2u) << "one row a minute, the shards' summed";
  const auto s = client_.stats(topic_);
  EXPECT_EQ(std::tie(s.put_total, s.started_total, s.done_total),
            std::tie(total[0].put, total[0].started, total[0].done));
  EXPECT_REDISCHED_ERROR(client_.history(topic_, HistoryStep::minute, 10, 5),
                         Errc::invalid_argument, "not a range of times");
  EXPECT_REDISCHED_ERROR(client_.history(topic_, HistoryStep::minute, 0, now),
                         Errc::invalid_argument, "more than 1441");
}

// What a topic counted before it was spread stays in its history; a
// Client that read the history before the spread (its layout cached)
// meets SHARDED and follows.
TEST_F(ShardsTest, HistoryKeepsWhatTheTopicCountedBeforeItWasSpread) {
  Client early(test::client_options());
  for (int i = 0; i < 4; ++i) client_.put(topic_, job("b" + std::to_string(i)));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(client_.remove(topic_, "b" + std::to_string(i)));
  ASSERT_EQ(early.history(topic_, HistoryStep::total).at(0).put, 4);
  client_.set_shards(topic_, 3);
  for (int i = 0; i < 6; ++i) client_.put(topic_, job("a" + std::to_string(i)));
  EXPECT_EQ(client_.history(topic_, HistoryStep::total).at(0).put, 10) << "before and after";
  EXPECT_EQ(early.history(topic_, HistoryStep::total).at(0).put, 10)
      << "a stale layout, read again";
  EXPECT_EQ(client_.stats(topic_).put_total, 10) << "stats' totals are the history's";
  EXPECT_EQ(client_.stats(topic_).ready, 6);
}

TEST_F(ShardsTest, ASpreadTopicTakesEveryCallAsOneTopic) {
  const auto shards = client_.set_shards(topic_, 3);
  ASSERT_EQ(shards.size(), 3u);
  for (const auto& s : shards) EXPECT_EQ(s.rfind(topic_ + "~", 0), 0u) << s;
  EXPECT_EQ(client_.shards(topic_), shards);

  std::vector<JobSpec> many;
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(client_.put(topic_, job("j" + std::to_string(i), i % 3)), PutOutcome::created);
    many.push_back(job("m" + std::to_string(i), 5));
  }
  for (auto o : client_.put_many(topic_, many)) EXPECT_EQ(o, PutOutcome::created);
  EXPECT_EQ(client_.put(topic_, job("j7")), PutOutcome::exists) << "an id is one job";
  std::set<std::string> added;
  for (int i = 0; i < 10; ++i) added.insert(client_.add(topic_, job("")));
  EXPECT_EQ(added.size(), 10u);

  // Every job is in the shard its id leads to, and each shard has its share;
  // on the cluster each shard is on a primary of its own.
  std::set<int> ports;
  std::map<std::string, std::size_t> shard_of;
  std::size_t total = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto h = held_by(shards[s]);
    EXPECT_GT(h.ids.size(), 120u) << shards[s];
    total += h.ids.size();
    ports.insert(h.port);
    for (const auto& id : h.ids) shard_of[id] = s;
  }
  EXPECT_EQ(total, 610u);
  EXPECT_EQ(ports.size(), test::on_cluster() ? 3u : 1u);

  // find_ids goes through every shard.
  std::set<std::string> found;
  std::string cursor;
  do {
    auto page = client_.find_ids(topic_, "j", cursor, 20);
    found.insert(page.ids.begin(), page.ids.end());
    cursor = page.cursor;
  } while (!cursor.empty());
  EXPECT_EQ(found.size(), 300u);

  auto st = client_.stats(topic_);
  EXPECT_EQ(st.ready, 610);
  EXPECT_EQ(st.shards, 3);
  for (const auto& id : added) EXPECT_TRUE(client_.get(topic_, id)) << id;
  EXPECT_EQ(client_.get(topic_, "j5")->priority, 2);
  EXPECT_TRUE(client_.remove(topic_, "j6"));
  EXPECT_FALSE(client_.get(topic_, "j6"));
  EXPECT_FALSE(client_.remove(topic_, "j6"));
  // Many ids at once go each to its shard: put again, removed together.
  std::vector<JobSpec> extra;
  std::vector<std::string> extra_ids{"j6"};  // (gone: not counted)
  for (int i = 0; i < 40; ++i) {
    extra.push_back(job("x" + std::to_string(i)));
    extra_ids.push_back(extra.back().id);
  }
  client_.put_many(topic_, extra);
  EXPECT_EQ(client_.stats(topic_).ready, 649);
  EXPECT_EQ(client_.remove_many(topic_, extra_ids), 40);
  EXPECT_EQ(client_.stats(topic_).ready, 609);

  // list pages over every shard.
  std::set<std::string> listed;
  for (std::int64_t at = 0; at < 609; at += 250) {
    auto page = client_.list(topic_, JobState::ready, at, 250, false);
    EXPECT_EQ(page.total, 609);
    for (const auto& j : page.jobs) listed.insert(j.id);
  }
  EXPECT_EQ(listed.size(), 609u);

  // pause and resume hold for every shard.
  EXPECT_TRUE(client_.pause(topic_));
  EXPECT_TRUE(client_.stats(topic_).paused);
  auto none = client_.reserve(topic_, 5);
  EXPECT_TRUE(none.jobs.empty());
  EXPECT_TRUE(none.paused);
  // A job asked for by its id comes from its shard, paused or not.
  auto j5 = client_.reserve_job(topic_, "j5", Millis(60000), "picker");
  ASSERT_EQ(j5.outcome, Outcome::ok);
  EXPECT_EQ(j5.job.id, "j5");
  EXPECT_EQ(client_.get(topic_, "j5")->worker, "picker");
  EXPECT_EQ(client_.reserve_job(topic_, "j5").outcome, Outcome::wrong_state);
  EXPECT_EQ(client_.reserve_job(topic_, "j6").outcome, Outcome::not_found);
  EXPECT_EQ(client_.release(topic_, "j5", j5.job.token), Outcome::ok);
  EXPECT_TRUE(client_.resume(topic_));

  // Reserve takes every job once, and from each shard in its order (here
  // priority): a shard never hands out a job before a higher one of its own.
  std::set<std::string> taken;
  std::vector<int> last(shards.size(), 1000);
  std::vector<std::pair<std::string, std::uint64_t>> acks;
  for (int calls = 0; calls < 400; ++calls) {
    auto r = client_.reserve(topic_, 7);
    if (r.jobs.empty()) break;
    for (const auto& j : r.jobs) {
      EXPECT_TRUE(taken.insert(j.id).second) << j.id << " twice";
      const auto s = shard_of.at(j.id);
      EXPECT_LE(j.priority, last[s]) << j.id;
      last[s] = j.priority;
      acks.emplace_back(j.id, j.token);
    }
  }
  EXPECT_EQ(taken.size(), 609u);
  for (auto o : client_.ack_many(topic_, acks)) EXPECT_EQ(o, Outcome::ok);
  st = client_.stats(topic_);
  EXPECT_EQ(st.ready + st.reserved + st.delayed, 0);

  // What a spread topic does not take.
  EXPECT_REDISCHED_ERROR(client_.set_limits(topic_, TopicLimits{.rate = 0, .concurrency = 2}),
                         Errc::conflict, "spread over shards");
  ScheduleSpec every;
  every.every = Millis(1000);
  EXPECT_REDISCHED_ERROR(client_.set_schedule(topic_, "s", every), Errc::conflict,
                         "spread over shards");
  EXPECT_REDISCHED_ERROR(client_.set_shards(topic_ + "~x", 2), Errc::invalid_argument, "topic");
  EXPECT_REDISCHED_ERROR(client_.set_shards(topic_, 0), Errc::invalid_argument, "from 1 to 256");
}

// HSCAN cannot answer SHARDED: find_ids' first page reads the shards afresh.
// (A layout is cached on the Client's own thread: the calls start there,
// each from an answer's callback.)
TEST_F(ShardsTest, FindIdsFollowsATopicSpreadSinceItsLayoutWasRead) {
  Client late{test::client_options()};
  std::promise<void> seen;
  late.now_ms_async([&](Result<std::int64_t>) {
    late.stats_async(topic_, [&](Result<TopicStats>) { seen.set_value(); });  // unspread
  });
  seen.get_future().get();
  client_.set_shards(topic_, 3);
  for (int i = 0; i < 30; ++i) client_.put(topic_, job("f" + std::to_string(i)));
  std::promise<Result<IdPage>> got;
  late.now_ms_async([&](Result<std::int64_t>) {
    late.find_ids_async(topic_, "f", "", 1000, [&](Result<IdPage> r) { got.set_value(r); });
  });
  auto page = got.get_future().get();
  ASSERT_TRUE(page.ok()) << page.error().what();
  EXPECT_EQ(page.value().ids.size(), 30u) << "every shard's, not the topic's own (empty) hash";
}

TEST_F(ShardsTest, TheShardsChangeOnlyWhileEmptyAndLateClientsFollow) {
  Client late{test::client_options()};
  late.stats(topic_);  // it has seen the topic unspread
  const auto three = client_.set_shards(topic_, 3);

  // A client that looked before the spread meets it at its first call.
  for (int i = 0; i < 30; ++i)
    EXPECT_EQ(late.put(topic_, job("a" + std::to_string(i))), PutOutcome::created);
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(client_.get(topic_, "a" + std::to_string(i)));
  EXPECT_EQ(late.stats(topic_).ready, 30);

  // Not while it holds jobs: nothing changes.
  EXPECT_REDISCHED_ERROR(client_.set_shards(topic_, 2), Errc::conflict, "no jobs");
  EXPECT_EQ(client_.shards(topic_), three);
  EXPECT_EQ(late.put(topic_, job("b")), PutOutcome::created);
  EXPECT_EQ(client_.stats(topic_).ready, 31);

  // Emptied: two shards, new ones; the late client follows again.
  auto r = client_.pull(topic_, 100);
  EXPECT_EQ(r.jobs.size(), 31u);
  const auto two = client_.set_shards(topic_, 2);
  ASSERT_EQ(two.size(), 2u);
  for (const auto& s : two) EXPECT_EQ(std::count(three.begin(), three.end(), s), 0) << s;
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(late.put(topic_, job("c" + std::to_string(i))), PutOutcome::created);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(client_.get(topic_, "c" + std::to_string(i)));
  EXPECT_EQ(held_by(two[0]).ids.size() + held_by(two[1]).ids.size(), 20u);
  EXPECT_EQ(late.reserve(topic_, 100).jobs.size(), 20u);
  EXPECT_EQ(client_.pull(topic_, 100).jobs.size(), 0u) << "reserved, not ready";
  EXPECT_EQ(client_.stats(topic_).reserved, 20);
  for (const auto& j : client_.list(topic_, JobState::reserved, 0, 100, false).jobs) {
    EXPECT_TRUE(client_.remove(topic_, j.id));
  }

  // A reservation acked by a client that still sees the old list.
  Client stale{test::client_options()};
  stale.stats(topic_);
  const auto two_again = two;
  EXPECT_EQ(stale.put(topic_, job("e")), PutOutcome::created);
  auto held = client_.reserve(topic_, 1);
  ASSERT_EQ(held.jobs.size(), 1u);
  client_.set_shards(topic_, 2);  // the same: nothing changes
  EXPECT_EQ(client_.shards(topic_), two_again);
  EXPECT_EQ(stale.ack(topic_, "e", held.jobs[0].token), Outcome::ok);

  // Back to one: the topic's own keys again.
  Client saw_two{test::client_options()};
  EXPECT_EQ(saw_two.stats(topic_).shards, 2);
  EXPECT_TRUE(client_.set_shards(topic_, 1).empty());
  EXPECT_EQ(late.put(topic_, job("d")), PutOutcome::created);
  EXPECT_TRUE(client_.get(topic_, "d"));
  EXPECT_EQ(held_by(topic_).ids, (std::set<std::string>{"d"}));
  EXPECT_EQ(client_.stats(topic_).shards, 0);
  EXPECT_EQ(saw_two.stats(topic_).ready, 1) << "no stale zeros from the closed shards";

  // Spread again: the names of the first spread come back, opened anew; a
  // client that saw the old list follows, and its stats are no stale zeros.
  EXPECT_TRUE(client_.remove(topic_, "d"));
  const auto again = client_.set_shards(topic_, 3);
  EXPECT_EQ(again, three);
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(late.put(topic_, job("f" + std::to_string(i))), PutOutcome::created);
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(client_.get(topic_, "f" + std::to_string(i)));
  EXPECT_EQ(saw_two.stats(topic_).ready, 9);
  EXPECT_EQ(late.stats(topic_).ready, 9);
}

TEST_F(ShardsTest, WatchAndWaitHearEveryShard) {
  std::atomic<int> signals{0}, ready{0};
  auto sub = client_.watch(
      topic_, [&](std::int64_t) { ++signals; }, [&] { ++ready; });
  ASSERT_TRUE(test::wait_until([&] { return ready.load() >= 1; }));
  // Spread after the watch began: it follows, and says so (on_ready).
  const int before = ready.load();
  client_.set_shards(topic_, 3);
  ASSERT_TRUE(test::wait_until([&] { return ready.load() >= before + 1; }))
      << "on_ready once every shard's channel is taken";
  for (int i = 0; i < 30; ++i) {
    auto s = job("w" + std::to_string(i));
    s.delay = Millis(60000);
    client_.put(topic_, s);
  }
  EXPECT_TRUE(test::wait_until([&] { return signals.load() == 30; })) << signals.load();

  // wait: on the shard that holds the job.
  auto s = job("kept");
  s.keep = Millis(60000);
  client_.put(topic_, s);
  auto waited = client_.wait_async(topic_, "kept", Millis(10000));
  auto r = client_.reserve(topic_, 100);
  for (const auto& j : r.jobs) {
    if (j.id == "kept") {
      EXPECT_EQ(client_.ack(topic_, j.id, j.token, j.keep, "answer"), Outcome::ok);
    }
  }
  auto done = waited.get();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, JobState::done);
  EXPECT_EQ(done->result, "answer");
}

// A job page follows a spread topic's reports: each shard's channel is
// taken, as watch()'s are.
TEST_F(ShardsTest, WatchReportsHearsEveryShard) {
  std::mutex m;
  std::set<std::string> heard;
  std::atomic<int> ready{0};
  client_.set_shards(topic_, 3);
  auto sub = client_.watch_reports(
      topic_,
      [&](const std::string& id) {
        const std::lock_guard lock(m);
        heard.insert(id);
      },
      [&] { ++ready; });
  ASSERT_TRUE(test::wait_until([&] { return ready.load() >= 1; })) << "every shard's channel taken";
  for (int i = 0; i < 12; ++i) client_.put(topic_, job("r" + std::to_string(i)));
  auto r = client_.reserve(topic_, 12);
  ASSERT_EQ(r.jobs.size(), 12u);
  for (const auto& j : r.jobs) {
    JobReport rep;
    rep.progress = "0.5";
    EXPECT_EQ(client_.report(topic_, j.id, j.token, rep), Outcome::ok);
  }
  EXPECT_TRUE(test::wait_until([&] {
    const std::lock_guard lock(m);
    return heard.size() == 12;
  })) << "every shard's jobs heard";
}

}  // namespace
}  // namespace redisched
