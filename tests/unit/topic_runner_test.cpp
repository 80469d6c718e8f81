// The worker's scheduling without Redis: a TopicRunner over a broker that
// answers from memory, on an io_context this test runs itself.
#include "worker/topic_runner.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redisched::worker {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)

// A topic in memory: ready jobs handed out in order; every call recorded;
// answers posted, as the Client's come later on its own thread. fail_next
// makes the next call of a kind fail with that error code.
class FakeBroker : public Broker {
 public:
  explicit FakeBroker(asio::io_context& io) : io_(io) {}

  struct Call {
    std::string what;
    int count = 0;                 // reserve: asked for; ack_many: how many
    std::vector<std::string> ids;  // ack_many, fail, release
    std::optional<int> max_attempts;
    std::string error;
  };
  std::vector<Call> calls;
  std::deque<std::string> ready;
  std::int64_t now_ms = 1'000'000;
  std::int64_t next_due_ms = -1;  // what reserve says when nothing is ready
  std::optional<Errc> fail_next_ack;

  int count(const std::string& what) const {
    int n = 0;
    for (const auto& c : calls) n += c.what == what ? 1 : 0;
    return n;
  }

  void reserve(const std::string&, int count, Millis ttr, Callback<ReserveResult> done) override {
    ReserveResult r;
    r.now_ms = now_ms;
    while (static_cast<int>(r.jobs.size()) < count && !ready.empty()) {
      Reservation j;
      j.id = ready.front();
      ready.pop_front();
      j.token = ++tokens_;
      j.deadline_ms = now_ms + (ttr.count() > 0 ? ttr.count() : 30000);
      r.jobs.push_back(j);
    }
    r.next_ms = ready.empty() ? next_due_ms : 0;
    calls.push_back({"reserve", count, {}, {}, {}});
    answer(std::move(done), Result<ReserveResult>(std::move(r)));
  }
  void ack_many(const std::string&, std::span<const std::pair<std::string, std::uint64_t>> jobs,
                Millis, Callback<std::vector<Outcome>> done) override {
    Call c{"ack_many", static_cast<int>(jobs.size()), {}, {}, {}};
    for (const auto& [id, token] : jobs) c.ids.push_back(id);
    calls.push_back(c);
    if (fail_next_ack) {
      const Errc code = *std::exchange(fail_next_ack, std::nullopt);
      return answer(std::move(done), Result<std::vector<Outcome>>(Error(code, "down")));
    }
    answer(std::move(done),
           Result<std::vector<Outcome>>(std::vector<Outcome>(jobs.size(), Outcome::ok)));
  }
  void release(const std::string&, const std::string& id, std::uint64_t, Millis,
               Callback<Outcome> done) override {
    calls.push_back({"release", 1, {id}, {}, {}});
    answer(std::move(done), Result<Outcome>(Outcome::ok));
  }
  void fail(const std::string&, const std::string& id, std::uint64_t, const std::string& error,
            bool, std::optional<Millis>, std::optional<int> max_attempts,
            Callback<FailResult> done) override {
    calls.push_back({"fail", 1, {id}, max_attempts, error});
    answer(std::move(done), Result<FailResult>(FailResult{}));
  }
  void touch(const std::string&, const std::string&, std::uint64_t, Millis,
             Callback<TouchResult> done) override {
    calls.push_back({"touch", 1, {}, {}, {}});
    answer(std::move(done), Result<TouchResult>(TouchResult{Outcome::ok, now_ms + 30000}));
  }
  TouchResult touch_now(const std::string&, const std::string&, std::uint64_t, Millis) override {
    return {Outcome::ok, now_ms + 30000};
  }
  void requeue(const std::string&, int, Callback<RequeueResult> done) override {
    calls.push_back({"requeue", 0, {}, {}, {}});
    answer(std::move(done), Result<RequeueResult>(RequeueResult{}));
  }

 private:
  template <class T>
  void answer(Callback<T> done, Result<T> r) {
    asio::post(io_, [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
  }
  asio::io_context& io_;
  std::uint64_t tokens_ = 0;
};

class TopicRunnerTest : public ::testing::Test {
 protected:
  // Runs the control loop until pred holds (or a second passed).
  template <class Pred>
  bool run_until(Pred pred, std::chrono::milliseconds limit = 1000ms) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      io_.run_one_for(5ms);
    }
    return true;
  }
  void run_for(std::chrono::milliseconds d) {
    io_.restart();
    io_.run_for(d);
  }

  // Jobs still held are dropped (a handler's job must not outlive its
  // runner), and the runner stops.
  void end(TopicRunner& runner) {
    handed_.clear();
    runner.stop_taking();
    io_.restart();
    io_.poll();
    runner.close();
  }

  std::unique_ptr<TopicRunner> async_runner(HandlerOptions o) {
    return std::make_unique<TopicRunner>(
        shared_, "t", o, nullptr,
        [this](std::shared_ptr<AsyncJob> j) { handed_.push_back(std::move(j)); });
  }

  asio::io_context io_;
  FakeBroker broker_{io_};
  Shared shared_{io_, broker_};
  std::vector<std::shared_ptr<AsyncJob>> handed_;
};

TEST_F(TopicRunnerTest, ReservesForItsFreeWorkersAndAcksWhatFinishedInOneCall) {
  broker_.ready = {"a", "b", "c", "d", "e", "f"};
  auto runner = async_runner({.concurrency = 4});
  runner->start();
  runner->look();
  ASSERT_TRUE(run_until([&] { return handed_.size() == 4; }));
  EXPECT_EQ(broker_.calls.front().what, "reserve");
  EXPECT_EQ(broker_.calls.front().count, 4) << "one reserve for every free worker";
  EXPECT_EQ(broker_.count("reserve"), 1) << "no worker is free: nothing more is asked for";
  for (auto& j : handed_) j->done();
  ASSERT_TRUE(run_until([&] { return broker_.count("ack_many") == 1 && handed_.size() == 6; }));
  const auto acks = std::find_if(broker_.calls.begin(), broker_.calls.end(),
                                 [](const auto& c) { return c.what == "ack_many"; });
  EXPECT_EQ(acks->ids, (std::vector<std::string>{"a", "b", "c", "d"}))
      << "one ackmany for all four";
  EXPECT_EQ(shared_.stats.acked.load(), 4u);
  end(*runner);
}

TEST_F(TopicRunnerTest, AFailedJobCarriesTheHandlersAttempts) {
  broker_.ready = {"x"};
  auto runner = async_runner({.concurrency = 1, .max_attempts = 3});
  runner->start();
  runner->look();
  ASSERT_TRUE(run_until([&] { return handed_.size() == 1; }));
  handed_[0]->fail("it broke");
  handed_[0]->done();
  ASSERT_TRUE(run_until([&] { return broker_.count("fail") == 1; }));
  const auto& f = *std::find_if(broker_.calls.begin(), broker_.calls.end(),
                                [](const auto& c) { return c.what == "fail"; });
  EXPECT_EQ(f.ids, std::vector<std::string>{"x"});
  EXPECT_EQ(f.error, "it broke");
  EXPECT_EQ(f.max_attempts, 3);
  EXPECT_EQ(broker_.count("ack_many"), 0);
  end(*runner);
}

// While an ack waits to be sent again, the topic reserves nothing, even when
// woken: once Redis is back, the acks go first.
TEST_F(TopicRunnerTest, WhileAnAckWaitsToBeSentAgainNothingIsReserved) {
  broker_.ready = {"a"};
  broker_.fail_next_ack = Errc::connection;
  auto runner = async_runner({.concurrency = 1});
  runner->start();
  runner->look();
  ASSERT_TRUE(run_until([&] { return handed_.size() == 1; }));
  handed_[0]->done();
  // The ack goes out, and a reserve beside it (which finds nothing).
  ASSERT_TRUE(run_until([&] { return broker_.count("reserve") == 2; }));
  io_.restart();
  io_.poll();  // the ack's failure is in (its answer was ready); its retry waits 50 ms
  broker_.ready = {"b"};
  runner->on_signal(broker_.now_ms);  // a job is ready: but the ack waits
  ASSERT_TRUE(run_until([&] { return handed_.size() == 2; })) << "then it reserves again";
  std::vector<std::string> order;
  for (const auto& c : broker_.calls) order.push_back(c.what);
  EXPECT_EQ(order,
            (std::vector<std::string>{"reserve", "ack_many", "reserve", "ack_many", "reserve"}));
  EXPECT_EQ(shared_.stats.acked.load(), 1u);
  end(*runner);
}

// Nothing ready: the runner sleeps on a timer aimed at the next due time
// (no polling), and reserves again when it fires.
TEST_F(TopicRunnerTest, NothingReadySleepsUntilTheNextDueTime) {
  broker_.next_due_ms = broker_.now_ms + 150;
  auto runner = async_runner({.concurrency = 2});
  runner->start();
  runner->look();
  ASSERT_TRUE(run_until([&] { return broker_.count("reserve") == 1; }));
  run_for(75ms);
  EXPECT_EQ(broker_.count("reserve"), 1) << "no reserve before the due time";
  broker_.ready = {"later"};
  ASSERT_TRUE(run_until([&] { return handed_.size() == 1; }, 1000ms));
  EXPECT_EQ(broker_.count("reserve"), 2);
  end(*runner);
}

// A wake-up signal for an earlier due time brings the timer forward.
TEST_F(TopicRunnerTest, ASignalWakesItEarlier) {
  broker_.next_due_ms = broker_.now_ms + 60000;
  auto runner = async_runner({.concurrency = 1});
  runner->start();
  runner->look();
  ASSERT_TRUE(run_until([&] { return broker_.count("reserve") == 1; }));
  broker_.ready = {"now"};
  runner->on_signal(broker_.now_ms);
  ASSERT_TRUE(run_until([&] { return handed_.size() == 1; }, 500ms));
  end(*runner);
}

}  // namespace
}  // namespace redisched::worker
