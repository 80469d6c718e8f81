// redisched::Client end to end against a real redis-server.
#include "redisched/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "core/client_access.h"
#include "redisched/asio.h"
#include "redisched/limits.h"
#include "redisched/runtime.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using test::shared_redis;
using test::unique_topic;

class ClientTest : public ::testing::Test {
 protected:
  JobSpec job(std::string id, std::string body = "body") {
    JobSpec s;
    s.id = std::move(id);
    s.body = std::move(body);
    return s;
  }

  Client client_{test::client_options()};
  std::string topic_ = unique_topic();
};

// watch(): the topic's wake-up signal through the Client, with the due time
// of what a put scheduled; nothing once the subscription is cancelled.
TEST_F(ClientTest, WatchHearsTheTopicsSignalUntilCancelled) {
  std::atomic<int> ready{0};
  std::mutex mu;
  std::vector<std::int64_t> dues;
  auto sub = client_.watch(
      topic_,
      [&](std::int64_t due) {
        std::lock_guard lock(mu);
        dues.push_back(due);
      },
      [&] { ++ready; });
  ASSERT_TRUE(test::wait_until([&] { return ready.load() == 1; }));
  JobSpec s;
  s.id = "later";
  s.body = "x";
  s.due_at_ms = client_.now_ms() + 60000;
  client_.put(topic_, s);
  ASSERT_TRUE(test::wait_until([&] {
    std::lock_guard lock(mu);
    return dues.size() == 1;
  }));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(dues[0], *s.due_at_ms);
  }
  sub.cancel();
  s.id = "unheard";
  client_.put(topic_, s);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::lock_guard lock(mu);
  EXPECT_EQ(dues.size(), 1u);
}

TEST_F(ClientTest, PutThenGetReturnsEveryField) {
  JobSpec s = job("need_some_help_email_42", "{\"user\":42}");
  s.delay = Millis(60000);
  s.priority = 7;
  s.ttr = Millis(5000);
  s.max_attempts = 4;
  s.backoff = Backoff{BackoffKind::fixed, Millis(250), Millis(250)};
  const auto before = client_.now_ms();
  EXPECT_EQ(client_.put(topic_, s), PutOutcome::created);
  auto j = client_.get(topic_, s.id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::delayed);
  EXPECT_EQ(j->body, s.body);
  EXPECT_EQ(j->priority, 7);
  EXPECT_GE(j->created_ms, before);
  EXPECT_EQ(j->due_ms, j->created_ms + 60000);
  EXPECT_EQ(j->ttr, Millis(5000));
  EXPECT_EQ(j->max_attempts, 4);
  EXPECT_EQ(j->backoff.kind, BackoffKind::fixed);
  EXPECT_EQ(j->backoff.base, Millis(250));
  EXPECT_EQ(j->attempts, 0);
  EXPECT_FALSE(client_.get(topic_, "nobody"));
}

TEST_F(ClientTest, PutModes) {
  EXPECT_EQ(client_.put(topic_, job("a", "1")), PutOutcome::created);
  EXPECT_EQ(client_.put(topic_, job("a", "2")), PutOutcome::exists);
  auto replace = job("a", "3");
  replace.mode = PutMode::replace;
  EXPECT_EQ(client_.put(topic_, replace), PutOutcome::updated);
  EXPECT_EQ(client_.get(topic_, "a")->body, "3");
  replace.id = "b";
  EXPECT_EQ(client_.put(topic_, replace), PutOutcome::not_found);
  auto upsert = job("b", "4");
  upsert.mode = PutMode::upsert;
  EXPECT_EQ(client_.put(topic_, upsert), PutOutcome::created);
  EXPECT_EQ(client_.put(topic_, upsert), PutOutcome::updated);
}

TEST_F(ClientTest, AddGeneratesUniqueIds) {
  auto s = job("");
  s.priority = 3;
  const std::string a = client_.add(topic_, s);
  const std::string b = client_.add(topic_, s);
  EXPECT_NE(a, b);
  EXPECT_EQ(client_.get(topic_, a)->priority, 3);
  EXPECT_THROW(client_.add(topic_, job("mine")), Error);
  EXPECT_THROW(client_.put(topic_, job("*")), Error) << "* is add's";
  EXPECT_EQ(client_.reserve(topic_, 5).jobs.size(), 2u);
}

TEST_F(ClientTest, ReserveAckRemovesTheJob) {
  client_.put(topic_, job("a"));
  auto r = client_.reserve(topic_, 1, Millis(10000));
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].id, "a");
  EXPECT_EQ(r.jobs[0].deadline_ms, r.now_ms + 10000);
  auto j = client_.get(topic_, "a");
  EXPECT_EQ(j->state, JobState::reserved);
  EXPECT_EQ(j->token, r.jobs[0].token);
  EXPECT_EQ(client_.ack(topic_, "a", r.jobs[0].token), Outcome::ok);
  EXPECT_FALSE(client_.get(topic_, "a"));
  EXPECT_EQ(client_.ack(topic_, "a", r.jobs[0].token), Outcome::not_found);
}

// A producer retries a put whose answer it never saw: inside the retry
// window the job that already ran is not made again; without one it is.
TEST_F(ClientTest, APutRetriedAfterItsJobRanAnswersExistsInsideTheRetryWindow) {
  EXPECT_EQ(client_.retry_window(topic_), (RetryWindow{Millis(60000), 0}));
  client_.put(topic_, job("once"));
  auto r = client_.reserve(topic_);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(client_.ack(topic_, "once", r.jobs[0].token), Outcome::ok);
  EXPECT_FALSE(client_.get(topic_, "once"));
  EXPECT_EQ(client_.put(topic_, job("once")), PutOutcome::exists);
  const std::vector<JobSpec> batch{job("once"), job("other")};
  EXPECT_EQ(client_.put_many(topic_, batch),
            (std::vector<PutOutcome>{PutOutcome::exists, PutOutcome::created}));
  EXPECT_EQ(client_.retry_window(topic_).remembered, 1);
  // Off: the ids held are forgotten and a put makes the job again.
  EXPECT_EQ(client_.set_retry_window(topic_, Millis(0)), (RetryWindow{Millis(0), 0}));
  EXPECT_EQ(client_.put(topic_, job("once")), PutOutcome::created);
  EXPECT_THROW(client_.set_retry_window(topic_, Millis(86400001)), Error);
  EXPECT_THROW(client_.set_retry_window(topic_, Millis(-1)), Error);
}

// A job put with keep: reserve reports it, the ack keeps the job with its
// result, and a producer's wait returns it as soon as it is acked.
TEST_F(ClientTest, WaitReturnsTheResultOnceTheJobIsAcked) {
  JobSpec s = job("report");
  s.keep = Millis(60000);
  client_.put(topic_, s);
  EXPECT_EQ(client_.get(topic_, "report")->keep, Millis(60000));
  auto waiting = client_.wait_async(topic_, "report", Millis(10000));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "a waiting job does not end the wait";
  auto r = client_.reserve(topic_);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].keep, Millis(60000));
  // (A result without a keep is kept for the retry window, for a job that may
  // wait for this one; with a window of 0 it has nowhere to go: refused.)
  client_.set_retry_window(topic_, Millis(0));
  EXPECT_REDISCHED_ERROR(client_.ack(topic_, "report", r.jobs[0].token, Millis(0), "x"),
                         Errc::invalid_argument, "RESULT needs KEEP");
  const auto acked_at = std::chrono::steady_clock::now();
  ASSERT_EQ(client_.ack(topic_, "report", r.jobs[0].token, r.jobs[0].keep, "42 rows"), Outcome::ok);
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto woke_after = std::chrono::steady_clock::now() - acked_at;
  auto done = waiting.get();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, JobState::done);
  EXPECT_EQ(done->result, "42 rows");
  EXPECT_LT(woke_after, std::chrono::milliseconds(500)) << "woken by the signal, not a poll";
  // Finished already: at once.
  EXPECT_EQ(client_.wait(topic_, "report", Millis(10000))->result, "42 rows");
}

TEST_F(ClientTest, WaitEndsOnDeadOnRemovalAndAtItsTimeout) {
  // Put with keep: their producer waits for them, so their ends are signalled.
  JobSpec s = job("doomed");
  s.max_attempts = 1;
  s.keep = Millis(60000);
  client_.put(topic_, s);
  JobSpec removed_job = job("removed");
  removed_job.keep = Millis(60000);
  client_.put(topic_, removed_job);
  client_.put(topic_, job("slow"));
  const auto t_start = std::chrono::steady_clock::now();
  auto dead = client_.wait_async(topic_, "doomed", Millis(10000));
  auto removed = client_.wait_async(topic_, "removed", Millis(10000));
  auto r = client_.reserve(topic_);
  ASSERT_EQ(r.jobs.size(), 1u);
  client_.fail(topic_, "doomed", r.jobs[0].token, "no luck");
  auto d = dead.get();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state, JobState::dead);
  EXPECT_EQ(d->error, "no luck");
  EXPECT_TRUE(client_.remove(topic_, "removed"));
  EXPECT_FALSE(removed.get()) << "gone: no such job";
  EXPECT_LT(std::chrono::steady_clock::now() - t_start, std::chrono::seconds(3))
      << "woken by the signals, not the 10 s timeouts";
  const auto t0 = std::chrono::steady_clock::now();
  auto slow = client_.wait(topic_, "slow", Millis(300));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->state, JobState::ready) << "at the timeout, as it is";
  EXPECT_FALSE(client_.wait(topic_, "never-put", Millis(5000))) << "no such job: at once";
  EXPECT_REDISCHED_ERROR(client_.wait(topic_, "slow", Millis(-1)), Errc::invalid_argument,
                         "timeout");
}

// Many waits on one topic share its subscription; each ends with its job.
TEST_F(ClientTest, ManyWaitsOnOneTopicEachEndWithTheirJob) {
  constexpr int kJobs = 50;
  std::vector<std::future<std::optional<Job>>> waits;
  for (int i = 0; i < kJobs; ++i) {
    JobSpec s = job("w" + std::to_string(i));
    s.keep = Millis(60000);
    client_.put(topic_, s);
    waits.push_back(client_.wait_async(topic_, s.id, Millis(20000)));
  }
  std::vector<std::pair<std::string, std::uint64_t>> acks;
  for (const auto& j : client_.reserve(topic_, kJobs).jobs) acks.emplace_back(j.id, j.token);
  ASSERT_EQ(acks.size(), static_cast<std::size_t>(kJobs));
  for (auto o : client_.ack_many(topic_, acks, Millis(60000))) EXPECT_EQ(o, Outcome::ok);
  for (int i = 0; i < kJobs; ++i) {
    auto j = waits[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(j);
    EXPECT_EQ(j->id, "w" + std::to_string(i));
    EXPECT_EQ(j->state, JobState::done);
  }
}

TEST_F(ClientTest, EmptyReserveSaysWhenToLookAgain) {
  auto none = client_.reserve(topic_);
  EXPECT_TRUE(none.jobs.empty());
  EXPECT_EQ(none.next_ms, -1);
  auto s = job("later");
  s.delay = Millis(30000);
  client_.put(topic_, s);
  auto r = client_.reserve(topic_);
  EXPECT_TRUE(r.jobs.empty());
  EXPECT_EQ(r.next_ms, client_.get(topic_, "later")->due_ms);
}

TEST_F(ClientTest, DelayedJobBecomesReadyOnTime) {
  auto s = job("soon");
  s.delay = Millis(150);
  client_.put(topic_, s);
  EXPECT_TRUE(client_.reserve(topic_).jobs.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(170));
  EXPECT_EQ(client_.reserve(topic_).jobs.size(), 1u);
}

TEST_F(ClientTest, ReleaseFailTouchAndStaleTokens) {
  client_.put(topic_, job("a"));
  auto first = client_.reserve(topic_, 1, Millis(50));
  ASSERT_EQ(first.jobs.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  // The reservation lapsed; another worker takes the job.
  auto second = client_.reserve(topic_, 1, Millis(10000));
  ASSERT_EQ(second.jobs.size(), 1u);
  EXPECT_EQ(second.jobs[0].attempt, 2);
  const auto stale = first.jobs[0].token;
  EXPECT_EQ(client_.ack(topic_, "a", stale), Outcome::stale_token);
  EXPECT_EQ(client_.release(topic_, "a", stale), Outcome::stale_token);
  EXPECT_EQ(client_.fail(topic_, "a", stale, "x").outcome, Outcome::stale_token);
  EXPECT_EQ(client_.touch(topic_, "a", stale).outcome, Outcome::stale_token);
  auto t = client_.touch(topic_, "a", second.jobs[0].token, Millis(20000));
  EXPECT_EQ(t.outcome, Outcome::ok);
  EXPECT_GT(t.deadline_ms, second.jobs[0].deadline_ms);
  EXPECT_EQ(client_.release(topic_, "a", second.jobs[0].token, Millis(0), 9), Outcome::ok);
  EXPECT_EQ(client_.get(topic_, "a")->priority, 9);
  auto third = client_.reserve(topic_);
  auto f = client_.fail(topic_, "a", third.jobs[0].token, "it broke", true);
  EXPECT_EQ(f.outcome, Outcome::ok);
  EXPECT_EQ(f.state, JobState::dead);
  EXPECT_EQ(client_.get(topic_, "a")->error, "it broke");
  EXPECT_EQ(client_.kick_all(topic_), 1);
  EXPECT_EQ(client_.get(topic_, "a")->state, JobState::ready);
}

// Library version 38 (beanstalkd's reserve-job): one job by its id, ahead
// of the rest, from ready, delayed or dead.
TEST_F(ClientTest, ReserveJobTakesTheJobNamedAheadOfTheRest) {
  auto high = job("high");
  high.priority = 9;
  client_.put(topic_, high);
  client_.put(topic_, job("low"));
  auto low = client_.reserve_job(topic_, "low", Millis(60000), "picker");
  ASSERT_EQ(low.outcome, Outcome::ok);
  EXPECT_EQ(low.job.id, "low");
  EXPECT_EQ(low.job.deadline_ms, low.now_ms + 60000);
  EXPECT_EQ(client_.get(topic_, "low")->worker, "picker");
  EXPECT_EQ(client_.reserve_job(topic_, "low").outcome, Outcome::wrong_state);
  EXPECT_EQ(client_.reserve_job(topic_, "nope").outcome, Outcome::not_found);
  auto f = client_.fail(topic_, "low", low.job.token, "broke", true);
  EXPECT_EQ(f.state, JobState::dead);
  auto again = client_.reserve_job(topic_, "low");
  ASSERT_EQ(again.outcome, Outcome::ok);
  EXPECT_EQ(again.job.attempt, 1);
  EXPECT_NE(again.job.token, low.job.token);
  EXPECT_EQ(client_.ack(topic_, "low", low.job.token), Outcome::stale_token);
  EXPECT_EQ(client_.ack(topic_, "low", again.job.token), Outcome::ok);
  auto rest = client_.reserve(topic_, 5);
  ASSERT_EQ(rest.jobs.size(), 1u);
  EXPECT_EQ(rest.jobs[0].id, "high");
  EXPECT_REDISCHED_ERROR(client_.reserve_job(topic_, "high", Millis(0), std::string(129, 'w')),
                         Errc::invalid_argument, "worker");
}

// Library version 30: each attempt that fails or lapses stays in the job's
// history with its times, its error and the worker that reserved it.
TEST_F(ClientTest, AttemptHistoryKeepsWhenWhyAndWhichWorker) {
  auto spec = job("h");
  spec.max_attempts = 3;
  spec.backoff = Backoff{BackoffKind::fixed, Millis{0}, Millis{0}};
  client_.put(topic_, spec);
  EXPECT_TRUE(client_.get(topic_, "h")->history.empty());
  EXPECT_REDISCHED_ERROR(client_.reserve(topic_, ReserveOptions{1, Millis{0}, "bad\nname"}),
                         Errc::invalid_argument, "control character");
  EXPECT_REDISCHED_ERROR(
      client_.reserve(topic_, ReserveOptions{1, Millis{0}, std::string(129, 'w')}),
      Errc::invalid_argument, "longer than 128 bytes");
  auto first = client_.reserve(topic_, ReserveOptions{1, Millis(50), "host-a:1:cafe"});
  ASSERT_EQ(first.jobs.size(), 1u);
  EXPECT_EQ(client_.get(topic_, "h")->worker, "host-a:1:cafe");
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  auto second = client_.reserve(topic_, ReserveOptions{1, Millis(10000), "host-b:2:beef"});
  ASSERT_EQ(second.jobs.size(), 1u) << "the lapsed reservation comes back";
  const std::string long_error(2000, 'x');
  EXPECT_EQ(client_.fail(topic_, "h", second.jobs[0].token, long_error).state, JobState::ready);
  const auto j = *client_.get(topic_, "h");
  EXPECT_TRUE(j.worker.empty()) << "no longer reserved";
  EXPECT_EQ(j.error, long_error) << "the last error is kept whole";
  ASSERT_EQ(j.history.size(), 2u);
  EXPECT_EQ(j.history[0].attempt, 1);
  EXPECT_EQ(j.history[0].outcome, AttemptOutcome::lapsed);
  EXPECT_EQ(j.history[0].worker, "host-a:1:cafe");
  EXPECT_EQ(j.history[0].error, "time-to-run lapsed");
  EXPECT_EQ(j.history[0].started_ms, first.now_ms);
  EXPECT_GE(j.history[0].ended_ms, first.jobs[0].deadline_ms);
  EXPECT_EQ(j.history[1].attempt, 2);
  EXPECT_EQ(j.history[1].outcome, AttemptOutcome::failed);
  EXPECT_EQ(j.history[1].worker, "host-b:2:beef");
  EXPECT_EQ(j.history[1].error, long_error.substr(0, limits::kHistoryErrorMax));
  EXPECT_TRUE(j.history[1].error_cut);
  // Reserves of different workers queued together do not coalesce into one
  // call under one name: each job names the worker that took it.
  client_.put(topic_, job("p"));
  auto fa = client_.reserve_async(topic_, ReserveOptions{1, Millis{0}, "wa"});
  auto fb = client_.reserve_async(topic_, ReserveOptions{1, Millis{0}, "wb"});
  auto ra = fa.get();
  auto rb = fb.get();
  ASSERT_EQ(ra.jobs.size() + rb.jobs.size(), 2u);
  for (const auto& [r, name] : {std::pair{&ra, "wa"}, {&rb, "wb"}}) {
    for (const auto& taken : r->jobs) EXPECT_EQ(client_.get(topic_, taken.id)->worker, name);
  }
}

// Library version 31: a reserved job's handler reports progress and log
// lines; they stay with the job through a failure, and restore takes them.
TEST_F(ClientTest, ReportsKeepProgressAndTheLatestLogLinesWithTheJob) {
  auto spec = job("r");
  spec.backoff = Backoff{BackoffKind::fixed, Millis{0}, Millis{0}};
  client_.put(topic_, spec);
  auto r = client_.reserve(topic_);
  ASSERT_EQ(r.jobs.size(), 1u);
  const auto token = r.jobs[0].token;
  EXPECT_EQ(client_.report(topic_, "r", token, {{"one", "two"}, R"({"percent":40})"}), Outcome::ok);
  EXPECT_EQ(client_.report(topic_, "r", token + 1, {{"x"}, std::nullopt}), Outcome::stale_token);
  EXPECT_EQ(client_.report(topic_, "nope", token, {{"x"}, std::nullopt}), Outcome::not_found);
  EXPECT_REDISCHED_ERROR(client_.report(topic_, "r", token, {}), Errc::invalid_argument,
                         "log lines, a progress or both");
  EXPECT_REDISCHED_ERROR(client_.report(topic_, "r", token, {{"\xff"}, std::nullopt}),
                         Errc::invalid_argument, "not UTF-8");
  EXPECT_REDISCHED_ERROR(client_.report(topic_, "r", token, {{}, "nope"}), Errc::invalid_argument,
                         "JSON value");
  EXPECT_REDISCHED_ERROR(
      client_.report(topic_, "r", token, {std::vector<std::string>(101, "l"), std::nullopt}),
      Errc::invalid_argument, "at most 100 log lines");
  EXPECT_EQ(client_.report(topic_, "r", token, {{std::string(1500, 'y')}, std::nullopt}),
            Outcome::ok);
  EXPECT_EQ(client_.fail(topic_, "r", token, "boom").state, JobState::ready);
  const auto j = *client_.get(topic_, "r");
  ASSERT_TRUE(j.progress);
  EXPECT_EQ(j.progress->value, R"({"percent":40})");
  EXPECT_EQ(j.progress->attempt, 1);
  EXPECT_GE(j.progress->at_ms, r.now_ms);
  ASSERT_EQ(j.log.size(), 3u);
  EXPECT_EQ(j.log_total, 3);
  EXPECT_EQ(j.log[0].text, "one");
  EXPECT_EQ(j.log[0].attempt, 1);
  EXPECT_EQ(j.log[2].text, std::string(limits::kLogLineMax, 'y'));
  EXPECT_TRUE(j.log[2].cut);
  EXPECT_FALSE(j.log[1].cut);
  // Export and import keep them (restore's PROGRESS and LOG).
  auto copy = j;
  copy.id = "r2";
  ASSERT_TRUE(client_.restore(topic_, copy));
  const auto back = *client_.get(topic_, "r2");
  ASSERT_TRUE(back.progress);
  EXPECT_EQ(back.progress->value, j.progress->value);
  EXPECT_EQ(back.progress->at_ms, j.progress->at_ms);
  ASSERT_EQ(back.log.size(), 3u);
  EXPECT_EQ(back.log_total, 3);
  EXPECT_EQ(back.log[2].text, j.log[2].text);
  EXPECT_TRUE(back.log[2].cut);
  EXPECT_EQ(back.log[1].at_ms, j.log[1].at_ms);
}

// Library version 32: delayed jobs due now in place (attempts and history
// kept), and the dead older than a time removed, a batch a call.
TEST_F(ClientTest, RescheduleChangesAWaitingJobInPlaceAndGetCanLeaveTheBodyOut) {
  auto spec = job("r", "the body");
  spec.backoff = Backoff{BackoffKind::fixed, Millis{0}, Millis{0}};
  client_.put(topic_, spec);
  auto taken = client_.reserve(topic_, 1);
  ASSERT_EQ(taken.jobs.size(), 1u);
  client_.fail(topic_, "r", taken.jobs[0].token, "boom");
  EXPECT_EQ(client_.reschedule(topic_, "r", {.priority = 7, .delay = Millis{60000}}), Outcome::ok);
  auto j = *client_.get(topic_, "r");
  EXPECT_EQ(j.state, JobState::delayed);
  EXPECT_EQ(j.priority, 7);
  EXPECT_EQ(j.attempts, 1) << "its attempt stays";
  EXPECT_EQ(j.history.size(), 1u);
  EXPECT_EQ(client_.reschedule(topic_, "r", {.due_at_ms = 1}), Outcome::ok);
  EXPECT_EQ(client_.get(topic_, "r")->state, JobState::ready) << "a time past is now";
  EXPECT_EQ(client_.reschedule(topic_, "nope", {.priority = 1}), Outcome::not_found);
  taken = client_.reserve(topic_, 1);
  EXPECT_EQ(client_.reschedule(topic_, "r", {.priority = 1}), Outcome::wrong_state);
  EXPECT_REDISCHED_ERROR(client_.reschedule(topic_, "r", {}), Errc::invalid_argument,
                         "give PRIORITY, DELAY or AT");
  const auto bare = *client_.get(topic_, "r", false);
  EXPECT_EQ(bare.body, "");
  EXPECT_EQ(bare.state, JobState::reserved);
  EXPECT_EQ(client_.get(topic_, "r")->body, "the body");
}

TEST_F(ClientTest, PromoteKeepsAttemptsAndPurgeRemovesTheOldDead) {
  auto spec = job("p");
  spec.backoff = Backoff{BackoffKind::fixed, Millis{600000}, Millis{600000}};
  client_.put(topic_, spec);
  auto r = client_.reserve(topic_);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(client_.fail(topic_, "p", r.jobs[0].token, "later").state, JobState::delayed);
  const std::vector<std::string> ids{"p", "nope"};
  EXPECT_EQ(client_.promote(topic_, ids), 1);
  auto j = *client_.get(topic_, "p");
  EXPECT_EQ(j.state, JobState::ready);
  EXPECT_EQ(j.attempts, 1);
  EXPECT_EQ(j.history.size(), 1u);
  for (int i = 0; i < 5; ++i) {
    auto later = job("l" + std::to_string(i));
    later.delay = Millis{3600000};
    client_.put(topic_, later);
  }
  auto first = client_.promote_all(topic_, 3);
  EXPECT_EQ(first.done, 3);
  EXPECT_EQ(first.left, 2);
  auto rest = client_.promote_all(topic_);
  EXPECT_EQ(rest.done, 2);
  EXPECT_EQ(rest.left, 0);
  EXPECT_EQ(client_.stats(topic_).delayed, 0);
  // Dead: three of them, then purged before and after their time.
  for (int i = 0; i < 3; ++i) {
    auto d = job("d" + std::to_string(i));
    d.max_attempts = 1;
    client_.put(topic_, d);
  }
  for (const auto& taken : client_.reserve(topic_, 10).jobs) {
    if (taken.id.starts_with("d")) {
      client_.fail(topic_, taken.id, taken.token, "boom");
    } else {
      client_.release(topic_, taken.id, taken.token);
    }
  }
  EXPECT_EQ(client_.stats(topic_).dead, 3);
  const auto none = client_.purge_dead(topic_, 1);
  EXPECT_EQ(none.done, 0);
  const auto now = client_.now_ms() + 1;
  const auto two = client_.purge_dead(topic_, now, 2);
  EXPECT_EQ(two.done, 2);
  EXPECT_EQ(two.left, 1);
  EXPECT_EQ(client_.purge_dead(topic_, now).done, 1);
  EXPECT_EQ(client_.stats(topic_).dead, 0);
  EXPECT_REDISCHED_ERROR(client_.purge_dead(topic_, now, 0), Errc::invalid_argument, "LIMIT");
}

TEST_F(ClientTest, BatchPutAndAckOverTheLibraryLimit) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 2500; ++i) jobs.push_back(job("j" + std::to_string(i)));
  jobs.push_back(job("j7"));  // a repeat within the batch
  auto outcomes = client_.put_many(topic_, jobs);
  ASSERT_EQ(outcomes.size(), 2501u);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), PutOutcome::created), 2500);
  EXPECT_EQ(outcomes.back(), PutOutcome::exists);
  std::vector<std::pair<std::string, std::uint64_t>> held;
  for (;;) {
    auto r = client_.reserve(topic_, 1000);
    if (r.jobs.empty()) break;
    for (auto& j : r.jobs) held.emplace_back(j.id, j.token);
  }
  ASSERT_EQ(held.size(), 2500u);
  EXPECT_EQ(held.front().first, "j0") << "put order";
  EXPECT_EQ(held.back().first, "j2499");
  auto acks = client_.ack_many(topic_, held);
  EXPECT_EQ(std::count(acks.begin(), acks.end(), Outcome::ok), 2500);
  EXPECT_EQ(client_.stats(topic_).reserved, 0);
}

TEST_F(ClientTest, PullListStatsPauseAndTopics) {
  for (int i = 0; i < 3; ++i) client_.put(topic_, job("p" + std::to_string(i)));
  auto page = client_.list(topic_, JobState::ready, 0, 2);
  EXPECT_EQ(page.total, 3);
  ASSERT_EQ(page.jobs.size(), 2u);
  EXPECT_EQ(page.jobs[0].id, "p0");
  EXPECT_EQ(page.jobs[0].body, "body");
  EXPECT_TRUE(client_.pause(topic_));
  EXPECT_TRUE(client_.pull(topic_, 3).paused);
  EXPECT_TRUE(client_.stats(topic_).paused);
  EXPECT_TRUE(client_.resume(topic_));
  EXPECT_EQ(client_.pull(topic_, 3).jobs.size(), 3u);
  EXPECT_EQ(client_.stats(topic_).ready, 0);
  auto topics = client_.topics();
  EXPECT_NE(std::find(topics.begin(), topics.end(), topic_), topics.end());
}

// Library version 38: a pause for a time ends by itself, with nobody to
// resume it; a reserve while paused says when.
TEST_F(ClientTest, ATimedPauseEndsByItself) {
  client_.put(topic_, job("t"));
  EXPECT_TRUE(client_.pause(topic_, Millis(600000)));
  auto st = client_.stats(topic_);
  EXPECT_TRUE(st.paused);
  auto none = client_.reserve(topic_);
  EXPECT_TRUE(none.paused);
  EXPECT_GT(none.next_ms, none.now_ms);
  EXPECT_LE(none.next_ms, none.now_ms + 600000);
  EXPECT_EQ(st.pause_end_ms, none.next_ms);
  // A pause of 1 ms in its place: ended however slow the machine is.
  EXPECT_TRUE(client_.pause(topic_, Millis(1)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(client_.stats(topic_).paused);
  EXPECT_EQ(client_.stats(topic_).pause_end_ms, -1);
  EXPECT_EQ(client_.reserve(topic_).jobs.size(), 1u);
  EXPECT_TRUE(client_.pause(topic_, Millis(0)));  // (no end)
  EXPECT_EQ(client_.stats(topic_).pause_end_ms, -1);
  EXPECT_TRUE(client_.stats(topic_).paused);
  EXPECT_TRUE(client_.resume(topic_));
  EXPECT_REDISCHED_ERROR(client_.pause(topic_, Millis(-1)), Errc::invalid_argument, "duration");
  EXPECT_REDISCHED_ERROR(client_.pause(topic_, Millis(limits::kDelayMax + 1)),
                         Errc::invalid_argument, "duration");
}

// Every id with the prefix, once, over pages; glob characters are plain.
TEST_F(ClientTest, FindIdsByPrefixPageByPage) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 2500; ++i) jobs.push_back(job("order_" + std::to_string(i)));
  for (const char* id : {"other", "or*der", "or?x", "or[d]", "or\\d"}) jobs.push_back(job(id));
  client_.put_many(topic_, jobs);
  auto held = client_.reserve(topic_, 1);  // (any state: reserved too)
  ASSERT_EQ(held.jobs.size(), 1u);

  std::set<std::string> found;
  std::string cursor;
  int pages = 0;
  do {
    auto page = client_.find_ids(topic_, "order_1", cursor, 50);
    EXPECT_LE(page.ids.size(), 500u) << "about count";
    for (auto& id : page.ids) {
      EXPECT_EQ(id.rfind("order_1", 0), 0u) << id;
      found.insert(std::move(id));
    }
    cursor = page.cursor;
    ASSERT_LT(++pages, 200);
  } while (!cursor.empty());
  EXPECT_EQ(found.size(), 1u + 10u + 100u + 1000u) << "order_1, _10.., _100.., _1000..";
  EXPECT_GT(pages, 1);

  for (const char* id : {"or*der", "or?x", "or[d]", "or\\d"}) {
    auto page = client_.find_ids(topic_, id, "", 1000);
    while (!page.cursor.empty() && page.ids.empty())
      page = client_.find_ids(topic_, id, page.cursor, 1000);
    EXPECT_EQ(page.ids, std::vector<std::string>{id}) << "a glob character is itself";
  }
  EXPECT_TRUE(client_.find_ids(test::unique_topic(), "x").ids.empty());
  EXPECT_REDISCHED_ERROR(client_.find_ids(topic_, "o", "12"), Errc::invalid_argument,
                         "not a cursor");
  EXPECT_REDISCHED_ERROR(client_.find_ids(topic_, "o", "1:0"), Errc::invalid_argument,
                         "a shard the topic lacks");
  EXPECT_REDISCHED_ERROR(client_.find_ids(topic_, "o", "", 0), Errc::invalid_argument,
                         "count must be");
  EXPECT_REDISCHED_ERROR(client_.find_ids(topic_, std::string(2000, 'o')), Errc::invalid_argument,
                         "at most");
}

TEST_F(ClientTest, RemoveInAnyState) {
  client_.put(topic_, job("a"));
  EXPECT_TRUE(client_.remove(topic_, "a"));
  EXPECT_FALSE(client_.remove(topic_, "a"));
}

// Many at once: every state, absent ids not counted, past the library's
// 1000 per call.
TEST_F(ClientTest, RemoveManyInAnyStateOverTheLibraryLimit) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 1500; ++i) jobs.push_back(job("m" + std::to_string(i)));
  client_.put_many(topic_, jobs);
  auto delayed = job("later");
  delayed.delay = Millis{60000};
  client_.put(topic_, delayed);
  auto taken = client_.reserve(topic_, 2);
  ASSERT_EQ(taken.jobs.size(), 2u);
  client_.fail(topic_, taken.jobs[1].id, taken.jobs[1].token, "x", true);
  std::vector<std::string> ids{"later", "never-put", taken.jobs[0].id, taken.jobs[1].id};
  for (int i = 2; i < 1500; ++i) ids.push_back("m" + std::to_string(i));
  EXPECT_EQ(client_.remove_many(topic_, ids), 1501);
  const auto st = client_.stats(topic_);
  EXPECT_EQ(st.ready + st.delayed + st.reserved + st.dead, 0);
  EXPECT_EQ(client_.remove_many(topic_, ids), 0);
  EXPECT_REDISCHED_ERROR(client_.remove_many(topic_, std::vector<std::string>{"bad\nid"}),
                         Errc::invalid_argument, "control character");
}

TEST_F(ClientTest, BinaryBodyRoundTrips) {
  std::string body;
  for (int i = 0; i < 256; ++i) body.push_back(static_cast<char>(i));
  client_.put(topic_, job("bin", body));
  EXPECT_EQ(client_.reserve(topic_).jobs.at(0).body, body);
}

TEST_F(ClientTest, InvalidArgumentsThrowWithTheReason) {
  EXPECT_REDISCHED_ERROR(client_.put("bad topic", job("a")), Errc::invalid_argument, "topic");
  EXPECT_REDISCHED_ERROR(client_.put("", job("a")), Errc::invalid_argument, "topic is empty");
  EXPECT_REDISCHED_ERROR(client_.put(topic_, job("")), Errc::invalid_argument, "job id is empty");
  EXPECT_REDISCHED_ERROR(client_.put(topic_, job("a", std::string((1 << 20) + 1, 'x'))),
                         Errc::invalid_argument, "over the limit");
  auto s = job("a");
  s.priority = 5000;
  EXPECT_REDISCHED_ERROR(client_.put(topic_, s), Errc::invalid_argument,
                         "PRIORITY must be from -4294966295 to 1000");
  s = job("a");
  s.delay = Millis(10);
  s.due_at_ms = 5;
  EXPECT_REDISCHED_ERROR(client_.put(topic_, s), Errc::invalid_argument, "DELAY or AT");
  EXPECT_REDISCHED_ERROR(client_.reserve(topic_, 0), Errc::invalid_argument,
                         "count must be from 1 to 1000");
  EXPECT_REDISCHED_ERROR(client_.list(topic_, JobState::ready, -1, 5), Errc::invalid_argument,
                         "offset");
  EXPECT_FALSE(client_.get(topic_, "a")) << "nothing was stored";
}

TEST_F(ClientTest, AsynchronousCallsWithFuturesAndCallbacks) {
  std::vector<std::future<PutOutcome>> puts;
  for (int i = 0; i < 500; ++i)
    puts.push_back(client_.put_async(topic_, job("f" + std::to_string(i))));
  for (auto& f : puts) EXPECT_EQ(f.get(), PutOutcome::created);
  std::promise<Result<ReserveResult>> got;
  client_.reserve_async(topic_, 10, Millis(0),
                        [&](Result<ReserveResult> r) { got.set_value(std::move(r)); });
  auto r = got.get_future().get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().jobs.size(), 10u);
  auto bad = client_.get_async(topic_, "");
  EXPECT_THROW(bad.get(), Error);

  // Every operation has its future form.
  auto held = r.value().jobs;
  EXPECT_EQ(client_.touch_async(topic_, held[0].id, held[0].token).get().outcome, Outcome::ok);
  EXPECT_EQ(client_.release_async(topic_, held[1].id, held[1].token).get(), Outcome::ok);
  EXPECT_EQ(client_.fail_async(topic_, held[2].id, held[2].token, "x", true).get().state,
            JobState::dead);
  EXPECT_EQ(client_.ack_async(topic_, held[3].id, held[3].token).get(), Outcome::ok);
  EXPECT_EQ(client_.kick_all_async(topic_).get(), 1);
  EXPECT_EQ(client_.stats_async(topic_).get().reserved, 7);
  EXPECT_EQ(client_.list_async(topic_, JobState::reserved, 0, 100).get().total, 7);
  EXPECT_EQ(client_.requeue_async(topic_).get().requeued, 0);
  EXPECT_TRUE(client_.pause_async(topic_).get());
  EXPECT_TRUE(client_.pull_async(topic_, 5).get().paused);
  EXPECT_TRUE(client_.resume_async(topic_).get());
  EXPECT_EQ(client_.pull_async(topic_, 5).get().jobs.size(), 5u);
  std::vector<std::string> none = {"nobody"};
  EXPECT_EQ(client_.kick_async(topic_, none).get(), 0);
  EXPECT_TRUE(client_.remove_async(topic_, held[4].id).get());
}

// What a coroutine saw of the Client's calls with Asio's tokens.
struct Awaited {
  std::optional<Job> got;
  Errc refused = Errc::ok;
  bool other_thread = false;
  std::vector<Outcome> acks;
};

// (A function, not a lambda: GCC 12 warns falsely on a coroutine lambda's
// frame.)
boost::asio::awaitable<void> await_calls(Client& client, std::string topic, Awaited& seen) {
  namespace asio = boost::asio;
  const auto here = std::this_thread::get_id();
  JobSpec a;
  a.id = "a";
  a.body = "x";
  EXPECT_EQ(co_await client.put_async(topic, a, asio::use_awaitable), PutOutcome::created);
  seen.other_thread = std::this_thread::get_id() != here;
  seen.got = co_await client.get_async(topic, "a", asio::use_awaitable);
  try {
    co_await client.get_async("bad topic", "a", asio::use_awaitable);
  } catch (const Error& e) {
    seen.refused = e.code();
  }
  auto r = co_await client.reserve_async(topic, 2, Millis(0), asio::use_awaitable);
  for (const auto& j : r.jobs) {
    seen.acks.push_back(co_await client.ack_async(topic, j.id, j.token, {}, asio::use_awaitable));
  }
}

// The same calls with Asio's completion tokens (redisched/asio.h), from a
// coroutine on an io_context of the test's own: use_awaitable answers on
// the coroutine's executor and throws the Error; deferred starts when
// launched.
TEST_F(ClientTest, AsynchronousCallsWithAsioCompletionTokens) {
  namespace asio = boost::asio;
  asio::io_context io;
  Awaited seen;
  asio::co_spawn(io, await_calls(client_, topic_, seen), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  EXPECT_FALSE(seen.other_thread) << "answers come on the coroutine's executor";
  ASSERT_TRUE(seen.got);
  EXPECT_EQ(seen.got->body, "x");
  EXPECT_EQ(seen.refused, Errc::invalid_argument);
  EXPECT_EQ(seen.acks, std::vector<Outcome>{Outcome::ok});

  const JobSpec b = job("b", "y");  // (read when the deferred call starts)
  auto later = client_.put_async(topic_, b, asio::deferred);
  EXPECT_EQ(client_.stats(topic_).ready, 0) << "not started yet";
  std::vector<PutOutcome> deferred_puts;
  std::move(later)(asio::bind_executor(io, [&](std::exception_ptr e, PutOutcome o) {
    EXPECT_FALSE(e);
    deferred_puts.push_back(o);
  }));
  io.restart();
  io.run();
  EXPECT_EQ(deferred_puts, std::vector<PutOutcome>{PutOutcome::created});
  EXPECT_EQ(client_.stats(topic_).ready, 1);
}

// TopicLimits through the Client: set, read, shown in stats, refused when
// out of range, cleared.
TEST_F(ClientTest, LimitsRoundTrip) {
  EXPECT_EQ(client_.limits(topic_), TopicLimits{});
  const TopicLimits want{.rate = 7, .window = Millis(250), .concurrency = 2, .aging = Millis(40)};
  EXPECT_EQ(client_.set_limits(topic_, want), want);
  EXPECT_EQ(client_.limits(topic_), want);
  EXPECT_EQ(client_.stats(topic_).limits, want);
  EXPECT_REDISCHED_ERROR(client_.set_limits(topic_, {.rate = 2000000}), Errc::invalid_argument,
                         "RATE must be from 0 to 1000000");
  EXPECT_REDISCHED_ERROR(client_.set_limits(topic_, {.rate = 1, .window = Millis(0)}),
                         Errc::invalid_argument, "RATE window");
  EXPECT_EQ(client_.limits(topic_), want) << "a refused change changes nothing";
  EXPECT_EQ(client_.set_limits(topic_, TopicLimits{}), TopicLimits{});
  EXPECT_EQ(client_.stats(topic_).limits, TopicLimits{});
}

// FCALLs Redis ran so far, on every node of the target.
long fcalls_run() {
  long n = 0;
  for (const int port : test::target_ports()) {
    auto info = test::RawRedis(port).call({"INFO", "commandstats"});
    const std::string text(info->str, info->len);
    const auto at = text.find("cmdstat_fcall:calls=");
    if (at != std::string::npos) n += std::stol(text.substr(at + 20));
  }
  return n;
}

// Coalescing: single calls queued together on a connection reach Redis as
// batched calls (far fewer FCALLs than calls), and each caller still gets
// the answer it would have got alone, in order: a put of a taken id, a put
// Redis refuses, adds, reserves beyond the ready jobs, a stale ack.
TEST_F(ClientTest, SingleCallsQueuedTogetherGoAsBatchesEachWithItsOwnAnswer) {
  client_.put(topic_, job("taken"));
  constexpr int kPuts = 200;
  std::mutex mu;
  std::vector<std::string> answers(kPuts + 2);
  std::atomic<int> answered{0};
  auto record = [&](int i, std::string what) {
    std::lock_guard lock(mu);
    answers[i] = std::move(what);
    ++answered;
  };
  const long before = fcalls_run();
  // On the runtime's thread, all queued before the connection writes.
  boost::asio::post(shard_io(client_.runtime(), 0), [&] {
    for (int i = 0; i < kPuts; ++i) {
      JobSpec s = job(i == 7 ? "taken" : "c" + std::to_string(i));
      client_.put_async(topic_, s, [&, i](Result<PutOutcome> r) {
        record(i, !r.ok()                            ? "error: " + std::string(r.error().what())
                  : r.value() == PutOutcome::created ? "created"
                                                     : "exists");
      });
    }
    client_.add_async(topic_, job(""),
                      [&](Result<std::string> r) { record(kPuts, r.ok() ? r.value() : "error"); });
    client_.add_async(topic_, job(""), [&](Result<std::string> r) {
      record(kPuts + 1, r.ok() ? r.value() : "error");
    });
  });
  ASSERT_TRUE(test::wait_until([&] { return answered.load() == kPuts + 2; }));
  const long used = fcalls_run() - before;
  EXPECT_LT(used, 20) << "200 puts and 2 adds went as " << used << " FCALLs";
  for (int i = 0; i < kPuts; ++i) {
    EXPECT_EQ(answers[i], i == 7 ? "exists" : "created") << i;
  }
  EXPECT_NE(answers[kPuts], answers[kPuts + 1]);
  EXPECT_TRUE(client_.get(topic_, answers[kPuts])) << "the generated id is the job's";
  EXPECT_EQ(client_.stats(topic_).ready, kPuts - 1 + 2 + 1);

  // A put the library refuses (not the Client) fails alone.
  answered = 0;
  boost::asio::post(shard_io(client_.runtime(), 0), [&] {
    for (int i = 0; i < 3; ++i) {
      JobSpec s = job("r" + std::to_string(i));
      if (i == 1) s.priority = 5000;
      client_.put_async(topic_, s, [&, i](Result<PutOutcome> r) {
        record(i, r.ok() ? "created" : std::string(r.error().what()));
      });
    }
  });
  ASSERT_TRUE(test::wait_until([&] { return answered.load() == 3; }));
  EXPECT_EQ(answers[0], "created");
  EXPECT_NE(answers[1].find("PRIORITY"), std::string::npos) << answers[1];
  EXPECT_EQ(answers[2], "created");
  EXPECT_FALSE(client_.get(topic_, "r1"));

  // Reserves of one job each, more than there are ready jobs: the first
  // get them in order, the others none and when to look again.
  const std::string few = unique_topic();
  for (int i = 0; i < 3; ++i) {
    JobSpec s = job("j" + std::to_string(i));
    s.priority = i;
    client_.put(few, s);
  }
  std::vector<Result<ReserveResult>> reserved;
  std::atomic<int> got{0};
  reserved.reserve(5);
  const long before_reserves = fcalls_run();
  boost::asio::post(shard_io(client_.runtime(), 0), [&] {
    for (int i = 0; i < 5; ++i) {
      client_.reserve_async(few, 1, Millis(0), [&](Result<ReserveResult> r) {
        reserved.push_back(std::move(r));  // on the runtime's thread, in order
        ++got;
      });
    }
  });
  ASSERT_TRUE(test::wait_until([&] { return got.load() == 5; }));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(reserved[i].ok());
    const auto& r = reserved[i].value();
    if (i < 3) {
      ASSERT_EQ(r.jobs.size(), 1u) << i;
      EXPECT_EQ(r.jobs[0].id, "j" + std::to_string(2 - i)) << "the highest priority first";
      EXPECT_EQ(r.next_ms, 0) << "as a reserve of one that got its job";
    } else {
      EXPECT_TRUE(r.jobs.empty());
      EXPECT_GT(r.next_ms, r.now_ms) << "when the first reservation lapses";
    }
  }

  // Acks of them, one with a stale token.
  std::vector<Result<Outcome>> acked(3, Result<Outcome>(Outcome::not_found));
  std::atomic<int> acks{0};
  boost::asio::post(shard_io(client_.runtime(), 0), [&] {
    for (int i = 0; i < 3; ++i) {
      const auto& j = reserved[i].value().jobs[0];
      client_.ack_async(few, j.id, i == 1 ? j.token + 1000 : j.token, Millis(0),
                        [&, i](Result<Outcome> r) {
                          acked[i] = std::move(r);
                          ++acks;
                        });
    }
  });
  ASSERT_TRUE(test::wait_until([&] { return acks.load() == 3; }));
  EXPECT_EQ(acked[0].value(), Outcome::ok);
  EXPECT_EQ(acked[1].value(), Outcome::stale_token);
  EXPECT_EQ(acked[2].value(), Outcome::ok);
  EXPECT_EQ(client_.stats(few).reserved, 1);
  const long reserves_and_acks = fcalls_run() - before_reserves;
  EXPECT_LT(reserves_and_acks, 10)
      << "8 reserves and acks went as " << reserves_and_acks << " FCALLs";
}

// ClientOptions::replicas: writes answer once a replica has them (WAIT on
// the connection that wrote), and say so when none did in time.
// The suite runs on the target it names: with REDISCHED_TEST_TARGET=cluster,
// its topics land on every primary of a cluster.
TEST_F(ClientTest, RunsOnTheTargetItNames) {
  for (int i = 0; i < 24; ++i) client_.put(topic_ + "_" + std::to_string(i), job("a"));
  const auto ports = test::target_ports();
  EXPECT_EQ(ports.size(), test::on_cluster() ? 3u : 1u);
  for (int port : ports) {
    auto info = test::RawRedis(port).call({"INFO", "cluster"});
    EXPECT_NE(
        std::string(info->str).find(test::on_cluster() ? "cluster_enabled:1" : "cluster_enabled:0"),
        std::string::npos);
    auto keys = test::RawRedis(port).call({"KEYS", "*" + topic_ + "_*"});
    EXPECT_GT(keys->elements, 0u) << "no topic on the node at port " << port;
  }
}

TEST_F(ClientTest, WritesWaitForTheReplicasAskedFor) {
  SKIP_ON_CLUSTER("it adds a replica to the single server (the cluster's: tests/cluster)");
  // The shared server has no replica: the write is done, but not confirmed.
  ClientOptions lonely = test::client_options();
  lonely.replicas = 1;
  lonely.replica_timeout = Millis{100};
  Client unconfirmed(lonely);
  EXPECT_REDISCHED_ERROR(unconfirmed.put(topic_, job("a")), Errc::timeout, "only 0 of 1 replicas");
  EXPECT_TRUE(client_.get(topic_, "a")) << "done on the primary all the same";
  // Reads do not wait; a topic of its own may ask for none.
  EXPECT_TRUE(unconfirmed.get(topic_, "a"));
  lonely.topic_replicas = {{topic_, 0}};
  Client per_topic(lonely);
  EXPECT_EQ(per_topic.put(topic_, job("b")), PutOutcome::created);
  // A put of its own may ask for more, or for none, over both.
  auto own = job("b2");
  own.replicas = 1;
  EXPECT_REDISCHED_ERROR(per_topic.put(topic_, own), Errc::timeout, "only 0 of 1 replicas");
  EXPECT_REDISCHED_ERROR(client_.put_many(topic_, std::vector<JobSpec>{job("b3"), own}),
                         Errc::timeout, "only 0 of 1 replicas");
  own.id = "b4";
  own.replicas = 0;
  EXPECT_EQ(unconfirmed.put(topic_, own), PutOutcome::created);
  // A batch waits for the most any job asks for, the client's for a job
  // without a count of its own.
  own.id = "b5";
  EXPECT_REDISCHED_ERROR(unconfirmed.put_many(topic_, std::vector<JobSpec>{own, job("b6")}),
                         Errc::timeout, "only 0 of 1 replicas");
  own.replicas = 17;
  EXPECT_REDISCHED_ERROR(client_.put(topic_, own), Errc::invalid_argument,
                         "replicas must be from 0 to 16, got 17");

  // With a replica, every write of a job's state is confirmed. (No delay
  // before the replica's first sync.)
  test::RawRedis(shared_redis().port()).call({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
  test::RedisServer replica(
      {.extra_config = "replicaof 127.0.0.1 " + std::to_string(shared_redis().port())});
  ClientOptions durable = test::client_options();
  durable.replicas = 1;
  durable.replica_timeout = Millis{5000};
  Client confirmed(durable);
  ASSERT_TRUE(test::wait_until([&] {
    try {
      confirmed.put(topic_, job("c"));
      return true;
    } catch (const Error&) {
      return false;  // the replica is still syncing
    }
  }));
  auto r = confirmed.reserve(topic_, 1);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(confirmed.ack(topic_, r.jobs[0].id, r.jobs[0].token), Outcome::ok);
  EXPECT_EQ(confirmed.put_many(topic_, std::vector<JobSpec>{job("d"), job("e")}).size(), 2u);
  EXPECT_TRUE(confirmed.remove(topic_, "d"));
  durable.replica_timeout = Millis{200};
  Client impatient(durable);
  auto two = job("f");
  two.replicas = 2;
  EXPECT_REDISCHED_ERROR(impatient.put(topic_, two), Errc::timeout, "only 1 of 2 replicas");

  // A put retried over a connection that wrote nothing and answered exists
  // is confirmed only once the replica has the job (CONFIRM: WAIT covers
  // its connection's writes alone). The replica frozen, the first put (not
  // waited for) is the primary's alone.
  replica.freeze();
  client_.put(topic_, job("g"));
  Client retrying(durable);
  EXPECT_REDISCHED_ERROR(retrying.put(topic_, job("g")), Errc::timeout, "only 0 of 1 replicas");
  Client retrying_many(durable);
  EXPECT_REDISCHED_ERROR(retrying_many.put_many(topic_, std::vector<JobSpec>{job("g"), job("g")}),
                         Errc::timeout, "only 0 of 1 replicas");
  replica.thaw();
  EXPECT_TRUE(test::wait_until([&] {
    try {
      return retrying.put(topic_, job("g")) == PutOutcome::exists;
    } catch (const Error&) {
      return false;  // the replica is catching up
    }
  }));

  EXPECT_REDISCHED_ERROR(
      [&] {
        ClientOptions bad = test::client_options();
        bad.replicas = 17;
        Client c(bad);
      }(),
      Errc::invalid_argument, "replicas must be from 0 to 16");
  EXPECT_REDISCHED_ERROR(
      [&] {
        ClientOptions bad = test::client_options();
        bad.topic_replicas["t"] = 1;
        bad.replica_timeout = bad.command_timeout;
        Client c(bad);
      }(),
      Errc::invalid_argument, "shorter than command_timeout");
}

// Priorities below 0, down to kPrioMin (library version 37: beanstalkd's
// 2^32 priorities): stored exactly, handed out in priority order, then put
// order, by put, put_many, release and reschedule alike.
TEST_F(ClientTest, PrioritiesBelowZeroKeepTheirOrder) {
  const std::vector<std::int64_t> prios = {
      0, limits::kPrioMin, -24, 1000, -25, -1, -24, -1000000000, 7, -25, limits::kPrioMin};
  std::vector<JobSpec> many;
  for (std::size_t i = 0; i < prios.size(); ++i) {
    JobSpec j = job("p" + std::to_string(i));
    j.priority = prios[i];
    if (i % 2 == 0) {
      ASSERT_EQ(client_.put(topic_, j), PutOutcome::created);
    } else {
      many.push_back(j);
    }
  }
  for (auto o : client_.put_many(topic_, many)) ASSERT_EQ(o, PutOutcome::created);
  for (std::size_t i = 0; i < prios.size(); ++i) {
    EXPECT_EQ(client_.get(topic_, "p" + std::to_string(i))->priority, prios[i]);
  }
  JobSpec low = job("too-low");
  low.priority = limits::kPrioMin - 1;
  EXPECT_REDISCHED_ERROR(client_.put(topic_, low), Errc::invalid_argument, "PRIORITY");
  // Expected: by priority, higher first; equal ones in put order (the odd
  // ones went in one put_many after the even ones).
  std::vector<std::size_t> order(prios.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto put_rank = [](std::size_t i) { return i % 2 == 0 ? i : 100 + i; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (prios[a] != prios[b]) return prios[a] > prios[b];
    return put_rank(a) < put_rank(b);
  });
  std::vector<std::string> want, got;
  for (auto i : order) want.push_back("p" + std::to_string(i));
  std::vector<Reservation> held;
  for (std::size_t n = 0; n < prios.size(); ++n) {
    auto r = client_.reserve(topic_, 1, Millis{60000});
    ASSERT_EQ(r.jobs.size(), 1u);
    got.push_back(r.jobs[0].id);
    EXPECT_EQ(r.jobs[0].priority, prios[std::stoul(r.jobs[0].id.substr(1))]);
    held.push_back(r.jobs[0]);
  }
  EXPECT_EQ(got, want);
  // Back with wide priorities: the lowest last, whatever its put order.
  ASSERT_EQ(client_.release(topic_, held[0].id, held[0].token, Millis{0}, limits::kPrioMin),
            Outcome::ok);
  ASSERT_EQ(client_.release(topic_, held[1].id, held[1].token, Millis{0}, -4000000000),
            Outcome::ok);
  EXPECT_EQ(client_.get(topic_, held[0].id)->priority, limits::kPrioMin);
  RescheduleOptions up;
  up.priority = -3999999999;
  ASSERT_EQ(client_.reschedule(topic_, held[0].id, up), Outcome::ok);
  auto r = client_.reserve(topic_, 2, Millis{60000});
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[0].id, held[0].id);
  EXPECT_EQ(r.jobs[0].priority, -3999999999);
  EXPECT_EQ(r.jobs[1].id, held[1].id);
}

// A write that waits for replicas and that the library refused changed
// nothing: it is answered as the refusal, never "done on the primary",
// whatever WAIT counted (issue 31). A change still is.
TEST_F(ClientTest, ARefusalIsNeverDoneOnThePrimary) {
  SKIP_ON_CLUSTER("the shared server has no replica only on the single target");
  ClientOptions lonely = test::client_options();
  lonely.replicas = 1;
  lonely.replica_timeout = Millis{50};
  Client unconfirmed(lonely);
  client_.put(topic_, job("a"));
  // Not a refusal: `exists` vouches for the first put, which no replica
  // confirmed (a retry answered exists is what a producer counts as done).
  EXPECT_REDISCHED_ERROR(unconfirmed.put(topic_, job("a")), Errc::timeout,
                         "done on the primary, but only 0 of 1 replicas");
  JobSpec missing = job("b");
  missing.mode = PutMode::replace;
  EXPECT_EQ(unconfirmed.put(topic_, missing), PutOutcome::not_found);
  auto r = client_.reserve(topic_, 1, Millis{60000});
  ASSERT_EQ(r.jobs.size(), 1u);
  const auto token = r.jobs[0].token;
  EXPECT_EQ(unconfirmed.ack(topic_, "a", token + 1), Outcome::stale_token);
  EXPECT_EQ(unconfirmed.ack(topic_, "nothing", token), Outcome::not_found);
  EXPECT_EQ(unconfirmed.release(topic_, "a", token + 1), Outcome::stale_token);
  EXPECT_EQ(unconfirmed.fail(topic_, "a", token + 1, "x").outcome, Outcome::stale_token);
  EXPECT_FALSE(unconfirmed.remove(topic_, "nothing"));
  EXPECT_EQ(unconfirmed.ack_many(
                topic_, std::vector<std::pair<std::string, std::uint64_t>>{{"a", token + 1},
                                                                           {"nothing", token}}),
            (std::vector<Outcome>{Outcome::stale_token, Outcome::not_found}));
  // The change itself: done on the primary, not confirmed (and said so to
  // the project's own code, which answers beanstalkd's delete as done).
  try {
    unconfirmed.ack(topic_, "a", token);
    ADD_FAILURE() << "an unconfirmed ack answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::timeout);
    EXPECT_NE(std::string(e.what()).find("done on the primary, but only 0 of 1 replicas"),
              std::string::npos)
        << e.what();
    EXPECT_TRUE(detail::ClientAccess::short_of_replicas(e));
  }
  EXPECT_FALSE(client_.get(topic_, "a"));
  // A plain timeout is not one.
  EXPECT_FALSE(detail::ClientAccess::short_of_replicas(Error(Errc::timeout, "late")));
}

// A write waiting for replicas does not hold up the calls after it: its
// WAIT runs on a connection of its own (issue 31). Here no replica ever
// answers, so the put waits its whole replica timeout; the reserve made
// after it on the same topic is answered first.
TEST_F(ClientTest, AReserveDoesNotQueueBehindAWriteWaitingForReplicas) {
  SKIP_ON_CLUSTER("the shared server has no replica only on the single target");
  ClientOptions lonely = test::client_options();
  lonely.topic_replicas = {{topic_, 1}};
  lonely.replica_timeout = Millis{1500};
  Client client(lonely);
  client_.put(topic_, job("ready"));
  std::mutex mu;
  std::vector<std::string> order;
  std::promise<void> both;
  auto note = [&](const std::string& what) {
    std::lock_guard lock(mu);
    order.push_back(what);
    if (order.size() == 2) both.set_value();
  };
  client.put_async(topic_, job("waits"), [&](Result<PutOutcome> r) {
    EXPECT_FALSE(r.ok()) << "no replica: done on the primary only";
    note("put");
  });
  // The put and its WAIT have gone out before the reserve is made.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  client.reserve_async(topic_, 1, Millis{60000}, [&](Result<ReserveResult> r) {
    EXPECT_TRUE(r.ok());
    note("reserve");
  });
  both.get_future().wait();
  EXPECT_EQ(order, (std::vector<std::string>{"reserve", "put"}));
}

// Several threads put, reserve and ack 100,000 jobs: each is acked exactly
// once and none is lost.
TEST_F(ClientTest, ConcurrentWorkersAckEveryJobExactlyOnce) {
  constexpr int kJobs = 100000;
  constexpr int kProducers = 2;
  constexpr int kWorkers = 4;
  std::atomic<int> acked{0};
  std::atomic<int> duplicate{0};
  std::vector<std::atomic<int>> seen(kJobs);
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      std::vector<JobSpec> batch;
      for (int i = p; i < kJobs; i += kProducers) {
        batch.push_back(job(std::to_string(i)));
        if (batch.size() == 500) {
          client_.put_many(topic_, batch);
          batch.clear();
        }
      }
      if (!batch.empty()) client_.put_many(topic_, batch);
    });
  }
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&] {
      Client own(test::client_options());  // a worker of its own, as a process would
      while (acked.load() < kJobs) {
        auto r = own.reserve(topic_, 50, Millis(60000));
        if (r.jobs.empty()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        std::vector<std::pair<std::string, std::uint64_t>> done;
        for (auto& j : r.jobs) {
          if (seen[std::stoi(j.id)]++ != 0) ++duplicate;
          done.emplace_back(j.id, j.token);
        }
        for (auto o : own.ack_many(topic_, done)) {
          if (o == Outcome::ok) ++acked;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acked.load(), kJobs);
  EXPECT_EQ(duplicate.load(), 0);
  for (int i = 0; i < kJobs; ++i) ASSERT_EQ(seen[i].load(), 1) << "job " << i;
  auto s = client_.stats(topic_);
  EXPECT_EQ(s.ready + s.reserved + s.delayed + s.dead, 0);
}

}  // namespace
}  // namespace redisched
