// Flows (JobSpec::after, library version 35) through the Client, on one
// node and on the cluster, where the topics of one flow lie in different
// slots and the mover (Client::move_outbox) hands them over.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>

#include "redisched/client.h"
#include "redisched/worker.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using test::job;

class FlowsTest : public ::testing::Test {
 protected:
  // Carries out the topics' outboxes until none holds an entry.
  void move(const std::vector<std::string>& topics) {
    for (int round = 0; round < 10; ++round) {
      int moved = 0;
      for (const auto& t : topics) {
        auto r = client_.move_outbox(t);
        EXPECT_EQ(r.failed, 0) << t;
        moved += r.moved;
      }
      if (moved == 0) return;
    }
    ADD_FAILURE() << "the outboxes never emptied";
  }
  // Reserves the topic's jobs and acks each, with result "<id> done" for
  // jobs others wait for.
  std::set<std::string> work(const std::string& topic, bool with_result = true) {
    std::set<std::string> ids;
    for (auto r = client_.reserve(topic, 100); !r.jobs.empty(); r = client_.reserve(topic, 100)) {
      for (const auto& j : r.jobs) {
        EXPECT_EQ(with_result ? client_.ack(topic, j.id, j.token, Millis{0}, j.id + " done")
                              : client_.ack(topic, j.id, j.token),
                  Outcome::ok);
        ids.insert(j.id);
      }
    }
    return ids;
  }
  static JobSpec after(const std::string& id, std::vector<Dependency> deps) {
    JobSpec s = job(id);
    s.after = std::move(deps);
    return s;
  }

  Client client_{test::client_options()};
  std::string a_ = test::unique_topic(), b_ = test::unique_topic(), c_ = test::unique_topic();
};

// Fan-in across three topics, one of them spread over shards (on the
// cluster, on different primaries): the parent runs once, after all.
TEST_F(FlowsTest, AJobRunsAfterItsDependenciesInOtherTopicsAndShardsWithTheirResults) {
  client_.set_shards(b_, 3);
  std::vector<Dependency> deps;
  for (int i = 0; i < 12; ++i) deps.push_back({b_, "part_" + std::to_string(i), OnFailure::fail});
  deps.push_back({c_, "summary", OnFailure::fail});
  ASSERT_EQ(client_.put(a_, after("invoice", deps)), PutOutcome::created);
  auto j = client_.get(a_, "invoice");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::blocked);
  EXPECT_EQ(j->deps_total, 13);
  EXPECT_EQ(j->deps_left, 13);
  EXPECT_EQ(client_.stats(a_).blocked, 1);
  for (int i = 0; i < 12; ++i) client_.put(b_, job("part_" + std::to_string(i)));
  move({a_, b_, c_});
  EXPECT_EQ(work(b_).size(), 12u);
  EXPECT_EQ(work(a_).size(), 0u) << "still waiting for the summary";
  move({a_, b_, c_});
  EXPECT_EQ(client_.get(a_, "invoice")->deps_left, 1);
  client_.put(c_, job("summary"));
  EXPECT_EQ(work(c_), (std::set<std::string>{"summary"}));
  move({a_, b_, c_});
  j = client_.get_with_dependencies(a_, "invoice");
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::ready);
  ASSERT_EQ(j->deps.size(), 13u);
  for (const auto& d : j->deps) {
    EXPECT_EQ(d.outcome, DependencyOutcome::done) << d.id;
    EXPECT_EQ(d.value, d.id + " done");
  }
  EXPECT_EQ(work(a_, false), (std::set<std::string>{"invoice"}));
  EXPECT_EQ(client_.stats(b_).outbox, 0);
  EXPECT_EQ(client_.stats(a_).blocked, 0);
}

// A parent on a spread topic, a failure that kills it, and its own
// dependent that ignores failures.
TEST_F(FlowsTest, AFailureSettlesByPolicyAcrossSpreadTopics) {
  client_.set_shards(a_, 2);
  client_.put(b_, job("x"));
  client_.put(a_, after("strict", {{b_, "x", OnFailure::fail}}));
  client_.put(c_, after("after_strict", {{a_, "strict", OnFailure::ignore}}));
  move({a_, b_, c_});
  auto r = client_.reserve(b_);
  ASSERT_EQ(r.jobs.size(), 1u);
  client_.fail(b_, "x", r.jobs[0].token, "no paper", true);
  move({a_, b_, c_});
  auto strict = client_.get(a_, "strict");
  ASSERT_TRUE(strict);
  EXPECT_EQ(strict->state, JobState::dead);
  EXPECT_EQ(strict->error.value_or(""), "dependency " + b_ + "/x failed: no paper");
  auto next = client_.get_with_dependencies(c_, "after_strict");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->state, JobState::ready);
  ASSERT_EQ(next->deps.size(), 1u);
  EXPECT_EQ(next->deps[0].outcome, DependencyOutcome::failed);
}

// The sweep signal says which outbox has entries, so a mover need not poll.
TEST_F(FlowsTest, TheSweepSignalNamesAnOutboxThatHasEntries) {
  std::mutex m;
  std::set<std::string> named;
  std::atomic<bool> ready{false};
  auto sub = client_.watch_sweep(
      [&](const SweepSignal& s) {
        if (s.kind != SweepSignal::Kind::outbox) return;
        const std::lock_guard lock(m);
        named.insert(s.topic);
      },
      [&] { ready = true; });
  ASSERT_TRUE(test::wait_until([&] { return ready.load(); }));
  client_.put(a_, after("p", {{b_, "x", OnFailure::fail}}));
  ASSERT_TRUE(test::wait_until([&] {
    const std::lock_guard lock(m);
    return named.count(a_) == 1;
  }));
}

// A Worker carries out its topics' outboxes itself, and a handler reads
// what its job waited for: the flow runs with no serve and no move here.
TEST_F(FlowsTest, AWorkersHandlerReadsItsDependenciesResults) {
  std::mutex m;
  std::vector<DependencyState> seen;
  std::atomic<int> parents{0};
  Worker w(client_);
  HandlerOptions o;
  o.concurrency = 2;
  w.handle(b_, o, [](JobContext& ctx) { ctx.set_result("rendered " + std::string(ctx.id())); });
  w.handle(a_, o, [&](JobContext& ctx) {
    auto deps = ctx.dependencies();
    const std::lock_guard lock(m);
    seen = std::move(deps);
    ++parents;
  });
  w.run();
  client_.put(a_, after("invoice", {{b_, "r1"}, {b_, "r2", OnFailure::ignore}}));
  for (auto id : {"r1", "r2"}) {
    JobSpec child = job(id);
    child.keep = Millis{60000};  // (so that the Worker's ack gives the result)
    client_.put(b_, child);
  }
  ASSERT_TRUE(test::wait_until([&] { return parents.load() == 1; }));
  const std::lock_guard lock(m);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].id, "r1");
  EXPECT_EQ(seen[0].outcome, DependencyOutcome::done);
  EXPECT_EQ(seen[0].value, "rendered r1");
  EXPECT_EQ(seen[1].on_failure, OnFailure::ignore);
  EXPECT_EQ(seen[1].value, "rendered r2");
  w.cancel();
}

// A batch (library version 36) in a topic spread over shards, its members
// in another spread one, given in two calls while open: a Worker runs the
// members and the callbacks, and moves the outboxes; on success runs once
// the batch is sealed and every member was done, and reads it as done.
TEST_F(FlowsTest, ABatchOnSpreadTopicsRunsItsCallbackOnceSealedAndDone) {
  ASSERT_EQ(client_.set_shards(a_, 3).size(), 3u);
  ASSERT_EQ(client_.set_shards(b_, 3).size(), 3u);
  Job made = client_.batch(a_, "nightly", {.add = {{b_, "m0"}, {b_, "m1"}}});
  ASSERT_TRUE(made.batch);
  EXPECT_EQ(made.state, JobState::blocked);
  EXPECT_EQ(made.batch->total, 2);
  EXPECT_FALSE(made.batch->sealed);
  client_.put(c_, after("on_success", {{a_, "nightly"}}));
  std::mutex m;
  std::vector<DependencyState> seen;
  std::atomic<int> members{0}, callbacks{0};
  Worker w(client_);
  w.handle(b_, {.concurrency = 4}, [&](JobContext&) { ++members; });
  w.move_outbox_of(a_);  // the batch's (no handler of a_ runs here)
  w.handle(c_, {}, [&](JobContext& ctx) {
    auto deps = ctx.dependencies();
    const std::lock_guard lock(m);
    seen = std::move(deps);
    ++callbacks;
  });
  w.run();
  for (int i = 0; i < 20; ++i) {
    const std::string id = "m" + std::to_string(i);
    if (i >= 2) client_.batch(a_, "nightly", {.add = {{b_, id}}});  // added, then put
    client_.put(b_, job(id));
  }
  ASSERT_TRUE(test::wait_until([&] { return client_.get(a_, "nightly")->batch->done == 20; }))
      << client_.get(a_, "nightly")->batch->done;
  EXPECT_EQ(callbacks.load(), 0) << "open: more members may come";
  const Job sealed = client_.batch(a_, "nightly", {.seal = true});
  EXPECT_EQ(sealed.state, JobState::done);
  EXPECT_EQ(sealed.batch->total, 20);
  EXPECT_EQ(sealed.batch->pending(), 0);
  ASSERT_TRUE(test::wait_until([&] { return callbacks.load() == 1; }));
  EXPECT_EQ(members.load(), 20);
  w.cancel();
  const std::lock_guard lock(m);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].outcome, DependencyOutcome::done);
  EXPECT_REDISCHED_ERROR(client_.batch(a_, "nightly", {.add = {{b_, "late"}}}),
                         Errc::invalid_argument, "has finished");
  EXPECT_REDISCHED_ERROR(client_.batch(a_, "nightly", {.add = {{"bad topic", "x"}}}),
                         Errc::invalid_argument, "may hold only");
  EXPECT_REDISCHED_ERROR(client_.batch(a_, "b2", {.keep = Millis{0}}), Errc::invalid_argument,
                         "keep must be positive");
}

// A handler's set_result reaches the jobs waiting for its job without a
// keep (library version 36: the Worker's ack says FORWARD). A job nobody
// waits for yet is acked all the same, and kept with its result for the
// retry window (version 38), so that one put to wait for it later, its
// depend carried after the ack, still gets it.
TEST_F(FlowsTest, SetResultReachesTheJobsWaitingWithoutAKeep) {
  client_.put(a_, after("invoice", {{b_, "r1"}}));
  move({a_});  // (r1 is waited for before it is put)
  client_.put(b_, job("r1"));
  client_.put(b_, job("lonely"));
  std::atomic<int> parents{0};
  std::mutex m;
  std::vector<std::string> values;
  Worker w(client_);
  w.handle(b_, {}, [](JobContext& ctx) { ctx.set_result("rendered " + std::string(ctx.id())); });
  w.handle(a_, {}, [&](JobContext& ctx) {
    auto deps = ctx.dependencies();
    {
      const std::lock_guard lock(m);
      values.push_back(deps.size() == 1 ? deps[0].value : "?");
    }
    ++parents;
  });
  w.run();
  ASSERT_TRUE(test::wait_until([&] { return parents.load() == 1; }));
  EXPECT_TRUE(test::wait_until([&] { return w.stats().acked == 3; })) << w.stats().acked;
  EXPECT_EQ(w.stats().failed, 0u) << "lonely's result is no reason to fail it";
  auto lonely = client_.get(b_, "lonely");
  ASSERT_TRUE(lonely);
  EXPECT_EQ(lonely->state, JobState::done);
  EXPECT_EQ(lonely->result, "rendered lonely");
  client_.put(a_, after("late", {{b_, "lonely"}}));
  ASSERT_TRUE(test::wait_until([&] { return parents.load() == 2; }));
  w.cancel();
  const std::lock_guard lock(m);
  EXPECT_EQ(values, (std::vector<std::string>{"rendered r1", "rendered lonely"}));
}

TEST_F(FlowsTest, BadDependenciesAreRefusedBeforeAnythingGoesOut) {
  EXPECT_REDISCHED_ERROR(client_.put(a_, after("p", {{"bad topic", "x"}})), Errc::invalid_argument,
                         "may hold only");
  EXPECT_REDISCHED_ERROR(client_.put(a_, after("p", {{b_, ""}})), Errc::invalid_argument,
                         "job id is empty");
  JobSpec update = after("p", {{b_, "x"}});
  update.mode = PutMode::upsert;
  EXPECT_REDISCHED_ERROR(client_.put(a_, update), Errc::invalid_argument, "new job only");
  std::vector<JobSpec> many{after("p", {{b_, "x"}})};
  EXPECT_REDISCHED_ERROR(client_.put_many(a_, many), Errc::invalid_argument, "alone");
  EXPECT_REDISCHED_ERROR(client_.put(a_, after("p", {{a_, "p"}})), Errc::invalid_argument,
                         "cannot wait for itself");
  EXPECT_EQ(client_.stats(a_).blocked, 0);
  EXPECT_FALSE(client_.get(a_, "p"));
}

}  // namespace
}  // namespace redisched
