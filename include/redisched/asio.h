// redisched over Boost.Asio, opt in: for an application that runs its own
// io_context, or posts work of its own beside redisched's on a shard's
// thread. redisched/runtime.h itself names no Asio type.
//
//   boost::asio::io_context io;
//   redisched::Client client({.runtime = redisched::make_runtime(io)});
//   ...  // calls, then io.run() on one thread
#pragma once

#include <cstddef>
#include <memory>

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

}  // namespace redisched
