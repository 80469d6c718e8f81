#include "redisched/worker.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <charconv>
#include <csignal>
#include <future>
#include <unordered_map>

#include "core/checks.h"
#include "core/keys.h"
#include "redisched/asio.h"
#include "redisched/limits.h"
#include "redisched/runtime.h"
#include "redisched/scheduler.h"
#include "worker/topic_runner.h"

namespace redisched {
namespace {

namespace asio = boost::asio;

// Set on the worker's own threads: cancel() from there would wait for itself.
thread_local bool t_worker_thread = false;

void check_options(const HandlerOptions& o) {
  auto bad = [](const std::string& what) { throw Error(Errc::invalid_argument, what); };
  if (o.concurrency < 1 || o.concurrency > 10000) {
    bad("concurrency must be from 1 to 10000, got " + std::to_string(o.concurrency));
  }
  if (o.prefetch < 0 || o.prefetch > limits::kBatchMax) {
    bad("prefetch must be from 0 to " + std::to_string(limits::kBatchMax) + ", got " +
        std::to_string(o.prefetch));
  }
  if (o.ttr && o.ttr->count() < 1) bad("ttr must be at least 1 ms");
  if (o.max_attempts && (*o.max_attempts < 1 || *o.max_attempts > limits::kAttemptsMax)) {
    bad("max_attempts must be from 1 to " + std::to_string(limits::kAttemptsMax) + ", got " +
        std::to_string(*o.max_attempts));
  }
  if (o.backoff) core::check_backoff(*o.backoff);
  if (o.keep_finished.count() < 0 || o.keep_finished.count() > limits::kDelayMax) {
    bad("keep_finished must be from 0 to " + std::to_string(limits::kDelayMax) + " ms");
  }
}

}  // namespace

class Worker::Impl {
 public:
  // client: a Client to share, or null for one of the worker's own (made
  // with o.client). The control loop runs on a shard of the Client's
  // runtime.
  Impl(WorkerOptions o, Client* shared_client)
      : opts(std::move(o)),
        own_client(shared_client ? nullptr : std::make_unique<Client>(opts.client)),
        client(shared_client ? *shared_client : *own_client),
        control_shard(client.runtime().next_shard()),
        io(shard_io(client.runtime(), control_shard)),
        broker(worker::client_broker(client)),
        shared(io, *broker) {}

  ~Impl() { cancel(std::nullopt); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void handle(std::string topic, HandlerOptions o, Handler h, AsyncHandler async) {
    Client::validate_topic(topic);
    check_options(o);
    if (!h && !async) {
      throw Error(Errc::invalid_argument, "the handler of topic " + topic + " is empty");
    }
    std::lock_guard lock(lifecycle);
    if (started) throw Error(Errc::invalid_argument, "register handlers before run()");
    const std::string channel = core::wake_channel(client.options().prefix, topic);
    if (by_channel.contains(channel)) {
      throw Error(Errc::invalid_argument, "topic " + topic + " has a handler already");
    }
    Handler wrapped;
    if (h) {
      wrapped = [h = std::move(h)](JobContext& ctx) {
        t_worker_thread = true;
        h(ctx);
      };
    }
    topics.push_back(std::make_unique<worker::TopicRunner>(shared, topic, o, std::move(wrapped),
                                                           std::move(async)));
    by_channel.emplace(channel, topics.back().get());
  }

  void run() {
    std::lock_guard lock(lifecycle);
    if (started) throw Error(Errc::invalid_argument, "a Worker runs once");
    if (topics.empty()) throw Error(Errc::invalid_argument, "no handlers: call handle() first");
    started = true;
    for (auto& t : topics) t->start();  // a synchronous handler's threads
    // A topic's wake-ups come through the Client; a (re)subscription means
    // signals may have been missed, so the topic looks again. They come on
    // whichever shard holds the subscription, and are posted to the control
    // shard, where `open` says whether the worker is still there.
    for (auto& t : topics) {
      worker::TopicRunner* runner = t.get();
      subscriptions.push_back(client.watch(
          runner->topic(),
          [this, runner, open = open](std::int64_t due) {
            asio::post(io, [runner, due, open] {
              if (*open) runner->on_signal(due);
            });
          },
          [this, runner, open = open] {
            asio::post(io, [runner, open] {
              if (*open) runner->look();
            });
          }));
    }
    if (opts.run_schedules) {
      scheduler = std::make_unique<Scheduler>(client);
      for (auto& t : topics) scheduler->add_topic(t->topic());
    }
    running = true;
  }

  void cancel(std::optional<Millis> drain) {
    if (t_worker_thread || client.runtime().current_shard() >= 0) {
      throw Error(Errc::invalid_argument,
                  "cancel() from a handler or a thread of the runtime would wait for itself");
    }
    std::lock_guard lock(lifecycle);
    if (!running) return;
    scheduler.reset();  // no tick starts from here on
    on_control([this] {
      for (auto& t : topics) t->stop_taking();
    });
    if (drain) {
      std::unique_lock l(shared.mu);
      shared.changed.wait_for(l, *drain, [this] { return shared.held == 0; });
    }
    on_control([this] {
      for (auto& t : topics) t->abandon_running();
    });
    for (auto& t : topics) t->join();
    on_control([this] {
      for (auto& t : topics) t->on_finished();
    });
    {
      std::unique_lock l(shared.mu);
      shared.changed.wait(l, [this] { return shared.calls == 0; });
    }
    subscriptions.clear();  // no callback starts from here on
    // The handlers of the timers close() cancels are queued on the shard's
    // thread, and so is what is posted from there after them: once that
    // ran, nothing of the worker is left on the shard. (A post from this
    // thread could overtake them.)
    std::promise<void> drained;
    asio::post(io, [this, &drained] {
      for (auto& t : topics) t->close();
      *open = false;
      asio::post(io, [&drained] { drained.set_value(); });
    });
    drained.get_future().wait();
    running = false;
  }

  // Runs fn on the control shard and waits for it.
  void on_control(std::function<void()> fn) {
    std::promise<void> done;
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  WorkerOptions opts;
  std::unique_ptr<Client> own_client;
  Client& client;
  std::size_t control_shard;
  asio::io_context& io;  // the control shard
  std::unique_ptr<worker::Broker> broker;
  worker::Shared shared;
  std::shared_ptr<bool> open = std::make_shared<bool>(true);  // on the control shard
  std::vector<std::unique_ptr<worker::TopicRunner>> topics;
  std::unordered_map<std::string, worker::TopicRunner*> by_channel;
  std::vector<Subscription> subscriptions;
  std::unique_ptr<Scheduler> scheduler;
  std::mutex lifecycle;
  bool started = false;
  std::atomic<bool> running{false};
};

Worker::Worker(WorkerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options), nullptr)) {}
Worker::Worker(Client& client, WorkerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options), &client)) {}
Worker::~Worker() = default;

Client& Worker::client() { return impl_->client; }

void Worker::handle(std::string topic, HandlerOptions options, Handler handler) {
  if (!handler) throw Error(Errc::invalid_argument, "the handler of topic " + topic + " is empty");
  impl_->handle(std::move(topic), options, std::move(handler), nullptr);
}

void Worker::handle_async(std::string topic, HandlerOptions options, AsyncHandler handler) {
  if (!handler) throw Error(Errc::invalid_argument, "the handler of topic " + topic + " is empty");
  impl_->handle(std::move(topic), options, nullptr, std::move(handler));
}

Canceller Worker::run() {
  impl_->run();
  return Canceller(*this);
}
void Worker::cancel() { impl_->cancel(std::nullopt); }
void Worker::cancel(Millis drain_timeout) { impl_->cancel(drain_timeout); }
bool Worker::running() const { return impl_->running; }

void Worker::run_until_signal() {
  // The handlers are installed before the worker starts, so a signal that
  // comes early still ends the wait.
  asio::io_context waiter;
  asio::signal_set signals(waiter, SIGINT, SIGTERM);
  run();
  signals.async_wait([](boost::system::error_code, int) {});
  waiter.run();
  cancel(impl_->opts.shutdown_timeout);
}

std::vector<RunningJob> Worker::running_jobs() const {
  std::vector<RunningJob> out;
  for (const auto& t : impl_->topics) t->snapshot(out);
  return out;
}

WorkerStats Worker::stats() const {
  const auto& s = impl_->shared.stats;
  return {s.reserved, s.acked,         s.failed,         s.released,
          s.stale,    s.reserve_calls, s.empty_reserves, s.wakeups};
}

}  // namespace redisched
