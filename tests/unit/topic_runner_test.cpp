// The worker's scheduling without Redis: a TopicRunner over a broker that
// answers from memory, on an io_context this test runs itself.
#include "worker/topic_runner.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "unit/fake_broker.h"

namespace redisched::worker {
namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)

class TopicRunnerTest : public test::ControlShardTest {
 protected:
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
