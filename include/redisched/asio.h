// redisched over Boost.Asio, opt in: for an application that runs its own
// io_context, posts work of its own beside redisched's on a shard's thread,
// or awaits the Client's calls with Asio's completion tokens. The public
// headers without it name no Asio type.
//
//   boost::asio::io_context io;
//   redisched::Client client({.runtime = redisched::make_runtime(io)});
//   ...  // calls, then io.run() on one thread
//
//   // in a coroutine (boost::asio::awaitable<void>):
//   auto job = co_await client.get_async("emails", "welcome_42", boost::asio::use_awaitable);
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "redisched/client.h"
#include "redisched/runtime.h"

namespace boost::asio {
class io_context;
}

namespace redisched {

namespace detail {
// Defined with Runtime (src/runtime/runtime.cpp).
struct RuntimeAccess {
  static std::shared_ptr<Runtime> over(boost::asio::io_context& io);
  static boost::asio::io_context& shard(Runtime& runtime, std::size_t i);
};
}  // namespace detail

// A runtime of one shard: io, which the caller runs on one thread (as
// Boost.Redis connections run on the caller's io_context). io must outlive
// it. A Client on it does not wait for Redis in its constructor (nothing
// answers before io runs): an unreachable Redis shows as the first call's
// Errc::connection.
inline std::shared_ptr<Runtime> make_runtime(boost::asio::io_context& io) {
  return detail::RuntimeAccess::over(io);
}

// The io_context of shard i (0..shards()-1): work posted to it runs on that
// shard's thread, beside the calls, timers and connections of the shard.
inline boost::asio::io_context& shard_io(Runtime& runtime, std::size_t i) {
  return detail::RuntimeAccess::shard(runtime, i);
}

namespace detail {
// Any Asio completion token answers a call of the Client (client.h,
// AnswerToken) with the signature (std::exception_ptr, T): the Error, or
// the value. The handler runs on its associated executor (posted there:
// the Client's callback runs on a thread of its runtime).
template <class Token, class T>
struct AsioCompletion {
  static constexpr bool is_token =
      boost::asio::completion_token_for<Token, void(std::exception_ptr, T)>;

  template <class Completion, class Start>
  static auto initiate(Completion&& token, Start&& start) {
    return boost::asio::async_initiate<Completion, void(std::exception_ptr, T)>(
        [start = std::forward<Start>(start)](auto handler) mutable {
          // The handler, and work on its executor until the answer is
          // posted there (an io_context does not run out while the call is
          // in flight). Both move into the posted answer, so that nothing
          // here touches the executor once the answer may have run.
          using Handler = decltype(handler);
          // A handler with no executor of its own (one operation of a
          // parallel group, say) is answered where the answer comes, on
          // the runtime's thread, as an I/O object answers on its own:
          // posted to the system executor it would start Asio's system
          // thread pool.
          if constexpr (std::is_same_v<boost::asio::associated_executor_t<Handler>,
                                       boost::asio::system_executor>) {
            start(Callback<T>(
                [h = std::make_shared<std::optional<Handler>>(std::move(handler))](Result<T> r) {
                  if (!*h) return;  // (answered once)
                  Handler answer = std::move(**h);
                  h->reset();
                  if (r.ok()) {
                    std::move(answer)(nullptr, std::move(r).value());
                  } else {
                    std::move(answer)(std::make_exception_ptr(r.error()), T{});
                  }
                }));
            return;
          }
          struct Pending {
            Handler handler;
            decltype(boost::asio::make_work_guard(handler)) work;
          };
          auto work = boost::asio::make_work_guard(handler);
          auto pending = std::make_shared<std::optional<Pending>>(
              Pending{std::move(handler), std::move(work)});
          start(Callback<T>([pending](Result<T> r) {
            if (!*pending) return;  // (answered once)
            Pending p = std::move(**pending);
            pending->reset();
            auto ex = p.work.get_executor();
            boost::asio::post(ex, [p = std::move(p), r = std::move(r)]() mutable {
              if (r.ok()) {
                std::move(p.handler)(nullptr, std::move(r).value());
              } else {
                std::move(p.handler)(std::make_exception_ptr(r.error()), T{});
              }
            });
          }));
        },
        token);
  }
};
}  // namespace detail

}  // namespace redisched
