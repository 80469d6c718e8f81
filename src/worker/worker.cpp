#include "redisched/worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <chrono>
#include <csignal>
#include <future>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>

#include "core/checks.h"
#include "core/keys.h"
#include "redisched/asio.h"
#include "redisched/limits.h"
#include "redisched/runtime.h"
#include "redisched/scheduler.h"
#include "redisched/version.h"
#include "worker/clock_map.h"
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

// A beat every 1 s at the most often, and its ttl (three intervals) within
// the registry's bound; an entry lists what the registry takes (the first
// topics, and running jobs).
constexpr Millis kBeatIntervalMin{1000}, kBeatIntervalMax{limits::kBeatTtlMax / 3};
constexpr auto kListed = static_cast<std::size_t>(limits::kWorkerListMax);

void check_options(const WorkerOptions& o) {
  if (o.move_interval.count() < 0)
    throw Error(Errc::invalid_argument, "move_interval must be >= 0");
  const auto every = o.beat_interval;
  if (every.count() != 0 && (every < kBeatIntervalMin || every > kBeatIntervalMax)) {
    throw Error(Errc::invalid_argument, "beat_interval must be 0 (no registry entry) or from " +
                                            std::to_string(kBeatIntervalMin.count()) + " to " +
                                            std::to_string(kBeatIntervalMax.count()) + " ms, got " +
                                            std::to_string(every.count()));
  }
}

// "<host>:<pid>:<8 hex digits>": unique among the workers alive, also of
// one process.
std::string new_worker_id(const std::string& host) {
  std::random_device random;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(random()));
  return host + ":" + std::to_string(::getpid()) + ":" + hex;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
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
        host(host_name()),
        id(new_worker_id(host)),
        broker(worker::client_broker(client, id)),
        shared(io, *broker),
        beat_timer(io),
        move_timer(io) {
    check_options(opts);
  }

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

  void move_outbox_of(std::string topic) {
    Client::validate_topic(topic);
    std::lock_guard lock(lifecycle);
    if (started) throw Error(Errc::invalid_argument, "name the outboxes to move before run()");
    own.insert(std::move(topic));
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
    if (opts.move_interval.count() > 0) {
      // Each topic's own outbox signal, from the node that holds it (the
      // sweep channel's crosses a cluster's bus, where Nagle held 2 % of
      // signals back 40 ms); and a move once subscribed, again after each
      // reconnection: signals sent meanwhile went unheard. Nothing on a
      // timer: each move reads until the outbox is empty, so an entry added
      // meanwhile, or left by a mover killed halfway, is found by the move
      // its outbox's first entry started (an idle worker costs Redis
      // nothing).
      for (auto& t : topics) own.insert(t->topic());
      for (const auto& topic : own) {
        auto moved = [this, open = open, topic] {
          asio::post(io, [this, open, topic] {
            if (*open) move(topic);
          });
        };
        subscriptions.push_back(client.watch_outbox(topic, moved, moved));
      }
    }
    if (opts.run_schedules) {
      scheduler = std::make_unique<Scheduler>(client);
      for (auto& t : topics) scheduler->add_topic(t->topic());
    }
    if (opts.beat_interval.count() > 0) {
      entry.host = host;
      entry.id = id;
      entry.pid = ::getpid();
      entry.version = std::string(version());
      entry.started_ms = worker::wall_ms();
      for (auto& t : topics) {
        if (entry.topics.size() == kListed) break;  // (the registry's bound)
        entry.topics.push_back({t->topic(), t->concurrency()});
      }
      asio::post(io, [this] { beat(); });
    }
    running = true;
  }

  // ---- the worker registry (WorkerOptions::beat_interval), on the control
  // shard: the entry with the jobs running now, again every interval.
  void beat() {
    if (!*open || !beating) return;
    WorkerEntry now = entry;
    std::vector<RunningJob> jobs;
    for (const auto& t : topics) t->snapshot(jobs);
    if (jobs.size() > kListed) jobs.resize(kListed);
    for (auto& j : jobs) now.running.push_back({j.topic, j.id, j.started_ms});
    shared.count_call(1);
    client.beat_async(now, opts.beat_interval * 3, [this](Result<bool> r) {
      // (Redis away: the next beat tries again; the entry may lapse meanwhile.)
      if (!r.ok() && !beat_failed.exchange(true)) {
        spdlog::warn("redisched worker: the registry's beat failed: {}", r.error().what());
      }
      if (r.ok()) beat_failed = false;
      shared.count_call(-1);
    });
    beat_timer.expires_after(opts.beat_interval);
    beat_timer.async_wait([this](boost::system::error_code ec) {
      if (!ec) beat();
    });
  }

  // ---- flows (docs/redis-api.md, "Flows"), on the control shard: the
  // outboxes of its topics carried out, one move per topic at a time.
  void move(const std::string& topic) {
    if (!moving_on) return;
    // (A signal during a move may name entries the move read too late:
    // the topic is moved again once it ends.)
    if (!moving.insert(topic).second) {
      again.insert(topic);
      return;
    }
    shared.count_call(1);
    client.move_outbox_async(topic, [this, topic](Result<MoveResult> r) {
      // What went wrong, if anything (a call, or the move itself).
      std::string wrong;
      if (!r.ok()) {
        wrong = r.error().what();
      } else if (r.value().failed > 0) {
        wrong = std::to_string(r.value().failed) + " calls failed";
      }
      asio::post(io, [this, topic, wrong = std::move(wrong)] {
        moving.erase(topic);
        const bool signalled = again.erase(topic) > 0;
        if (!wrong.empty()) {
          retry_move(topic);
        } else if (signalled) {
          move(topic);
        }
        if (!wrong.empty() && !move_failed) {
          spdlog::warn("redisched worker: carrying out the outbox of {}: {}", topic, wrong);
        }
        move_failed = !wrong.empty();
        shared.count_call(-1);
      });
    });
  }

  // A topic whose move failed (a call, or Redis away) moves again
  // move_interval later.
  void retry_move(const std::string& topic) {
    if (!retry.insert(topic).second || retry.size() > 1) return;  // (the timer is set)
    move_timer.expires_after(opts.move_interval);
    move_timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      const auto due = std::exchange(retry, {});
      for (const auto& t : due) move(t);
    });
  }

  // The worker stops: no more beats, and its entry goes at once.
  void leave() {
    if (!beating) return;
    beating = false;
    beat_timer.cancel();
    shared.count_call(1);
    client.leave_async(entry.id, [this](Result<bool>) { shared.count_call(-1); });
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
      if (opts.beat_interval.count() > 0) leave();
      moving_on = false;
      move_timer.cancel();
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
  const std::string host;
  const std::string id;  // its reserves' name, and its registry entry's id
  std::unique_ptr<worker::Broker> broker;
  worker::Shared shared;
  std::shared_ptr<bool> open = std::make_shared<bool>(true);  // on the control shard
  std::vector<std::unique_ptr<worker::TopicRunner>> topics;
  std::unordered_map<std::string, worker::TopicRunner*> by_channel;
  std::vector<Subscription> subscriptions;
  std::unique_ptr<Scheduler> scheduler;
  WorkerEntry entry;              // the registry's, but for its running jobs
  asio::steady_timer beat_timer;  // on the control shard
  bool beating = true;            // on the control shard
  // Flows: the topics handled here, those being moved now, and whether it
  // still moves (on the control shard; own set before run).
  std::set<std::string> own, moving, again, retry;
  asio::steady_timer move_timer;
  bool moving_on = true;
  bool move_failed = false;
  std::atomic<bool> beat_failed{false};
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

void Worker::move_outbox_of(std::string topic) { impl_->move_outbox_of(std::move(topic)); }

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

std::string Worker::id() const { return impl_->id; }

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
