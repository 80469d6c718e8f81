// Clients and Workers sharing a Runtime: calls complete on the thread that
// made them, nothing blocks a runtime thread, and async calls report every
// failure through their Result.
#include "redisched/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "redisched/asio.h"
#include "redisched/client.h"
#include "redisched/scheduler.h"
#include "redisched/worker.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using test::unique_topic;

ClientOptions on(const std::shared_ptr<Runtime>& rt) {
  ClientOptions o;
  o.redis_url = test::target_url();
  o.runtime = rt;
  return o;
}

using test::job;

TEST(RuntimeTest, RefusesAThreadCountOutOfRange) {
  EXPECT_REDISCHED_ERROR(Runtime(0), Errc::invalid_argument, "1 to 256 threads");
  EXPECT_REDISCHED_ERROR(Runtime(257), Errc::invalid_argument, "1 to 256 threads");
}

TEST(RuntimeTest, ShardsRunOnThreadsOfTheirOwn) {
  Runtime rt(3);
  EXPECT_EQ(rt.shards(), 3u);
  EXPECT_TRUE(rt.owns_threads());
  EXPECT_EQ(rt.current_shard(), -1);
  std::set<std::thread::id> threads;
  for (std::size_t i = 0; i < rt.shards(); ++i) {
    std::promise<std::pair<int, std::thread::id>> p;
    boost::asio::post(shard_io(rt, i), [&] {
      p.set_value({rt.current_shard(), std::this_thread::get_id()});
    });
    auto [shard, id] = p.get_future().get();
    EXPECT_EQ(shard, static_cast<int>(i));
    EXPECT_NE(id, std::this_thread::get_id());
    threads.insert(id);
  }
  EXPECT_EQ(threads.size(), 3u);
  EXPECT_EQ(rt.shard_of("emails"), rt.shard_of("emails"));
}

// A call made on a shard's thread is answered on that same thread.
TEST(RuntimeTest, ACallMadeOnAShardCompletesThere) {
  auto rt = std::make_shared<Runtime>(2);
  Client client(on(rt));
  const std::string topic = unique_topic();
  for (std::size_t i = 0; i < rt->shards(); ++i) {
    std::promise<bool> same;
    boost::asio::post(shard_io(*rt, i), [&, i] {
      const auto caller = std::this_thread::get_id();
      client.put_async(topic, job("j" + std::to_string(i)), [&, caller, i](Result<PutOutcome> r) {
        same.set_value(r.ok() && std::this_thread::get_id() == caller &&
                       rt->current_shard() == static_cast<int>(i));
      });
    });
    EXPECT_TRUE(same.get_future().get()) << "shard " << i;
  }
  EXPECT_EQ(client.stats(topic).ready, 2);
}

TEST(RuntimeTest, ASynchronousCallOnARuntimeThreadIsRefusedNotDeadlocked) {
  auto rt = std::make_shared<Runtime>(1);
  Client client(on(rt));
  std::promise<std::string> what;
  boost::asio::post(shard_io(*rt, 0), [&] {
    try {
      client.stats(unique_topic());
      what.set_value("answered");
    } catch (const Error& e) {
      what.set_value(e.what());
    }
  });
  EXPECT_NE(what.get_future().get().find("would wait for itself"), std::string::npos);
}

// The asynchronous forms never throw: a refused argument arrives as the
// Result's Error, on a thread of the runtime (not inside the call).
TEST(RuntimeTest, AsyncCallsReportRefusalsThroughTheirResult) {
  auto rt = std::make_shared<Runtime>(1);
  Client client(on(rt));
  std::promise<std::pair<Result<PutOutcome>, int>> got;
  EXPECT_NO_THROW(client.put_async("bad topic", job("a"), [&](Result<PutOutcome> r) {
    got.set_value({std::move(r), rt->current_shard()});
  }));
  auto [r, shard] = got.get_future().get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::invalid_argument);
  EXPECT_EQ(shard, 0) << "delivered on the runtime's thread";
  auto f = client.reserve_async(unique_topic(), 0);
  EXPECT_REDISCHED_ERROR(f.get(), Errc::invalid_argument, "count must be from 1 to 1000");
}

// A runtime over the caller's io_context: nothing runs until the caller
// runs it, and then calls complete on the caller's thread.
TEST(RuntimeTest, AClientOnTheCallersIoContext) {
  boost::asio::io_context io;
  auto rt = make_runtime(io);
  EXPECT_FALSE(rt->owns_threads());
  Client client(on(rt));  // does not wait: io is not running
  const std::string topic = unique_topic();
  std::optional<Result<PutOutcome>> put;
  std::thread::id answered_on;
  client.put_async(topic, job("a"), [&](Result<PutOutcome> r) {
    put.emplace(std::move(r));
    answered_on = std::this_thread::get_id();
    io.stop();
  });
  io.run();
  ASSERT_TRUE(put && put->ok());
  EXPECT_EQ(answered_on, std::this_thread::get_id());
  io.restart();
  std::optional<Result<TopicStats>> stats;
  client.stats_async(topic, [&](Result<TopicStats> r) {
    stats.emplace(std::move(r));
    io.stop();
  });
  io.run();
  ASSERT_TRUE(stats && stats->ok());
  EXPECT_EQ(stats->value().ready, 1);
}

// Many workers on one Client and one runtime of two threads: their jobs
// all run, and the process has the runtime's threads, not one per worker.
TEST(RuntimeTest, WorkersShareTheClientsRuntime) {
  auto rt = std::make_shared<Runtime>(2);
  Client client(on(rt));
  std::vector<std::string> topics;
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<int> handled{0};
  for (int i = 0; i < 10; ++i) {
    topics.push_back(unique_topic());
    workers.push_back(std::make_unique<Worker>(client));
    workers.back()->handle_async(topics.back(), {.concurrency = 5},
                                 [&](std::shared_ptr<AsyncJob> j) {
                                   ++handled;
                                   j->done();
                                 });
  }
  const int before = test::thread_count();
  for (auto& w : workers) w->run();
  for (auto& t : topics) {
    for (int j = 0; j < 20; ++j) client.put(t, job("j" + std::to_string(j)));
  }
  ASSERT_TRUE(test::wait_until([&] { return handled.load() == 200; }));
  EXPECT_EQ(test::thread_count(), before) << "workers with async handlers start no threads";
  for (auto& w : workers) w->cancel();
  for (auto& t : topics) EXPECT_EQ(client.stats(t).ready + client.stats(t).reserved, 0);
}

// Handlers pending on one shard that own I/O objects of another (a
// connection's coroutine on shard 1 holding a stream of shard 0): stopping
// and destroying the runtime destroys them while every shard's services
// still exist (ASan: no use after free), whichever shard goes first.
TEST(RuntimeTest, StopDestroysPendingHandlersThatHoldAnotherShardsObjects) {
  namespace asio = boost::asio;
  auto rt = std::make_unique<Runtime>(2);
  std::vector<std::weak_ptr<void>> held;
  for (int i = 0; i < 100; ++i) {
    auto t0 = std::make_shared<asio::steady_timer>(shard_io(*rt, 0), std::chrono::hours(1));
    auto t1 = std::make_shared<asio::steady_timer>(shard_io(*rt, 1), std::chrono::hours(1));
    auto s0 = std::make_shared<asio::ip::tcp::socket>(shard_io(*rt, 0));
    s0->open(asio::ip::tcp::v4());
    held.insert(held.end(), {t0, t1, s0});
    // Each handler keeps the other shard's objects; the last owner of t0
    // and s0 is t1's handler, and the other way round.
    t0->async_wait([t1](boost::system::error_code) {});
    t1->async_wait([t0, s0](boost::system::error_code) {});
  }
  rt->stop();  // what is pending would never end: the destructor alone would wait for it
  for (const auto& h : held) EXPECT_TRUE(h.expired()) << "a pending handler outlived stop()";
  rt.reset();
}

// A Client destroyed with calls in flight: each callback runs exactly once
// (done, or Errc::closed), before its runtime ends.
TEST(RuntimeTest, AClientDestroyedWithCallsInFlightAnswersEachOnce) {
  auto rt = std::make_shared<Runtime>(2);
  const auto topic = unique_topic();
  std::atomic<int> answered{0};
  std::atomic<int> twice{0};
  std::mutex other_mu;
  std::string other;  // the first answer that is neither done nor closed
  constexpr int kCalls = 2000;
  {
    Client client(on(rt));
    for (int i = 0; i < kCalls; ++i) {
      auto once = std::make_shared<std::atomic<bool>>(false);
      client.put_async(topic, job("j" + std::to_string(i)), [&, once](Result<PutOutcome> r) {
        if (once->exchange(true)) ++twice;
        if (r.ok() || r.error().code() == Errc::closed) {
          ++answered;
        } else {
          const std::lock_guard lock(other_mu);
          if (other.empty()) other = r.error().what();
        }
      });
    }
  }
  // The destructor waited for them: every one has answered already.
  EXPECT_EQ(answered.load(), kCalls)
      << "answered when the Client was gone; other answer: " << other;
  EXPECT_TRUE(test::wait_until([&] { return answered.load() == kCalls; }))
      << answered.load() << " of " << kCalls;
  rt.reset();
  EXPECT_EQ(twice.load(), 0);
  EXPECT_EQ(answered.load(), kCalls);
}

// On the caller's io_context the destructor cannot wait (nothing runs the
// answers meanwhile): they run when the caller runs it, after the Client
// is gone, each once with Errc::closed, and touch nothing of the Client
// (the ASan build checks).
TEST(RuntimeTest, AClientOnTheCallersIoContextDestroyedWithCallsInFlight) {
  boost::asio::io_context io;
  auto rt = make_runtime(io);
  std::atomic<int> closed{0};
  constexpr int kCalls = 100;
  {
    Client client(on(rt));
    for (int i = 0; i < kCalls; ++i) {
      client.put_async(unique_topic(), job("j"), [&](Result<PutOutcome> r) {
        if (!r.ok() && r.error().code() == Errc::closed) ++closed;
      });
    }
  }
  io.run_for(std::chrono::seconds(5));  // (what rt holds may keep it running)
  EXPECT_EQ(closed.load(), kCalls);
}

// Waits in progress, and a watch cancelled from another thread, when their
// Client goes while its runtime (the caller's io_context, run by a thread
// of the caller's) keeps running: each wait answers once, with
// Errc::closed, soon (not at its timeout), on the runtime's thread, after
// the Client is gone, touching nothing of it (the ASan build checks).
TEST(RuntimeTest, WaitsInProgressEndWhenTheirClientGoes) {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto rt = make_runtime(io);
  const auto topic = unique_topic();
  constexpr int kWaits = 20;
  std::atomic<int> closed{0}, other{0}, signals{0};
  {
    Client client(on(rt));
    for (int i = 0; i < kWaits; ++i) {
      auto later = job("w" + std::to_string(i));
      later.delay = Millis{3600000};
      client.put(topic, later);
    }
    std::atomic<bool> watch_ready{false};
    auto watching = client.watch(
        topic, [&](std::int64_t) { ++signals; }, [&] { watch_ready = true; });
    for (int i = 0; i < kWaits; ++i) {
      client.wait_async(topic, "w" + std::to_string(i), Millis{60000},
                        [&](Result<std::optional<Job>> r) {
                          if (!r.ok() && r.error().code() == Errc::closed) {
                            ++closed;
                          } else {
                            ++other;
                          }
                        });
    }
    // The waits subscribe and read their jobs meanwhile.
    EXPECT_TRUE(test::wait_until([&] { return watch_ready.load(); }));
    client.put(topic, job("signal"));
    EXPECT_TRUE(test::wait_until([&] { return signals.load() > 0; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(closed.load() + other.load(), 0) << "a wait answered before its job finished";
    watching = Subscription();  // cancelled from this thread, not the runtime's
  }
  EXPECT_TRUE(test::wait_until([&] { return closed.load() == kWaits; }, std::chrono::seconds(10)))
      << closed.load() << " of " << kWaits;
  EXPECT_EQ(other.load(), 0);
  guard.reset();
  io.stop();
  runner.join();
}

// Every face on one runtime, under load, torn down while it works: a
// Worker with a synchronous and an asynchronous handler, a Scheduler, waits
// on jobs, and calls in flight from a producer; each is destroyed while
// jobs still flow, then the runtime. Under ASan: no use after free, no
// leak; every wait and call answered exactly once.
TEST(RuntimeTest, EveryFaceTornDownUnderLoadAnswersOnceAndFreesEverything) {
  for (int round = 0; round < 3; ++round) {
    auto rt = std::make_shared<Runtime>(2);
    const auto sync_topic = unique_topic();
    const auto async_topic = unique_topic();
    std::atomic<int> answered{0}, twice{0}, calls{0};
    std::atomic<bool> producing{true};
    constexpr int kInFlight = 2000;  // the producer's calls not yet answered, at most
    {
      Client client(on(rt));
      ScheduleSpec every;
      every.every = std::chrono::milliseconds(50);
      every.body = "tick";
      client.set_schedule(sync_topic, "pulse", every);
      auto worker = std::make_unique<Worker>(client, WorkerOptions{.run_schedules = false});
      worker->handle(sync_topic, {.concurrency = 2}, [](JobContext&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      worker->handle_async(async_topic, {.concurrency = 20}, [rt](std::shared_ptr<AsyncJob> j) {
        auto timer = std::make_shared<boost::asio::steady_timer>(
            shard_io(*rt, static_cast<std::size_t>(std::max(rt->current_shard(), 0))),
            std::chrono::milliseconds(2));
        timer->async_wait([j, timer](boost::system::error_code) { j->done(); });
      });
      worker->run();
      auto scheduler = std::make_unique<Scheduler>(client);
      scheduler->add_topic(sync_topic);
      std::thread producer([&] {
        for (int i = 0; producing; ++i) {
          const auto id = "p" + std::to_string(round) + "_" + std::to_string(i);
          auto once = std::make_shared<std::atomic<bool>>(false);
          ++calls;
          auto count = [&, once](bool) {
            if (once->exchange(true)) ++twice;
            ++answered;
          };
          client.put_async(i % 2 ? sync_topic : async_topic, job(id),
                           [count](Result<PutOutcome> r) { count(r.ok()); });
          ++calls;
          auto once_wait = std::make_shared<std::atomic<bool>>(false);
          client.wait_async(async_topic, id, Millis{5000},
                            [&, once_wait](Result<std::optional<Job>>) {
                              if (once_wait->exchange(true)) ++twice;
                              ++answered;
                            });
          // (A producer that never waited would queue calls on the shard
          // faster than an ASan build serves them, the Worker's behind them.)
          while (producing && calls.load() - answered.load() > kInFlight) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      scheduler.reset();  // its ticks in flight answered first
      worker.reset();     // cancels at once: jobs in flight go back
      producing = false;
      producer.join();
      // The Client goes with calls and waits still in flight.
    }
    ASSERT_TRUE(test::wait_until([&] { return answered.load() == calls.load(); }))
        << answered.load() << " of " << calls.load();
    rt.reset();
    EXPECT_EQ(twice.load(), 0);
    EXPECT_GT(calls.load(), 100);
  }
}

}  // namespace
}  // namespace redisched
