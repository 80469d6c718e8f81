// What the server's coroutines await beside a Client call (which they await
// with asio::use_awaitable, redisched/asio.h): a call with a deadline, many
// calls at once (Asio's parallel group), and one-shot events (for one
// waiter or many) that any thread may fire.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "redisched/asio.h"

namespace redisched::server {

// An event that fires once, from any thread, and that a coroutine on ex
// awaits with a deadline. Held by shared_ptr: a late fire() keeps it alive.
class OneShot : public std::enable_shared_from_this<OneShot> {
 public:
  static std::shared_ptr<OneShot> make(const boost::asio::any_io_executor& ex) {
    return std::shared_ptr<OneShot>(new OneShot(ex));
  }
  // Any thread; only the first call counts.
  void fire() {
    boost::asio::post(timer_.get_executor(), [self = shared_from_this()] {
      self->fired_ = true;
      self->timer_.cancel();
    });
  }
  // True when fired before until.
  boost::asio::awaitable<bool> wait(std::chrono::steady_clock::time_point until) {
    if (!fired_) {
      timer_.expires_at(until);
      boost::system::error_code ignored;
      co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ignored));
    }
    co_return fired_;
  }

 private:
  explicit OneShot(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  boost::asio::steady_timer timer_;
  bool fired_ = false;  // on the timer's executor
};

// An event that fires once for many waiters, from any thread: each waiter
// watches it on its own executor (a watch after the fire is fired at once).
class Broadcast {
 public:
  std::shared_ptr<OneShot> watch(const boost::asio::any_io_executor& ex) {
    auto one = OneShot::make(ex);
    std::lock_guard lock(mu_);
    if (fired_) {
      one->fire();
    } else {
      waiting_.push_back(one);
    }
    return one;
  }
  void forget(const std::shared_ptr<OneShot>& one) {
    std::lock_guard lock(mu_);
    std::erase(waiting_, one);
  }
  void fire() {
    std::vector<std::shared_ptr<OneShot>> woken;
    {
      std::lock_guard lock(mu_);
      fired_ = true;
      woken.swap(waiting_);
    }
    for (const auto& one : woken) one->fire();
  }

 private:
  std::mutex mu_;
  bool fired_ = false;                             // GUARDED_BY(mu_)
  std::vector<std::shared_ptr<OneShot>> waiting_;  // GUARDED_BY(mu_)
};

// Awaits one Client call, start(callback), but gives up after timeout: nullopt then (the call runs
// on, its answer is dropped).
template <class T, class Start>
boost::asio::awaitable<std::optional<Result<T>>> await_call_within(
    std::chrono::milliseconds timeout, Start start) {
  struct Shared {
    explicit Shared(const boost::asio::any_io_executor& ex) : done(OneShot::make(ex)) {}
    std::shared_ptr<OneShot> done;
    std::mutex mu;
    std::optional<Result<T>> result;
  };
  auto shared = std::make_shared<Shared>(co_await boost::asio::this_coro::executor);
  try {
    start(Callback<T>([shared](Result<T> r) {
      {
        std::lock_guard lock(shared->mu);
        shared->result.emplace(std::move(r));
      }
      shared->done->fire();
    }));
  } catch (const Error& e) {
    co_return Result<T>(e);
  }
  co_await shared->done->wait(std::chrono::steady_clock::now() + timeout);
  std::lock_guard lock(shared->mu);
  co_return std::move(shared->result);
}

// Starts one Client call per item at once (they share the pipeline) and
// awaits them all, with Asio's parallel group: make(item) gives the call's
// deferred form (client.X_async(..., asio::deferred)). The results come in
// the items' order.
template <class T, class Item, class Make>
boost::asio::awaitable<std::vector<Result<T>>> await_each(const std::vector<Item>& items,
                                                          Make make) {
  namespace asio = boost::asio;
  std::vector<Result<T>> out;
  if (items.empty()) co_return out;
  std::vector<decltype(make(items.front()))> calls;
  calls.reserve(items.size());
  for (const auto& item : items) calls.push_back(make(item));
  auto [order, errors, values] =
      co_await asio::experimental::make_parallel_group(std::move(calls))
          .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!errors[i]) {
      out.emplace_back(std::move(values[i]));
      continue;
    }
    try {
      std::rethrow_exception(errors[i]);
    } catch (const Error& e) {
      out.emplace_back(e);
    }
  }
  co_return out;
}

}  // namespace redisched::server
