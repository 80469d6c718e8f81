// The Client's insides, shared by the files that implement its calls
// (client.cpp: jobs; schedules.cpp: recurring jobs). Private to core.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cassert>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/coalesce.h"
#include "core/codec.h"
#include "core/keys.h"
#include "core/operations.h"
#include "core/shards.h"
#include "redis/connection.h"
#include "redisched/asio.h"
#include "redisched/client.h"
#include "redisched/limits.h"
#include "redisched/runtime.h"

namespace redisched {
namespace client_detail {

namespace asio = boost::asio;
namespace op = core::op;
using redis::Reply;

constexpr int kBatchMax = static_cast<int>(limits::kBatchMax);  // jobs per call
constexpr const char* kBadReplicaTimeout =
    "replica_timeout must be at least 1 ms and shorter than command_timeout";
constexpr auto kLibraryMaxBody =
    static_cast<std::size_t>(limits::kBodyMaxDefault);  // MAXBODY's default

// Runs an asynchronous call and waits for its Result. Not on a thread of
// the runtime: the answer would have to come through the thread that waits.
template <class T, class Start>
T wait_for(const Runtime& runtime, Start&& start) {
  if (runtime.current_shard() >= 0) {
    throw Error(Errc::invalid_argument,
                "a synchronous call on a thread of the client's runtime would wait for itself: "
                "use the asynchronous form there");
  }
  std::promise<Result<T>> promise;
  auto future = promise.get_future();
  start(Callback<T>([&promise](Result<T> r) { promise.set_value(std::move(r)); }));
  return future.get().value();
}

// The one fan-in: a call made of n parts (the chunks of a batch, the
// shards of a spread topic) answers once, with finish(every part's value,
// in index order), or with the first part's error. The parts of a call all
// go out on one shard's connections (Impl::link), so they answer on one
// thread: no lock (debug builds check it). finish may throw Error: the
// call's answer.
template <class P, class T>
class FanIn {
 public:
  using Finish = std::function<T(std::vector<P>)>;

  // n >= 1 parts; part(i) is the callback of part i.
  static std::shared_ptr<FanIn> make(std::size_t n, Finish finish, Callback<T> done) {
    return std::shared_ptr<FanIn>(new FanIn(n, std::move(finish), std::move(done)));
  }

  Callback<P> part(std::size_t i, const std::shared_ptr<FanIn>& self) {
    return [self, i](Result<P> r) { self->answered(i, std::move(r)); };
  }

 private:
  FanIn(std::size_t n, Finish finish, Callback<T> done)
      : parts_(n), pending_(n), finish_(std::move(finish)), done_(std::move(done)) {}

  void answered(std::size_t i, Result<P> r) {
#ifndef NDEBUG
    if (thread_ == std::thread::id{}) thread_ = std::this_thread::get_id();
    assert(std::this_thread::get_id() == thread_);
#endif
    if (failed_) return;
    if (!r.ok()) {
      failed_ = true;
      return done_(r.error());
    }
    parts_[i] = std::move(r).value();
    if (--pending_ > 0) return;
    std::vector<P> all;
    all.reserve(parts_.size());
    for (auto& p : parts_) all.push_back(std::move(*p));
    Result<T> out = [&]() -> Result<T> {
      try {
        return finish_(std::move(all));
      } catch (const Error& e) {
        return e;
      }
    }();
    done_(std::move(out));
  }

  std::vector<std::optional<P>> parts_;
  std::size_t pending_;
  bool failed_ = false;
  Finish finish_;
  Callback<T> done_;
#ifndef NDEBUG
  std::thread::id thread_;  // the first part's answer's
#endif
};

// Debug builds check that no answer runs on its caller's stack, before the
// call returned: a link answers later, on its thread, never inline (the
// caller may be mid-way through its own state, or hold a lock its callback
// takes). A Sending lives around each hand-over to the link, and
// Impl::counted tags the call's handler with it.
class Sending {
 public:
#ifndef NDEBUG
  Sending() : outer_(std::exchange(current_, ++last_)) {}
  ~Sending() { current_ = outer_; }
  static std::uint64_t current() { return current_; }

 private:
  std::uint64_t outer_;
  static inline thread_local std::uint64_t current_ = 0;  // the hand-over on this thread
  static inline std::atomic<std::uint64_t> last_{0};
#else
  Sending() = default;
  static std::uint64_t current() { return 0; }
#endif
 public:
  Sending(const Sending&) = delete;
  Sending& operator=(const Sending&) = delete;
};

// Work on the shards that may run after its Client was destroyed (a wait's
// timer or message, a watch's cancellation) passes the gate before it
// touches the Client; the destructor closes it, and waits for whoever is
// inside to leave: briefly, since nothing blocks or answers inside.
class Gate {
 public:
  // A pass: true while the Client may be touched.
  class Pass {
   public:
    explicit Pass(Gate& g) : gate_(g), open_(g.enter()) {}
    ~Pass() {
      if (open_) gate_.inside_.fetch_sub(1);
    }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    explicit operator bool() const noexcept { return open_; }

   private:
    Gate& gate_;
    bool open_;
  };

  void close() {
    closed_.store(true);
    while (inside_.load() != 0) std::this_thread::yield();
  }

 private:
  // (seq_cst, with close's: either this sees closed, or close sees it inside.)
  bool enter() {
    inside_.fetch_add(1);
    if (!closed_.load()) return true;
    inside_.fetch_sub(1);
    return false;
  }
  std::atomic<bool> closed_{false};
  std::atomic<int> inside_{0};
};

// How soon a caller should look again after a shard of a spread topic could
// not be reached (its jobs wait there; the others were served).
inline constexpr std::int64_t kUnreachableShardRetryMs = 1000;

// reserve or pull on a spread topic: from its shards in turn, starting one
// further at each call (so that each shard is served alike), until count
// jobs came or every shard was asked. send(where, n, done) asks one. A
// shard that cannot be reached (its primary down) is passed over: the
// others still serve; only when none answered is the call an error.
template <class Send>
void take_spread(const core::LayoutPtr& l, int count, Send send, Callback<ReserveResult> done) {
  struct Take : std::enable_shared_from_this<Take> {
    core::LayoutPtr layout;
    std::size_t first = 0, asked = 0, answered = 0;
    int count = 0;
    bool all_paused = true;
    std::optional<Error> unreachable;
    ReserveResult out;
    std::optional<Send> send;
    Callback<ReserveResult> done;

    static bool transport(const Error& e) {
      return e.code() == Errc::connection || e.code() == Errc::timeout;
    }

    void next() {
      const auto& where = layout->shards[(first + asked) % layout->shards.size()];
      const int want = count - static_cast<int>(out.jobs.size());
      (*send)(where, want, [self = this->shared_from_this()](Result<ReserveResult> r) {
        if (!r.ok() && !transport(r.error())) {
          if (self->out.jobs.empty()) return self->done(r.error());
          // Jobs already taken from other shards are handed out (dropped,
          // a pull's would be lost); the caller looks again at once.
          self->out.next_ms = 0;
          self->out.paused = false;
          return self->done(std::move(self->out));
        }
        ++self->asked;
        if (!r.ok()) {
          self->unreachable = r.error();
          return self->more() ? self->next() : self->finish();
        }
        ++self->answered;
        auto& part = r.value();
        self->all_paused = self->all_paused && part.paused;
        self->out.now_ms = std::max(self->out.now_ms, part.now_ms);
        self->out.next_ms = core::earlier_time(self->out.next_ms, part.next_ms);
        for (auto& j : part.jobs) self->out.jobs.push_back(std::move(j));
        if (self->more()) return self->next();
        self->finish();
      });
    }

    bool more() const {
      return static_cast<int>(out.jobs.size()) < count && asked < layout->shards.size();
    }

    void finish() {
      if (answered == 0) return done(*unreachable);
      out.paused = all_paused;
      // Shards not asked may hold jobs: "look again at once".
      if (asked < layout->shards.size()) out.next_ms = 0;
      // One that could not be reached: look again soon, not at once.
      if (unreachable) {
        out.next_ms = core::earlier_time(out.next_ms, out.now_ms + kUnreachableShardRetryMs);
      }
      done(std::move(out));
    }
  };
  auto t = std::make_shared<Take>();
  t->layout = l;
  t->first = l->turn.fetch_add(1, std::memory_order_relaxed);
  t->count = count;
  t->send.emplace(std::move(send));
  t->done = std::move(done);
  t->next();
}

// list on a spread topic: shard by shard, each in its order; offset counts
// over them all. send(where, offset, count, done) lists one.
template <class Send>
void list_spread(const core::LayoutPtr& l, std::int64_t offset, int count, Send send,
                 Callback<ListPage> done) {
  struct List : std::enable_shared_from_this<List> {
    core::LayoutPtr layout;
    std::size_t at = 0;
    std::int64_t skip = 0;
    int count = 0;
    ListPage out;
    std::optional<Send> send;
    Callback<ListPage> done;

    void next() {
      const int want = std::max(1, count - static_cast<int>(out.jobs.size()));
      (*send)(layout->shards[at], skip, want,
              [self = this->shared_from_this()](Result<ListPage> r) {
                if (!r.ok()) return self->done(r.error());
                auto& part = r.value();
                self->out.total += part.total;
                self->skip = std::max<std::int64_t>(0, self->skip - part.total);
                for (auto& j : part.jobs) {
                  if (static_cast<int>(self->out.jobs.size()) < self->count) {
                    self->out.jobs.push_back(std::move(j));
                  }
                }
                if (++self->at < self->layout->shards.size()) return self->next();
                self->done(std::move(self->out));
              });
    }
  };
  auto t = std::make_shared<List>();
  t->layout = l;
  t->skip = offset;
  t->count = count;
  t->send.emplace(std::move(send));
  t->done = std::move(done);
  t->next();
}

// Heterogeneous lookup of topics (string_view) in a map of strings.
struct TopicHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace client_detail

// (A private header, read only by the Client's own files.)
using namespace client_detail;  // NOLINT(google-build-using-namespace)

class Client::Impl {
 public:
  struct Waiter;      // client.cpp: one Client::wait
  struct TopicWatch;  // client.cpp: one Client::watch or watch_reports
  using TopicWatchChannel = std::string (*)(std::string_view prefix, std::string_view topic);
  // Follows topic's channel (channel_of names it for a topic or a shard) on
  // each of its shards; on_ready after each subscription is in place.
  Subscription watch_topic(std::string_view topic, TopicWatchChannel channel_of,
                           std::function<void(const std::string&)> on_message,
                           std::function<void()> on_ready);

  // link: where commands go; nullptr: connections to opts.redis_url, one
  // set per shard of the runtime.
  Impl(ClientOptions options, std::unique_ptr<redis::Link> link)
      : opts(std::move(options)),
        runtime(opts.runtime ? opts.runtime : std::make_shared<Runtime>(1)) {
    if (opts.connections < 1) throw Error(Errc::invalid_argument, "connections must be at least 1");
    if (opts.prefix.empty() || opts.prefix.find_first_of("{}") != std::string::npos) {
      throw Error(Errc::invalid_argument, "key prefix must be non-empty and without braces");
    }
    core::check_replicas(opts.replicas, "replicas");
    bool waits = opts.replicas > 0;
    for (const auto& [topic, n] : opts.topic_replicas) {
      core::check_topic(topic);
      core::check_replicas(n, "replicas of topic " + topic);
      waits = waits || n > 0;
    }
    replica_timeout_ok =
        opts.replica_timeout.count() >= 1 &&
        (opts.command_timeout.count() == 0 || opts.replica_timeout < opts.command_timeout);
    if (waits && !replica_timeout_ok) throw Error(Errc::invalid_argument, kBadReplicaTimeout);
    layouts_.resize(runtime->shards());
    if (link) {
      links_.push_back(std::move(link));
      return;
    }
    redis::ConnectionConfig config;
    auto seeds = redis::parse_urls(opts.redis_url);
    config.endpoint = seeds.front();
    seeds.erase(seeds.begin());
    config.connect_timeout = opts.connect_timeout;
    config.command_timeout = opts.command_timeout;
    config.reconnect_min = opts.reconnect_min;
    config.reconnect_max = opts.reconnect_max;
    for (std::size_t i = 0; i < runtime->shards(); ++i) {
      links_.push_back(redis::make_link(shard_io(*runtime, i), config, opts.connections, seeds));
    }
  }

  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // FCALL redisched_<function> on a topic (or shard topic) already checked.
  core::Command fcall_at(std::string_view function, std::string_view where) const {
    core::Command cmd;
    cmd.fcall(function, opts.prefix, where, opts.history);
    return cmd;
  }

  // ---- the one dispatcher of core/operations.h's table

  // Runs operation Op on topic with a: checks a, finds where it goes,
  // encodes, sends, decodes. Every refusal (an argument, an error reply, a
  // lost connection) is done's Error; it never throws.
  template <class Op>
  void run(std::string_view topic, typename Op::Args a, Callback<typename Op::Value> done) {
    using V = typename Op::Value;
    if (runtime->current_shard() < 0) {
      // From a thread outside the runtime (an application's own): on the
      // topic's shard, the one thread that touches its layout there. (The
      // link would hand the command over to it anyway.)
      [[maybe_unused]] const Sending sending;
      asio::post(shard_io(*runtime, shard_for(topic)),
                 counted([this, state = shard_state, topic = std::string(topic), a = std::move(a),
                          done = std::move(done)]() mutable {
                   const Gate::Pass pass(state->gate);
                   if (!pass) return done(Error(Errc::closed, "the client is closed"));
                   run<Op>(topic, std::move(a), std::move(done));
                 }));
      return;
    }
    try {
      // (a slot's topic may be a shard's, "<topic>~<suffix>")
      if constexpr (Op::route == op::Route::slot) core::check_topic(core::base_topic(topic));
      if constexpr (Op::route != op::Route::registry && Op::route != op::Route::slot) {
        core::check_topic(topic);
      }
      if constexpr (requires { Op::check(a, opts); }) Op::check(a, opts);
      // (Before any part goes out: the parts of one call answer on one
      // thread, FanIn, and a refusal on the runtime's.)
      check_own_replicas<Op>(a);
    } catch (const Error& e) {
      return refuse(done, e);
    }
    if constexpr (requires { Op::settled(a); }) {
      if (auto v = Op::settled(a)) return answer_later(done, Result<V>(std::move(*v)));
    }
    if constexpr (Op::route == op::Route::topic || Op::route == op::Route::slot) {
      send<Op>(topic, a, std::move(done));
    } else if constexpr (Op::route == op::Route::registry) {
      send<Op>(core::registry_keys(opts.prefix)[0], a, std::move(done));
    } else {
      with_layout<V>(topic, std::move(done),
                     [this, a = std::move(a)](const core::LayoutPtr& l, Callback<V> then) {
                       on_layout<Op>(l, a, std::move(then));
                     });
    }
  }

  // run, once the topic's layout is known: Op's route over it.
  template <class Op>
  void on_layout(const core::LayoutPtr& l, const typename Op::Args& a,
                 Callback<typename Op::Value> done) {
    using V = typename Op::Value;
    using op::Route;
    if constexpr (Op::route == Route::job) {
      if constexpr (requires(typename Op::Args b) { Op::place(b, *l); }) {
        auto placed = a;
        Op::place(placed, *l);
        send<Op>(l->topic_for(Op::id(placed)), placed, std::move(done));
      } else {
        send<Op>(l->topic_for(Op::id(a)), a, std::move(done));
      }
    } else if constexpr (Op::route == Route::jobs) {
      send_jobs<Op>(l, a, std::move(done));
    } else if constexpr (Op::route == Route::every_shard) {
      // An answer that says the layout changed: SHARDED, as the library
      // says it, so that with_layout reads it again.
      auto checked = [l](Callback<V> then) -> Callback<V> {
        if constexpr (requires(const V& v) { Op::stale(v, *l); }) {
          return [l, then = std::move(then)](Result<V> r) {
            if (r.ok() && Op::stale(r.value(), *l)) {
              return then(core::error_from_reply("SHARDED " + l->topic + " changed its shards"));
            }
            then(std::move(r));
          };
        } else {
          return then;
        }
      };
      if (!l->spread()) return send<Op>(l->topic, a, checked(std::move(done)));
      constexpr bool with_base = requires(typename Op::Args b) { Op::spread_base(b); };
      each_shard<V>(
          l, std::move(done),
          [this, &a, checked, l](const std::string& where, Callback<V> part) {
            if constexpr (with_base) {
              if (where == l->topic) {
                auto own = a;
                Op::spread_base(own);
                return send<Op>(where, own, checked(std::move(part)));
              }
            }
            send<Op>(where, a, checked(std::move(part)));
          },
          [](std::vector<V> parts) {
            if constexpr (requires(V & v) { Op::add_base(v, v); }) {
              // (the topic's own part is the last)
              V base = std::move(parts.back());
              parts.pop_back();
              V all = Op::merge(std::move(parts));
              Op::add_base(all, base);
              return all;
            } else {
              return Op::merge(std::move(parts));
            }
          },
          with_base);
    } else if constexpr (Op::route == Route::take) {
      if (!l->spread()) return send<Op>(l->topic, a, std::move(done));
      take_spread(
          l, a.count,
          [this, a](const std::string& where, int want, Callback<V> then) {
            auto part = a;
            part.count = want;
            send<Op>(where, part, std::move(then));
          },
          std::move(done));
    } else {
      static_assert(Op::route == Route::pages);
      if (!l->spread()) return send<Op>(l->topic, a, std::move(done));
      list_spread(
          l, a.offset, a.count,
          [this, a](const std::string& where, std::int64_t skip, int want, Callback<V> then) {
            auto part = a;
            part.offset = skip;
            part.count = want;
            send<Op>(where, part, std::move(then));
          },
          std::move(done));
    }
  }

  // One call of Op on one topic or shard: alone, coalesced with calls of its
  // kind queued beside it, or waiting for replicas, as the table says.
  template <class Op>
  void send(std::string_view where, const typename Op::Args& a, Callback<typename Op::Value> done) {
    using V = typename Op::Value;
    core::Command cmd;
    if constexpr (Op::route == op::Route::registry) {
      cmd.fcall_registry(Op::function, opts.prefix);
    } else {
      cmd.fcall(Op::function, opts.prefix, where, opts.history || Op::reads_history);
    }
    Op::encode(cmd, a);
    const bool bounded = bounds_body<Op>(a);
    if (bounded) add_max_body(cmd);
    auto decode = [&] {
      if constexpr (requires(const Reply& r) { Op::decode(r); }) {
        return [](const Reply& r) { return Op::decode(r); };
      } else {
        return [a](const Reply& r) { return Op::decode(r, a); };  // (a copy: it answers later)
      }
    }();
    std::optional<int> own;
    if constexpr (requires { Op::replicas(a); }) own = Op::replicas(a);
    const int replicas = Op::job_write ? own.value_or(replicas_for(where)) : 0;
    if (Op::confirms && replicas > 0) cmd.add("CONFIRM");
    if constexpr (Op::coalesces) {
      // A call the library would refuse (!takes) goes alone: a batched call
      // is refused as a whole. So does one that waits for replicas.
      if (opts.coalesce && replicas == 0 && Op::takes(a)) {
        core::Command part, tail;
        Op::part(part, a);
        Op::tail(tail, a);
        if (bounded) add_max_body(tail);
        [[maybe_unused]] const Sending sending;
        link(where).send_batchable(
            where, core::batchable(Op::kind(), opts.prefix, where, opts.history, cmd, part, tail),
            counted(answer<V>(std::move(decode), std::move(done))));
        return;
      }
    }
    if constexpr (Op::job_write) {
      send_command<V>(where, cmd, replicas, std::move(decode), std::move(done));
    } else {
      call<V>(where, cmd, std::move(decode), std::move(done));
    }
  }

  // Route::jobs: each shard's share of the jobs, in calls of at most
  // kBatchMax; done gets Op::finish of one answer per job, in their order.
  template <class Op>
  void send_jobs(const core::LayoutPtr& l, const typename Op::Args& a,
                 Callback<typename Op::Value> done) {
    using Item = typename Op::Item;
    using Each = typename Op::Each;
    auto finish =
        Callback<std::vector<Each>>([done = std::move(done)](Result<std::vector<Each>> r) {
          if (!r.ok()) return done(r.error());
          done(Op::finish(std::move(r).value()));
        });
    auto send_share = [this, &a](const std::string& where, std::span<const Item> share,
                                 Callback<std::vector<Each>> then) {
      batched<Each, Item>(share, std::move(then), [&](auto chunk, auto cb) {
        auto cmd = fcall_at(Op::function, where);
        Op::encode(cmd, chunk, a);
        if (bounds_body<Op>(a)) add_max_body(cmd);
        // With a job's own replicas: the most any job asks for, its own or
        // the topic's.
        const int topic_wants = replicas_for(where);
        const bool own = std::any_of(chunk.begin(), chunk.end(),
                                     [](const Item& i) { return Op::replicas(i).has_value(); });
        int wait = own ? 0 : topic_wants;
        for (const auto& item : chunk) {
          if (own) wait = std::max(wait, Op::replicas(item).value_or(topic_wants));
        }
        if (Op::confirms && wait > 0) cmd.add("CONFIRM");
        auto decode = [n = chunk.size()](const Reply& r) { return Op::decode(r, n); };
        if constexpr (Op::job_write) {
          send_command<std::vector<Each>>(where, cmd, wait, decode, std::move(cb));
        } else {
          call<std::vector<Each>>(where, cmd, decode, std::move(cb));
        }
      });
    };
    split_by_shard<Each, Item>(
        l, Op::items(a), [](const Item& i) { return Op::item_id(i); }, std::move(finish),
        send_share);
  }

  // A job's own replicas, when the client cannot wait for them (its
  // replica_timeout unusable): refused before any part of the call goes out.
  template <class Op>
  void check_own_replicas(const typename Op::Args& a) const {
    if (replica_timeout_ok) return;
    if constexpr (Op::route == op::Route::jobs) {
      for (const auto& item : Op::items(a)) {
        if (Op::replicas(item).value_or(0) > 0) {
          throw Error(Errc::invalid_argument, kBadReplicaTimeout);
        }
      }
    } else if constexpr (requires { Op::replicas(a); }) {
      if (Op::replicas(a).value_or(0) > 0) throw Error(Errc::invalid_argument, kBadReplicaTimeout);
    }
  }

  // Whether Op's call ends in MAXBODY (ours is not the library's default).
  template <class Op>
  bool bounds_body(const typename Op::Args& a) const {
    if (opts.max_body == kLibraryMaxBody) return false;
    if constexpr (requires { Op::max_body(a); }) {
      return Op::max_body(a);
    } else {
      return Op::max_body;
    }
  }

  // ---- where a topic's jobs are (core/shards.h; docs/redis-api.md, "A
  // topic over many shards")

  // The topic's layout as last read on this thread's shard, or nullptr:
  // each shard has its own cache, touched only on its thread. (On any other
  // thread, nullptr: the few calls made from there outside run's, such as
  // migrate, read it afresh.)
  core::LayoutPtr cached_layout(std::string_view topic) {
    const int here = runtime->current_shard();
    return here >= 0 ? layouts_[static_cast<std::size_t>(here)].find(topic) : nullptr;
  }

  // Reads it (redisched_shards) and keeps it in the cache of the shard whose
  // thread the answer comes on.
  void read_layout(const std::string& topic, Callback<core::LayoutPtr> done) {
    send<op::Shards>(topic, {},
                     [this, topic, done = std::move(done)](Result<std::vector<std::string>> r) {
                       if (!r.ok()) return done(r.error());
                       auto layout = std::make_shared<const core::Layout>(topic, r.value());
                       const int here = runtime->current_shard();
                       if (here >= 0) layouts_[static_cast<std::size_t>(here)].keep(topic, layout);
                       done(core::LayoutPtr(layout));
                     });
  }

  // Records a migration reads in one call when a call meets an older
  // stored format (redisched_migrate's default).
  static constexpr int kMigrateLimit = 1000;

  // Calls redisched_migrate on one topic (or shard) until it answers done,
  // adding up what each call did (docs/redis-api.md, "Migrations").
  void migrate_topic(const std::string& where, int limit, Migration so_far,
                     Callback<Migration> done) {
    send<op::Migrate>(
        where, {limit},
        [this, where, limit, so_far, done = std::move(done)](Result<core::MigrateStep> r) mutable {
          if (!r.ok()) return done(r.error());
          so_far.rewritten += r.value().did.rewritten;
          so_far.read += r.value().did.read;
          so_far.calls += r.value().did.calls;
          if (r.value().done) return done(so_far);
          migrate_topic(where, limit, so_far, std::move(done));
        });
  }

  // migrate_topic on a topic, or on each shard of a spread one (at once).
  void migrate_layout(const core::LayoutPtr& l, int limit, Callback<Migration> done) {
    if (!l->spread()) return migrate_topic(l->topic, limit, {}, std::move(done));
    each_shard<Migration>(
        l, std::move(done),
        [this, limit](const std::string& where, Callback<Migration> part) {
          migrate_topic(where, limit, {}, std::move(part));
        },
        [](const std::vector<Migration>& parts) {
          Migration all;
          for (const auto& p : parts) {
            all.rewritten += p.rewritten;
            all.read += p.read;
            all.calls += p.calls;
          }
          return all;
        });
  }

  // Runs body(layout, done) once the topic's layout is known (read at its
  // first call, then from memory). A call made on a layout that changed
  // since (the library answers SHARDED) reads it again and runs once more;
  // one that met data of an older stored format (OLDFORMAT, nothing
  // changed) migrates the topic and runs once more. body must not throw;
  // the topic is already checked (run, migrate_async: once a call).
  template <class T, class Body>
  void with_layout(std::string_view topic, Callback<T> done, Body body) {
    auto shared =
        std::make_shared<std::pair<std::string, Body>>(std::string(topic), std::move(body));
    auto first = [this, shared](const core::LayoutPtr& l, Callback<T> then) {
      shared->second(l, Callback<T>([this, shared, l, then = std::move(then)](Result<T> r) mutable {
                       if (r.ok()) return then(std::move(r));
                       if (core::is_older_format(r.error())) {
                         return migrate_layout(
                             l, kMigrateLimit,
                             [shared, l, then = std::move(then)](Result<Migration> m) mutable {
                               if (!m.ok()) return then(m.error());
                               shared->second(l, std::move(then));
                             });
                       }
                       if (!core::is_sharded(r.error())) return then(std::move(r));
                       read_layout(shared->first, [shared, then = std::move(then)](
                                                      Result<core::LayoutPtr> fresh) mutable {
                         if (!fresh.ok()) return then(fresh.error());
                         shared->second(fresh.value(), std::move(then));
                       });
                     }));
    };
    if (auto l = cached_layout(shared->first)) return first(l, std::move(done));
    read_layout(shared->first, [first, done = std::move(done)](Result<core::LayoutPtr> l) mutable {
      if (!l.ok()) return done(l.error());
      first(l.value(), std::move(done));
    });
  }

  // A call on every shard at once, send(where, done) each (and on the
  // topic itself, last, with_base); merge makes one answer of theirs (in
  // the shards' order). Not for an unspread topic.
  template <class P, class T, class Send, class Merge>
  void each_shard(const core::LayoutPtr& l, Callback<T> done, Send send, Merge merge,
                  bool with_base = false) {
    const std::size_t n = l->shards.size();
    auto g = FanIn<P, T>::make(n + (with_base ? 1 : 0), std::move(merge), std::move(done));
    for (std::size_t i = 0; i < n; ++i) send(l->shards[i], g->part(i, g));
    if (with_base) send(l->topic, g->part(n, g));
  }

  // A call on many jobs: send(where, items, done) for the items each topic
  // or shard holds (id_of(item) is the job's id); done gets one T per item,
  // in items' order, or the first error.
  template <class T, class Item, class IdOf, class Send>
  void split_by_shard(const core::LayoutPtr& l, std::span<const Item> items, IdOf id_of,
                      Callback<std::vector<T>> done, Send send) {
    if (!l->spread()) return send(l->topic, items, std::move(done));
    std::vector<std::vector<std::size_t>> at(l->shards.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      at[core::shard_index(id_of(items[i]), at.size())].push_back(i);
    }
    // The shards that hold some of the items, and which items each.
    std::vector<std::size_t> asked;
    for (std::size_t k = 0; k < at.size(); ++k) {
      if (!at[k].empty()) asked.push_back(k);
    }
    if (asked.empty()) return answer_later(done, Result<std::vector<T>>(std::vector<T>{}));
    auto g = FanIn<std::vector<T>, std::vector<T>>::make(
        asked.size(),
        [n = items.size(), asked, at](std::vector<std::vector<T>> parts) {
          std::vector<T> out(n);
          for (std::size_t p = 0; p < parts.size(); ++p) {
            const auto& idx = at[asked[p]];
            if (parts[p].size() != idx.size()) {
              throw Error(Errc::protocol, "a shard answered for " +
                                              std::to_string(parts[p].size()) + " jobs of " +
                                              std::to_string(idx.size()));
            }
            for (std::size_t k = 0; k < idx.size(); ++k) out[idx[k]] = parts[p][k];
          }
          return out;
        },
        std::move(done));
    for (std::size_t p = 0; p < asked.size(); ++p) {
      std::vector<Item> part;
      part.reserve(at[asked[p]].size());
      for (auto i : at[asked[p]]) part.push_back(items[i]);
      send(l->shards[asked[p]], std::span<const Item>(part), g->part(p, g));
    }
  }

  // Sends cmd; parse turns the reply into T (or throws Error).
  template <class T, class Parse>
  void call(std::string_view route, const core::Command& cmd, Parse parse, Callback<T> done) {
    std::string resp;
    cmd.encode(resp);
    [[maybe_unused]] const Sending sending;
    link(route).send(route, std::move(resp), counted(answer<T>(std::move(parse), std::move(done))));
  }

  // call, or with replicas > 0 answered once that many replicas have it
  // (WAIT; ClientOptions::replicas).
  template <class T, class Parse>
  void send_command(std::string_view where, const core::Command& cmd, int replicas, Parse parse,
                    Callback<T> done) {
    if (replicas == 0) return call<T>(where, cmd, std::move(parse), std::move(done));
    if (!replica_timeout_ok) return refuse(done, Error(Errc::invalid_argument, kBadReplicaTimeout));
    std::string resp;
    cmd.encode(resp);
    [[maybe_unused]] const Sending sending;
    link(where).send_replicated(where, std::move(resp), replicas, opts.replica_timeout,
                                counted(answer_replicated<T>(std::move(parse), std::move(done))));
  }

  int replicas_for(std::string_view topic) const {
    if (opts.topic_replicas.empty()) return opts.replicas;
    topic = core::base_topic(topic);  // a shard's: its topic's
    const auto it = opts.topic_replicas.find(topic);
    return it != opts.topic_replicas.end() ? it->second : opts.replicas;
  }

  // The same, to one node of the link (commands every node must run).
  template <class T, class Parse>
  void call_node(std::size_t node, const core::Command& cmd, Parse parse, Callback<T> done) {
    std::string resp;
    cmd.encode(resp);
    [[maybe_unused]] const Sending sending;
    link().send_to_node(node, std::move(resp),
                        counted(answer<T>(std::move(parse), std::move(done))));
  }

  // Turns the link's answer into done's Result: a transport failure, an
  // error reply (core::error_from_reply), or parse's value or Error.
  template <class T, class Parse>
  static redis::ReplyHandler answer(Parse parse, Callback<T> done) {
    return [parse = std::move(parse), done = std::move(done)](std::error_code ec, Reply reply) {
      if (ec) return done(core::error_from_link(ec, reply.str));
      if (reply.is_error()) return done(core::error_from_reply(reply.str));
      try {
        done(parse(reply));
      } catch (const Error& e) {
        done(e);
      }
    };
  }

  // answer, for a write that waited for replicas: when they fell short (or
  // WAIT failed), a write the library refused is answered as the refusal
  // it is, since it changed nothing; only a change is "done on the primary".
  template <class T, class Parse>
  static redis::ReplyHandler answer_replicated(Parse parse, Callback<T> done) {
    return [parse = std::move(parse), done = std::move(done)](std::error_code ec, Reply reply) {
      if (ec && reply.elements.size() == 1) {
        try {
          T own = parse(reply.elements.front());
          if (core::changed_nothing(own)) return done(std::move(own));
        } catch (const Error& refused) {
          return done(refused);
        }
        Error short_of = core::error_from_link(ec, reply.str);
        detail::ErrorAccess::set_word(short_of, core::Word::short_of_replicas);
        return done(std::move(short_of));
      }
      answer<T>(parse, done)(ec, std::move(reply));
    };
  }

  // Splits items into calls of at most kBatchMax, in order; done gets all
  // their results, or the first error.
  template <class T, class Item, class Send>
  void batched(std::span<const Item> items, Callback<std::vector<T>> done, Send send) {
    if (items.empty()) return answer_later(done, Result<std::vector<T>>(std::vector<T>{}));
    if (items.size() <= static_cast<std::size_t>(kBatchMax)) return send(items, std::move(done));
    const std::size_t n = (items.size() + kBatchMax - 1) / kBatchMax;
    auto g = FanIn<std::vector<T>, std::vector<T>>::make(
        n,
        [size = items.size()](std::vector<std::vector<T>> parts) {
          std::vector<T> out;
          out.reserve(size);
          for (auto& part : parts) out.insert(out.end(), part.begin(), part.end());
          return out;
        },
        std::move(done));
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = i * kBatchMax;
      send(items.subspan(at, std::min<std::size_t>(kBatchMax, items.size() - at)), g->part(i, g));
    }
  }

  // The library's MAXBODY when ours is not its default.
  void add_max_body(core::Command& cmd) const {
    if (opts.max_body != kLibraryMaxBody) {
      cmd.add("MAXBODY").add(static_cast<std::int64_t>(opts.max_body));
    }
  }

  // The link a call goes out on: the calling thread's shard (the answer
  // comes back on that thread), else the shard of the call's topic, the
  // same for every shard of a spread topic (so that the parts of one call
  // answer on one thread: FanIn).
  redis::Link& link(std::string_view route = {}) { return *links_[shard_for(route)]; }
  // The runtime shard whose thread link(route)'s answers run on.
  std::size_t shard_for(std::string_view route) const {
    if (links_.size() == 1) return 0;
    const int here = runtime->current_shard();
    if (here >= 0) return static_cast<std::size_t>(here);
    return runtime->shard_of(core::base_topic(route));
  }

  // The calls in flight. Their handlers share it: a handler that runs after
  // the destructor stopped waiting (wait_for_calls cannot wait everywhere)
  // counts down here, not in a freed Client.
  // Counting takes no lock: mu only when the destructor waits.
  struct Flight {
    std::atomic<std::size_t> calls{0};
    std::atomic<bool> waited{false};  // the destructor waits for calls to land
    std::mutex mu;                    // only for idle's waits and wake-ups
    std::condition_variable idle;
    void landed() {
      // (seq_cst, with wait_for_calls's: either this sees waited, or the
      // waiter sees the count at 0.)
      if (calls.fetch_sub(1) == 1 && waited.load()) {
        std::lock_guard lock(mu);
        idle.notify_all();
      }
    }
  };

  // A handler of a call in flight, counted until it has run: the destructor
  // waits for the count to reach 0, so that no answer (and no continuation
  // it starts: a layout read, then the call itself) runs on a Client being
  // destroyed. Every Redis call's handler goes through it.
  template <class F>
  auto counted(F handler) {
    flight_->calls.fetch_add(1, std::memory_order_relaxed);
    return [flight = flight_, handler = std::move(handler),
            sent = Sending::current()](auto&&... args) mutable {
      assert((sent == 0 || Sending::current() != sent) && "an answer ran before its call returned");
      (void)sent;
      struct Landed {
        Flight& f;
        ~Landed() { f.landed(); }
      } landed{*flight};
      handler(std::forward<decltype(args)>(args)...);
    };
  }
  // Waits (up to timeout) until no call is in flight; not on the runtime's
  // own threads, nor once they stopped (nothing would answer).
  void wait_for_calls(std::chrono::milliseconds timeout);
  // Closes the gate (what is posted to the shards touches the Client no
  // more), and ends the waits in progress with Errc::closed, each on its
  // shard.
  void close_shard_state();
  // Runs f on each wait in progress, on its shard's thread.
  void each_wait(const std::function<void(Waiter&)>& f);
  // Client::wait once the job's shard is known: listens where the job is
  // (its topic, or its shard) for it to finish, until timeout.
  void start_wait(const std::string& topic, const std::string& where, const std::string& id,
                  Millis timeout, Callback<std::optional<Job>> done);

  // A call refused before it went out (a bad topic, a body too large): its
  // callback gets the Error on a thread of the runtime, as every answer does.
  template <class T>
  void refuse(Callback<T>& done, const Error& e) {
    answer_later(done, Result<T>(e));
  }

  // Answers a call without asking Redis, on the runtime as any answer (never
  // on the caller's thread: its caller may hold a lock the callback takes).
  template <class T>
  void answer_later(Callback<T>& done, Result<T> r) {
    if (!done) return;
    const int here = runtime->current_shard();
    asio::post(shard_io(*runtime, here >= 0 ? static_cast<std::size_t>(here) : 0),
               [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
  }

  ClientOptions opts;
  bool replica_timeout_ok = true;  // a write may wait for replicas
  std::shared_ptr<Runtime> runtime;
  // What work on the runtime's shards may reach after the Client is gone (a
  // call posted from outside, a wait's timer, a watch's cancellation), held
  // by shared_ptr: the gate it passes before it touches the Client, and the
  // waits in progress, each on the shard its link answers on.
  struct ShardState {
    explicit ShardState(std::size_t shards) : waits(shards) {}
    Gate gate;
    // [shard]: the waits in progress there; touched only on its thread.
    // (Weak: a wait's timer holds it; a strong one here would be a cycle.)
    std::vector<std::unordered_map<const Waiter*, std::weak_ptr<Waiter>>> waits;
    std::atomic<bool> waits_ended{false};  // Client::end_waits was called
  };
  std::shared_ptr<ShardState> shard_state = std::make_shared<ShardState>(runtime->shards());

 private:
  std::vector<std::unique_ptr<redis::Link>> links_;
  std::shared_ptr<Flight> flight_ = std::make_shared<Flight>();
  // The layouts read: one cache per shard of the runtime, each touched only
  // on its shard's thread.
  struct LayoutCache {
    std::unordered_map<std::string, core::LayoutPtr, TopicHash, std::equal_to<>> by_topic;
    core::LayoutPtr find(std::string_view topic) const {
      const auto it = by_topic.find(topic);
      return it == by_topic.end() ? nullptr : it->second;
    }
    void keep(const std::string& topic, core::LayoutPtr layout) {
      by_topic[topic] = std::move(layout);
    }
  };
  std::vector<LayoutCache> layouts_;
};

}  // namespace redisched
