#include "core/codec.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/client_access.h"
#include "core/keys.h"
#include "core/text.h"
#include "redis/command.h"
#include "redisched/limits.h"

namespace redisched::core {
namespace {

using redis::Reply;

[[noreturn]] void unexpected(std::string_view what) {
  throw Error(Errc::protocol, "unexpected reply from the Functions library: " + std::string(what));
}

const Reply& as_array(const Reply& r, size_t min_size, std::string_view what) {
  if (r.type != Reply::Type::array || r.elements.size() < min_size) unexpected(what);
  return r;
}

std::int64_t to_int(const Reply& r) {
  if (r.type == Reply::Type::integer) return r.integer;
  if (r.type == Reply::Type::string || r.type == Reply::Type::status) {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
    if (ec == std::errc() && end == r.str.data() + r.str.size()) return v;
  }
  unexpected("a number was expected");
}

JobState to_state(const std::string& s) {
  auto state = parse_job_state(s);
  if (!state) unexpected("unknown state '" + s + "'");
  return *state;
}

// An entry of a job's history (library version 30): field/value pairs.
Attempt attempt_from_fields(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) unexpected("history entry");
  Attempt a;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    const Reply& v = r.elements[i + 1];
    if (f == "attempt")
      a.attempt = static_cast<int>(to_int(v));
    else if (f == "outcome")
      a.outcome = v.str == "lapsed" ? AttemptOutcome::lapsed : AttemptOutcome::failed;
    else if (f == "started")
      a.started_ms = to_int(v);
    else if (f == "ended")
      a.ended_ms = to_int(v);
    else if (f == "worker")
      a.worker = v.str;
    else if (f == "error")
      a.error = v.str;
    else if (f == "error_cut")
      a.error_cut = to_int(v) != 0;
  }
  return a;
}

// A line of a job's log (library version 31): field/value pairs.
LogLine log_line_from_fields(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) unexpected("log line");
  LogLine l;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    const Reply& v = r.elements[i + 1];
    if (f == "at")
      l.at_ms = to_int(v);
    else if (f == "attempt")
      l.attempt = static_cast<int>(to_int(v));
    else if (f == "line")
      l.text = v.str;
    else if (f == "cut")
      l.cut = to_int(v) != 0;
  }
  return l;
}

namespace {
// One of get's deps (library version 35): topic id policy outcome value.
DependencyState dependency_from_fields(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) unexpected("dependency fields");
  DependencyState d;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    const std::string& v = r.elements[i + 1].str;
    if (f == "topic") {
      d.topic = v;
    } else if (f == "id") {
      d.id = v;
    } else if (f == "policy") {
      d.on_failure = parse_on_failure(v).value_or(OnFailure::fail);
    } else if (f == "outcome") {
      d.outcome = v == "done"      ? DependencyOutcome::done
                  : v == "failed"  ? DependencyOutcome::failed
                  : v == "dropped" ? DependencyOutcome::dropped
                                   : DependencyOutcome::pending;
    } else if (f == "value") {
      d.value = v;
    }
  }
  return d;
}
}  // namespace

Job job_from_fields(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) unexpected("job fields");
  Job j;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    const Reply& v = r.elements[i + 1];
    if (f == "id")
      j.id = v.str;
    else if (f == "state")
      j.state = to_state(v.str);
    else if (f == "body")
      j.body = v.str;
    else if (f == "priority")
      j.priority = to_int(v);
    else if (f == "created")
      j.created_ms = to_int(v);
    else if (f == "due")
      j.due_ms = to_int(v);
    else if (f == "attempts")
      j.attempts = static_cast<int>(to_int(v));
    else if (f == "max_attempts")
      j.max_attempts = static_cast<int>(to_int(v));
    else if (f == "ttr")
      j.ttr = Millis(to_int(v));
    else if (f == "own_ttr")
      j.own_ttr = to_int(v) != 0;
    else if (f == "backoff")
      j.backoff.kind = v.str == "fixed" ? BackoffKind::fixed : BackoffKind::exponential;
    else if (f == "backoff_base")
      j.backoff.base = Millis(to_int(v));
    else if (f == "backoff_cap")
      j.backoff.cap = Millis(to_int(v));
    else if (f == "error")
      j.error = v.str;
    else if (f == "result")
      j.result = v.str;
    else if (f == "keep")
      j.keep = Millis(to_int(v));
    else if (f == "token")
      j.token = static_cast<std::uint64_t>(to_int(v));
    else if (f == "reserved_at")
      j.reserved_at_ms = to_int(v);
    else if (f == "deadline")
      j.deadline_ms = to_int(v);
    else if (f == "died")
      j.died_ms = to_int(v);
    else if (f == "finished")
      j.finished_ms = to_int(v);
    else if (f == "expires")
      j.expires_ms = to_int(v);
    else if (f == "worker")
      j.worker = v.str;
    else if (f == "history") {
      if (v.type != Reply::Type::array) unexpected("history");
      j.history.reserve(v.elements.size());
      for (const Reply& e : v.elements) j.history.push_back(attempt_from_fields(e));
    } else if (f == "progress") {
      if (!j.progress) j.progress.emplace();
      j.progress->value = v.str;
    } else if (f == "progress_attempt") {
      if (!j.progress) j.progress.emplace();
      j.progress->attempt = static_cast<int>(to_int(v));
    } else if (f == "progress_at") {
      if (!j.progress) j.progress.emplace();
      j.progress->at_ms = to_int(v);
    } else if (f == "log") {
      if (v.type != Reply::Type::array) unexpected("log");
      j.log.reserve(v.elements.size());
      for (const Reply& e : v.elements) j.log.push_back(log_line_from_fields(e));
    } else if (f == "log_total") {
      j.log_total = to_int(v);
    } else if (f == "deps_total") {
      j.deps_total = static_cast<int>(to_int(v));
    } else if (f == "deps_left") {
      j.deps_left = static_cast<int>(to_int(v));
    } else if (f.starts_with("batch_")) {
      if (!j.batch) j.batch.emplace();
      if (f == "batch_sealed") j.batch->sealed = to_int(v) != 0;
      if (f == "batch_total") j.batch->total = to_int(v);
      if (f == "batch_done") j.batch->done = to_int(v);
      if (f == "batch_failed") j.batch->failed = to_int(v);
    } else if (f == "deps") {
      if (v.type != Reply::Type::array) unexpected("deps");
      j.deps.reserve(v.elements.size());
      for (const Reply& e : v.elements) j.deps.push_back(dependency_from_fields(e));
    }
    // Fields added by a newer library are skipped.
  }
  return j;
}

PutOutcome to_put_outcome(std::int64_t code) {
  switch (code) {
    case 1:
      return PutOutcome::created;
    case 2:
      return PutOutcome::updated;
    case -1:
      return PutOutcome::exists;
    case 0:
      return PutOutcome::not_found;
    default:
      unexpected("put code " + std::to_string(code));
  }
}

}  // namespace

Command& Command::fcall(std::string_view op, std::string_view prefix, std::string_view topic,
                        bool history) {
  add("FCALL");
  add_owned("redisched_" + std::string(op));
  return add_keys(prefix, topic, history);
}

Command& Command::fcall_registry(std::string_view op, std::string_view prefix) {
  add("FCALL");
  add_owned("redisched_" + std::string(op));
  add(std::int64_t{2});
  for (auto& key : registry_keys(prefix)) add_owned(std::move(key));
  return *this;
}

Command& Command::add_keys(std::string_view prefix, std::string_view topic, bool history) {
  // (the history key is the twelfth; the flows' follow it)
  const std::size_t n = history ? kKeyNames.size() : kKeysWithoutHistory;
  add(static_cast<std::int64_t>(n));
  // The keys in one owned buffer, each word a view into it: one
  // allocation a call instead of one a key (a coalesced call builds them
  // twice, and the client is what bounds those calls).
  std::size_t size = 0;
  for (std::size_t i = 0; i < n; ++i) size += topic_key_size(prefix, topic, kKeyNames[i]);
  std::string all;
  all.reserve(size);
  std::array<std::size_t, kKeyNames.size() + 1> at{};
  for (std::size_t i = 0; i < n; ++i) {
    at[i] = all.size();
    append_topic_key(all, prefix, topic, kKeyNames[i]);
  }
  at[n] = all.size();
  owned_.push_back(std::move(all));
  const std::string& keys = owned_.back();
  for (std::size_t i = 0; i < n; ++i) {
    push(std::string_view(keys.data() + at[i], at[i + 1] - at[i]));
  }
  return *this;
}

void Command::encode(std::string& out) const { redis::append_command(out, words_); }

void Command::encode_words(std::string& out) const { redis::append_words(out, words_); }

int put_option_words(const JobSpec& job) {
  int n = 0;
  if (job.delay) n += 2;
  if (job.due_at_ms) n += 2;
  if (job.priority != 0) n += 2;
  if (job.ttr) n += 2;
  if (job.max_attempts) n += 2;
  if (job.backoff) n += 4;
  if (job.keep.count() != 0) n += 2;
  if (job.mode != PutMode::create) n += 1;
  return n;
}

void add_put_options(Command& cmd, const JobSpec& job) {
  if (job.delay) cmd.add("DELAY").add(job.delay->count());
  if (job.due_at_ms) cmd.add("AT").add(*job.due_at_ms);
  if (job.priority != 0) cmd.add("PRIORITY").add(std::int64_t{job.priority});
  if (job.ttr) cmd.add("TTR").add(job.ttr->count());
  if (job.max_attempts) cmd.add("ATTEMPTS").add(std::int64_t{*job.max_attempts});
  if (job.backoff) {
    cmd.add("BACKOFF")
        .add(job.backoff->kind == BackoffKind::fixed ? "fixed" : "exponential")
        .add(job.backoff->base.count())
        .add(job.backoff->cap.count());
  }
  if (job.keep.count() != 0) cmd.add("KEEP").add(job.keep.count());
  if (job.mode == PutMode::replace) cmd.add("REPLACE");
  if (job.mode == PutMode::upsert) cmd.add("UPSERT");
  if (job.mode == PutMode::debounce) cmd.add("DEBOUNCE");
}

Error error_from_reply(const std::string& text) {
  const auto space = text.find(' ');
  const std::string_view word = std::string_view(text).substr(0, space);
  const std::string rest = space == std::string::npos ? text : text.substr(space + 1);
  for (const auto& w : kErrorWords) {
    if (w.word != word) continue;
    Error e = w.is == Word::oldformat ? Error(w.code, std::string(kOlderFormat) + rest)
              : w.is == Word::sharded ? Error(w.code, std::string(kSpreadTopic) + rest)
              : w.is == Word::not_now ? Error(w.code, "Redis: " + text)
                                      : Error(w.code, rest);
    detail::ErrorAccess::set_word(e, w.is);
    return e;
  }
  return Error(Errc::server, "Redis: " + text);
}

Error error_from_link(std::error_code ec, const std::string& text) {
  if (ec.category() == error_category()) return Error(static_cast<Errc>(ec.value()), text);
  return Error(Errc::connection, text.empty() ? ec.message() : text + ": " + ec.message());
}

Word word_of(const Error& e) { return detail::ErrorAccess::word(e); }

PutOutcome parse_put(const Reply& r) { return to_put_outcome(to_int(r)); }

std::vector<PutOutcome> parse_put_many(const Reply& r) {
  as_array(r, 0, "putmany codes");
  std::vector<PutOutcome> out;
  out.reserve(r.elements.size());
  for (const auto& e : r.elements) out.push_back(to_put_outcome(to_int(e)));
  return out;
}

std::optional<Job> parse_get(const Reply& r) {
  if (r.is_nil()) return std::nullopt;
  return job_from_fields(r);
}

Reservation parse_reservation(const Reply& r, bool reserved) {
  const Reply& e = as_array(r, reserved ? 9 : 7, "reserved job");
  Reservation j;
  j.id = e.elements[0].str;
  j.body = e.elements[1].str;
  size_t f = 2;
  if (reserved) j.token = static_cast<std::uint64_t>(to_int(e.elements[f++]));
  j.attempt = static_cast<int>(to_int(e.elements[f++]));
  j.max_attempts = static_cast<int>(to_int(e.elements[f++]));
  j.priority = to_int(e.elements[f++]);
  j.created_ms = to_int(e.elements[f++]);
  j.due_ms = to_int(e.elements[f++]);
  if (reserved) j.deadline_ms = to_int(e.elements[f++]);
  if (reserved && f < e.elements.size()) j.keep = Millis(to_int(e.elements[f]));  // version 12
  return j;
}

ReserveResult parse_reserve(const Reply& r, bool reserved) {
  as_array(r, 3, "reserve header");
  ReserveResult out;
  out.now_ms = to_int(r.elements[0]);
  out.next_ms = to_int(r.elements[1]);
  out.paused = to_int(r.elements[2]) != 0;
  out.jobs.reserve(r.elements.size() - 3);
  for (size_t i = 3; i < r.elements.size(); ++i)
    out.jobs.push_back(parse_reservation(r.elements[i], reserved));
  return out;
}

ReserveJobResult parse_reserve_job(const Reply& r) {
  as_array(r, 2, "reservejob reply");
  ReserveJobResult out;
  out.outcome = parse_outcome_code(to_int(r.elements[0]));
  out.now_ms = to_int(r.elements[1]);
  if (out.outcome == Outcome::ok) {
    out.job = parse_reservation(as_array(r, 3, "reservejob reply").elements[2], true);
  }
  return out;
}

Outcome parse_outcome_code(std::int64_t code) {
  switch (code) {
    case 1:
      return Outcome::ok;
    case 0:
      return Outcome::not_found;
    case -2:
      return Outcome::wrong_state;
    case -3:
      return Outcome::stale_token;
    default:
      unexpected("outcome code " + std::to_string(code));
  }
}

Outcome parse_outcome(const Reply& r) { return parse_outcome_code(to_int(r)); }

TickOutcome parse_tick(const Reply& r) {
  const std::int64_t code = to_int(r);
  switch (code) {
    case 1:
      return TickOutcome::put;
    case 2:
      return TickOutcome::moved;
    case 0:
      return TickOutcome::no_schedule;
    case -2:
      return TickOutcome::paused;
    case -3:
      return TickOutcome::superseded;
    default:
      unexpected("tick code " + std::to_string(code));
  }
}

std::vector<Outcome> parse_outcomes(const Reply& r) {
  as_array(r, 0, "outcome codes");
  std::vector<Outcome> out;
  out.reserve(r.elements.size());
  for (const auto& e : r.elements) out.push_back(parse_outcome_code(to_int(e)));
  return out;
}

FailResult parse_fail(const Reply& r) {
  if (r.type == Reply::Type::status) return {Outcome::ok, to_state(r.str)};
  return {parse_outcome_code(to_int(r)), JobState::reserved};
}

TouchResult parse_touch(const Reply& r) {
  const std::int64_t v = to_int(r);
  if (v > 0) return {Outcome::ok, v};
  return {parse_outcome_code(v), 0};
}

TopicLimits parse_limits(const Reply& r) {
  as_array(r, 3, "limits");
  TopicLimits l;
  l.rate = static_cast<int>(to_int(r.elements[0]));
  if (l.rate > 0) l.window = Millis(to_int(r.elements[1]));  // else TopicLimits' default
  l.concurrency = static_cast<int>(to_int(r.elements[2]));
  if (r.elements.size() > 3) l.aging = Millis(to_int(r.elements[3]));
  return l;
}

RetryWindow parse_retry_window(const Reply& r) {
  as_array(r, 2, "retrywindow");
  return RetryWindow{Millis(to_int(r.elements[0])), to_int(r.elements[1])};
}

MigrateStep parse_migrate_step(const Reply& r) {
  as_array(r, 3, "migrate");
  return MigrateStep{Migration{to_int(r.elements[1]), to_int(r.elements[2]), 1},
                     to_int(r.elements[0]) == 1};
}

std::vector<HistoryRow> parse_history(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.empty()) unexpected("history");
  std::vector<HistoryRow> rows;
  rows.reserve(r.elements.size() - 1);
  for (std::size_t i = 1; i < r.elements.size(); ++i) {
    const Reply& e = r.elements[i];
    as_array(e, 8, "history");
    rows.push_back(HistoryRow{to_int(e.elements[0]), to_int(e.elements[1]), to_int(e.elements[2]),
                              to_int(e.elements[3]), to_int(e.elements[4]), to_int(e.elements[5]),
                              to_int(e.elements[6]), to_int(e.elements[7])});
  }
  return rows;
}

TopicStats parse_stats(const Reply& r) {
  if (r.type != Reply::Type::array || r.elements.size() % 2 != 0) unexpected("stats");
  TopicStats s;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    const std::int64_t v = to_int(r.elements[i + 1]);
    if (f == "delayed")
      s.delayed = v;
    else if (f == "ready")
      s.ready = v;
    else if (f == "reserved")
      s.reserved = v;
    else if (f == "dead")
      s.dead = v;
    else if (f == "done")
      s.done = v;
    else if (f == "paused")
      s.paused = v != 0;
    else if (f == "pause_end")
      s.pause_end_ms = v;
    else if (f == "next_due")
      s.next_due_ms = v;
    else if (f == "limit_rate")
      s.limits.rate = static_cast<int>(v);
    else if (f == "limit_window" && v > 0)  // 0 without a rate: TopicLimits' default stays
      s.limits.window = Millis(v);
    else if (f == "limit_concurrency")
      s.limits.concurrency = static_cast<int>(v);
    else if (f == "schedules")
      s.schedules = v;
    else if (f == "shards")
      s.shards = v;
    else if (f == "blocked")
      s.blocked = v;
    else if (f == "outbox")
      s.outbox = v;
    else if (f == "limit_aging")
      s.limits.aging = Millis(v);
    else if (f == "limit_used")
      s.limit_used = v;
    else if (f == "failed_total")
      s.failed_total = v;
    else if (f == "dead_total")
      s.dead_total = v;
    else if (f == "lapsed_total")
      s.lapsed_total = v;
    else if (f == "put_total")
      s.put_total = v;
    else if (f == "started_total")
      s.started_total = v;
    else if (f == "done_total")
      s.done_total = v;
    else if (f == "wait_total")
      s.wait_total_ms = v;
  }
  return s;
}

ListPage parse_list(const Reply& r) {
  as_array(r, 1, "list");
  ListPage page;
  page.total = to_int(r.elements[0]);
  for (size_t i = 1; i < r.elements.size(); ++i)
    page.jobs.push_back(job_from_fields(r.elements[i]));
  return page;
}

namespace {
// A schedule's tick-job options, as redisched_schedule stored their words.
void schedule_options(const Reply& words, ScheduleSpec& spec) {
  const auto& w = words.elements;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& word = w[i].str;
    const auto next = [&]() -> const Reply& {
      if (i + 1 >= w.size()) unexpected("schedule options");
      return w[++i];
    };
    if (word == "PRIORITY") {
      spec.priority = to_int(next());
    } else if (word == "TTR") {
      spec.ttr = Millis(to_int(next()));
    } else if (word == "ATTEMPTS") {
      spec.max_attempts = static_cast<int>(to_int(next()));
    } else if (word == "KEEP") {
      spec.keep = Millis(to_int(next()));
    } else if (word == "BACKOFF") {
      Backoff b;
      b.kind = next().str == "fixed" ? BackoffKind::fixed : BackoffKind::exponential;
      b.base = Millis(to_int(next()));
      b.cap = Millis(to_int(next()));
      spec.backoff = b;
    }  // a word of a later version: left out
  }
}
}  // namespace

ScheduleList parse_schedules(const Reply& r) {
  as_array(r, 1, "schedules");
  ScheduleList out;
  out.now_ms = to_int(r.elements[0]);
  for (size_t i = 1; i < r.elements.size(); ++i) {
    const Reply& e = r.elements[i];
    if (e.type != Reply::Type::array || e.elements.size() % 2 != 0) unexpected("schedule fields");
    Schedule sc;
    for (size_t f = 0; f < e.elements.size(); f += 2) {
      const std::string& name = e.elements[f].str;
      const Reply& v = e.elements[f + 1];
      if (name == "name") {
        sc.name = v.str;
      } else if (name == "cron") {
        sc.spec.cron = v.str;
      } else if (name == "zone") {
        if (!v.str.empty()) sc.spec.time_zone = v.str;
      } else if (name == "every") {
        if (to_int(v) > 0) sc.spec.every = Millis(to_int(v));
      } else if (name == "next") {
        sc.next_ms = to_int(v);
      } else if (name == "last") {
        sc.last_tick_ms = to_int(v);
      } else if (name == "paused") {
        sc.spec.paused = to_int(v) != 0;
      } else if (name == "catchup") {
        sc.spec.catch_up = v.str == "last" ? CatchUp::last : CatchUp::skip;
      } else if (name == "body") {
        sc.spec.body = v.str;
      } else if (name == "options") {
        schedule_options(v, sc.spec);
      }
    }
    out.schedules.push_back(std::move(sc));
  }
  return out;
}

RequeueResult parse_requeue(const Reply& r) {
  as_array(r, 3, "requeue");
  return {static_cast<int>(to_int(r.elements[0])), static_cast<int>(to_int(r.elements[1])),
          to_int(r.elements[2])};
}

std::int64_t parse_integer(const Reply& r) { return to_int(r); }

}  // namespace redisched::core
