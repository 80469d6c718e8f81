// Awaiting the Client's callback-style calls from the server's coroutines:
// one call, one call with a deadline, many calls at once, and one-shot
// events (for one waiter or many) that any thread may fire.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
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

#include "redisched/client.h"

namespace redisched::server {

// Awaits one asynchronous Client call: start(callback) begins it. A refusal
// at the call and a failed Result both arrive as the thrown Error.
template <class T, class Start>
boost::asio::awaitable<T> await_call(Start start) {
  namespace asio = boost::asio;
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>,
                                          void(std::exception_ptr, T)>(
      [start](auto handler) mutable {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto deliver = [h](std::exception_ptr e, T v) {
          auto ex = asio::get_associated_executor(*h);
          asio::post(ex, [h, e, v = std::move(v)]() mutable { std::move (*h)(e, std::move(v)); });
        };
        try {
          start(Callback<T>([deliver](Result<T> r) {
            if (r.ok()) {
              deliver(nullptr, std::move(r).value());
            } else {
              deliver(std::make_exception_ptr(r.error()), T{});
            }
          }));
        } catch (...) {
          deliver(std::current_exception(), T{});
        }
      },
      asio::use_awaitable);
}

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

// Like await_call, but gives up after timeout: nullopt then (the call runs
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

// Starts one call per item at once (they share the pipeline) and awaits them
// all: start(item, callback). The results come in the items' order.
template <class T, class Item, class Start>
boost::asio::awaitable<std::vector<Result<T>>> await_each(const std::vector<Item>& items,
                                                          Start start) {
  struct Shared {
    explicit Shared(const boost::asio::any_io_executor& ex, std::size_t n)
        : done(OneShot::make(ex)), pending(n) {}
    std::shared_ptr<OneShot> done;
    std::mutex mu;
    std::vector<std::optional<Result<T>>> results;
    std::size_t pending;
  };
  auto shared = std::make_shared<Shared>(co_await boost::asio::this_coro::executor, items.size());
  shared->results.resize(items.size());
  if (items.empty()) shared->done->fire();
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto finish = [shared, i](Result<T> r) {
      bool last = false;
      {
        std::lock_guard lock(shared->mu);
        shared->results[i].emplace(std::move(r));
        last = --shared->pending == 0;
      }
      if (last) shared->done->fire();
    };
    try {
      start(items[i], Callback<T>(finish));
    } catch (const Error& e) {
      finish(Result<T>(e));
    }
  }
  co_await shared->done->wait(std::chrono::steady_clock::time_point::max());
  std::vector<Result<T>> out;
  std::lock_guard lock(shared->mu);
  out.reserve(items.size());
  for (auto& r : shared->results) out.push_back(std::move(*r));
  co_return out;
}

}  // namespace redisched::server
