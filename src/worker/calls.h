// What a Worker's topics share (its control shard, its broker, the counts
// cancel() waits on, its statistics), and the calls one topic makes to
// Redis through the broker: each counted while in flight, its answer taken
// back to the control shard, and a settling call retried while Redis is
// unreachable.
//
// Threads: everything here runs on the control shard, but for Shared's
// counts and statistics, which any thread may read.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "worker/broker.h"

namespace redisched::worker {

struct Shared {
  Shared(boost::asio::io_context& i, Broker& b) : io(i), broker(b) {}
  boost::asio::io_context& io;  // the control shard
  Broker& broker;
  // Calls to Redis in flight and jobs held, over all topics: cancel waits on them.
  std::mutex mu;
  std::condition_variable changed;
  int calls = 0;
  int held = 0;
  // WorkerStats, counted on the control shard, read from any thread.
  struct {
    std::atomic<std::uint64_t> reserved{0}, acked{0}, failed{0}, released{0}, stale{0};
    std::atomic<std::uint64_t> reserve_calls{0}, empty_reserves{0}, wakeups{0};
  } stats;
  void count_call(int delta);
  void count_held(int delta);
};

// A connection failure or a timeout: the call may succeed when sent again.
bool transient(const Error& e);

class TopicCalls {
 public:
  // A settling call (ack, fail, release, touch) is tried this many times
  // while Redis is unreachable, backing off; after that the reservation is
  // left to lapse and the job is handed out again (at-least-once).
  static constexpr int kTries = 30;
  static constexpr Millis kRetryMin{50};
  static constexpr Millis kRetryMax{2000};

  TopicCalls(Shared& shared, std::string topic) : shared_(shared), topic_(std::move(topic)) {}

  Shared& shared() const { return shared_; }
  Broker& broker() const { return shared_.broker; }
  boost::asio::io_context& io() const { return shared_.io; }
  const std::string& topic() const { return topic_; }

  // Runs fn on the control shard, later.
  void post(std::function<void()> fn) const { boost::asio::post(shared_.io, std::move(fn)); }

  // start(callback) once; done(result) on the control shard.
  template <class T>
  void once(std::function<void(Callback<T>)> start, std::function<void(Result<T>)> done) {
    shared_.count_call(+1);
    start([this, done = std::move(done)](Result<T> r) mutable {
      post([this, done = std::move(done), r = std::move(r)]() mutable {
        done(std::move(r));
        shared_.count_call(-1);
      });
    });
  }

  // start(callback) until Redis answers, or kTries connection failures;
  // then done(result) on the control shard.
  template <class T>
  void retried(std::function<void(Callback<T>)> start, std::function<void(Result<T>)> done,
               int tries = 0);

  // Calls waiting to be sent again. While there are any, the topic neither
  // reserves nor sweeps: once Redis is back, the acks and fails of the jobs
  // held go first, so that none lapses and runs again meanwhile.
  bool retrying() const { return retrying_ > 0; }
  // Runs when the last call that waited to be sent again is done.
  void on_retries_done(std::function<void()> fn) { retries_done_ = std::move(fn); }

 private:
  Shared& shared_;
  const std::string topic_;
  int retrying_ = 0;
  std::function<void()> retries_done_;
};

template <class T>
void TopicCalls::retried(std::function<void(Callback<T>)> start,
                         std::function<void(Result<T>)> done, int tries) {
  if (tries == 0) shared_.count_call(+1);
  auto finish = [this, start, done, tries](Result<T> r) mutable {
    if (!r.ok() && transient(r.error()) && tries + 1 < kTries) {
      if (tries == 0) ++retrying_;
      auto timer = std::make_shared<boost::asio::steady_timer>(
          shared_.io, std::min(kRetryMin * (1 << std::min(tries, 6)), kRetryMax));
      timer->async_wait([this, timer, start = std::move(start), done = std::move(done),
                         tries](boost::system::error_code) mutable {
        retried<T>(std::move(start), std::move(done), tries + 1);
      });
      return;
    }
    done(std::move(r));
    shared_.count_call(-1);
    if (tries > 0 && --retrying_ == 0 && retries_done_) retries_done_();
  };
  start([this, finish = std::move(finish)](Result<T> r) mutable {
    post([finish = std::move(finish), r = std::move(r)]() mutable { finish(std::move(r)); });
  });
}

}  // namespace redisched::worker
