#include "redisched/runtime.h"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redisched/asio.h"
#include "redisched/error.h"

namespace redisched {

namespace asio = boost::asio;

// An io_context whose services can be shut down apart from its destruction.
// Objects of one shard may hold I/O objects of another (a connection's
// coroutine frame on shard 1 holding a stream of shard 0), so every shard's
// pending handlers are destroyed (shutdown) while all shards' services still
// exist, and only then is any shard destroyed.
class Shard : public asio::io_context {
 public:
  Shard() : asio::io_context(1) {}  // one thread each: Asio may skip its locking
  using asio::io_context::shutdown;
};

class Runtime::Impl {
 public:
  using Guard = asio::executor_work_guard<asio::io_context::executor_type>;

  explicit Impl(int threads) {
    if (threads < 1 || threads > 256) {
      throw Error(Errc::invalid_argument,
                  "a runtime has 1 to 256 threads, got " + std::to_string(threads));
    }
    owned_.reserve(static_cast<std::size_t>(threads));
    for (int i = 0; i < threads; ++i) {
      owned_.push_back(std::make_unique<Shard>());
      shards_.push_back(owned_.back().get());
      guards_.emplace_back(asio::make_work_guard(*shards_.back()));
    }
    for (auto* io : shards_) threads_.emplace_back([io] { io->run(); });
  }

  explicit Impl(asio::io_context& io) { shards_.push_back(&io); }

  ~Impl() {
    // What is queued (connections closing, their callbacks) runs to the end.
    guards_.clear();
    join();
    // What was posted after stop() (objects closed after it) is destroyed
    // here, still before any shard is.
    shutdown();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void stop() {
    for (auto& io : owned_) io->stop();
    join();
    shutdown();
  }

  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // Destroys every handler still pending on the runtime's own shards (a
  // coroutine waiting on a socket, say): each shard's services stop, all
  // before the first shard is destroyed. Idempotent.
  void shutdown() {
    for (auto& io : owned_) io->shutdown();
  }

  std::vector<std::unique_ptr<Shard>> owned_;
  std::vector<asio::io_context*> shards_;
  std::vector<Guard> guards_;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> next_{0};
};

Runtime::Runtime(int threads) : impl_(std::make_unique<Impl>(threads)) {}
Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

std::size_t Runtime::shards() const noexcept { return impl_->shards_.size(); }

bool Runtime::owns_threads() const noexcept { return !impl_->owned_.empty(); }

std::shared_ptr<Runtime> detail::RuntimeAccess::over(asio::io_context& io) {
  return std::shared_ptr<Runtime>(new Runtime(std::make_unique<Runtime::Impl>(io)));
}

asio::io_context& detail::RuntimeAccess::shard(Runtime& runtime, std::size_t i) {
  return *runtime.impl_->shards_.at(i);
}

int Runtime::current_shard() const noexcept {
  const auto& shards = impl_->shards_;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i]->get_executor().running_in_this_thread()) return static_cast<int>(i);
  }
  return -1;
}

std::size_t Runtime::next_shard() noexcept {
  return impl_->next_.fetch_add(1, std::memory_order_relaxed) % impl_->shards_.size();
}

std::size_t Runtime::shard_of(std::string_view name) const noexcept {
  return std::hash<std::string_view>{}(name) % impl_->shards_.size();
}

void Runtime::stop() { impl_->stop(); }

}  // namespace redisched
