// The one table of the Client's calls to the Functions library: each
// operation declared once, with its function, where it goes, whether it
// writes a job (and so waits for replicas when asked), whether it coalesces,
// what it checks, its words and its reply. Client::Impl::run (client_impl.h)
// is the one dispatcher: it checks, routes, encodes, sends, decodes and
// refuses. docs/redis-api.md, "The C++ Client's calls", quotes the table.
//
// Adding an operation: one struct here, its encode and decode in
// operations.cpp, and its public call in client.h / client.cpp, a line that
// hands its arguments to run.
//
// An operation is a struct with:
//   function       the library function, without "redisched_"
//   calls          the Client's calls that make it (names that differ from
//                  the function's are mapped here and nowhere else)
//   route          Route (below)
//   job_write      waits for ClientOptions::replicas (or the job's, the
//                  topic's) when they are asked for
//   confirms       a job_write whose refusal `exists` vouches for a write
//                  made before (put): sends CONFIRM when it waits for
//                  replicas, so that WAIT covers that write too
//   reads_history  names the topic's history key even when
//                  ClientOptions::history is off
//   max_body       ends in MAXBODY when ClientOptions::max_body is not the
//                  library's default (or max_body(a): when a says so)
//   Args, Value    what the caller gives, what the caller gets
//   encode(cmd, a) the words after the keys
//   decode(r)      the reply as Value (or throws Error); decode(r, a) when
//                  it needs the arguments
// and, as its route or kind needs:
//   check(a, o)    refuses arguments before anything goes out (throws)
//   settled(a)     an answer without asking Redis (a std::optional<Value>)
//   id(a)          Route::job: the job id that picks the shard
//   place(a, l)    Route::job: sets what depends on the layout (add's id)
//   merge(parts)   Route::every_shard: one Value of the shards' (in order)
//   stale(v, l)    Route::every_shard: the answer says the layout changed
//   Item, items(a), item_id(item), replicas(item), Each, finish(eaches)
//                  Route::jobs: the jobs, the id of each, each one's own
//                  replicas; encode(cmd, chunk, a) and decode(r, n) of a
//                  call on n of them give one Each per job (in order), and
//                  finish the caller's Value of all
//                  Route::take: Args::count, how many at most; Route::pages:
//                  Args::offset and Args::count, over the shards in turn
//   kind(), takes(a), part(cmd, a), tail(cmd, a)
//                  coalescing (core/coalesce.h): the batched call's kind,
//                  whether this call may join one, its words in it, and the
//                  call-wide words every joined call shares
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/codec.h"
#include "core/shards.h"
#include "redis/batch.h"
#include "redisched/client.h"

namespace redisched {
enum class TickOutcome;  // core/client_access.h
}

namespace redisched::core::op {

using redis::Reply;

enum class Route {
  topic,        // the topic's own keys (a spread topic answers SHARDED)
  job,          // the topic, or the shard that holds the job id
  jobs,         // many jobs: each shard's share, in calls of at most kBatchMax
  every_shard,  // the topic, or each of its shards at once, answers merged
  take,         // the topic, or its shards in turn until count came
  pages,        // the topic, or its shards one after another (offset over all)
  registry,     // the worker registry's own keys, no topic
  slot,         // the keys of the topic named, a shard's own too (a mover's outbox)
};

// Defaults: a read of one topic that goes as itself.
struct Read {
  static constexpr Route route = Route::topic;
  static constexpr bool reads_history = false;
  static constexpr bool job_write = false;
  static constexpr bool confirms = false;
  static constexpr bool max_body = false;
  static constexpr bool coalesces = false;
};
struct JobWrite : Read {
  static constexpr Route route = Route::job;
  static constexpr bool job_write = true;
};

// ---------------------------------------------------------------- put

struct Put : JobWrite {
  static constexpr std::string_view function = "put";
  static constexpr std::string_view calls = "put";
  static constexpr bool confirms = true;
  static constexpr bool max_body = true;
  static constexpr bool coalesces = true;
  using Args = JobSpec;
  using Value = PutOutcome;
  static void check(const Args& a, const ClientOptions& o);
  static std::string_view id(const Args& a) { return a.id; }
  static std::optional<int> replicas(const Args& a) { return a.replicas; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static const redis::BatchKind& kind();
  static bool takes(const Args& a);
  static void part(Command& cmd, const Args& a);
  static void tail(Command& /*cmd*/, const Args& /*a*/) {}
};

// put with an id made for it (Client::add): "*", or on a spread topic
// one made here, so that it leads to the shard it is put on.
struct Add : Put {
  static constexpr std::string_view calls = "add";
  using Value = std::string;
  static void check(const Args& a, const ClientOptions& o);
  static void place(Args& a, const Layout& l);
  // "*" only: an id made here goes alone.
  static bool takes(const Args& a) { return a.id == "*" && Put::takes(a); }
  static Value decode(const Reply& r, const Args& a);
};

struct PutMany : JobWrite {
  static constexpr std::string_view function = "putmany";
  static constexpr std::string_view calls = "put_many";
  static constexpr Route route = Route::jobs;
  static constexpr bool confirms = true;
  static constexpr bool max_body = true;
  struct Args {
    std::vector<JobSpec> jobs;
  };
  using Item = JobSpec;
  using Each = PutOutcome;
  using Value = std::vector<PutOutcome>;
  static void check(const Args& a, const ClientOptions& o);
  static std::span<const Item> items(const Args& a) { return a.jobs; }
  static const std::string& item_id(const Item& job) { return job.id; }
  static std::optional<int> replicas(const Item& job) { return job.replicas; }
  static void encode(Command& cmd, std::span<const Item> chunk, const Args& a);
  static std::vector<Each> decode(const Reply& r, std::size_t n);
  static Value finish(std::vector<Each> each) { return each; }
};

// ---------------------------------------------------------------- read

struct Get : Read {
  static constexpr std::string_view function = "get";
  static constexpr std::string_view calls = "get";
  static constexpr Route route = Route::job;
  struct Args {
    std::string id;
    bool with_body = true;
    bool with_deps = false;  // DEPS (library version 35)
  };
  using Value = std::optional<Job>;
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Stats : Read {
  static constexpr std::string_view function = "stats";
  static constexpr std::string_view calls = "stats";
  static constexpr Route route = Route::every_shard;
  struct Args {};
  using Value = TopicStats;
  static void encode(Command& /*cmd*/, const Args& /*a*/) {}
  static Value decode(const Reply& r);
  static Value merge(std::vector<Value> parts);
  // A former shard's answer (shards < 0), or the topic's when it was spread
  // since this client read its layout.
  static bool stale(const Value& v, const Layout& l) {
    return v.shards < 0 || (!l.spread() && v.shards > 0);
  }
  // A spread topic is read on itself too: the totals it counted before it
  // was spread (failed, dead, lapsed, its history's) are added to its
  // shards'. (It holds no jobs of its own.)
  static void spread_base(Args& /*a*/) {}
  static void add_base(Value& all, const Value& base);
};

struct History : Read {
  static constexpr std::string_view function = "history";
  static constexpr std::string_view calls = "history";
  static constexpr Route route = Route::every_shard;
  static constexpr bool reads_history = true;
  struct Args {
    HistoryStep step = HistoryStep::total;
    std::int64_t from_ms = 0, to_ms = 0;
    bool spread = false;  // SPREAD: the spread topic's own, beside its shards'
  };
  using Value = std::vector<HistoryRow>;
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static Value merge(std::vector<Value> parts);
  // A spread topic is read on its shards and on itself, for what it
  // counted before it was spread (the library answers SHARDED to a read
  // of it alone, so a stale layout is read again); its rows are summed
  // with theirs.
  static void spread_base(Args& a) { a.spread = true; }
};

struct List : Read {
  static constexpr std::string_view function = "list";
  static constexpr std::string_view calls = "list";
  static constexpr Route route = Route::pages;
  struct Args {
    JobState state = JobState::ready;
    std::int64_t offset = 0;
    int count = 0;
    bool with_bodies = true;
  };
  using Value = ListPage;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// ---------------------------------------------------------------- take

struct Reserve : Read {
  static constexpr std::string_view function = "reserve";
  static constexpr std::string_view calls = "reserve";
  static constexpr Route route = Route::take;
  static constexpr bool coalesces = true;
  using Args = ReserveOptions;
  using Value = ReserveResult;
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static const redis::BatchKind& kind();
  // Reserves of one job each, queued together, go as one reserve of many.
  static bool takes(const Args& a) { return a.count == 1; }
  static void part(Command& /*cmd*/, const Args& /*a*/) {}
  static void tail(Command& cmd, const Args& a);
};

// One job by its id, reserved ahead of the rest (library version 38).
struct ReserveJob : Read {
  static constexpr std::string_view function = "reservejob";
  static constexpr std::string_view calls = "reserve_job";
  static constexpr Route route = Route::job;
  struct Args {
    std::string id;
    Millis ttr{0};
    std::string worker;
  };
  using Value = ReserveJobResult;
  static std::string_view id(const Args& a) { return a.id; }
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Pull : Read {
  static constexpr std::string_view function = "pull";
  static constexpr std::string_view calls = "pull";
  static constexpr Route route = Route::take;
  struct Args {
    int count = 1;
  };
  using Value = ReserveResult;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// ---------------------------------------------------------------- settle

// The words every call on a reservation starts with.
struct Held {
  std::string id;
  std::uint64_t token = 0;
};

struct Ack : JobWrite {
  static constexpr std::string_view function = "ack";
  static constexpr std::string_view calls = "ack";
  static constexpr bool coalesces = true;
  struct Args : Held {
    Millis keep{0};
    // With a result: kept with the finished job (for keep, and at least
    // the retry window), and alone (ackmany takes no results).
    std::optional<std::string> result;
    // FORWARD (library version 36): the result is for the jobs waiting for
    // this one; where the library would refuse it, dropped instead.
    bool forward = false;
  };
  using Value = Outcome;
  // (MAXBODY bounds a result: only an ack with one says it.)
  static bool max_body(const Args& a) { return a.result.has_value(); }
  static void check(const Args& a, const ClientOptions& o);
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static const redis::BatchKind& kind();
  static bool takes(const Args& a);
  static void part(Command& cmd, const Args& a);
  static void tail(Command& cmd, const Args& a);
};

struct AckMany : JobWrite {
  static constexpr std::string_view function = "ackmany";
  static constexpr std::string_view calls = "ack_many";
  static constexpr Route route = Route::jobs;
  using Item = std::pair<std::string, std::uint64_t>;
  struct Args {
    std::vector<Item> jobs;
    Millis keep{0};
  };
  using Each = Outcome;
  using Value = std::vector<Outcome>;
  static std::span<const Item> items(const Args& a) { return a.jobs; }
  static const std::string& item_id(const Item& job) { return job.first; }
  static std::optional<int> replicas(const Item& /*job*/) { return std::nullopt; }
  static void encode(Command& cmd, std::span<const Item> chunk, const Args& a);
  static std::vector<Each> decode(const Reply& r, std::size_t n);
  static Value finish(std::vector<Each> each) { return each; }
};

struct Release : JobWrite {
  static constexpr std::string_view function = "release";
  static constexpr std::string_view calls = "release";
  struct Args : Held {
    Millis delay{0};
    std::optional<std::int64_t> priority;
  };
  using Value = Outcome;
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// A waiting job's priority and due time, in place (library version 33).
struct Reschedule : JobWrite {
  static constexpr std::string_view function = "reschedule";
  static constexpr std::string_view calls = "reschedule";
  struct Args {
    std::string id;
    RescheduleOptions change;
  };
  using Value = Outcome;
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Fail : JobWrite {
  static constexpr std::string_view function = "fail";
  static constexpr std::string_view calls = "fail";
  struct Args : Held {
    std::string error;
    bool bury = false;
    std::optional<Millis> retry_delay;
    std::optional<int> max_attempts;
    std::optional<std::int64_t> priority{};  // (library version 37)
  };
  using Value = FailResult;
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// A touch moves a deadline: no replica waits for it (a lapse after a
// failover redelivers, which at-least-once allows).
struct Touch : Read {
  static constexpr std::string_view function = "touch";
  static constexpr std::string_view calls = "touch";
  static constexpr Route route = Route::job;
  struct Args : Held {
    Millis ttr{0};
  };
  using Value = TouchResult;
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// What the handler of a reserved job reports (library version 31). Not a
// job write: it waits for no replica (a report lost in a failover is a
// progress or log line less, and the next one comes soon).
struct Report : Read {
  static constexpr std::string_view function = "progress";
  static constexpr std::string_view calls = "report";
  static constexpr Route route = Route::job;
  struct Args : Held {
    JobReport report;
  };
  using Value = Outcome;
  static std::string_view id(const Args& a) { return a.id; }
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// ---------------------------------------------------------------- manage

struct Delete : JobWrite {
  static constexpr std::string_view function = "delete";
  static constexpr std::string_view calls = "remove";
  struct Args {
    std::string id;
  };
  using Value = bool;
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Restore : JobWrite {
  static constexpr std::string_view function = "restore";
  static constexpr std::string_view calls = "restore";
  struct Args {
    Job job;
    bool replace = false;
  };
  using Value = bool;
  // A done job is not restored.
  static std::optional<Value> settled(const Args& a) {
    if (a.job.state == JobState::done) return false;
    return std::nullopt;
  }
  static std::string_view id(const Args& a) { return a.job.id; }
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Requeue : Read {
  static constexpr std::string_view function = "requeue";
  static constexpr std::string_view calls = "requeue";
  static constexpr Route route = Route::every_shard;
  struct Args {
    int limit = limits::kBatchMax;
  };
  using Value = RequeueResult;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static Value merge(std::vector<Value> parts);
};

// A call whose arguments are all job ids (up to 1000 per call, each call
// on the shard its ids lead to) and whose answer is one count.
struct IdsCount : Read {
  static constexpr Route route = Route::jobs;
  using Item = std::string;
  struct Args {
    std::vector<Item> ids;
  };
  // The library answers one count per call: it stands in the first job's
  // place, the others' are 0, and the caller gets their sum.
  using Each = int;
  using Value = int;
  static std::span<const Item> items(const Args& a) { return a.ids; }
  static const std::string& item_id(const Item& id) { return id; }
  static std::optional<int> replicas(const Item& /*id*/) { return std::nullopt; }
  static void encode(Command& cmd, std::span<const Item> chunk, const Args& a);
  static std::vector<Each> decode(const Reply& r, std::size_t n);
  static Value finish(const std::vector<Each>& each);
};

struct Kick : IdsCount {
  static constexpr std::string_view function = "kick";
  static constexpr std::string_view calls = "kick";
};

// Many jobs removed, atomically per call (Delete is one job's).
struct DeleteMany : IdsCount {
  static constexpr std::string_view function = "delete";
  static constexpr std::string_view calls = "remove_many";
  static constexpr bool job_write = true;  // (waits for replicas, as remove does)
};

struct KickAll : Read {
  static constexpr std::string_view function = "kickall";
  static constexpr std::string_view calls = "kick_all";
  static constexpr Route route = Route::every_shard;
  struct Args {
    int limit = limits::kBatchMax;
  };
  using Value = int;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static Value merge(const std::vector<Value>& parts);
};

// Delayed jobs due now, in place (library version 32).
struct Promote : IdsCount {
  static constexpr std::string_view function = "promote";
  static constexpr std::string_view calls = "promote";
};

// promoteall and purge answer {done, left}; a spread topic's shards' add up.
struct Batches : Read {
  static constexpr Route route = Route::every_shard;
  using Value = BatchResult;
  static Value decode(const Reply& r);
  static Value merge(const std::vector<Value>& parts);
};

struct PromoteAll : Batches {
  static constexpr std::string_view function = "promoteall";
  static constexpr std::string_view calls = "promote_all";
  struct Args {
    int limit = limits::kBatchMax;
  };
  static void encode(Command& cmd, const Args& a);
};

struct Purge : Batches {
  static constexpr std::string_view function = "purge";
  static constexpr std::string_view calls = "purge_dead";
  struct Args {
    std::int64_t before_ms = 0;
    int limit = limits::kBatchMax;
  };
  static void encode(Command& cmd, const Args& a);
};

// pause and resume: true when any shard's state changed.
struct Pause : Read {
  static constexpr std::string_view function = "pause";
  static constexpr std::string_view calls = "pause";
  static constexpr Route route = Route::every_shard;
  struct Args {
    Millis duration{0};  // FOR (library version 38); 0: no end
  };
  using Value = bool;
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static Value merge(const std::vector<Value>& parts);
};
struct Resume : Pause {
  static constexpr std::string_view function = "resume";
  static constexpr std::string_view calls = "resume";
  struct Args {};
  static void check(const Args& /*a*/, const ClientOptions& /*o*/) {}
  static void encode(Command& /*cmd*/, const Args& /*a*/) {}
};

// Client::limits and set_limits (a spread topic answers SHARDED: limits
// hold for one topic's keys).
struct Limit : Read {
  static constexpr std::string_view function = "limit";
  static constexpr std::string_view calls = "limits set_limits";
  struct Args {
    std::optional<TopicLimits> set;
  };
  using Value = TopicLimits;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// Client::retry_window and set_retry_window: set on every shard, read
// from the first (remembered: their sum).
struct RetryWindow : Read {
  static constexpr std::string_view function = "retrywindow";
  static constexpr std::string_view calls = "retry_window set_retry_window";
  static constexpr Route route = Route::every_shard;
  struct Args {
    std::optional<Millis> set;
  };
  using Value = redisched::RetryWindow;
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
  static Value merge(std::vector<Value> parts);
};

// One redisched_migrate call on one topic or shard (Client::migrate
// repeats it until done, on every shard).
struct Migrate : Read {
  static constexpr std::string_view function = "migrate";
  static constexpr std::string_view calls = "migrate";
  struct Args {
    int limit = limits::kBatchMax;
  };
  using Value = MigrateStep;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// The layout (redisched_shards), and one step of changing it.
struct Shards : Read {
  static constexpr std::string_view function = "shards";
  static constexpr std::string_view calls = "shards";
  struct Args {};
  using Value = std::vector<std::string>;  // the suffixes
  static void encode(Command& /*cmd*/, const Args& /*a*/) {}
  static Value decode(const Reply& r);
};
struct Shard : Read {
  static constexpr std::string_view function = "shard";
  static constexpr std::string_view calls = "set_shards";
  struct Args {
    std::vector<std::string> words;
  };
  using Value = int;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// ---------------------------------------------------------------- schedules

// One schedule by name, or all of them, with Redis's clock.
struct Schedules : Read {
  static constexpr std::string_view function = "schedules";
  static constexpr std::string_view calls = "schedules set_schedule resume_schedule";
  struct Args {
    std::optional<std::string> name;
  };
  using Value = ScheduleList;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// Client::set_schedule's write, once its next tick is computed.
struct Schedule : Read {
  static constexpr std::string_view function = "schedule";
  static constexpr std::string_view calls = "set_schedule";
  static constexpr bool max_body = true;
  struct Args {
    redisched::Schedule stored;  // as the call answers it
    JobSpec job;                 // the tick job's options
  };
  using Value = redisched::Schedule;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r, const Args& a);
};

struct Unschedule : Read {
  static constexpr std::string_view function = "unschedule";
  static constexpr std::string_view calls = "remove_schedule";
  struct Args {
    std::string name;
  };
  using Value = bool;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct PauseSchedule : Read {
  static constexpr std::string_view function = "pauseschedule";
  static constexpr std::string_view calls = "pause_schedule";
  struct Args {
    std::string name;
  };
  using Value = Outcome;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// Client::resume_schedule's write, once its next tick is computed.
struct ResumeSchedule : Read {
  static constexpr std::string_view function = "resumeschedule";
  static constexpr std::string_view calls = "resume_schedule";
  struct Args {
    std::string name;
    std::int64_t next = 0;
  };
  using Value = Outcome;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Tick : Read {
  static constexpr std::string_view function = "tick";
  static constexpr std::string_view calls = "";  // the Scheduler's (ClientAccess::tick)
  struct Args {
    std::string name;
    std::int64_t expect = 0, next = 0;
    std::optional<std::int64_t> run;
  };
  using Value = TickOutcome;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// ---------------------------------------------------------------- workers

// The worker registry (docs/redis-api.md, "the worker registry").
struct RegistryCall : Read {
  static constexpr Route route = Route::registry;
};

struct Beat : RegistryCall {
  static constexpr std::string_view function = "beat";
  static constexpr std::string_view calls = "beat";
  struct Args {
    WorkerEntry entry;
    Millis ttl{0};
  };
  using Value = bool;  // registered anew (new, or its entry had expired)
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Leave : RegistryCall {
  static constexpr std::string_view function = "leave";
  static constexpr std::string_view calls = "leave";
  struct Args {
    std::string id;
  };
  using Value = bool;  // there was an entry
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

struct Workers : RegistryCall {
  static constexpr std::string_view function = "workers";
  static constexpr std::string_view calls = "workers";
  struct Args {};
  using Value = std::vector<WorkerEntry>;
  static void encode(Command& /*cmd*/, const Args& /*a*/) {}
  static Value decode(const Reply& r);
};

// Every operation, for what goes over them all (tests/unit/operations_test
// checks docs/redis-api.md's table of names against it).
// ---------------------------------------------------------------- flows

// An entry of a topic's outbox (library version 35): call function fn on
// topic with args, then delete the entry (Moved).
struct OutboxEntry {
  std::string entry, fn, topic;
  std::vector<std::string> args;
};

// A mover's calls (Client::move_outbox): the outbox of one topic or shard
// as the sweep signal names it, the calls its entries name, then the
// entries carried out deleted.
struct Outbox : Read {
  static constexpr std::string_view function = "outbox";
  static constexpr std::string_view calls = "move_outbox";
  static constexpr Route route = Route::slot;
  struct Args {
    int count = static_cast<int>(limits::kBatchMax);
  };
  using Value = std::vector<OutboxEntry>;
  static void encode(Command& cmd, const Args& a) { cmd.add(std::int64_t{a.count}); }
  static Value decode(const Reply& r);
};

struct Moved : Read {
  static constexpr std::string_view function = "moved";
  static constexpr std::string_view calls = "move_outbox";
  static constexpr Route route = Route::slot;
  struct Args {
    std::vector<std::string> entries;
  };
  using Value = int;
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// A dependent recorded by its dependencies (each on the shard its id
// leads to). Job writes: the mover deletes the entry once they are on the
// replicas asked for, so a failover keeps them.
struct Depend : JobWrite {
  static constexpr std::string_view function = "depend";
  static constexpr std::string_view calls = "move_outbox";
  static constexpr Route route = Route::jobs;
  using Item = std::string;
  struct Args {
    std::string topic, id, gen;  // the dependent
    std::vector<Item> ids;       // its dependencies in this topic
  };
  using Each = int;
  using Value = int;  // how many had finished already
  static std::span<const Item> items(const Args& a) { return a.ids; }
  static const std::string& item_id(const Item& id) { return id; }
  static std::optional<int> replicas(const Item& /*id*/) { return std::nullopt; }
  static void encode(Command& cmd, std::span<const Item> chunk, const Args& a);
  static std::vector<Each> decode(const Reply& r, std::size_t n);
  static Value finish(const std::vector<Each>& each);
};

// A dependent that waits no longer, dropped by its dependencies (each on
// the shard its id leads to): Depend's words.
struct Forget : Depend {
  static constexpr std::string_view function = "forget";
  using Value = int;  // how many held it
  static std::vector<Each> decode(const Reply& r, std::size_t n);
  static Value finish(const std::vector<Each>& each);
};

// Dependencies of a blocked job settled (on the shard its id leads to).
struct Resolve : JobWrite {
  static constexpr std::string_view function = "resolve";
  static constexpr std::string_view calls = "move_outbox";
  struct Args {
    std::string id;
    std::vector<std::string> rest;  // gen count (topic id outcome value)...
  };
  using Value = int;  // 0 nothing settled, 1 settled, 2 released, 3 dead
  static std::string_view id(const Args& a) { return a.id; }
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

// A batch made, its members added, sealed (library version 36): the batch
// after the call.
struct Batch : JobWrite {
  static constexpr std::string_view function = "batch";
  static constexpr std::string_view calls = "batch";
  struct Args {
    std::string id;
    BatchChange change;
  };
  using Value = Job;
  static std::string_view id(const Args& a) { return a.id; }
  static void check(const Args& a, const ClientOptions& o);
  static void encode(Command& cmd, const Args& a);
  static Value decode(const Reply& r);
};

using All =
    std::tuple<Put, Add, PutMany, Get, Stats, History, List, Reserve, ReserveJob, Pull, Ack,
               AckMany, Release, Fail, Touch, Report, Delete, Restore, Requeue, Kick, KickAll,
               Promote, PromoteAll, Purge, Reschedule, Pause, Resume, Limit, RetryWindow, Migrate,
               Shards, Shard, Schedules, Schedule, Unschedule, PauseSchedule, ResumeSchedule, Tick,
               Beat, Leave, Workers, Outbox, Moved, Depend, Forget, Resolve, Batch>;

}  // namespace redisched::core::op
