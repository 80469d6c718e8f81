// The Client's insides, shared by the files that implement its calls
// (client.cpp: jobs; schedules.cpp: recurring jobs). Private to core.
#pragma once

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "core/coalesce.h"
#include "core/codec.h"
#include "redis/connection.h"
#include "redisched/client.h"
#include "redisched/runtime.h"

namespace redisched {
namespace client_detail {

namespace asio = boost::asio;
using redis::Reply;

constexpr int kBatchMax = 1000;  // the library's limit of jobs per call
constexpr const char* kBadReplicaTimeout =
    "replica_timeout must be at least 1 ms and shorter than command_timeout";
constexpr std::size_t kLibraryMaxBody = 1 << 20;  // the library's default MAXBODY

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

// A callback that fulfils the returned future.
template <class T>
std::pair<Callback<T>, std::future<T>> future_callback() {
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  Callback<T> cb = [promise](Result<T> r) {
    if (r.ok()) {
      promise->set_value(std::move(r).value());
    } else {
      promise->set_exception(std::make_exception_ptr(r.error()));
    }
  };
  return {std::move(cb), std::move(future)};
}

template <class T, class Start>
std::future<T> as_future(Start&& start) {
  auto [cb, future] = future_callback<T>();
  start(std::move(cb));
  return std::move(future);
}

// Gathers the results of the chunks of a batch, which complete in order on
// one thread of the runtime (one topic, one connection), into one callback.
template <class T>
struct Gather {
  std::vector<T> out;
  size_t pending = 0;
  bool failed = false;
  Callback<std::vector<T>> done;
};

struct Waiter;  // client.cpp: one Client::wait

}  // namespace client_detail

// (A private header, read only by the Client's own files.)
using namespace client_detail;  // NOLINT(google-build-using-namespace)

class Client::Impl {
 public:
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
      links_.push_back(redis::make_link(runtime->shard(i), config, opts.connections, seeds));
    }
  }

  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  core::Command fcall(std::string_view op, std::string_view topic) const {
    core::check_topic(topic);
    core::Command cmd;
    cmd.fcall(op, opts.prefix, topic);
    return cmd;
  }

  // The start of every call on a reservation: ... id token.
  core::Command held(std::string_view op, std::string_view topic, std::string_view id,
                     std::uint64_t token) const {
    auto cmd = fcall(op, topic);
    cmd.add(id).add(static_cast<std::int64_t>(token));
    return cmd;
  }

  // Sends cmd; parse turns the reply into T (or throws Error).
  template <class T, class Parse>
  void call(std::string_view route, const core::Command& cmd, Parse parse, Callback<T> done) {
    std::string resp;
    cmd.encode(resp);
    link(route).send(route, std::move(resp), answer<T>(std::move(parse), std::move(done)));
  }

  // call, for a write of a job's state: with ClientOptions::replicas (or
  // the topic's own), answered once that many replicas have it (WAIT).
  // replicas: the call's own count, over those.
  template <class T, class Parse>
  void call_write(std::string_view topic, const core::Command& cmd, Parse parse, Callback<T> done,
                  std::optional<int> own_replicas = std::nullopt) {
    const int replicas = own_replicas.value_or(replicas_for(topic));
    if (replicas == 0) return call<T>(topic, cmd, std::move(parse), std::move(done));
    if (!replica_timeout_ok) return refuse(done, Error(Errc::invalid_argument, kBadReplicaTimeout));
    std::string resp;
    cmd.encode(resp);
    link(topic).send_replicated(topic, std::move(resp), replicas, opts.replica_timeout,
                                answer<T>(std::move(parse), std::move(done)));
  }

  // call_write, for a call the pipeline may coalesce with calls of its
  // kind queued beside it (core/coalesce.h): single is the call alone, part
  // and tail its words in a batched call. A call the library would refuse
  // (!takes), or that waits for replicas, goes alone (own_replicas 0: a
  // call that writes no job's state).
  template <class T, class Parse>
  void call_coalescable(std::string_view topic, const redis::BatchKind& kind, bool takes,
                        const core::Command& single, const core::Command& part,
                        const core::Command& tail, Parse parse, Callback<T> done,
                        std::optional<int> own_replicas = std::nullopt) {
    const int replicas = own_replicas.value_or(replicas_for(topic));
    if (!opts.coalesce || !takes || replicas > 0) {
      return call_write<T>(topic, single, std::move(parse), std::move(done), replicas);
    }
    link(topic).send_batchable(topic, core::batchable(kind, opts.prefix, topic, single, part, tail),
                               answer<T>(std::move(parse), std::move(done)));
  }

  int replicas_for(std::string_view topic) const {
    if (opts.topic_replicas.empty()) return opts.replicas;
    const auto it = opts.topic_replicas.find(topic);
    return it != opts.topic_replicas.end() ? it->second : opts.replicas;
  }

  // The same, to one node of the link (commands every node must run).
  template <class T, class Parse>
  void call_node(std::size_t node, const core::Command& cmd, Parse parse, Callback<T> done) {
    std::string resp;
    cmd.encode(resp);
    link().send_to_node(node, std::move(resp), answer<T>(std::move(parse), std::move(done)));
  }

  // Turns the link's answer into done's Result: a transport failure, an
  // error reply (core::error_from_reply), or parse's value or Error.
  template <class T, class Parse>
  static redis::ReplyHandler answer(Parse parse, Callback<T> done) {
    return [parse = std::move(parse), done = std::move(done)](std::error_code ec, Reply reply) {
      if (ec) return done(Error(static_cast<Errc>(ec.value()), reply.str));
      if (reply.is_error()) return done(core::error_from_reply(reply.str));
      try {
        done(parse(reply));
      } catch (const Error& e) {
        done(e);
      }
    };
  }

  // Splits items into calls of at most kBatchMax, in order; done gets all
  // their results, or the first error.
  template <class T, class Item, class Send>
  void batched(std::span<const Item> items, Callback<std::vector<T>> done, Send send) {
    if (items.empty()) return done(std::vector<T>{});
    auto g = std::make_shared<Gather<T>>();
    g->done = std::move(done);
    g->pending = (items.size() + kBatchMax - 1) / kBatchMax;
    g->out.reserve(items.size());
    for (size_t at = 0; at < items.size(); at += kBatchMax) {
      send(items.subspan(at, std::min<size_t>(kBatchMax, items.size() - at)),
           Callback<std::vector<T>>([g](Result<std::vector<T>> r) {
             if (g->failed) return;
             if (!r.ok()) {
               g->failed = true;
               return g->done(r.error());
             }
             auto& part = r.value();
             g->out.insert(g->out.end(), part.begin(), part.end());
             if (--g->pending == 0) g->done(std::move(g->out));
           }));
    }
  }

  // The library's MAXBODY when ours is not its default.
  void add_max_body(core::Command& cmd) const {
    if (opts.max_body != kLibraryMaxBody) {
      cmd.add("MAXBODY").add(static_cast<std::int64_t>(opts.max_body));
    }
  }
  core::Command max_body_tail() const {
    core::Command tail;
    add_max_body(tail);
    return tail;
  }

  // The link a call goes out on: the calling thread's shard (the answer
  // comes back on that thread), else the shard of the call's topic.
  redis::Link& link(std::string_view route = {}) {
    if (links_.size() == 1) return *links_.front();
    const int here = runtime->current_shard();
    return *links_[here >= 0 ? static_cast<std::size_t>(here) : runtime->shard_of(route)];
  }

  // A call refused before it went out (a bad topic, a body too large): its
  // callback gets the Error on a thread of the runtime, as every answer does.
  template <class T>
  void refuse(Callback<T>& done, const Error& e) {
    if (!done) return;
    const int here = runtime->current_shard();
    asio::post(runtime->shard(here >= 0 ? static_cast<std::size_t>(here) : 0),
               [done = std::move(done), e] { done(e); });
  }

  ClientOptions opts;
  bool replica_timeout_ok = true;  // a write may wait for replicas
  std::shared_ptr<Runtime> runtime;
  std::mutex waiters_mu;
  std::unordered_set<std::shared_ptr<client_detail::Waiter>> waiters;  // Client::wait in progress

 private:
  std::vector<std::unique_ptr<redis::Link>> links_;
};

}  // namespace redisched

// Every operation: the callback form does the work; the future and
// synchronous forms wrap it.
#define REDISCHED_WRAP(T, name, params, args)                                       \
  std::future<T> Client::name##_async params {                                      \
    return client_detail::as_future<T>([&](Callback<T> cb) { name##_async args; }); \
  }                                                                                 \
  T Client::name params {                                                           \
    return client_detail::wait_for<T>(*impl_->runtime,                              \
                                      [&](Callback<T> cb) { name##_async args; });  \
  }
