#include "server/api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>

#include "core/checks.h"
#include "core/shards.h"
#include "core/text.h"
#include "redisched/limits.h"
#include "redisched/version.h"
#include "server/async_util.h"
#include "server/census.h"
#include "server/dashboard.h"
#include "server/metrics.h"
#include "server/push.h"
#include "server/sweeper.h"
#include "server/wake_hub.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using asio::awaitable;
using Status = http::status;

[[noreturn]] void refuse(Status status, std::string code, std::string message) {
  throw HttpError{status, std::move(code), std::move(message)};
}

Response ok_json(const Request& req, const json::value& v, Status status = Status::ok) {
  return json_response(req, status, wire::to_text(v));
}

std::uint64_t token_field(const json::object& o) {
  auto t = int_field(o, "token", 1, limits::kSeqMax);
  if (!t) bad_request("\"token\" is missing: it comes with the reserved job");
  return static_cast<std::uint64_t>(*t);
}

int count_field(const json::object& o) {
  return static_cast<int>(int_field(o, "count", 1, limits::kBatchMax).value_or(1));
}

std::int64_t query_int(const Params& p, const std::string& name, std::int64_t def, std::int64_t lo,
                       std::int64_t hi) {
  const std::string* v = p.find(name);
  if (!v) return def;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < lo || n > hi) {
    bad_request("query parameter " + name + " must be an integer from " + std::to_string(lo) +
                " to " + std::to_string(hi));
  }
  return n;
}

json::object taken_json(const ReserveResult& r, bool reserved) {
  json::array jobs;
  for (const auto& j : r.jobs) jobs.push_back(wire::reservation_json(j, reserved));
  return json::object{{"jobs", std::move(jobs)}, {"paused", r.paused}};
}

// The wire names of outcomes: a batch's per-job outcomes, and the error
// codes of a single call's refusals.
std::string_view put_outcome_name(PutOutcome o) {
  switch (o) {
    case PutOutcome::created:
      return "created";
    case PutOutcome::updated:
      return "updated";
    case PutOutcome::exists:
      return "exists";
    case PutOutcome::not_found:
      return "not_found";
  }
  return "unknown";
}

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::ok:
      return "ok";
    case Outcome::not_found:
      return "not_found";
    case Outcome::wrong_state:
      return "wrong_state";
    case Outcome::stale_token:
      return "stale_token";
  }
  return "unknown";
}

Response outcome_response(const Request& req, Outcome o, std::string_view id,
                          json::object extra = {}) {
  switch (o) {
    case Outcome::ok:
      extra["ok"] = true;
      return ok_json(req, extra);
    case Outcome::not_found:
      refuse(Status::not_found, std::string(outcome_name(o)),
             "no job " + std::string(id) + " in this topic");
    case Outcome::wrong_state:
      refuse(Status::conflict, std::string(outcome_name(o)),
             "job " + std::string(id) + " is not reserved");
    case Outcome::stale_token:
      refuse(Status::conflict, std::string(outcome_name(o)),
             "the reservation of job " + std::string(id) +
                 " is over (it lapsed and was handed out again)");
  }
  refuse(Status::internal_server_error, "internal", "unknown outcome");
}

// ---- jobs

awaitable<Response> put_job(ApiContext& ctx, Request& req, const Params& p) {
  JobSpec s = job_spec(json_object(req.body()));
  s.id = p.id;
  auto o = co_await ctx.client.put_async(p.topic, s, asio::use_awaitable);
  switch (o) {
    case PutOutcome::created:
    case PutOutcome::updated: {
      ctx.metrics.job_event("put", p.topic, p.id, s.due_at_ms.value_or(0));
      const bool created = o == PutOutcome::created;
      co_return ok_json(req, json::object{{"id", p.id}, {"outcome", put_outcome_name(o)}},
                        created ? Status::created : Status::ok);
    }
    case PutOutcome::exists:
      if (s.mode == PutMode::debounce) {
        refuse(Status::conflict, std::string(put_outcome_name(o)),
               "job " + p.id + " is not waiting (reserved, dead or done): left as it is");
      }
      refuse(
          Status::conflict, std::string(put_outcome_name(o)),
          "job " + p.id + " exists; put it with \"mode\": \"replace\" or \"upsert\" to update it");
    case PutOutcome::not_found:
      refuse(Status::not_found, std::string(put_outcome_name(o)), "no job " + p.id + " to replace");
  }
  refuse(Status::internal_server_error, "internal", "unknown put outcome");
}

awaitable<Response> add_job(ApiContext& ctx, Request& req, const Params& p) {
  JobSpec s = job_spec(json_object(req.body()));
  if (s.mode != PutMode::create) bad_request("a generated id is always new: mode must be create");
  auto id = co_await ctx.client.add_async(p.topic, s, asio::use_awaitable);
  ctx.metrics.job_event("put", p.topic, id);
  co_return ok_json(req, json::object{{"id", id}, {"outcome", "created"}}, Status::created);
}

// The "jobs" array of a batch request: 1..kBatchMax objects.
const json::array& batch_jobs(const json::object& body) {
  auto it = body.find("jobs");
  if (it == body.end() || !it->value().is_array()) bad_request("give \"jobs\": [...]");
  const auto& jobs = it->value().as_array();
  if (jobs.empty()) bad_request("\"jobs\" is empty");
  if (jobs.size() > static_cast<std::size_t>(limits::kBatchMax)) {
    bad_request("at most " + std::to_string(limits::kBatchMax) + " jobs at once");
  }
  return jobs;
}

// A job of a batch: an object, with its "id".
const json::object& batch_job(const json::value& v) {
  if (!v.is_object()) bad_request("not an object");
  return v.as_object();
}
std::string batch_id(const json::object& job) {
  auto id = string_field(job, "id");
  if (!id) bad_request("give its \"id\"");
  return std::move(*id);
}

// Reads job i of a batch (f); its refusal says which job it was.
template <class F>
void for_job(std::size_t i, F f) {
  const auto which = "job " + std::to_string(i + 1) + ": ";
  try {
    f();
  } catch (HttpError& e) {
    e.message = which + e.message;
    throw;
  } catch (const Error& e) {
    HttpError refused = http_error(e);
    refused.message = which + refused.message;
    throw refused;
  }
}

// POST .../put: many puts in one request, each as PUT .../jobs/{id} takes
// it plus its "id"; every job is checked before any is put. 200 with each
// job's outcome in order: created, updated, exists, not_found.
awaitable<Response> put_jobs(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"jobs"});
  const auto& jobs = batch_jobs(body);
  std::vector<JobSpec> specs;
  specs.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    for_job(i, [&] {
      json::object job = batch_job(jobs[i]);
      std::string id = batch_id(job);
      if (id == "*") bad_request("a generated id is POST .../jobs's, one job a request");
      if (job.contains("after")) {
        bad_request("\"after\" goes with PUT .../jobs/{id}, one job a request");
      }
      job.erase("id");
      specs.push_back(job_spec(job));
      specs.back().id = std::move(id);
      core::check_id(specs.back().id);
    });
  }
  const auto outcomes = co_await ctx.client.put_many_async(p.topic, specs, asio::use_awaitable);
  json::array answers;
  answers.reserve(outcomes.size());
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto o = outcomes[i];
    if (o == PutOutcome::created || o == PutOutcome::updated) {
      ctx.metrics.job_event("put", p.topic, specs[i].id, specs[i].due_at_ms.value_or(0));
    }
    answers.push_back(json::object{{"id", specs[i].id}, {"outcome", put_outcome_name(o)}});
  }
  co_return ok_json(req, json::object{{"jobs", std::move(answers)}});
}

// With ?wait_ms=N, a long-poll: answers once the job has finished (done or
// dead), is gone, or N ms have passed (then as it is), woken by the
// topic's finished signal (Client::wait).
awaitable<Response> get_job(ApiContext& ctx, Request& req, const Params& p) {
  const auto wait = query_int(p, "wait_ms", 0, 0, ctx.max_wait_ms);
  // (No co_await inside ?: — GCC 12 miscompiles it.)
  std::optional<Job> j;
  if (wait > 0 && !ctx.stopping) {
    j = co_await ctx.client.wait_async(p.topic, p.id, Millis{wait}, asio::use_awaitable);
  } else {
    j = co_await ctx.client.get_with_dependencies_async(p.topic, p.id, asio::use_awaitable);
  }
  if (!j) refuse(Status::not_found, "not_found", "no job " + p.id + " in topic " + p.topic);
  co_return json_response(req, Status::ok, wire::job_text(*j));
}

// POST .../batches/{id}: makes the batch, adds members, seals it (library
// version 36); the batch after the call. GET: the batch, 404 for a job.
awaitable<Response> change_batch(ApiContext& ctx, Request& req, const Params& p) {
  const BatchChange change = batch_change(json_object(req.body()));
  const Job b = co_await ctx.client.batch_async(p.topic, p.id, change, asio::use_awaitable);
  co_return json_response(req, Status::ok, wire::job_text(b));
}

awaitable<Response> get_batch(ApiContext& ctx, Request& req, const Params& p) {
  auto j = co_await ctx.client.get_async(p.topic, p.id, true, asio::use_awaitable);
  if (!j || !j->batch)
    refuse(Status::not_found, "not_found", "no batch " + p.id + " in topic " + p.topic);
  co_return json_response(req, Status::ok, wire::job_text(*j));
}

awaitable<Response> delete_job(ApiContext& ctx, Request& req, const Params& p) {
  auto removed = co_await ctx.client.remove_async(p.topic, p.id, asio::use_awaitable);
  if (!removed) refuse(Status::not_found, "not_found", "no job " + p.id + " in topic " + p.topic);
  ctx.metrics.job_event("deleted", p.topic, p.id);
  co_return ok_json(req, json::object{{"deleted", true}});
}

// GET .../ids?prefix=&cursor=&count=: the ids that start with prefix, a
// page at a time (Client::find_ids); "cursor" goes on (null: the end).
awaitable<Response> find_ids(ApiContext& ctx, Request& req, const Params& p) {
  const auto count = static_cast<int>(query_int(p, "count", 100, 1, limits::kBatchMax));
  // (Named, not temporaries in the co_await: GCC 12 mishandles those.)
  const std::string prefix = p.find("prefix") ? *p.find("prefix") : std::string();
  const std::string cursor = p.find("cursor") ? *p.find("cursor") : std::string();
  auto page =
      co_await ctx.client.find_ids_async(p.topic, prefix, cursor, count, asio::use_awaitable);
  json::array ids;
  for (auto& id : page.ids) ids.emplace_back(std::move(id));
  json::value next = nullptr;
  if (!page.cursor.empty()) next = page.cursor;
  co_return ok_json(req, json::object{{"ids", std::move(ids)}, {"cursor", std::move(next)}});
}

awaitable<Response> list_jobs(ApiContext& ctx, Request& req, const Params& p) {
  const std::string* name = p.find("state");
  auto state = parse_job_state(name ? *name : "ready");
  if (!state) bad_request("state must be delayed, ready, reserved, dead, done or blocked");
  const auto offset = query_int(p, "offset", 0, 0, limits::kOffsetMax);
  const auto count = static_cast<int>(query_int(p, "count", 100, 1, limits::kBatchMax));
  auto page =
      co_await ctx.client.list_async(p.topic, *state, offset, count, true, asio::use_awaitable);
  json::array jobs;
  for (const auto& j : page.jobs) jobs.push_back(wire::job_json(j));
  co_return ok_json(req, json::object{{"total", page.total}, {"jobs", std::move(jobs)}});
}

// ---- working on jobs

// While draining, a connection that asks for work and gets none is told to
// close: the drain need not wait for it. One that got jobs (its reserve
// reached Redis before the drain began) stays open for their acks.
Response draining_aware(const ApiContext& ctx, Response res, bool handed_out) {
  if (ctx.stopping && !handed_out) res.keep_alive(false);
  return res;
}

// Reserve, waiting up to wait_ms for a job (long-poll) on the wake-up signal.
// While the server drains, nothing is handed out: the answer is empty.
awaitable<ReserveResult> reserve_waiting(ApiContext& ctx, const std::string& topic,
                                         const ReserveOptions& options, std::int64_t wait_ms) {
  const auto until = std::chrono::steady_clock::now() + Millis{wait_ms};
  const auto ex = co_await asio::this_coro::executor;
  for (;;) {
    if (ctx.stopping) co_return ReserveResult{};
    auto ticket = wait_ms > 0 ? ctx.hub.watch(topic, ex) : nullptr;
    auto r = co_await ctx.client.reserve_async(topic, options, asio::use_awaitable);
    const auto now = std::chrono::steady_clock::now();
    if (!r.jobs.empty() || !ticket || now >= until || ctx.stopping) {
      if (ticket) ctx.hub.forget(ticket);
      co_return r;
    }
    // Sleep until a signal, the next due time Redis reported, or the end.
    auto wake = until;
    if (r.next_ms > 0) {
      wake = std::min(wake, now + Millis{std::max<std::int64_t>(r.next_ms - r.now_ms, 0)});
    }
    co_await ctx.hub.wait(ticket, wake);
  }
}

// Who reserves, from a body's "worker" (the job's history names it): empty
// when not given; the Client checks the rest (1..128 bytes without control
// characters).
std::string worker_field(const json::object& body) {
  auto worker = string_field(body, "worker");
  if (!worker) return {};
  if (worker->empty()) bad_request("\"worker\" is empty");
  return std::move(*worker);
}

awaitable<Response> reserve(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"count", "ttr_ms", "wait_ms", "worker"});
  ReserveOptions options;
  options.count = count_field(body);
  options.ttr = Millis{int_field(body, "ttr_ms", 1, limits::kTtrMax).value_or(0)};
  options.worker = worker_field(body);
  const auto wait = int_field(body, "wait_ms", 0, ctx.max_wait_ms).value_or(0);
  auto r = co_await reserve_waiting(ctx, p.topic, options, wait);
  for (const auto& j : r.jobs) ctx.metrics.job_event("reserved", p.topic, j.id);
  co_return draining_aware(ctx, ok_json(req, taken_json(r, true)), !r.jobs.empty());
}

// One job by its id, reserved ahead of the rest (library version 38). While
// the server drains it hands nothing out, as reserve does: 503.
awaitable<Response> reserve_job(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"ttr_ms", "worker"});
  const Millis ttr{int_field(body, "ttr_ms", 1, limits::kTtrMax).value_or(0)};
  const std::string worker = worker_field(body);
  if (ctx.stopping) {
    refuse(Status::service_unavailable, "draining",
           "the server is shutting down: nothing is handed out");
  }
  auto r = co_await ctx.client.reserve_job_async(p.topic, p.id, ttr, worker, asio::use_awaitable);
  switch (r.outcome) {
    case Outcome::ok:
      break;
    case Outcome::not_found:
      refuse(Status::not_found, std::string(outcome_name(r.outcome)),
             "no job " + p.id + " in this topic");
    default:
      refuse(Status::conflict, std::string(outcome_name(r.outcome)),
             "job " + p.id + " is reserved, waiting for other jobs, or finished: not to be had");
  }
  ctx.metrics.job_event("reserved", p.topic, r.job.id);
  co_return ok_json(req, json::object{{"job", wire::reservation_json(r.job, true)}});
}

awaitable<Response> pull(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"count"});
  const int count = count_field(body);
  // (Jobs pulled are taken for good: nothing follows them on the connection.)
  if (ctx.stopping) co_return draining_aware(ctx, ok_json(req, taken_json({}, false)), false);
  auto r = co_await ctx.client.pull_async(p.topic, count, asio::use_awaitable);
  for (const auto& j : r.jobs) ctx.metrics.job_event("pulled", p.topic, j.id);
  co_return draining_aware(ctx, ok_json(req, taken_json(r, false)), false);
}

awaitable<Response> ack(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"token", "keep_ms", "result", "result_base64"});
  const auto token = token_field(body);
  const Millis keep{int_field(body, "keep_ms", 0, limits::kDelayMax).value_or(0)};
  auto result = string_field(body, "result");
  if (auto b64 = string_field(body, "result_base64")) {
    if (result) bad_request("give \"result\" or \"result_base64\", not both");
    result = wire::base64_decode(*b64);
    if (!result) bad_request("\"result_base64\" is not base64 (RFC 4648, with its padding)");
  }
  Outcome o{};
  if (result) {
    // A result goes to the jobs waiting for this one, and stays at least
    // for the topic's retry window for one still on its way: the library
    // refuses one without keep_ms only with a window of 0, said here in
    // this API's words.
    std::optional<Error> refused;
    try {
      o = co_await ctx.client.ack_async(p.topic, p.id, token, keep, *result, asio::use_awaitable);
    } catch (const Error& e) {
      if (e.code() != Errc::invalid_argument ||
          std::string_view(e.what()).find("RESULT needs KEEP") == std::string_view::npos) {
        throw;
      }
      refused = e;
    }
    if (refused) {
      bad_request(
          "a \"result\" needs \"keep_ms\" > 0 here: no job waits for this one, and the "
          "topic's retry window is 0, so none can come for it");
    }
  } else {
    o = co_await ctx.client.ack_async(p.topic, p.id, token, keep, asio::use_awaitable);
  }
  if (o == Outcome::ok) ctx.metrics.job_event("acked", p.topic, p.id);
  co_return outcome_response(req, o, p.id);
}

// POST .../ack: many acks in one request, [{id, token}...] and keep_ms for
// all. 200 with each job's outcome in order: ok, not_found, wrong_state,
// stale_token.
awaitable<Response> ack_jobs(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"jobs", "keep_ms"});
  const auto& jobs = batch_jobs(body);
  const Millis keep{int_field(body, "keep_ms", 0, limits::kDelayMax).value_or(0)};
  std::vector<std::pair<std::string, std::uint64_t>> held;
  held.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    for_job(i, [&] {
      const auto& job = batch_job(jobs[i]);
      only_fields(job, {"id", "token"});
      std::string id = batch_id(job);
      core::check_id(id);
      held.emplace_back(std::move(id), token_field(job));
    });
  }
  const auto outcomes =
      co_await ctx.client.ack_many_async(p.topic, held, keep, asio::use_awaitable);
  json::array answers;
  answers.reserve(outcomes.size());
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i] == Outcome::ok) ctx.metrics.job_event("acked", p.topic, held[i].first);
    answers.push_back(json::object{{"id", held[i].first}, {"outcome", outcome_name(outcomes[i])}});
  }
  co_return ok_json(req, json::object{{"jobs", std::move(answers)}});
}

awaitable<Response> release(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"token", "delay_ms", "priority"});
  const auto token = token_field(body);
  const Millis delay{int_field(body, "delay_ms", 0, limits::kDelayMax).value_or(0)};
  const auto prio = int_field(body, "priority", limits::kPrioMin, limits::kPrioMax);
  auto o =
      co_await ctx.client.release_async(p.topic, p.id, token, delay, prio, asio::use_awaitable);
  if (o == Outcome::ok) ctx.metrics.job_event("released", p.topic, p.id);
  co_return outcome_response(req, o, p.id);
}

awaitable<Response> fail(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"token", "error", "dead"});
  const auto token = token_field(body);
  const auto error = string_field(body, "error").value_or("failed");
  if (error.size() > static_cast<std::size_t>(limits::kErrorMax)) {
    bad_request("\"error\" is over " + std::to_string(limits::kErrorMax) + " bytes");
  }
  const bool dead = bool_field(body, "dead").value_or(false);
  auto f = co_await ctx.client.fail_async(p.topic, p.id, token, error, dead, std::nullopt,
                                          std::nullopt, asio::use_awaitable);
  if (f.outcome == Outcome::ok) {
    ctx.metrics.job_event(f.state == JobState::dead ? "dead" : "failed", p.topic, p.id);
  }
  co_return outcome_response(req, f.outcome, p.id, json::object{{"state", to_string(f.state)}});
}

awaitable<Response> touch(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"token", "ttr_ms"});
  const auto token = token_field(body);
  const Millis ttr{int_field(body, "ttr_ms", 1, limits::kTtrMax).value_or(0)};
  auto t = co_await ctx.client.touch_async(p.topic, p.id, token, ttr, asio::use_awaitable);
  co_return outcome_response(req, t.outcome, p.id, json::object{{"deadline", t.deadline_ms}});
}

// A handler's report: {"token", "progress" (any JSON value), "log" (an
// array of strings)}, one of the two at least.
// A waiting job's priority and/or due time, in place: {"priority",
// "delay_ms" | "due_at_ms"}; 409 for a job that is not waiting.
awaitable<Response> reschedule(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"priority", "delay_ms", "due_at_ms"});
  RescheduleOptions change;
  change.priority = int_field(body, "priority", limits::kPrioMin, limits::kPrioMax);
  if (auto v = int_field(body, "delay_ms", 0, limits::kDelayMax)) change.delay = Millis{*v};
  change.due_at_ms = int_field(body, "due_at_ms", 0, limits::kMsMax);
  if (change.delay && change.due_at_ms) bad_request("give \"delay_ms\" or \"due_at_ms\", not both");
  if (!change.priority && !change.delay && !change.due_at_ms) {
    bad_request("give \"priority\", \"delay_ms\" or \"due_at_ms\"");
  }
  const auto o = co_await ctx.client.reschedule_async(p.topic, p.id, change, asio::use_awaitable);
  if (o == Outcome::wrong_state) {
    refuse(Status::conflict, "wrong_state",
           "job " + p.id + " is not waiting (it is reserved, dead or done)");
  }
  co_return outcome_response(req, o, p.id);
}

awaitable<Response> report(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"token", "progress", "log"});
  const auto token = token_field(body);
  JobReport r;
  // As the body spells it: Boost.JSON's value would write 0.1 as 1E-1.
  if (body.contains("progress")) r.progress = wire::scan_json(req.body(), "progress").member;
  if (auto it = body.find("log"); it != body.end()) {
    if (!it->value().is_array()) bad_request("\"log\" must be an array of strings");
    for (const auto& line : it->value().as_array()) {
      if (!line.is_string()) bad_request("\"log\" must be an array of strings");
      r.lines.emplace_back(line.as_string());
    }
  }
  auto o = co_await ctx.client.report_async(p.topic, p.id, token, r, asio::use_awaitable);
  co_return outcome_response(req, o, p.id);
}

// ---- topics

json::object topic_row(const std::string& topic, const TopicStats& st) {
  return json::object{{"topic", topic},          {"delayed", st.delayed}, {"ready", st.ready},
                      {"reserved", st.reserved}, {"dead", st.dead},       {"done", st.done},
                      {"paused", st.paused}};
}

// A query parameter that names topics or starts their names (prefix, after):
// the topic alphabet, at most 128 characters.
std::string topic_query(const Params& p, const std::string& name) {
  const std::string* v = p.find(name);
  if (!v) return {};
  const bool ok = v->size() <= 128 && std::all_of(v->begin(), v->end(), core::valid_topic_char);
  if (!ok) {
    bad_request("query parameter " + name +
                " must be at most 128 characters of A-Z a-z 0-9 _ - . (a topic's alphabet)");
  }
  return *v;
}

// GET /v1/topics: every topic with its counts (the census's reading). With
// count, prefix, contains or after: a page of them in name order, the
// names read (SCAN) and the counts of the page's topics only; "next" is the
// after of the next page (null: none), "total" how many names match.
awaitable<Response> list_topics(ApiContext& ctx, Request& req, const Params& p) {
  if (!p.find("count") && !p.find("prefix") && !p.find("after") && !p.find("contains")) {
    const auto reading = co_await ctx.census.after(std::chrono::steady_clock::now());
    json::array out;
    for (const auto& [topic, st] : reading->topics) out.push_back(topic_row(topic, st));
    co_return ok_json(req, json::object{{"topics", std::move(out)}});
  }
  const auto count = static_cast<std::size_t>(query_int(p, "count", 100, 1, limits::kBatchMax));
  const std::string prefix = topic_query(p, "prefix");
  // contains: a part of the name, in any case (the dashboard's filter).
  const std::string contains = core::ascii_lower(topic_query(p, "contains"));
  // after is only compared: any name next gave (one put by hand included).
  const std::string after = p.find("after") ? *p.find("after") : std::string();
  if (after.size() > 256) bad_request("query parameter after is longer than 256 bytes");
  auto names = co_await ctx.client.topics_async(asio::use_awaitable);  // sorted
  std::erase_if(names, [&](const std::string& n) {
    return !n.starts_with(prefix) || core::ascii_lower(n).find(contains) == std::string::npos;
  });
  auto it = std::upper_bound(names.begin(), names.end(), after);
  std::vector<std::string> page;
  for (; it != names.end() && page.size() < count; ++it) page.push_back(*it);
  const bool more = it != names.end();
  auto stats = co_await await_each<TopicStats>(
      page, [&](const std::string& t) { return ctx.client.stats_async(t, asio::deferred); });
  json::array out;
  for (std::size_t i = 0; i < page.size(); ++i) {
    if (stats[i].ok()) {
      out.push_back(topic_row(page[i], stats[i].value()));
    } else if (stats[i].error().code() != Errc::invalid_argument) {
      throw stats[i].error();
    }  // (else a name the Client refuses, put by hand: left out, as the census does)
  }
  json::value next = nullptr;
  if (more && !page.empty()) next = page.back();
  co_return ok_json(
      req,
      json::object{{"topics", std::move(out)}, {"next", std::move(next)}, {"total", names.size()}});
}

awaitable<Response> list_workers(ApiContext& ctx, Request& req, const Params&) {
  const auto workers = co_await ctx.client.workers_async(asio::use_awaitable);
  json::array out;
  for (const auto& w : workers) out.push_back(wire::worker_json(w));
  co_return ok_json(req, json::object{{"workers", std::move(out)}});
}

// INFO's "key:value" lines (sections' "# Name" lines and blank ones left out).
std::map<std::string, std::string, std::less<>> info_fields(std::string_view text) {
  std::map<std::string, std::string, std::less<>> out;
  while (!text.empty()) {
    auto end = text.find('\n');
    auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto colon = line.find(':');
    if (line.empty() || line.front() == '#' || colon == std::string_view::npos) continue;
    out.emplace(line.substr(0, colon), line.substr(colon + 1));
  }
  return out;
}

// A number of INFO's text, or null.
json::value info_number(std::string_view v) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size()) return nullptr;
  return n;
}

// An INFO value of the form "k=v,k=v" ("db0:keys=12,expires=0,...",
// "slave0:ip=...,port=..."), by key.
std::map<std::string_view, std::string_view> info_pairs(std::string_view value) {
  std::map<std::string_view, std::string_view> kv;
  for (std::string_view rest = value; !rest.empty();) {
    const auto comma = std::min(rest.find(','), rest.size());
    const auto part = rest.substr(0, comma);
    if (const auto eq = part.find('='); eq != std::string_view::npos) {
      kv.emplace(part.substr(0, eq), part.substr(eq + 1));
    }
    rest = comma < rest.size() ? rest.substr(comma + 1) : std::string_view{};
  }
  return kv;
}

// The replicas a primary's INFO lists, "slave0:ip=10.0.0.2,port=6380,
// state=online,offset=1234,lag=0" and on: how far each is (Sentinel's and a
// cluster's replicas are the ones a failover promotes).
json::array replica_nodes_json(const std::map<std::string, std::string, std::less<>>& f) {
  json::array out;
  for (int i = 0;; ++i) {
    auto it = f.find("slave" + std::to_string(i));
    if (it == f.end()) break;
    auto kv = info_pairs(it->second);
    // (An IPv6 address in brackets, so that its port stays apart.)
    const std::string ip(kv["ip"]);
    const std::string host = ip.find(':') == std::string::npos ? ip : "[" + ip + "]";
    out.push_back(json::object{{"address", wire::printable(host + ":" + std::string(kv["port"]))},
                               {"state", wire::printable(kv["state"])},
                               {"offset", info_number(kv["offset"])},
                               {"lag_s", info_number(kv["lag"])}});
  }
  return out;
}

// One node of GET /v1/redis: what an operator watches, from its INFO.
json::object redis_node_json(const RedisNode& n) {
  const auto f = info_fields(n.info);
  auto text = [&](std::string_view k) -> json::value {
    auto it = f.find(k);
    if (it == f.end()) return nullptr;
    return json::value(wire::printable(it->second));
  };
  auto number = [&](std::string_view k) -> json::value {
    auto it = f.find(k);
    return it == f.end() ? json::value(nullptr) : info_number(it->second);
  };
  // "db0:keys=12,expires=0,avg_ttl=0": the keys of database 0 (the only one
  // a cluster has; a single node's Client may use another: all are summed).
  std::int64_t keys = 0;
  for (const auto& [k, v] : f) {
    if (!k.starts_with("db")) continue;
    if (auto n_keys = info_number(info_pairs(v)["keys"]); n_keys.is_int64()) {
      keys += n_keys.as_int64();
    }
  }
  return json::object{
      {"address", wire::printable(n.address)},
      {"version", text("redis_version")},
      {"role", text("role")},
      {"uptime_s", number("uptime_in_seconds")},
      {"memory", json::object{{"used", number("used_memory")},
                              {"peak", number("used_memory_peak")},
                              {"max", number("maxmemory")},
                              {"policy", text("maxmemory_policy")}}},
      {"clients", json::object{{"connected", number("connected_clients")},
                               {"blocked", number("blocked_clients")}}},
      {"ops_per_sec", number("instantaneous_ops_per_sec")},
      {"commands_total", number("total_commands_processed")},
      {"keys", keys},
      {"replicas", number("connected_slaves")},
      {"replication_offset", number("master_repl_offset")},
      {"replica_nodes", replica_nodes_json(f)},
      {"persistence",
       json::object{{"rdb_last_save", number("rdb_last_save_time")},
                    {"rdb_changes_since_save", number("rdb_changes_since_last_save")},
                    {"rdb_last_status", text("rdb_last_bgsave_status")},
                    {"aof_enabled", number("aof_enabled")},
                    {"aof_last_write_status", text("aof_last_write_status")}}}};
}

// GET /v1/redis: the mode (single, sentinel or cluster) and each node that
// holds keys, as its INFO says.
awaitable<Response> redis_info(ApiContext& ctx, Request& req, const Params&) {
  const auto nodes = co_await ctx.client.redis_nodes_async(asio::use_awaitable);
  json::array out;
  bool cluster = false;
  for (const auto& n : nodes) {
    out.push_back(redis_node_json(n));
    cluster = cluster || n.info.find("redis_mode:cluster") != std::string::npos;
  }
  const bool sentinel = ctx.client.options().redis_url.starts_with("redis+sentinel:");
  const char* mode = cluster ? "cluster" : sentinel ? "sentinel" : "single";
  co_return ok_json(req, json::object{{"mode", mode}, {"nodes", std::move(out)}});
}

// ---- history

using wire::HistoryRange;

// ?range= (1h by default), now by this server's clock.
HistoryRange history_range(const Params& p) {
  const std::string* given = p.find("range");
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  auto r = wire::history_range(given ? *given : "1h", now);
  if (!r) bad_request("query parameter range must be 1h, 24h or 30d");
  return *r;
}

json::object history_json(const HistoryRange& r, const std::vector<HistoryRow>& rows) {
  json::array out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(wire::history_row_json(row));
  return json::object{{"range", r.name},
                      {"step", r.step == HistoryStep::minute ? "minute" : "hour"},
                      {"from", r.from_ms},
                      {"to", r.to_ms},
                      {"rows", std::move(out)}};
}

// GET /v1/topics/{topic}/history?range=1h|24h|30d: the minutes or hours
// that counted anything (Client::history).
awaitable<Response> topic_history(ApiContext& ctx, Request& req, const Params& p) {
  const HistoryRange r = history_range(p);
  auto rows =
      co_await ctx.client.history_async(p.topic, r.step, r.from_ms, r.to_ms, asio::use_awaitable);
  json::object out = history_json(r, rows);
  out["topic"] = p.topic;
  co_return ok_json(req, out);
}

// GET /v1/history?range=: every topic's history summed, one call a topic;
// an answer serves its range again for 10 s (ApiContext::history_cache).
awaitable<Response> all_history(ApiContext& ctx, Request& req, const Params& p) {
  const HistoryRange r = history_range(p);
  auto& cache = ctx.history_cache;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(cache.mu);
    auto it = cache.answers.find(r.name);
    if (it != cache.answers.end() && now - it->second.first < std::chrono::seconds(10)) {
      co_return json_response(req, Status::ok, it->second.second);
    }
  }
  const auto names = co_await ctx.client.topics_async(asio::use_awaitable);
  auto parts = co_await await_each<std::vector<HistoryRow>>(names, [&](const std::string& t) {
    return ctx.client.history_async(t, r.step, r.from_ms, r.to_ms, asio::deferred);
  });
  std::vector<std::vector<HistoryRow>> ok;
  ok.reserve(parts.size());
  for (auto& part : parts) {
    if (part.ok()) {
      ok.push_back(std::move(part.value()));
    } else if (part.error().code() != Errc::invalid_argument) {
      throw part.error();
    }  // (a name the Client refuses, put by hand: left out, as the census does)
  }
  json::object out = history_json(r, core::merge_history(std::move(ok)));
  out["topics"] = names.size();
  std::string body = wire::to_text(out);
  {
    std::lock_guard lock(cache.mu);
    cache.answers[r.name] = {now, body};
  }
  co_return json_response(req, Status::ok, std::move(body));
}

awaitable<Response> topic_stats(ApiContext& ctx, Request& req, const Params& p) {
  auto s = co_await ctx.client.stats_async(p.topic, asio::use_awaitable);
  co_return ok_json(req, wire::stats_json(p.topic, s));
}

// "ids": 1..1000 job ids.
std::vector<std::string> ids_field(const json::object& body) {
  auto it = body.find("ids");
  if (it == body.end() || !it->value().is_array()) bad_request("give \"ids\": [...]");
  std::vector<std::string> ids;
  for (const auto& v : it->value().as_array()) {
    if (!v.is_string()) bad_request("\"ids\" must hold strings");
    ids.emplace_back(v.as_string());
    core::check_id(ids.back());
  }
  if (ids.empty()) bad_request("\"ids\" is empty");
  if (ids.size() > static_cast<std::size_t>(limits::kBatchMax)) {
    bad_request("at most " + std::to_string(limits::kBatchMax) + " ids at once");
  }
  return ids;
}

awaitable<Response> kick(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"ids", "all", "limit"});
  int kicked = 0;
  if (bool_field(body, "all").value_or(false)) {
    if (body.contains("ids")) bad_request("give \"ids\" or \"all\", not both");
    const int limit = static_cast<int>(
        int_field(body, "limit", 1, limits::kLimitMax).value_or(limits::kBatchMax));
    kicked = co_await ctx.client.kick_all_async(p.topic, limit, asio::use_awaitable);
  } else {
    if (body.contains("limit")) bad_request("\"limit\" goes with \"all\"");
    if (!body.contains("ids")) bad_request("give \"ids\": [...] or \"all\": true");
    const auto ids = ids_field(body);
    kicked = co_await ctx.client.kick_async(p.topic, ids, asio::use_awaitable);
  }
  ctx.metrics.count("kicked", p.topic, static_cast<std::uint64_t>(kicked));
  co_return ok_json(req, json::object{{"kicked", kicked}});
}

// Delayed jobs due now, in place: {"ids": [...]}, or {"all": true,
// "limit": n}, one batch of the first n in due order, with what is left.
awaitable<Response> promote(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"ids", "all", "limit"});
  json::object out;
  if (bool_field(body, "all").value_or(false)) {
    if (body.contains("ids")) bad_request("give \"ids\" or \"all\", not both");
    const int limit = static_cast<int>(
        int_field(body, "limit", 1, limits::kLimitMax).value_or(limits::kBatchMax));
    const auto r = co_await ctx.client.promote_all_async(p.topic, limit, asio::use_awaitable);
    out = json::object{{"promoted", r.done}, {"left", r.left}};
  } else {
    if (body.contains("limit")) bad_request("\"limit\" goes with \"all\"");
    if (!body.contains("ids")) bad_request("give \"ids\": [...] or \"all\": true");
    const auto ids = ids_field(body);
    const int n = co_await ctx.client.promote_async(p.topic, ids, asio::use_awaitable);
    out = json::object{{"promoted", n}};
  }
  ctx.metrics.count("promoted", p.topic, static_cast<std::uint64_t>(out.at("promoted").as_int64()));
  co_return ok_json(req, std::move(out));
}

// One batch of the dead jobs that died before a time, removed:
// {"older_than_ms": ms} (by Redis's clock) or {"before": unix-ms}, "limit".
awaitable<Response> purge(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"before", "older_than_ms", "limit"});
  const auto before = int_field(body, "before", 0, limits::kMsMax);
  const auto older = int_field(body, "older_than_ms", 0, limits::kDelayMax);
  if (before.has_value() == older.has_value()) bad_request("give \"before\" or \"older_than_ms\"");
  const int limit =
      static_cast<int>(int_field(body, "limit", 1, limits::kLimitMax).value_or(limits::kBatchMax));
  std::int64_t cutoff = before.value_or(0);
  if (older) cutoff = co_await ctx.client.now_ms_async(asio::use_awaitable) - *older;
  const auto r = co_await ctx.client.purge_dead_async(p.topic, std::max<std::int64_t>(cutoff, 0),
                                                      limit, asio::use_awaitable);
  ctx.metrics.count("deleted", p.topic, static_cast<std::uint64_t>(r.done));
  co_return ok_json(req, json::object{{"deleted", r.done}, {"left", r.left}, {"before", cutoff}});
}

// Many jobs deleted in one atomic call (per shard of a spread topic).
awaitable<Response> delete_jobs(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"ids"});
  const auto ids = ids_field(body);
  const int deleted = co_await ctx.client.remove_many_async(p.topic, ids, asio::use_awaitable);
  ctx.metrics.count("deleted", p.topic, static_cast<std::uint64_t>(deleted));
  co_return ok_json(req, json::object{{"deleted", deleted}});
}

awaitable<Response> pause_or_resume(ApiContext& ctx, Request& req, const Params& p, bool pausing) {
  const auto body = json_object(req.body());
  bool changed = false;
  if (pausing) {
    // for_ms: a pause that ends by itself (library version 38)
    only_fields(body, {"for_ms"});
    const Millis duration{int_field(body, "for_ms", 1, limits::kDelayMax).value_or(0)};
    changed = co_await ctx.client.pause_async(p.topic, duration, asio::use_awaitable);
  } else {
    only_fields(body, {});
    changed = co_await ctx.client.resume_async(p.topic, asio::use_awaitable);
  }
  co_return ok_json(req, json::object{{"paused", pausing}, {"changed", changed}});
}

awaitable<Response> pause(ApiContext& ctx, Request& req, const Params& p) {
  return pause_or_resume(ctx, req, p, true);
}

awaitable<Response> resume(ApiContext& ctx, Request& req, const Params& p) {
  return pause_or_resume(ctx, req, p, false);
}

awaitable<Response> get_limits(ApiContext& ctx, Request& req, const Params& p) {
  auto l = co_await ctx.client.limits_async(p.topic, asio::use_awaitable);
  co_return ok_json(req, wire::limits_json(l));
}

// PUT sets every limit (a field left out: none); DELETE clears them.
awaitable<Response> put_limits(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"rate", "window_ms", "concurrency", "aging_ms"});
  TopicLimits want;
  want.rate = static_cast<int>(int_field(body, "rate", 0, limits::kRateMax).value_or(0));
  want.window = Millis(int_field(body, "window_ms", 1, limits::kWindowMax).value_or(1000));
  want.concurrency =
      static_cast<int>(int_field(body, "concurrency", 0, limits::kConcurrencyMax).value_or(0));
  want.aging = Millis(int_field(body, "aging_ms", 0, limits::kAgingMax).value_or(0));
  if (body.contains("window_ms") && want.rate == 0) bad_request("\"window_ms\" goes with \"rate\"");
  auto l = co_await ctx.client.set_limits_async(p.topic, want, asio::use_awaitable);
  co_return ok_json(req, wire::limits_json(l));
}

awaitable<Response> delete_limits(ApiContext& ctx, Request& req, const Params& p) {
  auto l = co_await ctx.client.set_limits_async(p.topic, TopicLimits{}, asio::use_awaitable);
  co_return ok_json(req, wire::limits_json(l));
}

// ---- the retry window (Client::set_retry_window)

json::object retry_window_json(std::string_view topic, const RetryWindow& w) {
  return json::object{
      {"topic", topic}, {"retry_window_ms", w.window.count()}, {"remembered", w.remembered}};
}

awaitable<Response> get_retry_window(ApiContext& ctx, Request& req, const Params& p) {
  auto w = co_await ctx.client.retry_window_async(p.topic, asio::use_awaitable);
  co_return ok_json(req, retry_window_json(p.topic, w));
}

awaitable<Response> put_retry_window(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"retry_window_ms"});
  const auto ms = int_field(body, "retry_window_ms", 0, limits::kWindowMax);
  if (!ms) bad_request("\"retry_window_ms\" is required (0: none)");
  auto w = co_await ctx.client.set_retry_window_async(p.topic, Millis(*ms), asio::use_awaitable);
  co_return ok_json(req, retry_window_json(p.topic, w));
}

// ---- one topic over many shards

json::object shards_json(std::string_view topic, const std::vector<std::string>& shards) {
  json::array names;
  for (const auto& s : shards) names.emplace_back(s);
  return json::object{{"topic", topic},
                      {"count", std::max<std::size_t>(1, shards.size())},
                      {"shards", std::move(names)}};
}

awaitable<Response> get_shards(ApiContext& ctx, Request& req, const Params& p) {
  auto shards = co_await ctx.client.shards_async(p.topic, asio::use_awaitable);
  co_return ok_json(req, shards_json(p.topic, shards));
}

// PUT {"count": n}: spreads the topic over n shards (1: its own keys), only
// while it holds no jobs.
awaitable<Response> put_shards(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"count"});
  const auto n = int_field(body, "count", 1, core::kShardsMax);
  if (!n) bad_request("\"count\" is required");
  auto shards =
      co_await ctx.client.set_shards_async(p.topic, static_cast<int>(*n), asio::use_awaitable);
  co_return ok_json(req, shards_json(p.topic, shards));
}

// ---- recurring jobs

awaitable<Response> list_schedules(ApiContext& ctx, Request& req, const Params& p) {
  auto list = co_await ctx.client.schedules_async(p.topic, asio::use_awaitable);
  json::array out;
  for (const auto& s : list.schedules) out.push_back(wire::schedule_json(s));
  co_return ok_json(req, json::object{{"now", list.now_ms}, {"schedules", std::move(out)}});
}

awaitable<Response> get_schedule(ApiContext& ctx, Request& req, const Params& p) {
  auto list = co_await ctx.client.schedules_async(p.topic, asio::use_awaitable);
  for (const auto& s : list.schedules) {
    if (s.name == p.name) co_return ok_json(req, wire::schedule_json(s));
  }
  refuse(Status::not_found, "not_found", "no schedule " + p.name + " in topic " + p.topic);
}

awaitable<Response> put_schedule(ApiContext& ctx, Request& req, const Params& p) {
  const ScheduleSpec spec = schedule_spec(json_object(req.body()));
  auto s = co_await ctx.client.set_schedule_async(p.topic, p.name, spec, asio::use_awaitable);
  ctx.sweeper.note_schedules(p.topic);
  co_return ok_json(req, wire::schedule_json(s));
}

awaitable<Response> delete_schedule(ApiContext& ctx, Request& req, const Params& p) {
  const bool removed =
      co_await ctx.client.remove_schedule_async(p.topic, p.name, asio::use_awaitable);
  if (!removed)
    refuse(Status::not_found, "not_found", "no schedule " + p.name + " in topic " + p.topic);
  co_return ok_json(req, json::object{{"deleted", true}});
}

// {"changed", "paused"}; 404 without such a schedule.
Response schedule_state(const Request& req, Outcome o, const Params& p, bool paused) {
  if (o == Outcome::not_found) {
    refuse(Status::not_found, "not_found", "no schedule " + p.name + " in topic " + p.topic);
  }
  return ok_json(req, json::object{{"changed", o == Outcome::ok}, {"paused", paused}});
}

awaitable<Response> pause_schedule(ApiContext& ctx, Request& req, const Params& p) {
  const auto o = co_await ctx.client.pause_schedule_async(p.topic, p.name, asio::use_awaitable);
  co_return schedule_state(req, o, p, true);
}

awaitable<Response> resume_schedule(ApiContext& ctx, Request& req, const Params& p) {
  const auto o = co_await ctx.client.resume_schedule_async(p.topic, p.name, asio::use_awaitable);
  co_return schedule_state(req, o, p, false);
}

// ---- webhooks

json::object subscription_json(const std::string& topic, const Subscription& s) {
  return json::object{{"topic", topic},
                      {"url", s.url},
                      {"concurrency", s.concurrency},
                      {"timeout_ms", s.timeout.count()}};
}

awaitable<Response> get_webhook(ApiContext& ctx, Request& req, const Params& p) {
  auto s = ctx.pusher.subscription(p.topic);
  if (!s) refuse(Status::not_found, "not_found", "topic " + p.topic + " has no webhook");
  co_return ok_json(req, subscription_json(p.topic, *s));
}

awaitable<Response> put_webhook(ApiContext& ctx, Request& req, const Params& p) {
  const auto body = json_object(req.body());
  only_fields(body, {"url", "concurrency", "timeout_ms"});
  Subscription s;
  auto url = string_field(body, "url");
  if (!url) bad_request("\"url\" is missing");
  s.url = *url;
  s.concurrency = static_cast<int>(
      int_field(body, "concurrency", 1, kWebhookConcurrencyMax).value_or(s.concurrency));
  s.timeout =
      Millis{int_field(body, "timeout_ms", 1, kWebhookTimeoutMaxMs).value_or(s.timeout.count())};
  if (auto why = ctx.pusher.refusal(s.url)) refuse(Status::forbidden, "forbidden", *why);
  // (Its Error: a bad URL 400, the server stopping 503.)
  ctx.pusher.subscribe(p.topic, s);
  co_return ok_json(req, subscription_json(p.topic, s));
}

awaitable<Response> delete_webhook(ApiContext& ctx, Request& req, const Params& p) {
  if (!ctx.pusher.unsubscribe(p.topic)) {
    refuse(Status::not_found, "not_found", "topic " + p.topic + " has no webhook");
  }
  co_return ok_json(req, json::object{{"deleted", true}});
}

// ---- operations and the dashboard

awaitable<Response> dashboard(ApiContext&, Request& req, const Params& p) {
  if (auto file = dashboard_file(req, p.path)) co_return std::move(*file);
  refuse(Status::not_found, "not_found", "no such file");
}

// Reached only when the stream handler did not claim the request (HEAD).
awaitable<Response> events_head(ApiContext&, Request& req, const Params& p) {
  // (a GET with a good list is streamed before routing: events_stream)
  if (const std::string* topics = p.find("topics"); topics && !events_topics(*topics)) {
    bad_request("query parameter topics must be 1 to " + std::to_string(kEventsTopicsMax) +
                " topic names, comma-separated");
  }
  if (const std::string* counts = p.find("counts"); counts && *counts != "none") {
    bad_request("query parameter counts may only be none (the events alone)");
  }
  Response res{Status::ok, req.version()};
  res.set(http::field::content_type, "text/event-stream");
  res.keep_alive(req.keep_alive());
  co_return res;
}

// Redis answers and holds the library: one read-only call, answered within
// a second even when Redis hangs.
awaitable<Response> healthz(ApiContext& ctx, Request& req, const Params&) {
  auto r = co_await await_call_within<int>(
      std::chrono::seconds(1), [&](auto cb) { ctx.client.library_version_async(std::move(cb)); });
  if (r && r->ok()) {
    co_return ok_json(req, json::object{{"status", "ok"},
                                        {"version", redisched::version()},
                                        {"library_version", r->value()}});
  }
  const std::string why = !r ? "Redis did not answer within 1 s" : r->error().what();
  co_return ok_json(req, json::object{{"status", "unavailable"}, {"error", wire::printable(why)}},
                    Status::service_unavailable);
}

awaitable<Response> metrics(ApiContext& ctx, Request& req, const Params&) {
  const auto reading =
      co_await ctx.census.after(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  Response res{Status::ok, req.version()};
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.keep_alive(req.keep_alive());
  res.body() = ctx.metrics.render(reading->topics);
  res.prepare_payload();
  co_return res;
}

// ---- the table

using http::verb;
const std::vector<std::string_view> kNoQuery{};
const std::vector<std::string_view> kListQuery{"state", "offset", "count"};
const std::vector<std::string_view> kEventsQuery{"token", "topics", "counts"};
const std::vector<std::string_view> kJobQuery{"wait_ms"};
const std::vector<std::string_view> kTopicsQuery{"count", "prefix", "contains", "after"};
const std::vector<std::string_view> kIdsQuery{"prefix", "cursor", "count"};
const std::vector<std::string_view> kHistoryQuery{"range"};

const std::vector<Route>& table() {
  static const std::vector<Route> routes = {
      {"/", {{verb::get, dashboard, Role::read}}, true},
      {"/index.html", {{verb::get, dashboard, Role::read}}, true},
      {"/app.js", {{verb::get, dashboard, Role::read}}, true},
      {"/style.css", {{verb::get, dashboard, Role::read}}, true},
      {"/vendor/dygraph.min.js", {{verb::get, dashboard, Role::read}}, true},
      {"/vendor/dygraph.min.css", {{verb::get, dashboard, Role::read}}, true},
      {"/healthz", {{verb::get, healthz, Role::read}}, true, &kNoQuery},
      {"/metrics", {{verb::get, metrics, Role::read}}, false, &kNoQuery},
      {"/v1/events", {{verb::get, events_head, Role::read}}, false, &kEventsQuery},
      {"/v1/topics", {{verb::get, list_topics, Role::read}}, false, &kTopicsQuery},
      {"/v1/topics/{topic}", {{verb::get, topic_stats, Role::read}}, false, &kNoQuery},
      {"/v1/workers", {{verb::get, list_workers, Role::read}}, false, &kNoQuery},
      {"/v1/redis", {{verb::get, redis_info, Role::read}}, false, &kNoQuery},
      {"/v1/topics/{topic}/jobs",
       {{verb::get, list_jobs, Role::read}, {verb::post, add_job, Role::produce}},
       false,
       &kListQuery},
      {"/v1/topics/{topic}/ids", {{verb::get, find_ids, Role::read}}, false, &kIdsQuery},
      {"/v1/topics/{topic}/history",
       {{verb::get, topic_history, Role::read}},
       false,
       &kHistoryQuery},
      {"/v1/history", {{verb::get, all_history, Role::read}}, false, &kHistoryQuery},
      {"/v1/topics/{topic}/jobs/{id}",
       {{verb::get, get_job, Role::read, true},
        {verb::put, put_job, Role::produce},
        {verb::delete_, delete_job, Role::produce}},
       false,
       &kJobQuery},
      {"/v1/topics/{topic}/batches/{id}",
       {{verb::get, get_batch, Role::read}, {verb::post, change_batch, Role::produce}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/ack", {{verb::post, ack, Role::consume}}, false, &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/release",
       {{verb::post, release, Role::consume}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/fail", {{verb::post, fail, Role::consume}}, false, &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/touch",
       {{verb::post, touch, Role::consume}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/reserve",
       {{verb::post, reserve_job, Role::consume}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/reschedule",
       {{verb::post, reschedule, Role::produce}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/jobs/{id}/report",
       {{verb::post, report, Role::consume}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/put", {{verb::post, put_jobs, Role::produce}}, false, &kNoQuery},
      {"/v1/topics/{topic}/ack", {{verb::post, ack_jobs, Role::consume}}, false, &kNoQuery},
      {"/v1/topics/{topic}/reserve",
       {{verb::post, reserve, Role::consume, true}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/pull", {{verb::post, pull, Role::consume}}, false, &kNoQuery},
      {"/v1/topics/{topic}/kick", {{verb::post, kick, Role::admin}}, false, &kNoQuery},
      {"/v1/topics/{topic}/delete", {{verb::post, delete_jobs, Role::produce}}, false, &kNoQuery},
      {"/v1/topics/{topic}/promote", {{verb::post, promote, Role::admin}}, false, &kNoQuery},
      {"/v1/topics/{topic}/purge", {{verb::post, purge, Role::admin}}, false, &kNoQuery},
      {"/v1/topics/{topic}/pause", {{verb::post, pause, Role::admin}}, false, &kNoQuery},
      {"/v1/topics/{topic}/resume", {{verb::post, resume, Role::admin}}, false, &kNoQuery},
      {"/v1/topics/{topic}/limits",
       {{verb::get, get_limits, Role::read},
        {verb::put, put_limits, Role::admin},
        {verb::delete_, delete_limits, Role::admin}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/retry-window",
       {{verb::get, get_retry_window, Role::read}, {verb::put, put_retry_window, Role::admin}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/shards",
       {{verb::get, get_shards, Role::read}, {verb::put, put_shards, Role::admin}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/schedules", {{verb::get, list_schedules, Role::read}}, false, &kNoQuery},
      {"/v1/topics/{topic}/schedules/{name}",
       {{verb::get, get_schedule, Role::read},
        {verb::put, put_schedule, Role::admin},
        {verb::delete_, delete_schedule, Role::admin}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/schedules/{name}/pause",
       {{verb::post, pause_schedule, Role::admin}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/schedules/{name}/resume",
       {{verb::post, resume_schedule, Role::admin}},
       false,
       &kNoQuery},
      {"/v1/topics/{topic}/webhook",
       {{verb::get, get_webhook, Role::read},
        {verb::put, put_webhook, Role::admin},
        {verb::delete_, delete_webhook, Role::admin}},
       false,
       &kNoQuery},
      // The original servers' routes, which ignore what they do not know.
      {"/schedule/{topic}",
       {{verb::post, schedule_route, Role::produce}},
       false,
       nullptr,
       original_refusal},
      {"/cancel/{topic}",
       {{verb::post, cancel_route, Role::produce}},
       false,
       nullptr,
       original_refusal},
      {"/push", {{verb::post, push_route, Role::produce}}, false, nullptr, delay_queue_refusal},
      {"/pop", {{verb::get, pop_route, Role::consume}}, false, nullptr, delay_queue_refusal},
      {"/finish", {{verb::get, finish_route, Role::consume}}, false, nullptr, delay_queue_refusal},
  };
  return routes;
}

}  // namespace

std::span<const Route> api_routes() { return table(); }

const Grant* grant_of(const ApiContext& ctx, const Request& req) {
  if (req.count(http::field::authorization) != 1) return nullptr;  // two: which one counts?
  return ctx.access.from_header(req[http::field::authorization]);
}

void ApiContext::stop() {
  stopping = true;
  stopped.fire();
  hub.wake_all();      // long-poll reserves look again, and see stopping
  client.end_waits();  // waits on a job answer with it as it is
}

bool may_wait(const Request& req) {
  // (Routed a second time, but only for a request that came pipelined
  // behind answers not yet written.)
  Match m;
  try {
    m = match_route(table(), req.method(), req.target());
  } catch (const std::exception&) {
    return false;  // not a target: refused at once
  }
  // A long-poll waits when asked: wait_ms in its query. (One with a body,
  // a reserve's, had the answers before it written before its body was
  // read: HttpServer writes them before reading a body.)
  return m.long_poll && m.params.find("wait_ms") != nullptr;
}

awaitable<Response> route(ApiContext& ctx, Request& req) {
  const auto start = std::chrono::steady_clock::now();
  const Route* matched = nullptr;
  std::optional<Role> need;  // the matched method's
  bool handling = false;     // past routing: the route's own refusal shape applies
  Response res;
  std::optional<HttpError> refused;
  try {
    Match m = match_route(table(), req.method(), req.target());
    matched = m.route;
    const bool guarded = !(m.route && m.route->open) && !ctx.access.open();
    const Grant* grant = guarded ? grant_of(ctx, req) : nullptr;
    if (guarded && !grant) {
      res = error_response(req, Status::unauthorized, "unauthorized",
                           "this server needs \"Authorization: Bearer <token>\"");
      res.set(http::field::www_authenticate, "Bearer");
    } else if (req.method() == http::verb::unknown) {
      refuse(Status::not_implemented, "not_implemented",
             "method " + std::string(req.method_string().substr(0, 40)) + " is not implemented");
    } else if (!m.route) {
      refuse(Status::not_found, "not_found", "no such route: " + std::string(req.target()));
    } else if (!m.handler) {
      const std::string allow = allowed_methods(*m.route);
      res = error_response(req, Status::method_not_allowed, "method_not_allowed",
                           std::string(req.method_string()) + " is not allowed here; use " + allow);
      res.set(http::field::allow, allow);
    } else {
      need = m.need;
      if (grant) {
        if (auto why = refusal(*grant, m.need, m.params.topic)) {
          refuse(Status::forbidden, "forbidden", *why);
        }
      }
      handling = true;
      check_params(m);
      res = co_await m.handler(ctx, req, m.params);
    }
  } catch (const HttpError& e) {
    refused = e;
  } catch (const Error& e) {
    refused = http_error(e);
  }
  if (refused) {
    res = handling && matched->refusal
              ? matched->refusal(req, *refused)
              : error_response(req, refused->status, refused->code, refused->message);
  }
  // While draining, a connection stays open only for a client that may hold
  // jobs (the consume calls): its acks, releases, failures still count. A
  // reserve or pull that hands nothing out closes it (draining_aware); every
  // other answer closes it, so that keep-alive clients leave at once.
  if (ctx.stopping && need != Role::consume) res.keep_alive(false);
  ctx.metrics.observe(
      "request", std::string(matched ? matched->path : "unmatched"),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  co_return res;
}

}  // namespace redisched::server
