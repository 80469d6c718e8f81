// The values redisched hands in and out: what to put, what a job is, what a
// reservation holds. Times are Unix milliseconds of the Redis server's clock.
//
// Plain values: copyable, owning their strings, no reference to the Client
// that made them; like any std type, one may be read from many threads at
// once but changed from one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redisched {

using Millis = std::chrono::milliseconds;

// blocked (library version 35): waiting for other jobs (JobSpec::after).
enum class JobState { delayed, ready, reserved, dead, done, blocked };
std::string_view to_string(JobState s) noexcept;
std::optional<JobState> parse_job_state(std::string_view s) noexcept;

enum class BackoffKind { fixed, exponential };

// Delay before the retry after a failure: fixed, or base * 2^(attempt-1)
// capped at cap.
struct Backoff {
  BackoffKind kind = BackoffKind::exponential;
  Millis base{1000};
  Millis cap{600000};
};

// What put does when the id exists.
enum class PutMode {
  create,   // refuse: the outcome is PutOutcome::exists
  replace,  // update an existing job only: PutOutcome::not_found otherwise
  upsert,   // create or update
  // Debounce: create, or update a job still waiting (delayed or ready) to
  // this put's body, options and due time ("run once, 5 s after the last
  // put" with delay 5 s); a job reserved, dead or done is left as it is:
  // PutOutcome::exists.
  debounce,
};

// A job to put. Unset options take the defaults of docs/redis-api.md:
// due now, priority 0, ttr 30 s, 5 attempts, exponential backoff 1 s..10 min.
// (Every member has an initializer, so designated initializers may leave
// any out without -Wmissing-field-initializers.)
// What a dependency's failure (dead, or deleted before it finished) does to
// the job waiting for it (library version 35, docs/flows.md): fail, the job
// dies at once; ignore, it runs all the same; drop, it runs, the dependency
// marked dropped.
enum class OnFailure { fail, ignore, drop };
std::string_view to_string(OnFailure p) noexcept;
std::optional<OnFailure> parse_on_failure(std::string_view s) noexcept;

// A job another waits for: its topic (any, a spread one too) and id.
struct Dependency {
  std::string topic;
  std::string id;
  OnFailure on_failure = OnFailure::fail;
};

// How a dependency settled, as the job waiting for it sees it.
enum class DependencyOutcome { pending, done, failed, dropped };
std::string_view to_string(DependencyOutcome o) noexcept;

// A batch (library version 36, docs/flows.md, "Batches"): jobs of any
// topics grouped so that others can wait for them all (JobSpec::after
// naming the batch's topic and id). Its counts, as Client::batch and a get
// of it report them.
struct BatchCounts {
  bool sealed = false;      // takes no more members
  std::int64_t total = 0;   // members named
  std::int64_t done = 0;    // acked (or taken for good)
  std::int64_t failed = 0;  // dead, or deleted before they finished
  std::int64_t pending() const { return total - done - failed; }
};

// A job named by its topic and id (a batch's member).
struct JobRef {
  std::string topic;
  std::string id;
};

// What Client::batch does to a batch (made by the first call on its id).
struct BatchChange {
  std::vector<JobRef> add{};     // members, each once (up to limits::kDepsMax a call)
  bool seal = false;             // no more members
  std::optional<Millis> keep{};  // kept once finished (a week unless given)
};

struct DependencyState {
  std::string topic;
  std::string id;
  OnFailure on_failure = OnFailure::fail;
  DependencyOutcome outcome = DependencyOutcome::pending;
  // done: the result its ack gave ("" for none); failed or dropped: why.
  std::string value;
};

struct JobSpec {
  std::string id{};                         // 1..256 bytes, no control characters
  std::string body{};                       // any bytes, up to ClientOptions::max_body
  std::optional<Millis> delay{};            // due this long after now
  std::optional<std::int64_t> due_at_ms{};  // or at this time; not both
  // limits::kPrioMin..kPrioMax (-4294966295..1000), higher first; below 0
  // from library version 37 (beanstalkd's priorities: pri = 1000 - priority).
  std::int64_t priority = 0;
  // Time-to-run of a reservation. 0: delivered at most once: reserve hands
  // the job out and removes it in the same call (token 0, nothing to ack).
  std::optional<Millis> ttr{};
  std::optional<int> max_attempts{};  // 1..1000
  std::optional<Backoff> backoff{};
  // Once acked, keep the job (state done) and its result this long, so that
  // its producer can wait for it (Client::wait) and read the result; reserve
  // reports it (Reservation::keep) and the Worker's ack gives it. 0: the ack
  // decides (removed at once unless it keeps the job). Up to ten years.
  Millis keep{0};
  PutMode mode = PutMode::create;
  // This put answers once this many replicas have it (0..16), over
  // ClientOptions::replicas and topic_replicas; put_many waits for the most
  // any of its jobs asks for.
  std::optional<int> replicas{};
  // Jobs to wait for (up to limits::kDepsMax, each once; put alone, create
  // mode only): the job is blocked until each has settled, then due by
  // delay/due_at_ms. Its handler reads their outcomes and results
  // (JobContext::dependencies).
  std::vector<Dependency> after{};
};

enum class PutOutcome { created, updated, exists, not_found };

// How an attempt ended without success.
enum class AttemptOutcome { failed, lapsed };
std::string_view to_string(AttemptOutcome o) noexcept;

// One attempt of a job that ended without success: an entry of its
// history (Job::history).
struct Attempt {
  int attempt = 0;  // its number, counted as Job::attempts (from 1 again after a kick)
  AttemptOutcome outcome = AttemptOutcome::failed;
  std::int64_t started_ms = 0;  // when it was reserved
  std::int64_t ended_ms = 0;    // when it failed, or its lapse was noticed
  std::string worker;           // who reserved it (ReserveOptions::worker); empty: not named
  // Why: the first limits::kHistoryErrorMax bytes of the error (the job's
  // error keeps the last one whole); error_cut when it was longer.
  std::string error;
  bool error_cut = false;
};

// A job's progress, as its handler last reported it (library version 31:
// JobContext::progress, Client::report).
struct Progress {
  std::string value;  // JSON text (a number, or a small object), at most limits::kProgressMax bytes
  int attempt = 0;    // the attempt that reported it
  std::int64_t at_ms = 0;
};

// A line of a job's log (library version 31: JobContext::log, Client::report).
struct LogLine {
  std::int64_t at_ms = 0;
  int attempt = 0;   // the attempt that logged it
  std::string text;  // UTF-8, its first limits::kLogLineMax bytes
  bool cut = false;  // the line was longer
};

// What the handler of a reserved job reports (Client::report): log lines,
// a progress value, or both.
struct JobReport {
  std::vector<std::string> lines;  // at most limits::kLogLinesMax, UTF-8
  std::optional<std::string> progress;
  bool empty() const { return lines.empty() && !progress; }
};

// One batch of a call that works through a topic in batches
// (Client::promote_all, purge_dead): what it did, and what is left for the
// next call (0: nothing).
struct BatchResult {
  int done = 0;
  std::int64_t left = 0;
};

// A job as stored, as get and list return it.
struct Job {
  std::string id;
  JobState state = JobState::ready;
  std::string body;
  std::int64_t priority = 0;
  std::int64_t created_ms = 0;
  std::int64_t due_ms = 0;
  int attempts = 0;  // attempts that ended without success so far
  int max_attempts = 0;
  Millis ttr{0};        // 0: delivered at most once (JobSpec::ttr)
  bool own_ttr = true;  // ttr is the job's own; false: reserve's TTR, or the default, applies
  Backoff backoff;
  Millis keep{0};                     // JobSpec::keep
  std::optional<std::string> error;   // the last failure's text
  std::optional<std::string> result;  // state == done: what its handler returned
  // state == reserved:
  std::uint64_t token = 0;
  std::int64_t reserved_at_ms = 0;
  std::int64_t deadline_ms = 0;
  std::string worker;  // who reserved it, when its reserve said (ReserveOptions::worker)
  // state == dead: when it died. state == done: when it finished and when
  // its retention ends.
  std::int64_t died_ms = 0;
  std::int64_t finished_ms = 0;
  std::int64_t expires_ms = 0;
  // The last limits::kHistoryMax attempts that failed or lapsed, oldest
  // first (library version 30; kept across kicks, dropped by an update).
  std::vector<Attempt> history;
  // What its handlers reported (library version 31; kept across attempts,
  // dropped by an update): the latest progress, and the log's latest
  // lines (at most limits::kLogLinesMax, limits::kLogBytesMax bytes),
  // oldest first, of log_total lines ever logged.
  std::optional<Progress> progress;
  std::vector<LogLine> log;
  std::int64_t log_total = 0;
  // Put with JobSpec::after (library version 35): how many it waits for,
  // and how many of those are still pending (0 once released); deps, each
  // one's state, when read with them (Client::get_with_dependencies).
  int deps_total = 0;
  int deps_left = 0;
  std::vector<DependencyState> deps;
  // A batch's counts (library version 36): set for a batch alone (its state
  // blocked until sealed with every member finished, then done; error: the
  // last member's failure).
  std::optional<BatchCounts> batch;
};

// What reserve takes.
// A waiting job's new priority and/or due time (Client::reschedule): the
// ones given change, the others stay; one at least. A due time in the past
// is now.
struct RescheduleOptions {
  std::optional<std::int64_t> priority{};   // kPrioMin..kPrioMax
  std::optional<Millis> delay{};            // due this long from now
  std::optional<std::int64_t> due_at_ms{};  // or due at this time (Unix ms)
};

struct ReserveOptions {
  int count = 1;  // 1..1000 jobs
  Millis ttr{0};  // for jobs put without a time-to-run of their own; 0: the default
  // Who reserves: 1..128 bytes without control characters (a Worker gives
  // its own id). get and list show it on the reservation, and the job's
  // history on an attempt that fails or lapses. Empty: none.
  std::string worker;
};

// A job handed out by reserve (token != 0) or pull (token == 0).
struct Reservation {
  std::string id;
  std::string body;
  // Goes with ack, release, fail and touch; 0 for a job put with ttr 0,
  // which reserve handed out for good (nothing to settle).
  std::uint64_t token = 0;
  int attempt = 1;  // this attempt's number, from 1
  int max_attempts = 0;
  std::int64_t priority = 0;
  std::int64_t created_ms = 0;
  std::int64_t due_ms = 0;
  std::int64_t deadline_ms = 0;  // reserve only
  // The retention the job was put with (JobSpec::keep): give it to ack.
  Millis keep{0};
};

struct ReserveResult {
  std::vector<Reservation> jobs;
  std::int64_t now_ms = 0;  // the Redis server's clock at the call
  // When to look again: 0 = jobs may remain, -1 = nothing is scheduled,
  // otherwise the earliest due time or reservation deadline (ms); while
  // paused, when the pause ends (-1: a pause without end).
  std::int64_t next_ms = -1;
  bool paused = false;
};

// The outcome of ack, release, fail and touch for one job.
enum class Outcome {
  ok,
  not_found,    // no such job
  wrong_state,  // the job is not reserved
  stale_token,  // the job was reserved again since: this reservation is over
};
std::string_view to_string(Outcome o) noexcept;

// reserve_job's answer (library version 38): the job, reserved, when
// outcome is ok; otherwise not_found (no such job) or wrong_state
// (reserved, blocked or finished: not to be had), and nothing changed.
struct ReserveJobResult {
  Outcome outcome = Outcome::ok;
  Reservation job;          // when ok
  std::int64_t now_ms = 0;  // the Redis server's clock at the call
};

struct FailResult {
  Outcome outcome = Outcome::ok;
  JobState state = JobState::delayed;  // where the job went, when ok
};

struct TouchResult {
  Outcome outcome = Outcome::ok;
  std::int64_t deadline_ms = 0;  // the new deadline, when ok
};

// A topic's retry window (Client::set_retry_window): for this long after a
// job finished without a trace (acked without keep, or taken for good), a
// put of its id (create mode) answers exists, so that a producer that
// retries a put after an unsure answer does not make the job again.
struct RetryWindow {
  Millis window{60000};         // 0: none; up to a day
  std::int64_t remembered = 0;  // ids held now (some windows may have ended)

  friend bool operator==(const RetryWindow&, const RetryWindow&) = default;
};

// What Client::migrate did to a topic (docs/redis-api.md, "Migrations").
struct Migration {
  std::int64_t rewritten = 0;  // records rewritten as this version writes them
  std::int64_t read = 0;       // records read
  int calls = 0;               // library calls it took (on a spread topic: all shards')

  friend bool operator==(const Migration&, const Migration&) = default;
};

// A topic's limits (Client::set_limits), held in Redis for every worker and
// server together: reserve and pull hand out no more than they leave room
// for, and say when to look again.
struct TopicLimits {
  // At most rate jobs handed out in each window (fixed windows, aligned to
  // multiples of window on Redis's clock); 0: no rate limit.
  int rate = 0;         // 0..1000000
  Millis window{1000};  // 1 ms..1 day
  // At most this many jobs reserved at once (jobs of TTR 0, taken for
  // good, are not counted); 0: no cap.
  int concurrency = 0;  // 0..1000000
  // Priority aging: each level of priority counts as this much waiting, so
  // reserve hands out the highest priority + (time since due) / aging, and a
  // job waits at most (p - q) * aging behind jobs of priority p due after
  // it (q its own). 0: plain priority order. Up to a day.
  Millis aging{0};

  friend bool operator==(const TopicLimits&, const TopicLimits&) = default;
};

struct TopicStats {
  std::int64_t delayed = 0, ready = 0, reserved = 0, dead = 0, done = 0;
  bool paused = false;
  // When a timed pause ends (Client::pause with a duration; library
  // version 38); -1: not paused, or a pause without end.
  std::int64_t pause_end_ms = -1;
  std::int64_t next_due_ms = -1;  // earliest due delayed job, -1 if none
  std::int64_t failed_total = 0, dead_total = 0, lapsed_total = 0;
  TopicLimits limits;           // window 0 without a rate limit
  std::int64_t limit_used = 0;  // jobs handed out in the rate's current window
  std::int64_t schedules = 0;   // recurring jobs (Client::set_schedule)
  std::int64_t shards = 0;      // 0, or the shards it is spread over (Client::set_shards)
  // Jobs waiting for other jobs (JobState::blocked), and the topic's outbox
  // entries not yet carried out by a mover (library version 35).
  std::int64_t blocked = 0, outbox = 0;
  // The history's totals (Client::history; library version 34): jobs put,
  // started and done, and their wait from due to start, summed, since the
  // topic's history began (counted by callers that name its history key).
  std::int64_t put_total = 0, started_total = 0, done_total = 0, wait_total_ms = 0;
};

// A topic's history (Client::history): minutes for a day, hours for 30
// days, or the totals since it began.
enum class HistoryStep { minute, hour, total };

// What one minute or hour of a topic's history counted.
struct HistoryRow {
  std::int64_t at_ms = 0;  // the minute's or hour's start (0 for the totals)
  std::int64_t put = 0, started = 0, done = 0, failed = 0, dead = 0, lapsed = 0;
  std::int64_t wait_ms = 0;  // from due to start, summed over the jobs started
};

// What the scheduler does with ticks missed while none ran (a downtime).
enum class CatchUp {
  skip,  // drop them; one due less than a minute ago still runs
  last,  // run the last one missed, once
};

// A recurring job (Client::set_schedule). Each tick puts one job, with
// this body and these options, due at the tick, under the id
// "<schedule name>@<tick ms>": however many Workers and servers run the
// schedule, a tick is put once. Give cron or every.
struct ScheduleSpec {
  // 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds
  // first), or @yearly @monthly @weekly @daily @hourly; on the wall clock
  // of time_zone (a time skipped by a daylight saving change runs at the
  // end of the gap, a time repeated runs once).
  std::string cron{};
  std::string time_zone = "UTC";  // an IANA name: Europe/Berlin
  // Or a fixed interval, its first tick that long after it is set.
  std::optional<Millis> every{};
  std::string body{};
  std::int64_t priority = 0;
  std::optional<Millis> ttr{};
  std::optional<int> max_attempts{};
  std::optional<Backoff> backoff{};
  Millis keep{0};  // JobSpec::keep: each tick's job is kept with its result
  CatchUp catch_up = CatchUp::skip;
  bool paused = false;  // a paused schedule puts nothing
};

struct Schedule {
  std::string name;
  ScheduleSpec spec;
  std::int64_t next_ms = 0;       // its next tick
  std::int64_t last_tick_ms = 0;  // the last tick that put a job; 0: none yet
};

struct ScheduleList {
  std::int64_t now_ms = 0;  // the Redis server's clock
  std::vector<Schedule> schedules;
};

// A schedule's next n ticks from its next one (the dashboard's next runs).
// Throws Error(invalid_argument) for a rule that does not parse.
std::vector<std::int64_t> next_ticks(const Schedule& schedule, int n);

struct ListPage {
  std::int64_t total = 0;  // jobs in that state
  std::vector<Job> jobs;
};

// A page of the ids of a topic's jobs that start with a prefix
// (Client::find_ids): cursor, given back, goes on; empty once every job
// was seen.
struct IdPage {
  std::vector<std::string> ids;
  std::string cursor;
};

// A Redis node that holds keys (Client::redis_nodes): the one node, or each
// primary of a cluster, as it describes itself.
struct RedisNode {
  std::string address;  // host:port, as the node sees the Client's connection (CLIENT INFO laddr)
  std::string info;     // INFO's text: every default section
};

// A worker of the registry (Client::beat, Client::workers; docs/redis-api.md,
// "the worker registry"): who it is, where it runs, what it handles and
// what it runs now. A Worker keeps its own entry (WorkerOptions::beat_interval).
struct WorkerEntry {
  std::string id;  // 1..128 bytes; a Worker's: "<host>:<pid>:<random>"
  std::string host;
  std::int64_t pid = 0;
  std::string version;          // of redisched, or of the client it runs
  std::int64_t started_ms = 0;  // when it started (its host's clock)
  struct Topic {
    std::string topic;
    int concurrency = 1;
  };
  std::vector<Topic> topics;
  struct Running {
    std::string topic, id;
    std::int64_t started_ms = 0;  // when its handler started it (the worker host's clock)
  };
  std::vector<Running> running;
  // As Client::workers reads it: its last beat, and when its entry expires
  // (Redis's clock).
  std::int64_t beat_ms = 0, expires_ms = 0;
};

// What a sweeper must look at (docs/redis-api.md, "Sweep signal").
struct SweepSignal {
  enum class Kind {
    lapse,      // a reservation of topic may lapse at at_ms (Redis's clock)
    schedules,  // topic has schedules
    outbox,     // topic's outbox has entries for a mover (Client::move_outbox)
  };
  Kind kind = Kind::lapse;
  std::string topic;  // the topic (for a spread topic's shard, the topic it is part of)
  std::int64_t at_ms = 0;
};

// What a mover carried out (Client::move_outbox): entries whose call
// answered, and deleted; entries whose call failed, left for the next.
struct MoveResult {
  int moved = 0;
  int failed = 0;
};

struct RequeueResult {
  int requeued = 0;  // back to ready
  int buried = 0;    // to dead (attempts used up)
  std::int64_t next_deadline_ms = -1;
};

}  // namespace redisched
