// The words and replies of the operations of core/operations.h (no I/O;
// the replies' meaning is in codec.cpp, shared with the tests).
#include "core/operations.h"

#include <algorithm>

#include "core/client_access.h"
#include "core/coalesce.h"
#include "core/text.h"
#include "redisched/limits.h"

namespace redisched::core::op {
namespace {

// The library's bounds (redisched/limits.h), checked before anything goes
// out; the library checks every word again.
constexpr auto kWorkerIdMax = static_cast<std::size_t>(limits::kWorkerIdMax);
constexpr auto kRegistryListMax = static_cast<std::size_t>(limits::kWorkerListMax);

// A worker's id (the registry's) or name (reserve's WORKER): 1..128 bytes
// without control characters.
void check_worker_id(std::string_view id, std::string_view what = "worker id") {
  if (id.empty()) throw Error(Errc::invalid_argument, std::string(what) + " is empty");
  if (id.size() > kWorkerIdMax) {
    throw Error(Errc::invalid_argument,
                std::string(what) + " is longer than " + std::to_string(kWorkerIdMax) + " bytes");
  }
  if (std::any_of(id.begin(), id.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    throw Error(Errc::invalid_argument, std::string(what) + " holds a control character");
  }
}

// A reply for n jobs: one answer each, or the call is not understood.
template <class T>
std::vector<T> for_each_of(std::vector<T> each, std::size_t n) {
  if (each.size() != n) {
    throw Error(Errc::protocol, "the library answered for " + std::to_string(each.size()) +
                                    " jobs of " + std::to_string(n));
  }
  return each;
}

void add_held(Command& cmd, const Held& a) {
  cmd.add(a.id).add(static_cast<std::int64_t>(a.token));
}

// A job's words in a putmany: id body nopts [options...].
void add_putmany_part(Command& cmd, const JobSpec& job) {
  cmd.add(job.id).add(job.body).add(std::int64_t{put_option_words(job)});
  add_put_options(cmd, job);
}

bool changed(const Reply& r) { return parse_integer(r) == 1; }
int to_count(const Reply& r) { return static_cast<int>(parse_integer(r)); }

}  // namespace

// ---------------------------------------------------------------- put

void Put::check(const Args& a, const ClientOptions& o) { check_spec(a, o.max_body); }
void Put::encode(Command& cmd, const Args& a) {
  cmd.add(a.id).add(a.body);
  add_put_options(cmd, a);
  if (a.after.empty()) return;
  cmd.add("AFTER").add(static_cast<std::int64_t>(a.after.size()));
  for (const auto& d : a.after) cmd.add(d.topic).add(d.id).add(to_string(d.on_failure));
}
PutOutcome Put::decode(const Reply& r) { return parse_put(r); }
const redis::BatchKind& Put::kind() { return put_kind(); }
bool Put::takes(const Args& a) { return put_takes(a.id, a); }
void Put::part(Command& cmd, const Args& a) { add_putmany_part(cmd, a); }

void Add::check(const Args& a, const ClientOptions& o) {
  if (!a.id.empty()) {
    throw Error(Errc::invalid_argument, "add generates the id: leave JobSpec::id empty");
  }
  if (a.mode != PutMode::create) {
    throw Error(Errc::invalid_argument, "add creates a job: a generated id cannot be replaced");
  }
  check_spec(a, o.max_body);
}

void Add::place(Args& a, const Layout& l) {
  // The library makes ids per topic ("*"), and a shard's id must lead to
  // that shard: on a spread topic the id is made here ("<ms>-<random>").
  a.id = l.spread() ? random_job_id() : "*";
}

std::string Add::decode(const Reply& r, const Args& a) {
  if (a.id != "*") {
    if (parse_put(r) != PutOutcome::created) {
      throw Error(Errc::server, "the generated id " + a.id + " was taken");
    }
    return a.id;
  }
  if (r.type != Reply::Type::string) throw Error(Errc::protocol, "put * gave no id");
  return r.str;
}

void PutMany::check(const Args& a, const ClientOptions& o) {
  for (const auto& job : a.jobs) {
    check_spec(job, o.max_body);
    if (!job.after.empty()) {
      throw Error(Errc::invalid_argument,
                  "put_many takes no dependencies (JobSpec::after): put job " + job.id + " alone");
    }
  }
}
void PutMany::encode(Command& cmd, std::span<const Item> chunk, const Args& /*a*/) {
  cmd.add(static_cast<std::int64_t>(chunk.size()));
  for (const auto& job : chunk) add_putmany_part(cmd, job);
}
std::vector<PutOutcome> PutMany::decode(const Reply& r, std::size_t n) {
  return for_each_of(parse_put_many(r), n);
}

// ---------------------------------------------------------------- read

void Get::encode(Command& cmd, const Args& a) {
  cmd.add(a.id);
  if (!a.with_body) cmd.add("NOBODY");
  if (a.with_deps) cmd.add("DEPS");
}
std::optional<Job> Get::decode(const Reply& r) { return parse_get(r); }

TopicStats Stats::decode(const Reply& r) { return parse_stats(r); }
TopicStats Stats::merge(std::vector<Value> parts) { return merge_stats(parts, parts.size()); }
void Stats::add_base(Value& all, const Value& base) {
  add_totals(all, base);
  all.outbox += base.outbox;  // (entries it made before it was spread)
}

void History::check(const Args& a, const ClientOptions& /*o*/) {
  if (a.step == HistoryStep::total) return;
  if (a.from_ms < 0 || a.to_ms < a.from_ms) {
    throw Error(Errc::invalid_argument, "history: from " + std::to_string(a.from_ms) + " to " +
                                            std::to_string(a.to_ms) + " is not a range of times");
  }
}
void History::encode(Command& cmd, const Args& a) {
  if (a.step == HistoryStep::total) {
    cmd.add("total");
  } else {
    cmd.add(a.step == HistoryStep::minute ? "minute" : "hour").add(a.from_ms).add(a.to_ms);
  }
  if (a.spread) cmd.add("SPREAD");
}
std::vector<HistoryRow> History::decode(const Reply& r) { return parse_history(r); }
std::vector<HistoryRow> History::merge(std::vector<Value> parts) {
  return merge_history(std::move(parts));
}

void List::encode(Command& cmd, const Args& a) {
  cmd.add(to_string(a.state)).add(a.offset).add(std::int64_t{a.count});
  if (!a.with_bodies) cmd.add("NOBODY");
}
ListPage List::decode(const Reply& r) { return parse_list(r); }

// ---------------------------------------------------------------- take

void Reserve::encode(Command& cmd, const Args& a) {
  cmd.add(std::int64_t{a.count});
  tail(cmd, a);
}
ReserveResult Reserve::decode(const Reply& r) { return parse_reserve(r, true); }
const redis::BatchKind& Reserve::kind() { return reserve_kind(); }
void Reserve::check(const Args& a, const ClientOptions& /*o*/) {
  if (!a.worker.empty()) check_worker_id(a.worker, "the reserving worker's name");
}
void Reserve::tail(Command& cmd, const Args& a) {
  if (a.ttr.count() > 0) cmd.add("TTR").add(a.ttr.count());
  // (in the tail: reserves coalesce only with those of the same worker)
  if (!a.worker.empty()) cmd.add("WORKER").add(a.worker);
}

void ReserveJob::check(const Args& a, const ClientOptions& /*o*/) {
  if (!a.worker.empty()) check_worker_id(a.worker, "the reserving worker's name");
}
void ReserveJob::encode(Command& cmd, const Args& a) {
  cmd.add(a.id);
  if (a.ttr.count() > 0) cmd.add("TTR").add(a.ttr.count());
  if (!a.worker.empty()) cmd.add("WORKER").add(a.worker);
}
ReserveJobResult ReserveJob::decode(const Reply& r) { return parse_reserve_job(r); }

void Pull::encode(Command& cmd, const Args& a) { cmd.add(std::int64_t{a.count}); }
ReserveResult Pull::decode(const Reply& r) { return parse_reserve(r, false); }

// ---------------------------------------------------------------- settle

void Ack::check(const Args& a, const ClientOptions& o) {
  if (!a.result) return;
  // (The library keeps a result for keep, and at least the retry window,
  // for a job still on its way to wait for it; it refuses one without keep
  // only where that window is 0 and no job waits.)
  if (a.result->size() > o.max_body) {
    throw Error(Errc::invalid_argument, "result is " + std::to_string(a.result->size()) +
                                            " bytes, over the limit of " +
                                            std::to_string(o.max_body));
  }
}
void Ack::encode(Command& cmd, const Args& a) {
  add_held(cmd, a);
  tail(cmd, a);
  if (a.result) cmd.add("RESULT").add(*a.result);
  if (a.result && a.forward) cmd.add("FORWARD");
}
Outcome Ack::decode(const Reply& r) { return parse_outcome(r); }
const redis::BatchKind& Ack::kind() { return ack_kind(); }
bool Ack::takes(const Args& a) { return !a.result && ack_takes(a.id, a.token); }
void Ack::part(Command& cmd, const Args& a) { add_held(cmd, a); }
void Ack::tail(Command& cmd, const Args& a) {
  if (a.keep.count() > 0) cmd.add("KEEP").add(a.keep.count());
}

void AckMany::encode(Command& cmd, std::span<const Item> chunk, const Args& a) {
  cmd.add(static_cast<std::int64_t>(chunk.size()));
  for (const auto& [id, token] : chunk) cmd.add(id).add(static_cast<std::int64_t>(token));
  if (a.keep.count() > 0) cmd.add("KEEP").add(a.keep.count());
}
std::vector<Outcome> AckMany::decode(const Reply& r, std::size_t n) {
  return for_each_of(parse_outcomes(r), n);
}

void Release::encode(Command& cmd, const Args& a) {
  add_held(cmd, a);
  if (a.delay.count() > 0) cmd.add("DELAY").add(a.delay.count());
  if (a.priority) cmd.add("PRIORITY").add(std::int64_t{*a.priority});
}
Outcome Release::decode(const Reply& r) { return parse_outcome(r); }

void Reschedule::encode(Command& cmd, const Args& a) {
  cmd.add(a.id);
  if (a.change.priority) cmd.add("PRIORITY").add(std::int64_t{*a.change.priority});
  if (a.change.delay) cmd.add("DELAY").add(a.change.delay->count());
  if (a.change.due_at_ms) cmd.add("AT").add(*a.change.due_at_ms);
}
Outcome Reschedule::decode(const Reply& r) { return parse_outcome(r); }

void Fail::encode(Command& cmd, const Args& a) {
  add_held(cmd, a);
  cmd.add(a.error);
  if (a.bury) cmd.add("DEAD");
  if (a.retry_delay) cmd.add("DELAY").add(a.retry_delay->count());
  if (a.max_attempts) cmd.add("ATTEMPTS").add(std::int64_t{*a.max_attempts});
  if (a.priority) cmd.add("PRIORITY").add(*a.priority);
}
FailResult Fail::decode(const Reply& r) { return parse_fail(r); }

void Touch::encode(Command& cmd, const Args& a) {
  add_held(cmd, a);
  if (a.ttr.count() > 0) cmd.add("TTR").add(a.ttr.count());
}
TouchResult Touch::decode(const Reply& r) { return parse_touch(r); }

// The library checks a progress value's JSON; what it would cut or refuse
// of the rest is refused here, before anything goes out.
void Report::check(const Args& a, const ClientOptions& /*o*/) {
  const JobReport& r = a.report;
  if (r.empty())
    throw Error(Errc::invalid_argument, "a report holds log lines, a progress or both");
  if (r.lines.size() > static_cast<std::size_t>(limits::kLogLinesMax)) {
    throw Error(Errc::invalid_argument,
                "a report holds at most " + std::to_string(limits::kLogLinesMax) + " log lines");
  }
  for (const std::string& line : r.lines) {
    if (!valid_utf8(line))
      throw Error(Errc::invalid_argument, "a log line is not UTF-8: " + printable(line));
  }
  if (r.progress &&
      (r.progress->empty() || r.progress->size() > static_cast<std::size_t>(limits::kProgressMax) ||
       !valid_utf8(*r.progress))) {
    throw Error(Errc::invalid_argument, "a progress is a JSON value of 1.." +
                                            std::to_string(limits::kProgressMax) +
                                            " bytes of UTF-8");
  }
}

void Report::encode(Command& cmd, const Args& a) {
  add_held(cmd, a);
  cmd.add(static_cast<std::int64_t>(a.report.lines.size()));
  for (const std::string& line : a.report.lines) cmd.add(line);
  if (a.report.progress) cmd.add("PROGRESS").add(*a.report.progress);
}
Outcome Report::decode(const Reply& r) { return parse_outcome(r); }

// ---------------------------------------------------------------- manage

void Delete::encode(Command& cmd, const Args& a) { cmd.add(a.id); }
bool Delete::decode(const Reply& r) { return changed(r); }

namespace {

// Big-endian, as the stored format lays numbers out.
void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// restore's HISTORY: the history as the stored format lays it out (its
// count, then each entry; docs/redis-api.md, "Stored format").
std::string history_bytes(const std::vector<Attempt>& history) {
  std::string out;
  put_be(out, history.size(), 1);
  for (const Attempt& a : history) {
    put_be(out, static_cast<std::uint64_t>(a.attempt), 2);
    put_be(out, (a.outcome == AttemptOutcome::lapsed ? 2 : 1) + (a.error_cut ? 128 : 0), 1);
    put_be(out, static_cast<std::uint64_t>(a.started_ms), 6);
    put_be(out, static_cast<std::uint64_t>(a.ended_ms), 6);
    put_be(out, a.worker.size(), 1);
    out += a.worker;
    put_be(out, a.error.size(), 2);
    out += a.error;
  }
  return out;
}

// restore's LOG: the log as the stored format lays it out.
std::string log_bytes(const Job& job) {
  std::string out;
  put_be(out,
         static_cast<std::uint64_t>(
             std::max<std::int64_t>(job.log_total, static_cast<std::int64_t>(job.log.size()))),
         4);
  put_be(out, job.log.size(), 2);
  for (const LogLine& l : job.log) {
    put_be(out, static_cast<std::uint64_t>(l.at_ms), 6);
    put_be(out, static_cast<std::uint64_t>(l.attempt), 2);
    put_be(out, l.cut ? 1 : 0, 1);
    put_be(out, l.text.size(), 2);
    out += l.text;
  }
  return out;
}

}  // namespace

// The bounds that history_bytes's and log_bytes's fields need (the library checks the rest).
void Restore::check(const Args& a, const ClientOptions& /*o*/) {
  if (a.job.state == JobState::blocked) {
    throw Error(Errc::invalid_argument,
                "a blocked job is not restored: its dependencies are other topics' to keep");
  }
  const auto& h = a.job.history;
  if (h.size() > static_cast<std::size_t>(limits::kHistoryMax)) {
    throw Error(Errc::invalid_argument,
                "a history holds at most " + std::to_string(limits::kHistoryMax) + " attempts");
  }
  for (const Attempt& e : h) {
    if (!e.worker.empty()) check_worker_id(e.worker, "an attempt's worker");
    if (e.error.size() > static_cast<std::size_t>(limits::kHistoryErrorMax)) {
      throw Error(Errc::invalid_argument, "an attempt's error is over " +
                                              std::to_string(limits::kHistoryErrorMax) + " bytes");
    }
    if (e.attempt < 1 || e.attempt > limits::kAttemptsMax || e.started_ms < 0 ||
        e.started_ms > e.ended_ms || e.ended_ms > limits::kMsMax) {
      throw Error(Errc::invalid_argument,
                  "an attempt's number or times are out of range (attempt " +
                      std::to_string(e.attempt) + ", started " + std::to_string(e.started_ms) +
                      ", ended " + std::to_string(e.ended_ms) + ")");
    }
  }
  // The log's and progress's bounds (the library checks the text).
  if (a.job.log.size() > static_cast<std::size_t>(limits::kLogLinesMax)) {
    throw Error(Errc::invalid_argument,
                "a log holds at most " + std::to_string(limits::kLogLinesMax) + " lines");
  }
  std::int64_t bytes = 0;
  for (const LogLine& l : a.job.log) {
    bytes += static_cast<std::int64_t>(l.text.size());
    if (static_cast<std::int64_t>(l.text.size()) > limits::kLogLineMax || l.attempt < 1 ||
        l.attempt > limits::kAttemptsMax || l.at_ms < 0 || l.at_ms > limits::kMsMax) {
      throw Error(Errc::invalid_argument, "a log line's size, attempt or time is out of range");
    }
  }
  if (bytes > limits::kLogBytesMax) {
    throw Error(Errc::invalid_argument,
                "a log holds at most " + std::to_string(limits::kLogBytesMax) + " bytes of lines");
  }
  if (const auto& p = a.job.progress;
      p && (p->attempt < 1 || p->attempt > limits::kAttemptsMax || p->at_ms < 0 ||
            p->at_ms > limits::kMsMax || p->value.empty() ||
            static_cast<std::int64_t>(p->value.size()) > limits::kProgressMax)) {
    throw Error(Errc::invalid_argument, "a progress's attempt, time or size is out of range");
  }
}

void Restore::encode(Command& cmd, const Args& a) {
  const Job& job = a.job;
  const char* state = job.state == JobState::dead      ? "dead"
                      : job.state == JobState::delayed ? "delayed"
                                                       : "ready";
  cmd.add(job.id).add(job.body).add(state).add(job.created_ms).add(std::int64_t{job.attempts});
  cmd.add("AT").add(job.due_ms).add("PRIORITY").add(std::int64_t{job.priority});
  if (job.own_ttr) cmd.add("TTR").add(job.ttr.count());  // else reserve's or the default
  if (job.max_attempts > 0) cmd.add("ATTEMPTS").add(std::int64_t{job.max_attempts});
  cmd.add("BACKOFF")
      .add(job.backoff.kind == BackoffKind::fixed ? "fixed" : "exponential")
      .add(job.backoff.base.count())
      .add(job.backoff.cap.count());
  if (job.keep.count() > 0) cmd.add("KEEP").add(job.keep.count());
  if (job.error) cmd.add("ERROR").add(*job.error);
  if (job.state == JobState::dead) cmd.add("DIED").add(job.died_ms);
  if (!job.history.empty()) cmd.add("HISTORY").add_owned(history_bytes(job.history));
  if (job.progress) {
    cmd.add("PROGRESS")
        .add(std::int64_t{job.progress->attempt})
        .add(job.progress->at_ms)
        .add(job.progress->value);
  }
  if (!job.log.empty()) cmd.add("LOG").add_owned(log_bytes(job));
  if (a.replace) cmd.add("REPLACE");
}
bool Restore::decode(const Reply& r) { return changed(r); }

void Requeue::encode(Command& cmd, const Args& a) { cmd.add("LIMIT").add(std::int64_t{a.limit}); }
RequeueResult Requeue::decode(const Reply& r) { return parse_requeue(r); }
RequeueResult Requeue::merge(std::vector<Value> parts) {
  RequeueResult all;
  for (const auto& p : parts) {
    all.requeued += p.requeued;
    all.buried += p.buried;
    all.next_deadline_ms = earlier_time(all.next_deadline_ms, p.next_deadline_ms);
  }
  return all;
}

void IdsCount::encode(Command& cmd, std::span<const Item> chunk, const Args& /*a*/) {
  for (const auto& id : chunk) cmd.add(id);
}
std::vector<int> IdsCount::decode(const Reply& r, std::size_t n) {
  std::vector<int> each(n, 0);
  if (n > 0) each.front() = to_count(r);
  return each;
}
int IdsCount::finish(const std::vector<Each>& each) {
  int n = 0;
  for (int k : each) n += k;
  return n;
}

void KickAll::encode(Command& cmd, const Args& a) { cmd.add("LIMIT").add(std::int64_t{a.limit}); }
int KickAll::decode(const Reply& r) { return to_count(r); }
int KickAll::merge(const std::vector<Value>& parts) { return IdsCount::finish(parts); }

BatchResult Batches::decode(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.size() != 2) {
    throw Error(Errc::protocol, "expected {done, left}");
  }
  return {static_cast<int>(parse_integer(r.elements[0])), parse_integer(r.elements[1])};
}
BatchResult Batches::merge(const std::vector<Value>& parts) {
  BatchResult all;
  for (const auto& p : parts) {
    all.done += p.done;
    all.left += p.left;
  }
  return all;
}
void PromoteAll::encode(Command& cmd, const Args& a) {
  cmd.add("LIMIT").add(std::int64_t{a.limit});
}
void Purge::encode(Command& cmd, const Args& a) {
  cmd.add(a.before_ms).add("LIMIT").add(std::int64_t{a.limit});
}

void Pause::check(const Args& a, const ClientOptions& /*o*/) {
  if (a.duration.count() < 0 || a.duration.count() > limits::kDelayMax) {
    throw Error(Errc::invalid_argument,
                "a pause's duration is " + std::to_string(a.duration.count()) +
                    " ms: it must be 0 (no end) to " + std::to_string(limits::kDelayMax) + " ms");
  }
}
void Pause::encode(Command& cmd, const Args& a) {
  if (a.duration.count() > 0) cmd.add("FOR").add(a.duration.count());
}
bool Pause::decode(const Reply& r) { return changed(r); }
bool Pause::merge(const std::vector<Value>& parts) {
  return std::find(parts.begin(), parts.end(), true) != parts.end();
}

void Limit::encode(Command& cmd, const Args& a) {
  if (!a.set) return;
  const TopicLimits& l = *a.set;
  // Without a rate its window is not used, but the library checks it.
  const std::int64_t window = l.rate == 0 ? 1 : l.window.count();
  cmd.add("RATE").add(std::int64_t{l.rate}).add(window);
  cmd.add("CONCURRENCY").add(std::int64_t{l.concurrency});
  cmd.add("AGING").add(l.aging.count());
}
TopicLimits Limit::decode(const Reply& r) { return parse_limits(r); }

void RetryWindow::check(const Args& a, const ClientOptions& /*o*/) {
  if (a.set && (a.set->count() < 0 || a.set->count() > limits::kWindowMax)) {
    throw Error(Errc::invalid_argument, "the retry window must be 0.." +
                                            std::to_string(limits::kWindowMax) + " ms, got " +
                                            std::to_string(a.set->count()));
  }
}
void RetryWindow::encode(Command& cmd, const Args& a) {
  if (a.set) cmd.add(a.set->count());
}
redisched::RetryWindow RetryWindow::decode(const Reply& r) { return parse_retry_window(r); }
redisched::RetryWindow RetryWindow::merge(std::vector<Value> parts) {
  Value all = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) all.remembered += parts[i].remembered;
  return all;
}

void Migrate::encode(Command& cmd, const Args& a) { cmd.add("LIMIT").add(std::int64_t{a.limit}); }
MigrateStep Migrate::decode(const Reply& r) { return parse_migrate_step(r); }

std::vector<std::string> Shards::decode(const Reply& r) {
  if (r.type != Reply::Type::array) throw Error(Errc::protocol, "shards: not a list");
  std::vector<std::string> list;
  list.reserve(r.elements.size());
  for (const auto& e : r.elements) list.push_back(e.str);
  return list;
}

void Shard::encode(Command& cmd, const Args& a) {
  for (const auto& w : a.words) cmd.add(w);
}
int Shard::decode(const Reply& r) { return to_count(r); }

// ---------------------------------------------------------------- schedules

void Schedules::encode(Command& cmd, const Args& a) {
  if (a.name) cmd.add("NAME").add(*a.name);
}
ScheduleList Schedules::decode(const Reply& r) { return parse_schedules(r); }

void Schedule::encode(Command& cmd, const Args& a) {
  const ScheduleSpec& spec = a.stored.spec;
  cmd.add(a.stored.name).add(spec.body);
  if (spec.every) {
    cmd.add("EVERY").add(spec.every->count());
  } else {
    cmd.add("CRON").add(spec.cron).add(spec.time_zone);
  }
  cmd.add("NEXT").add(a.stored.next_ms);
  if (spec.catch_up == CatchUp::last) cmd.add("CATCHUP").add("last");
  if (spec.paused) cmd.add("PAUSED");
  add_put_options(cmd, a.job);
}
redisched::Schedule Schedule::decode(const Reply& /*r*/, const Args& a) { return a.stored; }

void Unschedule::encode(Command& cmd, const Args& a) { cmd.add(a.name); }
bool Unschedule::decode(const Reply& r) { return changed(r); }

void PauseSchedule::encode(Command& cmd, const Args& a) { cmd.add(a.name); }
Outcome PauseSchedule::decode(const Reply& r) { return parse_outcome(r); }

void ResumeSchedule::encode(Command& cmd, const Args& a) {
  cmd.add(a.name).add("NEXT").add(a.next);
}
Outcome ResumeSchedule::decode(const Reply& r) { return parse_outcome(r); }

void Tick::encode(Command& cmd, const Args& a) {
  cmd.add(a.name).add(a.expect).add(a.next);
  if (a.run) cmd.add("RUN").add(*a.run);
}
TickOutcome Tick::decode(const Reply& r) { return parse_tick(r); }

// ---------------------------------------------------------------- workers

void Beat::check(const Args& a, const ClientOptions& /*o*/) {
  check_worker_id(a.entry.id);
  if (a.ttl.count() < limits::kBeatTtlMin || a.ttl.count() > limits::kBeatTtlMax) {
    throw Error(Errc::invalid_argument, "a beat's ttl must be from " +
                                            std::to_string(limits::kBeatTtlMin) + " to " +
                                            std::to_string(limits::kBeatTtlMax) + " ms, got " +
                                            std::to_string(a.ttl.count()));
  }
  if (a.entry.topics.size() > kRegistryListMax || a.entry.running.size() > kRegistryListMax) {
    throw Error(Errc::invalid_argument, "a worker's entry lists at most " +
                                            std::to_string(kRegistryListMax) + " topics and " +
                                            std::to_string(kRegistryListMax) + " running jobs");
  }
  for (const auto& t : a.entry.topics) check_topic(t.topic);
  for (const auto& r : a.entry.running) {
    check_topic(r.topic);
    check_id(r.id);
  }
}

void Beat::encode(Command& cmd, const Args& a) {
  const WorkerEntry& e = a.entry;
  cmd.add(e.id).add(a.ttl.count()).add(e.host).add(e.pid).add(e.version).add(e.started_ms);
  cmd.add(static_cast<std::int64_t>(e.topics.size()));
  for (const auto& t : e.topics) cmd.add(t.topic).add(std::int64_t{t.concurrency});
  cmd.add(static_cast<std::int64_t>(e.running.size()));
  for (const auto& r : e.running) cmd.add(r.topic).add(r.id).add(r.started_ms);
}
bool Beat::decode(const Reply& r) { return parse_integer(r) == 1; }

void Leave::check(const Args& a, const ClientOptions& /*o*/) { check_worker_id(a.id); }
void Leave::encode(Command& cmd, const Args& a) { cmd.add(a.id); }
bool Leave::decode(const Reply& r) { return parse_integer(r) == 1; }

std::vector<WorkerEntry> Workers::decode(const Reply& r) {
  auto bad = [] { return Error(Errc::protocol, "unexpected reply of redisched_workers"); };
  if (r.type != Reply::Type::array || r.elements.empty()) throw bad();
  std::vector<WorkerEntry> out;
  out.reserve(r.elements.size() - 1);
  for (std::size_t i = 1; i < r.elements.size(); ++i) {
    const auto& w = r.elements[i];
    if (w.type != Reply::Type::array || w.elements.size() != 9 ||
        w.elements[7].elements.size() % 2 != 0 || w.elements[8].elements.size() % 3 != 0) {
      throw bad();
    }
    WorkerEntry e;
    e.id = w.elements[0].str;
    e.host = w.elements[1].str;
    e.pid = parse_integer(w.elements[2]);
    e.version = w.elements[3].str;
    e.started_ms = parse_integer(w.elements[4]);
    e.beat_ms = parse_integer(w.elements[5]);
    e.expires_ms = parse_integer(w.elements[6]);
    const auto& topics = w.elements[7].elements;
    for (std::size_t k = 0; k < topics.size(); k += 2) {
      e.topics.push_back({topics[k].str, static_cast<int>(parse_integer(topics[k + 1]))});
    }
    const auto& running = w.elements[8].elements;
    for (std::size_t k = 0; k < running.size(); k += 3) {
      e.running.push_back({running[k].str, running[k + 1].str, parse_integer(running[k + 2])});
    }
    out.push_back(std::move(e));
  }
  return out;
}

// ---------------------------------------------------------------- flows

std::vector<OutboxEntry> Outbox::decode(const Reply& r) {
  if (r.type != Reply::Type::array) throw Error(Errc::protocol, "outbox: not an array");
  std::vector<OutboxEntry> out;
  out.reserve(r.elements.size());
  for (const Reply& e : r.elements) {
    if (e.type != Reply::Type::array || e.elements.size() < 3) {
      throw Error(Errc::protocol, "outbox: an entry of fewer than 3 words");
    }
    OutboxEntry x{e.elements[0].str, e.elements[1].str, e.elements[2].str, {}};
    for (std::size_t i = 3; i < e.elements.size(); ++i) x.args.push_back(e.elements[i].str);
    out.push_back(std::move(x));
  }
  return out;
}

void Moved::encode(Command& cmd, const Args& a) {
  for (const auto& e : a.entries) cmd.add(e);
}
int Moved::decode(const Reply& r) { return to_count(r); }

void Depend::encode(Command& cmd, std::span<const Item> chunk, const Args& a) {
  cmd.add(a.topic).add(a.id).add(a.gen).add(static_cast<std::int64_t>(chunk.size()));
  for (const auto& id : chunk) cmd.add(id);
}
std::vector<int> Depend::decode(const Reply& r, std::size_t n) {
  if (r.type != Reply::Type::array) throw Error(Errc::protocol, "depend: not an array");
  std::vector<int> each;
  each.reserve(r.elements.size());
  for (const Reply& e : r.elements) each.push_back(to_count(e));
  return for_each_of(std::move(each), n);
}
int Depend::finish(const std::vector<int>& each) {
  return static_cast<int>(std::count(each.begin(), each.end(), 2));
}

// (forget answers one count per call, not per id: it stands in the first
// id's place, as IdsCount's do)
std::vector<int> Forget::decode(const Reply& r, std::size_t n) {
  std::vector<int> each(n, 0);
  if (n > 0) each[0] = to_count(r);
  return each;
}
int Forget::finish(const std::vector<int>& each) {
  int n = 0;
  for (int e : each) n += e;
  return n;
}

void Resolve::encode(Command& cmd, const Args& a) {
  cmd.add(a.id);
  for (const auto& w : a.rest) cmd.add(w);
}
int Resolve::decode(const Reply& r) { return to_count(r); }

void Batch::check(const Args& a, const ClientOptions& /*o*/) {
  check_id(a.id);
  if (a.change.add.size() > static_cast<std::size_t>(limits::kDepsMax)) {
    throw Error(Errc::invalid_argument,
                "a batch takes at most " + std::to_string(limits::kDepsMax) + " members a call");
  }
  for (const auto& m : a.change.add) {
    check_topic(m.topic);
    check_id(m.id);
  }
  if (a.change.keep && a.change.keep->count() <= 0) {
    throw Error(Errc::invalid_argument, "a batch's keep must be positive");
  }
}
void Batch::encode(Command& cmd, const Args& a) {
  cmd.add(a.id);
  if (!a.change.add.empty()) {
    cmd.add("ADD").add(static_cast<std::int64_t>(a.change.add.size()));
    for (const auto& m : a.change.add) cmd.add(m.topic).add(m.id);
  }
  if (a.change.seal) cmd.add("SEAL");
  if (a.change.keep) cmd.add("KEEP").add(a.change.keep->count());
}
Job Batch::decode(const Reply& r) {
  auto j = parse_get(r);
  if (!j) throw Error(Errc::protocol, "unexpected reply from the Functions library: batch nil");
  return *std::move(j);
}

}  // namespace redisched::core::op
