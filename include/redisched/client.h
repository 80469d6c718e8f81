// redisched::Client: every job operation of redisched, each one atomic call
// of the Redis Functions library (lua/redisched.lua).
//
// Threads: a Client runs on a Runtime (redisched/runtime.h): its own, of one
// thread, unless options.runtime shares one. It may be used from any number
// of threads at once. A call made on a thread of the runtime goes out on that
// thread's connections and its callback runs there; a call from any other
// thread goes out on its topic's shard. Callbacks run on a thread of the
// runtime and must not block; a synchronous call on a thread of the runtime
// is refused (Errc::invalid_argument: it would wait for itself).
//
// Errors: the synchronous calls throw redisched::Error (Errc::invalid_argument
// for refused arguments, Errc::connection when Redis is unreachable, ...).
// Outcomes that depend on the job's state (exists, not found, stale token)
// are values, not exceptions. The asynchronous calls never throw when made:
// every failure, a refused argument included, is their answer (the
// Result's Error, the future's exception, or thrown at co_await).
//
// Lifetime: when a Client is destroyed, its calls still in flight end with
// Errc::closed, and the destructor waits for their callbacks (up to
// command_timeout). On a runtime over the caller's own io_context, or when
// destroyed on a runtime thread, they run afterwards, so they must not use
// the Client.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "redisched/error.h"
#include "redisched/job.h"
#include "redisched/limits.h"

namespace redisched {

class Runtime;
namespace detail {
struct ClientAccess;  // the project's own access (src/core/client_access.h)
}

struct ClientOptions {
  // redis://[user:password@]host[:port][/db], rediss://... (TLS; query
  // parameters ca=/path/to/ca.pem, cert= and key= for a client certificate,
  // verify=0), or unix:///path[?db=N]. For a Redis Cluster, any primary's
  // URL; several, comma-separated, to find the cluster when one is down.
  // For Redis Sentinel, redis+sentinel://[user:password@]host[:port][,
  // host[:port]...]/service[/db] (sentinels on 26379 unless given; query
  // parameters sentinel_user and sentinel_password for their own AUTH): each
  // connection asks the sentinels for the primary, checks its ROLE, and asks
  // again when it is lost or answers READONLY (a failover).
  std::string redis_url = "redis://127.0.0.1:6379";
  // Every key is "<prefix>:{<topic>}:<name>".
  std::string prefix = "redisched";
  // Bodies larger than this are refused (bytes; the library's own limit,
  // which MAXBODY raises up to limits::kBodyMaxLimit).
  std::size_t max_body = static_cast<std::size_t>(limits::kBodyMaxDefault);
  // Pipelined connections to share the calls (at least 1).
  int connections = 1;
  // Coalescing: single puts, adds, acks and reserves of one job that are
  // queued one after another on a connection for the same topic go to Redis
  // as one batched call (putmany, ackmany, reserve of many), each caller
  // getting its own answer, in order. Nothing waits to be coalesced: a call
  // queued alone goes alone. Off: every call as itself.
  bool coalesce = true;
  // Count this client's puts, starts, acks, failures and lapses in each
  // topic's history (Client::history; library version 34): a call names
  // the topic's history key and adds one HINCRBY per kind it counts. Off:
  // calls name the eleven keys of version 33 and count nothing (history
  // and stats still read what others counted).
  bool history = true;
  // How long the constructor waits for the first connection.
  Millis connect_timeout{5000};
  // A call unanswered this long fails with Errc::timeout and the connection
  // is reopened. 0 = wait forever.
  Millis command_timeout{10000};
  // Reconnection backoff: doubles from min to max.
  Millis reconnect_min{50};
  Millis reconnect_max{2000};
  // The threads the Client runs on, shared with other Clients, Workers and
  // servers; each shard gets `connections` connections of its own. Null: a
  // runtime of one thread, the Client's own. With a runtime the caller runs
  // (make_runtime(io), redisched/asio.h), the constructor does not wait for Redis (the
  // io_context is not running yet): an unreachable Redis shows as the first
  // call's Errc::connection.
  std::shared_ptr<Runtime> runtime{};
  // Durability across a failover. A write of a job (put, add, put_many,
  // ack, ack_many, release, fail, remove, restore) answers once this many
  // replicas have it (Redis's WAIT, on the connection that wrote it), or
  // fails with Errc::timeout after replica_timeout: the write is then done
  // on the primary, but a failover may lose it. 0: answered when the
  // primary has it, Redis's own default (docs/scaling.md has both costs).
  int replicas = 0;              // 0..16
  Millis replica_timeout{1000};  // shorter than command_timeout
  // The same for some topics, over `replicas`.
  std::map<std::string, int, std::less<>> topic_replicas{};
};

template <class T>
using Callback = std::function<void(Result<T>)>;

// How an asynchronous call answers: its last argument, a completion token
// (as the calls of Boost.Asio and Boost.Redis take one).
//  - A Callback<T>, or any callable taking Result<T>: called on a thread of
//    the runtime, where it must not block.
//  - use_future, the default: the call returns a std::future<T>, whose
//    get() throws the Error.
//  - With redisched/asio.h, any Asio completion token: use_awaitable (co_await
//    it; the Error is thrown), deferred, a handler of (std::exception_ptr,
//    T), ... It completes on the token's executor.
// A token that starts the call later (deferred, an awaitable not yet
// awaited) reads the arguments then: the strings, spans and JobSpec they
// view must live until it starts.
struct use_future_t {};
inline constexpr use_future_t use_future{};

namespace detail {
// What Asio's completion tokens need: in redisched/asio.h.
template <class Token, class T>
struct AsioCompletion;

// A callback: called with the Result, returning nothing (Asio's deferred
// is callable too, and returns an operation).
template <class F, class T>
concept ResultCallback =
    std::invocable<F&, Result<T>> && std::is_void_v<std::invoke_result_t<F&, Result<T>>>;
}  // namespace detail

template <class Token, class T>
concept AnswerToken =
    !std::is_convertible_v<Token, std::string_view> &&
    (std::same_as<std::remove_cvref_t<Token>, use_future_t> ||
     detail::ResultCallback<std::remove_cvref_t<Token>, T> ||
     requires { requires detail::AsioCompletion<std::remove_cvref_t<Token>, T>::is_token; });

// A subscription to a topic's wake-up signal (Client::watch). It ends when
// cancelled or destroyed; it must not outlive its Client. Movable.
class Subscription {
 public:
  Subscription() = default;
  explicit Subscription(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
  ~Subscription() { cancel(); }
  Subscription(Subscription&& o) noexcept : cancel_(std::move(o.cancel_)) { o.cancel_ = nullptr; }
  Subscription& operator=(Subscription&& o) noexcept {
    if (this != &o) {
      cancel();
      cancel_ = std::move(o.cancel_);
      o.cancel_ = nullptr;
    }
    return *this;
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // No callback starts once it returns (one running on the runtime may
  // finish). Any thread.
  void cancel() {
    if (cancel_) std::exchange(cancel_, nullptr)();
  }
  explicit operator bool() const { return static_cast<bool>(cancel_); }

 private:
  std::function<void()> cancel_;
};

class Client {
 public:
  // Connects, and loads the Functions library when Redis lacks it or holds
  // an older version. Throws Error (Errc::connection) when the first
  // connection fails within connect_timeout, Errc::invalid_argument for a
  // malformed URL.
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientOptions& options() const noexcept;
  // The threads the Client runs on (options.runtime, or its own).
  Runtime& runtime() noexcept;

  // Topic names: 1..128 characters of A-Z a-z 0-9 _ - . (they end up in
  // keys, URLs and metric labels).
  static void validate_topic(std::string_view topic);

  // ---- synchronous
  PutOutcome put(std::string_view topic, const JobSpec& job);
  // Puts a job under a generated id ("<created ms>-<n>", unique in the
  // topic) and returns it. REQUIRES: job.id empty, job.mode create.
  std::string add(std::string_view topic, const JobSpec& job);
  // Up to 1000 jobs per call to Redis; larger spans are split.
  std::vector<PutOutcome> put_many(std::string_view topic, std::span<const JobSpec> jobs);
  // with_body false: the job with an empty body (library version 33), for
  // a reader of its state, progress or log.
  std::optional<Job> get(std::string_view topic, std::string_view id, bool with_body = true);
  // The job with Job::deps filled: each job it waits for (JobSpec::after)
  // and how it settled, as it now is.
  std::optional<Job> get_with_dependencies(std::string_view topic, std::string_view id);
  // Makes batch id of topic (the first call on the id), adds members to
  // it, seals it (library version 36; docs/flows.md, "Batches"): the batch
  // after the call (Job::batch). A job put with JobSpec::after naming topic
  // and id waits for it: once sealed with every member finished. Add a
  // member before its put, or put it with a keep: one that finished before
  // it was added counts only while its trace is kept (flows' rule).
  // Errc::invalid_argument: the id is a job's, or the batch is sealed or
  // finished and members were given.
  Job batch(std::string_view topic, std::string_view id, const BatchChange& change);
  // Removes a job in any state; false if there was none.
  bool remove(std::string_view topic, std::string_view id);
  // Removes jobs in any state, up to 1000 in one atomic call (more, or ids
  // on several shards of a spread topic, in one call per 1000 of a shard);
  // returns how many there were.
  int remove_many(std::string_view topic, std::span<const std::string> ids);
  // Hands out up to count (1..1000) ready jobs for their time-to-run (ttr
  // applies to jobs put without one; 0 = the default).
  ReserveResult reserve(std::string_view topic, int count = 1, Millis ttr = Millis{0});
  // The same, naming who reserves (ReserveOptions::worker).
  ReserveResult reserve(std::string_view topic, const ReserveOptions& options);
  // Reserves one job by its id, ahead of every other and whatever the
  // topic's pause and limits: a ready or delayed job, or a dead one (back
  // as kick brings it, attempts from 0, under a new token). ttr and worker
  // as reserve's. beanstalkd's reserve-job; library version 38.
  ReserveJobResult reserve_job(std::string_view topic, std::string_view id, Millis ttr = Millis{0},
                               std::string_view worker = {});
  // keep > 0 keeps the finished job (state done) that long (give at least
  // the Reservation's keep: its producer may wait for it).
  Outcome ack(std::string_view topic, std::string_view id, std::uint64_t token,
              Millis keep = Millis{0});
  // The same, with the handler's result, kept with the job (get and wait
  // return it as Job::result), and sent to the jobs waiting for it
  // (JobSpec::after). The job is kept for keep, its own JobSpec::keep, or
  // the topic's retry window, whichever is longest (library 38: a job may
  // still be on its way to wait for it); with a window of 0 and keep 0, the
  // result is refused unless a job waits. At most max_body bytes.
  Outcome ack(std::string_view topic, std::string_view id, std::uint64_t token, Millis keep,
              std::string_view result);
  // keep > 0 keeps the finished jobs (state done) that long, as ack does.
  std::vector<Outcome> ack_many(std::string_view topic,
                                std::span<const std::pair<std::string, std::uint64_t>> jobs,
                                Millis keep = Millis{0});
  // Puts a reserved job back (not counted as an attempt), due after delay,
  // optionally with a new priority.
  Outcome release(std::string_view topic, std::string_view id, std::uint64_t token,
                  Millis delay = Millis{0}, std::optional<std::int64_t> priority = std::nullopt);
  // The attempt failed: retry after the job's backoff (or after retry_delay
  // when given), or dead once its attempts are used up (at once with bury).
  // max_attempts, when given, becomes the job's own before that decision
  // (a handler's limit overriding the job's; get() then shows it).
  FailResult fail(std::string_view topic, std::string_view id, std::uint64_t token,
                  std::string_view error, bool bury = false,
                  std::optional<Millis> retry_delay = std::nullopt,
                  std::optional<int> max_attempts = std::nullopt);
  // Extends a reservation to now + ttr (0 = the job's own ttr).
  TouchResult touch(std::string_view topic, std::string_view id, std::uint64_t token,
                    Millis ttr = Millis{0});
  // What the handler of a reserved job reports: log lines and a progress
  // value, kept with the job (get() shows them as Job::log and
  // Job::progress) through its retries, until it is removed. Each call
  // rewrites the job's record, body included: report a few times a second
  // at most (a Worker gathers its handlers' reports). Does not extend the
  // reservation. Library version 31 (docs/redis-api.md, redisched_progress).
  Outcome report(std::string_view topic, std::string_view id, std::uint64_t token,
                 const JobReport& report);
  // Takes up to count ready jobs for good (at-most-once).
  ReserveResult pull(std::string_view topic, int count = 1);
  // Lapsed reservations back to ready or dead; at most limit of them.
  RequeueResult requeue(std::string_view topic, int limit = limits::kBatchMax);
  // Carries out the topic's outbox (its shards' too), the calls that hand
  // flows over between topics (JobSpec::after; docs/redis-api.md,
  // "Flows"): each entry's call made, then the entry deleted. Safe from
  // any number of processes at once. serve runs it when the sweep signal
  // says an outbox has entries (SweepSignal::Kind::outbox), and on every
  // topic that holds some when its signal may have been missed.
  MoveResult move_outbox(std::string_view topic);
  // The topics (a shard's: the topic it is part of) whose outbox holds
  // entries, by a SCAN of every primary: for a mover that did not hear the
  // signal (an application's own, started after entries were added).
  std::vector<std::string> outbox_topics();
  // A spread topic's counts are its shards' summed, with the totals it
  // counted itself before it was spread.
  TopicStats stats(std::string_view topic);
  // Jobs of one state, in the order they leave it; count 1..1000.
  ListPage list(std::string_view topic, JobState state, std::int64_t offset, int count,
                bool with_bodies = true);
  // The ids of the topic's jobs, of any state, that start with prefix (""
  // for all; the ids are compared byte by byte), a page at a time: cursor
  // "" first, then the page's. A page holds about count (1..1000) ids: it
  // holds fewer when its scan looked at 10 times as many jobs (1000 at
  // least) first, and may hold more (a small topic answers whole). Each job there from the first
  // page to the last is listed, once or more (HSCAN's guarantee); one put
  // or deleted meanwhile may be or not. Reads the jobs hash only.
  IdPage find_ids(std::string_view topic, std::string_view prefix, std::string_view cursor = "",
                  int count = 100);
  // A waiting (delayed or ready) job's priority and/or due time, changed
  // in place: its attempts, last error, history, progress and log stay (a
  // put with PutMode::replace starts them afresh). Outcome::ok, not_found,
  // or wrong_state for a reserved, dead or done job (left alone). Library
  // version 33.
  Outcome reschedule(std::string_view topic, std::string_view id, const RescheduleOptions& change);
  // The topic's history (library version 34): the minutes (at most 1441)
  // or hours (at most 745) from from_ms to to_ms, both included, that
  // counted anything, in time order; or HistoryStep::total, one row of the
  // totals since it began (from_ms and to_ms unused). A spread topic's rows
  // are the sums of its shards' and of what it counted itself before it
  // was spread. Counts what this Client and every caller
  // that names the history key did (docs/redis-api.md, redisched_history).
  std::vector<HistoryRow> history(std::string_view topic, HistoryStep step,
                                  std::int64_t from_ms = 0, std::int64_t to_ms = 0);
  // Dead jobs back to ready; returns how many were dead.
  int kick(std::string_view topic, std::span<const std::string> ids);
  int kick_all(std::string_view topic, int limit = limits::kBatchMax);
  // Delayed jobs due now, in place: their attempts, last error, history,
  // progress and log stay (a put with PutMode::replace starts them afresh).
  // Returns how many were delayed. Library version 32.
  int promote(std::string_view topic, std::span<const std::string> ids);
  // The first limit (1..10000) delayed jobs, in due order, due now as
  // promote() makes them (of each shard of a spread topic); call again
  // while left > 0.
  BatchResult promote_all(std::string_view topic, int limit = limits::kBatchMax);
  // Dead jobs that died before before_ms removed, the oldest first, at most
  // limit (1..10000) of each shard; call again while left > 0.
  BatchResult purge_dead(std::string_view topic, std::int64_t before_ms,
                         int limit = limits::kBatchMax);
  // A paused topic hands out nothing. True when the state changed.
  bool pause(std::string_view topic);
  // The same for duration (1 ms to limits::kDelayMax; 0: no end): the pause
  // ends by itself, whatever becomes of the caller (TopicStats::pause_end_ms
  // says when). A pause replaces the one before. Library version 38.
  bool pause(std::string_view topic, Millis duration);
  bool resume(std::string_view topic);
  // A topic's limits, held in Redis for all its workers together
  // (TopicLimits): set_limits replaces both (zeros: none) and returns them
  // as they now are; limits reads them.
  TopicLimits set_limits(std::string_view topic, const TopicLimits& limits);
  TopicLimits limits(std::string_view topic);
  // A topic's retry window (RetryWindow; 60 s unless set; 0 turns it off
  // and forgets the ids held). A spread topic's shards each hold theirs:
  // set on them all, read from the first (remembered: their sum).
  RetryWindow set_retry_window(std::string_view topic, Millis window);
  RetryWindow retry_window(std::string_view topic);
  // Rewrites what the topic (each shard, when spread) holds in an older
  // stored format as this library version writes it, in calls of `limit`
  // records and members (1..1000) until done. Safe beside every other call, and
  // beside other migrations of the topic (docs/redis-api.md, "Migrations").
  Migration migrate(std::string_view topic, int limit = limits::kBatchMax);
  // Puts back a job as get or list returned it, with its state, creation
  // time, attempts and last error (export/import). A reserved job comes
  // back ready, a done one is not restored (false). With replace, an
  // existing job of that id is overwritten; else false when it exists.
  bool restore(std::string_view topic, const Job& job, bool replace = false);
  // ---- one topic over many shards (docs/redis-api.md, "A topic over many
  // shards"). A topic lives in one Redis Cluster slot; spread over n shard
  // topics (each its own slot, placed on different primaries) it takes n
  // primaries' work. Every call above works on it as on any topic: a job
  // goes to the shard its id leads to (so get, delete, ack... stay one
  // call), reserve and pull take from the shards in turn, stats and list
  // cover them all. Limits and schedules are refused on a spread topic.
  // Spreads the topic over n shards (1..256; 1: its own keys again) and
  // returns their topics ("<topic>~<suffix>"). Only while it holds no jobs
  // (and no schedules or limits): Errc::invalid_argument otherwise.
  std::vector<std::string> set_shards(std::string_view topic, int n);
  // The topics of its shards, none when it is not spread.
  std::vector<std::string> shards(std::string_view topic);
  // Every topic that has ever had a job (SCAN; for tools, not hot paths).
  std::vector<std::string> topics();
  // ---- recurring jobs (ScheduleSpec; docs/redis-api.md, "Recurring jobs")
  // Creates or changes a schedule (name: 1..128 of A-Z a-z 0-9 _ - .),
  // and returns it as stored: its next tick computed from now (Redis's
  // clock), or kept when the schedule had the same rule and ran (so that
  // setting it again at every start changes nothing). A change keeps the
  // last tick put: no tick is put twice.
  Schedule set_schedule(std::string_view topic, std::string_view name, const ScheduleSpec& spec);
  ScheduleList schedules(std::string_view topic);
  // False when there was no such schedule. The jobs it put stay.
  bool remove_schedule(std::string_view topic, std::string_view name);
  // A paused schedule puts nothing; resumed, it ticks from now on (the
  // ticks it missed are not caught up). Outcome::ok when the state
  // changed, not_found without such a schedule, wrong_state when it
  // already was.
  Outcome pause_schedule(std::string_view topic, std::string_view name);
  Outcome resume_schedule(std::string_view topic, std::string_view name);
  // Listens for changes of a topic's schedules (their names), as watch().
  Subscription watch_schedules(std::string_view topic,
                               std::function<void(const std::string& name)> on_change,
                               std::function<void()> on_ready = {});

  // Waits until the job has finished (done, or dead) and returns it, with
  // its result or last error; at timeout returns it as it is then (state
  // delayed, ready or reserved). nullopt: there is no such job (never put,
  // removed, or finished without being kept: give JobSpec::keep to wait for
  // a job). Woken by the topic's finished signal (docs/redis-api.md,
  // "Waiting for a job"), not by polling.
  std::optional<Job> wait(std::string_view topic, std::string_view id, Millis timeout);
  // Ends every wait in progress as if its timeout had come (each answers
  // with its job as it is), and every wait started from now on at once:
  // for a server that drains. Any thread.
  void end_waits();
  // The Redis server's clock.
  std::int64_t now_ms();
  // Listens to a topic's wake-up signal (docs/redis-api.md, "Wake-up
  // signal"): on_signal(due_ms) each time a call made a job of the topic
  // ready or scheduled one (due_ms: when it is due, maybe already past), and
  // on_ready() once the subscription is in place (a spread topic's: every
  // shard's, and again when its shards change) and again after every
  // reconnection (signals sent meanwhile were lost: look again). Callbacks
  // run on a thread of the runtime and must not block. Any thread.
  Subscription watch(std::string_view topic, std::function<void(std::int64_t due_ms)> on_signal,
                     std::function<void()> on_ready = {});

  // Listens for reports of a topic's jobs (report(), a Worker's
  // JobContext::log and progress): on_report(id) once each is stored,
  // on_ready as watch()'s. A spread topic's shards are followed as
  // watch()'s are. Any thread.
  Subscription watch_reports(std::string_view topic,
                             std::function<void(const std::string& id)> on_report,
                             std::function<void()> on_ready = {});

  // Listens for a topic's outbox signal (library version 36; docs/flows.md):
  // on_signal each time its outbox (a spread topic's: a shard's) gets a
  // first entry, for a mover (move_outbox), which reads until it finds it
  // empty; on_ready as watch()'s. Delivered by the node that holds the
  // topic, where the sweep signal crosses a Redis Cluster's bus. Any thread.
  Subscription watch_outbox(std::string_view topic, std::function<void()> on_signal,
                            std::function<void()> on_ready = {});

  // Listens to the sweep signal (docs/redis-api.md, "Sweep signal"), one
  // channel for every topic: on_signal when a call gave a topic a
  // reservation that lapses before its others, or a schedule. on_ready as
  // watch()'s: once subscribed, and after every reconnection (signals sent
  // meanwhile were lost: look at every topic again). Any thread.
  Subscription watch_sweep(std::function<void(const SweepSignal&)> on_signal,
                           std::function<void()> on_ready = {});

  // The version of the Functions library Redis holds (redisched_version):
  // one read-only call that says Redis answers and the library is there.
  int library_version();

  // The worker registry (docs/redis-api.md, "the worker registry"): who
  // works on which topics, and on which jobs now. A Worker keeps its own
  // entry (WorkerOptions::beat_interval); beat and leave are for other
  // worker loops. beat registers entry, or replaces what it said before,
  // for ttl (1 s .. 1 h): true when registered anew (new, or its entry had
  // expired). leave deletes an entry at once: false when there was none.
  // workers lists the entries alive, in id order.
  bool beat(const WorkerEntry& entry, Millis ttl);
  bool leave(std::string_view worker_id);
  std::vector<WorkerEntry> workers();
  // The nodes that hold keys (one; a cluster's primaries), each with its
  // INFO, for what an operator watches (memory, clients, ops/s,
  // persistence). Needs INFO and CLIENT in the user's ACL.
  std::vector<RedisNode> redis_nodes();

  // ---- asynchronous: many calls in flight on the pipelined connections.
  // Each synchronous call above has an asynchronous form with the same
  // arguments and a completion token last (AnswerToken, above: a Callback,
  // use_future by default, or an Asio token such as use_awaitable). The
  // form with a Callback<T> does the work; the others are adapters of it
  // (redisched/detail/async_calls.h). Calls on one topic run in the order
  // made from one thread. They do not throw: a refused argument (an invalid
  // topic, a body over max_body) and everything Redis refuses arrive as the
  // Result's Error (the future's or the awaitable's exception).
  void set_shards_async(std::string_view topic, int n, Callback<std::vector<std::string>> done);
  template <AnswerToken<std::vector<std::string>> Token = use_future_t>
  auto set_shards_async(std::string_view topic, int n, Token&& completion = {});
  void shards_async(std::string_view topic, Callback<std::vector<std::string>> done);
  template <AnswerToken<std::vector<std::string>> Token = use_future_t>
  auto shards_async(std::string_view topic, Token&& completion = {});
  void put_async(std::string_view topic, const JobSpec& job, Callback<PutOutcome> done);
  template <AnswerToken<PutOutcome> Token = use_future_t>
  auto put_async(std::string_view topic, const JobSpec& job, Token&& completion = {});
  void add_async(std::string_view topic, const JobSpec& job, Callback<std::string> done);
  template <AnswerToken<std::string> Token = use_future_t>
  auto add_async(std::string_view topic, const JobSpec& job, Token&& completion = {});
  void put_many_async(std::string_view topic, std::span<const JobSpec> jobs,
                      Callback<std::vector<PutOutcome>> done);
  template <AnswerToken<std::vector<PutOutcome>> Token = use_future_t>
  auto put_many_async(std::string_view topic, std::span<const JobSpec> jobs,
                      Token&& completion = {});
  void get_async(std::string_view topic, std::string_view id, bool with_body,
                 Callback<std::optional<Job>> done);
  void get_async(std::string_view topic, std::string_view id, Callback<std::optional<Job>> done) {
    get_async(topic, id, true, std::move(done));
  }
  template <AnswerToken<std::optional<Job>> Token = use_future_t>
  auto get_async(std::string_view topic, std::string_view id, Token&& completion = {});
  template <AnswerToken<std::optional<Job>> Token = use_future_t>
  auto get_async(std::string_view topic, std::string_view id, bool with_body,
                 Token&& completion = {});
  void remove_async(std::string_view topic, std::string_view id, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto remove_async(std::string_view topic, std::string_view id, Token&& completion = {});
  void reserve_async(std::string_view topic, int count, Millis ttr, Callback<ReserveResult> done);
  template <AnswerToken<ReserveResult> Token = use_future_t>
  auto reserve_async(std::string_view topic, int count = 1, Millis ttr = Millis{0},
                     Token&& completion = {});
  void reserve_async(std::string_view topic, const ReserveOptions& options,
                     Callback<ReserveResult> done);
  template <AnswerToken<ReserveResult> Token = use_future_t>
  auto reserve_async(std::string_view topic, const ReserveOptions& options,
                     Token&& completion = {});
  void reserve_job_async(std::string_view topic, std::string_view id, Millis ttr,
                         std::string_view worker, Callback<ReserveJobResult> done);
  template <AnswerToken<ReserveJobResult> Token = use_future_t>
  auto reserve_job_async(std::string_view topic, std::string_view id, Millis ttr = Millis{0},
                         std::string_view worker = {}, Token&& completion = {});
  void ack_async(std::string_view topic, std::string_view id, std::uint64_t token, Millis keep,
                 Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                 Millis keep = Millis{0}, Token&& completion = {});
  void ack_async(std::string_view topic, std::string_view id, std::uint64_t token, Millis keep,
                 std::string_view result, Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto ack_async(std::string_view topic, std::string_view id, std::uint64_t token, Millis keep,
                 std::string_view result, Token&& completion = {});
  void ack_many_async(std::string_view topic,
                      std::span<const std::pair<std::string, std::uint64_t>> jobs, Millis keep,
                      Callback<std::vector<Outcome>> done);
  template <AnswerToken<std::vector<Outcome>> Token = use_future_t>
  auto ack_many_async(std::string_view topic,
                      std::span<const std::pair<std::string, std::uint64_t>> jobs,
                      Millis keep = Millis{0}, Token&& completion = {});
  void release_async(std::string_view topic, std::string_view id, std::uint64_t token, Millis delay,
                     std::optional<std::int64_t> priority, Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto release_async(std::string_view topic, std::string_view id, std::uint64_t token,
                     Millis delay = Millis{0}, std::optional<std::int64_t> priority = std::nullopt,
                     Token&& completion = {});
  void fail_async(std::string_view topic, std::string_view id, std::uint64_t token,
                  std::string_view error, bool bury, std::optional<Millis> retry_delay,
                  std::optional<int> max_attempts, Callback<FailResult> done);
  template <AnswerToken<FailResult> Token = use_future_t>
  auto fail_async(std::string_view topic, std::string_view id, std::uint64_t token,
                  std::string_view error, bool bury = false,
                  std::optional<Millis> retry_delay = std::nullopt,
                  std::optional<int> max_attempts = std::nullopt, Token&& completion = {});
  void touch_async(std::string_view topic, std::string_view id, std::uint64_t token, Millis ttr,
                   Callback<TouchResult> done);
  template <AnswerToken<TouchResult> Token = use_future_t>
  auto touch_async(std::string_view topic, std::string_view id, std::uint64_t token,
                   Millis ttr = Millis{0}, Token&& completion = {});
  void report_async(std::string_view topic, std::string_view id, std::uint64_t token,
                    const JobReport& report, Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto report_async(std::string_view topic, std::string_view id, std::uint64_t token,
                    const JobReport& report, Token&& completion = {});
  void pull_async(std::string_view topic, int count, Callback<ReserveResult> done);
  template <AnswerToken<ReserveResult> Token = use_future_t>
  auto pull_async(std::string_view topic, int count = 1, Token&& completion = {});
  void requeue_async(std::string_view topic, int limit, Callback<RequeueResult> done);
  void move_outbox_async(std::string_view topic, Callback<MoveResult> done);
  template <AnswerToken<MoveResult> Token = use_future_t>
  auto move_outbox_async(std::string_view topic, Token&& completion = {});
  void outbox_topics_async(Callback<std::vector<std::string>> done);
  template <AnswerToken<std::vector<std::string>> Token = use_future_t>
  auto outbox_topics_async(Token&& completion = {});
  void get_with_dependencies_async(std::string_view topic, std::string_view id,
                                   Callback<std::optional<Job>> done);
  void batch_async(std::string_view topic, std::string_view id, const BatchChange& change,
                   Callback<Job> done);
  template <AnswerToken<Job> Token = use_future_t>
  auto batch_async(std::string_view topic, std::string_view id, const BatchChange& change,
                   Token&& completion = {});
  template <AnswerToken<std::optional<Job>> Token = use_future_t>
  auto get_with_dependencies_async(std::string_view topic, std::string_view id,
                                   Token&& completion = {});
  template <AnswerToken<RequeueResult> Token = use_future_t>
  auto requeue_async(std::string_view topic, int limit = limits::kBatchMax,
                     Token&& completion = {});
  void stats_async(std::string_view topic, Callback<TopicStats> done);
  template <AnswerToken<TopicStats> Token = use_future_t>
  auto stats_async(std::string_view topic, Token&& completion = {});
  void list_async(std::string_view topic, JobState state, std::int64_t offset, int count,
                  bool with_bodies, Callback<ListPage> done);
  template <AnswerToken<ListPage> Token = use_future_t>
  auto list_async(std::string_view topic, JobState state, std::int64_t offset, int count,
                  bool with_bodies = true, Token&& completion = {});
  void find_ids_async(std::string_view topic, std::string_view prefix, std::string_view cursor,
                      int count, Callback<IdPage> done);
  template <AnswerToken<IdPage> Token = use_future_t>
  auto find_ids_async(std::string_view topic, std::string_view prefix, std::string_view cursor,
                      int count, Token&& completion = {});
  void reschedule_async(std::string_view topic, std::string_view id,
                        const RescheduleOptions& change, Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto reschedule_async(std::string_view topic, std::string_view id,
                        const RescheduleOptions& change, Token&& completion = {});
  void history_async(std::string_view topic, HistoryStep step, std::int64_t from_ms,
                     std::int64_t to_ms, Callback<std::vector<HistoryRow>> done);
  template <AnswerToken<std::vector<HistoryRow>> Token = use_future_t>
  auto history_async(std::string_view topic, HistoryStep step, std::int64_t from_ms,
                     std::int64_t to_ms, Token&& completion = {});
  void topics_async(Callback<std::vector<std::string>> done);
  template <AnswerToken<std::vector<std::string>> Token = use_future_t>
  auto topics_async(Token&& completion = {});
  void restore_async(std::string_view topic, const Job& job, bool replace, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto restore_async(std::string_view topic, const Job& job, bool replace = false,
                     Token&& completion = {});
  void kick_async(std::string_view topic, std::span<const std::string> ids, Callback<int> done);
  void remove_many_async(std::string_view topic, std::span<const std::string> ids,
                         Callback<int> done);
  template <AnswerToken<int> Token = use_future_t>
  auto remove_many_async(std::string_view topic, std::span<const std::string> ids,
                         Token&& completion = {});
  template <AnswerToken<int> Token = use_future_t>
  auto kick_async(std::string_view topic, std::span<const std::string> ids,
                  Token&& completion = {});
  void kick_all_async(std::string_view topic, int limit, Callback<int> done);
  template <AnswerToken<int> Token = use_future_t>
  auto kick_all_async(std::string_view topic, int limit = limits::kBatchMax,
                      Token&& completion = {});
  void promote_async(std::string_view topic, std::span<const std::string> ids, Callback<int> done);
  template <AnswerToken<int> Token = use_future_t>
  auto promote_async(std::string_view topic, std::span<const std::string> ids,
                     Token&& completion = {});
  void promote_all_async(std::string_view topic, int limit, Callback<BatchResult> done);
  template <AnswerToken<BatchResult> Token = use_future_t>
  auto promote_all_async(std::string_view topic, int limit = limits::kBatchMax,
                         Token&& completion = {});
  void purge_dead_async(std::string_view topic, std::int64_t before_ms, int limit,
                        Callback<BatchResult> done);
  template <AnswerToken<BatchResult> Token = use_future_t>
  auto purge_dead_async(std::string_view topic, std::int64_t before_ms,
                        int limit = limits::kBatchMax, Token&& completion = {});
  void library_version_async(Callback<int> done);
  template <AnswerToken<int> Token = use_future_t>
  auto library_version_async(Token&& completion = {});
  void now_ms_async(Callback<std::int64_t> done);
  template <AnswerToken<std::int64_t> Token = use_future_t>
  auto now_ms_async(Token&& completion = {});
  void beat_async(const WorkerEntry& entry, Millis ttl, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto beat_async(const WorkerEntry& entry, Millis ttl, Token&& completion = {});
  void leave_async(std::string_view worker_id, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto leave_async(std::string_view worker_id, Token&& completion = {});
  void workers_async(Callback<std::vector<WorkerEntry>> done);
  template <AnswerToken<std::vector<WorkerEntry>> Token = use_future_t>
  auto workers_async(Token&& completion = {});
  void redis_nodes_async(Callback<std::vector<RedisNode>> done);
  template <AnswerToken<std::vector<RedisNode>> Token = use_future_t>
  auto redis_nodes_async(Token&& completion = {});
  void pause_async(std::string_view topic, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto pause_async(std::string_view topic, Token&& completion = {});
  void pause_async(std::string_view topic, Millis duration, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto pause_async(std::string_view topic, Millis duration, Token&& completion = {});
  void resume_async(std::string_view topic, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto resume_async(std::string_view topic, Token&& completion = {});
  void set_limits_async(std::string_view topic, const TopicLimits& limits,
                        Callback<TopicLimits> done);
  template <AnswerToken<TopicLimits> Token = use_future_t>
  auto set_limits_async(std::string_view topic, const TopicLimits& limits, Token&& completion = {});
  void limits_async(std::string_view topic, Callback<TopicLimits> done);
  template <AnswerToken<TopicLimits> Token = use_future_t>
  auto limits_async(std::string_view topic, Token&& completion = {});
  void set_retry_window_async(std::string_view topic, Millis window, Callback<RetryWindow> done);
  template <AnswerToken<RetryWindow> Token = use_future_t>
  auto set_retry_window_async(std::string_view topic, Millis window, Token&& completion = {});
  void retry_window_async(std::string_view topic, Callback<RetryWindow> done);
  template <AnswerToken<RetryWindow> Token = use_future_t>
  auto retry_window_async(std::string_view topic, Token&& completion = {});
  void migrate_async(std::string_view topic, int limit, Callback<Migration> done);
  template <AnswerToken<Migration> Token = use_future_t>
  auto migrate_async(std::string_view topic, int limit = limits::kBatchMax,
                     Token&& completion = {});
  void set_schedule_async(std::string_view topic, std::string_view name, const ScheduleSpec& spec,
                          Callback<Schedule> done);
  template <AnswerToken<Schedule> Token = use_future_t>
  auto set_schedule_async(std::string_view topic, std::string_view name, const ScheduleSpec& spec,
                          Token&& completion = {});
  void schedules_async(std::string_view topic, Callback<ScheduleList> done);
  template <AnswerToken<ScheduleList> Token = use_future_t>
  auto schedules_async(std::string_view topic, Token&& completion = {});
  void remove_schedule_async(std::string_view topic, std::string_view name, Callback<bool> done);
  template <AnswerToken<bool> Token = use_future_t>
  auto remove_schedule_async(std::string_view topic, std::string_view name,
                             Token&& completion = {});
  void pause_schedule_async(std::string_view topic, std::string_view name, Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto pause_schedule_async(std::string_view topic, std::string_view name, Token&& completion = {});
  void resume_schedule_async(std::string_view topic, std::string_view name, Callback<Outcome> done);
  template <AnswerToken<Outcome> Token = use_future_t>
  auto resume_schedule_async(std::string_view topic, std::string_view name,
                             Token&& completion = {});
  void wait_async(std::string_view topic, std::string_view id, Millis timeout,
                  Callback<std::optional<Job>> done);
  template <AnswerToken<std::optional<Job>> Token = use_future_t>
  auto wait_async(std::string_view topic, std::string_view id, Millis timeout,
                  Token&& completion = {});

 private:
  friend struct detail::ClientAccess;
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace redisched

#include "redisched/detail/async_calls.h"  // IWYU pragma: export
