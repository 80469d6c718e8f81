// The parts of a worker's topic, each on its own, over a broker that answers
// from memory (no Redis): the calls, the settler, the handler pool, the
// heartbeats and the lapse sweeper.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redisched/limits.h"
#include "unit/fake_broker.h"
#include "worker/calls.h"
#include "worker/handler_pool.h"
#include "worker/heartbeats.h"
#include "worker/lapse_sweeper.h"
#include "worker/reports.h"
#include "worker/settler.h"

namespace redisched::worker {
namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)

Reservation reservation(std::string id, std::uint64_t token, std::int64_t deadline_ms = 0,
                        int attempt = 1) {
  Reservation r;
  r.id = std::move(id);
  r.token = token;
  r.deadline_ms = deadline_ms;
  r.attempt = attempt;
  return r;
}

Finished verdict(Reservation job, Verdict v = Verdict::ack) {
  Finished f;
  f.job = std::move(job);
  f.verdict = v;
  return f;
}

class WorkerPartsTest : public test::ControlShardTest {
 protected:
  TopicCalls calls_{shared_, "t"};
};

// ------------------------------------------------------------ TopicCalls

TEST_F(WorkerPartsTest, ASettlingCallIsSentAgainAfterAConnectionFailureOnly) {
  broker_.fail_next_ack = Errc::connection;
  int retries_done = 0;
  calls_.on_retries_done([&] { ++retries_done; });
  std::vector<std::pair<std::string, std::uint64_t>> jobs{{"a", 1}};
  std::optional<Result<std::vector<Outcome>>> got;
  calls_.retried<std::vector<Outcome>>(
      [&](Callback<std::vector<Outcome>> cb) {
        broker_.ack_many("t", jobs, Millis{0}, std::move(cb));
      },
      [&](Result<std::vector<Outcome>> r) { got = std::move(r); });
  EXPECT_EQ(shared_.calls, 1) << "counted while in flight";
  poll();
  EXPECT_TRUE(calls_.retrying()) << "the connection failed: it waits to be sent again";
  EXPECT_FALSE(got);
  ASSERT_TRUE(run_until([&] { return got.has_value(); }));
  EXPECT_TRUE(got->ok());
  EXPECT_EQ(broker_.count("ack_many"), 2);
  EXPECT_FALSE(calls_.retrying());
  EXPECT_EQ(retries_done, 1);
  EXPECT_EQ(shared_.calls, 0);

  // A refusal is an answer: not sent again.
  broker_.fail_next_ack = Errc::invalid_argument;
  got.reset();
  calls_.retried<std::vector<Outcome>>(
      [&](Callback<std::vector<Outcome>> cb) {
        broker_.ack_many("t", jobs, Millis{0}, std::move(cb));
      },
      [&](Result<std::vector<Outcome>> r) { got = std::move(r); });
  poll();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->error().code(), Errc::invalid_argument);
  EXPECT_EQ(broker_.count("ack_many"), 3);
  EXPECT_EQ(retries_done, 1);
}

// ------------------------------------------------------------ Settler

TEST_F(WorkerPartsTest, AcksThatFinishWhileAnAckmanyIsInFlightGoTogetherInTheNext) {
  Settler settler(calls_, {});
  settler.settle(verdict(reservation("a", 1)));
  settler.flush();
  settler.settle(verdict(reservation("b", 2)));
  settler.settle(verdict(reservation("c", 3)));
  settler.flush();  // the first is in flight: these wait for its answer
  EXPECT_EQ(broker_.count("ack_many"), 1);
  ASSERT_TRUE(run_until([&] { return shared_.stats.acked == 3; }));
  ASSERT_EQ(broker_.count("ack_many"), 2);
  EXPECT_EQ(broker_.calls[0].ids, std::vector<std::string>{"a"});
  EXPECT_EQ(broker_.calls[1].ids, (std::vector<std::string>{"b", "c"}));
}

TEST_F(WorkerPartsTest, AFailCarriesTheBackoffForItsAttemptAndAShortenedError) {
  HandlerOptions o;
  o.backoff = Backoff{BackoffKind::exponential, Millis{100}, Millis{1000}};
  o.max_attempts = 5;
  Settler settler(calls_, o);
  auto f = verdict(reservation("x", 7, 0, 3), Verdict::fail);
  f.error.assign(static_cast<size_t>(limits::kErrorMax) + 100, 'e');
  settler.settle(std::move(f));
  auto late = verdict(reservation("y", 8, 0, 9), Verdict::bury);
  settler.settle(std::move(late));
  ASSERT_TRUE(run_until([&] { return shared_.stats.failed == 2; }));
  ASSERT_EQ(broker_.count("fail"), 2);
  EXPECT_EQ(broker_.calls[0].delay, Millis{400}) << "100 ms doubled for attempts 2 and 3";
  EXPECT_EQ(broker_.calls[0].error.size(), static_cast<size_t>(limits::kErrorMax));
  EXPECT_EQ(broker_.calls[0].max_attempts, 5);
  EXPECT_EQ(broker_.calls[1].delay, Millis{1000}) << "capped";
  EXPECT_EQ(retry_delay(Backoff{BackoffKind::fixed, Millis{250}, Millis{0}}, 6), Millis{250});
}

TEST_F(WorkerPartsTest, JobsHandedOutForGoodAndDroppedVerdictsSendNothing) {
  Settler settler(calls_, {});
  settler.settle(verdict(reservation("once", 0)));
  auto dropped = verdict(reservation("gone", 4), Verdict::fail);
  dropped.dropped = true;
  settler.settle(std::move(dropped));
  settler.flush();
  poll();
  EXPECT_TRUE(broker_.calls.empty());
  EXPECT_EQ(shared_.stats.acked, 1u) << "a ttr-0 job counts as acked when its handler returns";
}

// ------------------------------------------------------------ HandlerPool

TEST_F(WorkerPartsTest, SynchronousHandlersRunOnTheirOwnThreadsAndHandOverVerdictsInBatches) {
  HandlerOptions o{.concurrency = 3};
  std::atomic<int> inside{0};
  std::atomic<bool> go{false};
  int finished_posts = 0;
  HandlerPool pool(
      calls_, o,
      [&](JobContext& ctx) {
        ++inside;
        while (!go) std::this_thread::sleep_for(1ms);
        if (ctx.job().id == "bad") throw std::runtime_error("no good");
      },
      nullptr, [&] { ++finished_posts; });
  pool.start();
  pool.add({reservation("a", 1, 5000), reservation("b", 2, 5000), reservation("bad", 3, 5000)},
           1000);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (inside < 3 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(inside, 3) << "three handler threads, three jobs at once";
  std::vector<RunningJob> running;
  pool.snapshot(running);
  EXPECT_EQ(running.size(), 3u);
  go = true;
  pool.join();
  poll();
  auto done = pool.take_finished();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_LE(finished_posts, 3);
  EXPECT_GE(finished_posts, 1);
  for (const auto& f : done) {
    if (f.job.id == "bad") {
      EXPECT_EQ(f.verdict, Verdict::fail);
      EXPECT_EQ(f.error, "no good") << "a throw fails the job with its text";
    } else {
      EXPECT_EQ(f.verdict, Verdict::ack);
    }
  }
}

TEST_F(WorkerPartsTest, CancelReleasesAbandonedJobsAndKeepsJobsHandedOutForGood) {
  HandlerOptions o{.concurrency = 1};
  std::vector<std::shared_ptr<AsyncJob>> handed;
  HandlerPool pool(
      calls_, o, nullptr, [&](std::shared_ptr<AsyncJob> j) { handed.push_back(std::move(j)); },
      [] {});
  pool.start();
  pool.add({reservation("running", 1, 5000)}, 1000);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(pool.shortest_ttr(), Millis{4000});
  pool.abandon_running();
  EXPECT_TRUE(handed[0]->cancelled());
  handed[0]->fail("late");
  handed[0]->done();
  auto done = pool.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].verdict, Verdict::release) << "its handler returned: back for another worker";
  EXPECT_EQ(done[0].delay, Millis{0});
  EXPECT_FALSE(pool.shortest_ttr());
}

TEST_F(WorkerPartsTest, WaitingJobsGoBackButTtrZeroJobsStayQueued) {
  HandlerOptions o{.concurrency = 1};
  std::atomic<int> ran{0};
  HandlerPool pool(
      calls_, o, [&](JobContext&) { ++ran; }, nullptr, [] {});
  // No threads yet: everything waits in the queue.
  pool.add({reservation("held", 5, 5000), reservation("once", 0, 1000)}, 1000);
  const auto waiting = pool.take_waiting();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].id, "held");
  pool.start();
  pool.join();
  EXPECT_EQ(ran, 1) << "the ttr-0 job ran before the thread ended";
}

// ------------------------------------------------------------ Heartbeats

TEST_F(WorkerPartsTest, ARunningJobIsTouchedWhenAThirdOfItsTimeToRunIsUsed) {
  ClockMap clock;
  clock.observe(broker_.now_ms);
  HandlerOptions o{.concurrency = 1, .overrun = Overrun::heartbeat};
  std::vector<std::shared_ptr<AsyncJob>> handed;
  HandlerPool pool(
      calls_, o, nullptr, [&](std::shared_ptr<AsyncJob> j) { handed.push_back(std::move(j)); },
      [] {});
  Heartbeats beats(calls_, pool, clock, true);
  pool.add({reservation("slow", 9, broker_.now_ms + 90)}, broker_.now_ms);
  beats.arm();
  run_for(10ms);
  EXPECT_EQ(broker_.count("touch"), 0) << "not before a third of the 90 ms";
  ASSERT_TRUE(run_until([&] { return broker_.count("touch") == 1; }, 500ms));
  poll();
  std::vector<RunningJob> running;
  pool.snapshot(running);
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].deadline_ms, broker_.now_ms + 30000) << "the new deadline is kept";
  handed.clear();
  beats.cancel();
  poll();
}

// ------------------------------------------------------------ Reports

// A topic's handler pool, settler and reports wired as TopicRunner wires
// them: verdicts settled as they come, a waiting report arms the timer.
struct ReportingTopic {
  ReportingTopic(TopicCalls& calls, const HandlerOptions& o)
      : settler(calls, o),
        pool(
            calls, o, nullptr,
            [this](std::shared_ptr<AsyncJob> j) { handed.push_back(std::move(j)); },
            [this] {
              for (auto& f : pool.take_finished()) settler.settle(std::move(f));
              settler.flush();
            },
            [this] { reports.arm(); }),
        reports(calls, pool) {}
  std::vector<std::shared_ptr<AsyncJob>> handed;
  Settler settler;
  HandlerPool pool;
  Reports reports;
};

TEST_F(WorkerPartsTest, ReportsAreGatheredPerJobAndTheLastGoesBeforeAKeptVerdict) {
  ReportingTopic t(calls_, {.concurrency = 1});
  auto& handed = t.handed;
  auto& pool = t.pool;
  auto& gathered = t.reports;
  pool.add(
      {reservation("a", 1, broker_.now_ms + 30000), reservation("b", 2, broker_.now_ms + 30000)},
      broker_.now_ms);
  poll();
  ASSERT_EQ(handed.size(), 2u);
  handed[0]->log("one");
  handed[0]->log("two");
  handed[0]->progress(40, "page \"4\"");
  handed[1]->progress_json("7");
  EXPECT_THROW(handed[1]->log("\xff"), Error) << "a log line is UTF-8";
  EXPECT_THROW(handed[1]->progress_json(""), Error);
  run_for(50ms);
  EXPECT_EQ(broker_.count("report"), 0) << "gathered for 250 ms";
  ASSERT_TRUE(run_until([&] { return broker_.count("report") == 2; }, 1000ms));
  for (const auto& c : broker_.calls) {
    if (c.what != "report") continue;
    if (c.ids[0] == "a") {
      EXPECT_EQ(c.count, 2) << "both lines in one call";
      EXPECT_EQ(c.error, R"({"percent":40,"note":"page \"4\""})") << "the latest progress";
    } else {
      EXPECT_EQ(c.error, "7");
    }
  }
  // A note that escaping makes longer than a progress may be is shortened.
  handed[1]->progress(10, std::string(2000, '"'));
  ASSERT_TRUE(run_until([&] { return broker_.count("report") == 3; }, 1000ms));
  const auto& noted = broker_.calls.back();
  EXPECT_LE(noted.error.size(), static_cast<std::size_t>(limits::kProgressMax));
  EXPECT_TRUE(noted.error.starts_with(R"({"percent":10,"note":")")) << noted.error;
  // A line reported just before a failure goes before the fail; one
  // reported before an ack without keep goes nowhere (the job goes).
  // (Job b's verdict may wait for its report in flight.)
  handed[0]->log("three");
  handed[0]->fail("boom", false);
  handed[0]->done();
  handed[1]->log("lost");
  handed[1]->done();
  ASSERT_TRUE(run_until(
      [&] { return broker_.count("fail") == 1 && broker_.count("ack_many") == 1; }, 1000ms));
  std::vector<std::string> order;
  for (const auto& c : broker_.calls)
    order.push_back(c.what + (c.ids.empty() ? "" : ":" + c.ids[0]));
  const auto at = [&](const std::string& what) {
    return std::find(order.begin(), order.end(), what) - order.begin();
  };
  EXPECT_EQ(broker_.count("report"), 4) << "the ack without keep sent no report";
  EXPECT_LT(at("report:a"), at("fail:a"));
  EXPECT_LT(std::find(order.begin() + at("report:a") + 1, order.end(), "report:a") - order.begin(),
            at("fail:a"))
      << "the last report went before the fail";
  handed.clear();
  gathered.cancel();
  poll();
}

TEST_F(WorkerPartsTest, AVerdictWaitsForTheReportInFlightAndTakesWhatItCouldNotSend) {
  ReportingTopic t(calls_, {.concurrency = 1});
  auto& handed = t.handed;
  auto& pool = t.pool;
  auto& gathered = t.reports;
  pool.add({reservation("a", 1, broker_.now_ms + 30000)}, broker_.now_ms);
  poll();
  ASSERT_EQ(handed.size(), 1u);
  broker_.hold_reports = true;
  handed[0]->log("one");
  run_for(400ms);  // (gathered for 250 ms)
  ASSERT_EQ(broker_.held_reports.size(), 1u);
  // The job fails while its report is in flight: its verdict waits.
  handed[0]->log("two");
  handed[0]->fail("boom", false);
  handed[0]->done();
  run_for(50ms);
  EXPECT_EQ(broker_.count("fail"), 0) << "not before the report in flight is back";
  std::vector<RunningJob> running;
  pool.snapshot(running);
  EXPECT_TRUE(running.empty()) << "its handler has finished";
  // That report could not be sent: its line goes with the next, before the fail.
  broker_.hold_reports = false;
  auto back = std::move(broker_.held_reports.front());
  broker_.held_reports.clear();
  back(Result<Outcome>(Error(Errc::connection, "down")));
  ASSERT_TRUE(run_until([&] { return broker_.count("fail") == 1; }, 1000ms));
  ASSERT_EQ(broker_.count("report"), 2);
  const auto& last = broker_.calls[broker_.calls.size() - 2];
  EXPECT_EQ(last.what, "report");
  EXPECT_EQ(last.count, 2) << "the unsent line, then the one since";
  EXPECT_EQ(broker_.calls.back().what, "fail");
  handed.clear();
  gathered.cancel();
  poll();
}

// ------------------------------------------------------------ LapseSweeper

TEST_F(WorkerPartsTest, ASweepFollowsTheDeadlinesAndWaitsForSettlingCalls) {
  ClockMap clock;
  clock.observe(broker_.now_ms);
  int requeued = 0;
  LapseSweeper sweeper(calls_, clock, [&] { ++requeued; });
  broker_.requeued = 2;
  // (150 ms ahead: a loaded machine ran the 10 ms below past a deadline of
  // 30 ms once, in a full run beside three other test binaries)
  broker_.next_deadline = clock.redis_now() + 250;
  sweeper.arm(clock.redis_now() + 150);
  sweeper.arm(clock.redis_now() + 5000);  // later than the one set: no change
  run_for(10ms);
  EXPECT_EQ(broker_.count("requeue"), 0) << "not before the deadline";
  ASSERT_TRUE(run_until([&] { return broker_.count("requeue") == 1; }, 500ms));
  poll();
  EXPECT_EQ(requeued, 1) << "jobs came back: the topic looks again";
  ASSERT_TRUE(run_until([&] { return broker_.count("requeue") == 2; }, 500ms))
      << "and again at the next deadline Redis reported";
  EXPECT_EQ(requeued, 1);

  // While a fail waits to be sent again, a sweep is put off until it went.
  broker_.fail_next_fail = Errc::connection;
  calls_.on_retries_done([&] { sweeper.retries_done(); });
  Settler settler(calls_, {});
  settler.settle(verdict(reservation("f", 3), Verdict::fail));
  poll();
  ASSERT_TRUE(calls_.retrying());
  sweeper.sweep();
  poll();
  EXPECT_EQ(broker_.count("requeue"), 2);
  ASSERT_TRUE(run_until([&] { return broker_.count("requeue") == 3; }, 500ms));
  std::vector<std::string> order;
  for (const auto& c : broker_.calls) order.push_back(c.what);
  EXPECT_EQ(order, (std::vector<std::string>{"requeue", "requeue", "fail", "fail", "requeue"}));
  sweeper.stop();
  sweeper.sweep();
  poll();
  EXPECT_EQ(broker_.count("requeue"), 3) << "stopped: no more sweeps";
}

}  // namespace
}  // namespace redisched::worker
