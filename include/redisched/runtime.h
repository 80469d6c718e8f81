// redisched::Runtime: the threads a process gives to redisched. N shards,
// each one single-threaded io_context; Clients, Workers and the server share
// them, so a process runs N threads however many topics, webhooks and
// connections it serves.
//
//   auto runtime = std::make_shared<redisched::Runtime>(2);
//   redisched::Client client({.runtime = runtime});
//   redisched::Worker worker(client);   // its control loop on a shard
//
// A call made on a shard's thread goes out on that shard's connections and
// completes there: no thread hop between the caller and Redis. Calls from
// other threads go to the shard of their topic.
//
// Thread safety: every member may be called from any thread. Ownership:
// held by shared_ptr by whatever runs on it; it must outlive them, which
// holding it that way ensures. The destructor lets what is queued finish
// (a Client closing its connections, say), then joins its threads; it must
// not run on one of them.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace redisched {

namespace detail {
struct RuntimeAccess;  // redisched/asio.h: a runtime over the caller's io_context
}

class Runtime {
 public:
  // threads shards (1..256), each run by a thread of the runtime's own.
  // (redisched/asio.h makes one over an io_context of the caller's.)
  explicit Runtime(int threads = 1);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  std::size_t shards() const noexcept;
  // False for a runtime over the caller's io_context.
  bool owns_threads() const noexcept;
  // The shard whose thread calls this, or -1 on any other thread.
  int current_shard() const noexcept;
  // A shard for a new long-lived piece of work (a worker's topic loop, an
  // HTTP connection), in turn.
  std::size_t next_shard() noexcept;
  // The shard of a topic or a key: the same one for the same name.
  std::size_t shard_of(std::string_view name) const noexcept;

  // Stops every shard at once and joins the runtime's threads; then the
  // handlers still queued or waiting (on a socket, a timer) are destroyed,
  // not run: every shard's, before any shard itself is destroyed, so that a
  // handler may own I/O objects of another shard. What refers to an object
  // of yours must be stopped before it (serve drains first). Idempotent.
  void stop();

 private:
  friend struct detail::RuntimeAccess;
  class Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace redisched
