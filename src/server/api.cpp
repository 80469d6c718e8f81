#include "server/api.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>
#include <charconv>
#include <chrono>
#include <map>

#include "server/dashboard.h"
#include "server/metrics.h"
#include "server/push.h"
#include "server/wake_hub.h"
#include "wire/job_json.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using asio::awaitable;
using Status = http::status;

[[noreturn]] void refuse(Status status, std::string code, std::string message) {
  throw HttpError{status, std::move(code), std::move(message)};
}

[[noreturn]] void bad(std::string message) {
  refuse(Status::bad_request, "invalid_argument", std::move(message));
}

Response ok_json(const Request& req, const json::value& v, Status status = Status::ok) {
  return json_response(req, status, json::serialize(v));
}

// ---- reading JSON fields

void only_fields(const json::object& o, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : o) {
    bool known = false;
    for (auto a : allowed) known = known || key == a;
    if (!known) bad("unknown field \"" + std::string(key) + "\"");
  }
}

std::optional<std::int64_t> int_field(const json::object& o, std::string_view name, std::int64_t lo,
                                      std::int64_t hi) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  const json::value& v = it->value();
  std::int64_t n = 0;
  if (v.is_int64()) {
    n = v.as_int64();
  } else if (v.is_uint64() && v.as_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    n = static_cast<std::int64_t>(v.as_uint64());
  } else if (v.is_double() &&
             v.as_double() == static_cast<double>(static_cast<std::int64_t>(v.as_double()))) {
    n = static_cast<std::int64_t>(v.as_double());
  } else {
    bad("\"" + std::string(name) + "\" must be an integer");
  }
  if (n < lo || n > hi) {
    bad("\"" + std::string(name) + "\" must be from " + std::to_string(lo) + " to " +
        std::to_string(hi) + ", got " + std::to_string(n));
  }
  return n;
}

std::optional<std::string> string_field(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  if (!it->value().is_string()) bad("\"" + std::string(name) + "\" must be a string");
  return std::string(it->value().as_string());
}

std::optional<bool> bool_field(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  if (!it->value().is_bool()) bad("\"" + std::string(name) + "\" must be true or false");
  return it->value().as_bool();
}

std::uint64_t token_field(const json::object& o) {
  auto t = int_field(o, "token", 1, INT64_MAX);
  if (!t) bad("\"token\" is missing: it comes with the reserved job");
  return static_cast<std::uint64_t>(*t);
}

// The job of a put: body (text) or body_base64, and its schedule.
JobSpec job_spec(const json::object& o) {
  only_fields(o, {"body", "body_base64", "delay_ms", "due_at_ms", "priority", "ttr_ms", "attempts",
                  "backoff", "mode"});
  JobSpec s;
  auto text = string_field(o, "body");
  auto b64 = string_field(o, "body_base64");
  if (text && b64) bad("give \"body\" or \"body_base64\", not both");
  if (b64) {
    auto decoded = wire::base64_decode(*b64);
    if (!decoded) bad("\"body_base64\" is not valid base64");
    s.body = std::move(*decoded);
  } else if (text) {
    s.body = std::move(*text);
  } else if (o.contains("body")) {
    bad("\"body\" must be a string (JSON values travel serialised, binary as body_base64)");
  }
  if (auto d = int_field(o, "delay_ms", 0, 315576000000)) s.delay = Millis{*d};
  if (auto at = int_field(o, "due_at_ms", 0, 253402300799999)) s.due_at_ms = *at;
  if (s.delay && s.due_at_ms) bad("give \"delay_ms\" or \"due_at_ms\", not both");
  if (auto p = int_field(o, "priority", 0, 1000)) s.priority = static_cast<int>(*p);
  if (auto t = int_field(o, "ttr_ms", 1, 604800000)) s.ttr = Millis{*t};
  if (auto a = int_field(o, "attempts", 1, 1000)) s.max_attempts = static_cast<int>(*a);
  if (auto it = o.find("backoff"); it != o.end() && !it->value().is_null()) {
    if (!it->value().is_object()) bad("\"backoff\" must be an object {kind, base_ms, cap_ms}");
    const auto& b = it->value().as_object();
    only_fields(b, {"kind", "base_ms", "cap_ms"});
    Backoff backoff;
    auto kind = string_field(b, "kind").value_or("exponential");
    if (kind == "fixed") {
      backoff.kind = BackoffKind::fixed;
    } else if (kind != "exponential") {
      bad("\"backoff.kind\" must be fixed or exponential");
    }
    backoff.base = Millis{int_field(b, "base_ms", 0, 315576000000).value_or(1000)};
    backoff.cap =
        Millis{int_field(b, "cap_ms", 0, 315576000000)
                   .value_or(backoff.kind == BackoffKind::fixed ? backoff.base.count() : 600000)};
    if (backoff.cap < backoff.base) bad("\"backoff.cap_ms\" must be at least base_ms");
    s.backoff = backoff;
  }
  auto mode = string_field(o, "mode").value_or("create");
  if (mode == "replace") {
    s.mode = PutMode::replace;
  } else if (mode == "upsert") {
    s.mode = PutMode::upsert;
  } else if (mode != "create") {
    bad("\"mode\" must be create, replace or upsert");
  }
  return s;
}

json::object taken_json(const ReserveResult& r, bool reserved) {
  json::array jobs;
  for (const auto& j : r.jobs) jobs.push_back(wire::reservation_json(j, reserved));
  json::object out{{"jobs", std::move(jobs)}, {"paused", r.paused}};
  return out;
}

// ---- the routes

struct Path {
  std::vector<std::string> segments;  // decoded
  std::map<std::string, std::string> query;
};

Path parse_target(std::string_view target) {
  auto u = boost::urls::parse_origin_form(target);
  if (!u) bad("malformed request target");
  Path p;
  for (auto seg : u->segments()) p.segments.emplace_back(seg);
  for (auto param : u->params()) p.query[std::string(param.key)] = std::string(param.value);
  return p;
}

std::int64_t query_int(const Path& p, const std::string& name, std::int64_t def, std::int64_t lo,
                       std::int64_t hi) {
  auto it = p.query.find(name);
  if (it == p.query.end()) return def;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
  if (ec != std::errc() || end != it->second.data() + it->second.size()) {
    bad("query parameter " + name + " must be an integer");
  }
  if (n < lo || n > hi) {
    bad("query parameter " + name + " must be from " + std::to_string(lo) + " to " +
        std::to_string(hi));
  }
  return n;
}

void method_is(const Request& req, std::initializer_list<http::verb> allowed) {
  for (auto v : allowed) {
    if (req.method() == v) return;
  }
  std::string names;
  for (auto v : allowed) names += (names.empty() ? "" : ", ") + std::string(http::to_string(v));
  refuse(Status::method_not_allowed, "method_not_allowed",
         std::string(req.method_string()) + " is not allowed here; use " + names);
}

Response outcome_response(const Request& req, Outcome o, std::string_view id,
                          json::object extra = {}) {
  switch (o) {
    case Outcome::ok:
      extra["ok"] = true;
      return ok_json(req, extra);
    case Outcome::not_found:
      refuse(Status::not_found, "not_found", "no job " + std::string(id) + " in this topic");
    case Outcome::wrong_state:
      refuse(Status::conflict, "wrong_state", "job " + std::string(id) + " is not reserved");
    case Outcome::stale_token:
      refuse(Status::conflict, "stale_token",
             "the reservation of job " + std::string(id) +
                 " is over (it lapsed and was handed out again)");
  }
  refuse(Status::internal_server_error, "internal", "unknown outcome");
}

// Reserve, waiting up to wait_ms for a job (long-poll) on the wake-up signal.
awaitable<ReserveResult> reserve_waiting(ApiContext& ctx, const std::string& topic, int count,
                                         Millis ttr, std::int64_t wait_ms) {
  const auto until = std::chrono::steady_clock::now() + Millis{wait_ms};
  const auto ex = co_await asio::this_coro::executor;
  for (;;) {
    auto ticket = wait_ms > 0 ? ctx.hub.watch(topic, ex) : nullptr;
    auto r = co_await await_call<ReserveResult>([&](Callback<ReserveResult> cb) {
      ctx.client.reserve_async(topic, count, ttr, std::move(cb));
    });
    const auto now = std::chrono::steady_clock::now();
    if (!r.jobs.empty() || !ticket || now >= until || ctx.stopping) {
      if (ticket) ctx.hub.forget(ticket);
      co_return r;
    }
    // Sleep until a signal, the next due time Redis reported, or the end.
    auto wake = until;
    if (r.next_ms > 0)
      wake = std::min(wake, now + Millis{std::max<std::int64_t>(r.next_ms - r.now_ms, 0)});
    co_await ctx.hub.wait(ticket, wake);
  }
}

awaitable<Response> topic_routes(ApiContext& ctx, Request& req, const Path& p) {
  // p.segments: v1 topics {topic} ...
  const std::string& topic = p.segments[2];
  Client::validate_topic(topic);
  const size_t n = p.segments.size();
  auto& c = ctx.client;
  if (n == 3) {  // the topic: stats
    method_is(req, {http::verb::get});
    auto s = co_await await_call<TopicStats>([&](auto cb) { c.stats_async(topic, std::move(cb)); });
    co_return ok_json(req, wire::stats_json(topic, s));
  }
  const std::string& what = p.segments[3];
  if (what == "jobs" && n == 4) {
    if (req.method() == http::verb::get) {  // list by state
      auto state = parse_job_state(p.query.count("state") ? p.query.at("state") : "ready");
      if (!state) bad("state must be delayed, ready, reserved, dead or done");
      const auto offset = query_int(p, "offset", 0, 0, INT64_MAX);
      const auto count = static_cast<int>(query_int(p, "count", 100, 1, 1000));
      auto page = co_await await_call<ListPage>(
          [&](auto cb) { c.list_async(topic, *state, offset, count, true, std::move(cb)); });
      json::array jobs;
      for (const auto& j : page.jobs) jobs.push_back(wire::job_json(j));
      co_return ok_json(req, json::object{{"total", page.total}, {"jobs", std::move(jobs)}});
    }
    method_is(req, {http::verb::post});  // put with a generated id
    JobSpec s = job_spec(json_body(req));
    if (s.mode != PutMode::create) bad("a generated id is always new: mode must be create");
    auto id =
        co_await await_call<std::string>([&](auto cb) { c.add_async(topic, s, std::move(cb)); });
    ctx.metrics.job_event("put", topic, id);
    co_return ok_json(req, json::object{{"id", id}, {"outcome", "created"}}, Status::created);
  }
  if (what == "jobs" && n >= 5) {
    const std::string& id = p.segments[4];
    if (n == 5) {
      if (req.method() == http::verb::put) {
        JobSpec s = job_spec(json_body(req));
        s.id = id;
        auto o =
            co_await await_call<PutOutcome>([&](auto cb) { c.put_async(topic, s, std::move(cb)); });
        switch (o) {
          case PutOutcome::created:
            ctx.metrics.job_event("put", topic, id, s.due_at_ms.value_or(0));
            co_return ok_json(req, json::object{{"id", id}, {"outcome", "created"}},
                              Status::created);
          case PutOutcome::updated:
            ctx.metrics.job_event("put", topic, id, s.due_at_ms.value_or(0));
            co_return ok_json(req, json::object{{"id", id}, {"outcome", "updated"}});
          case PutOutcome::exists:
            refuse(Status::conflict, "exists",
                   "job " + id +
                       " exists; put it with \"mode\": \"replace\" or \"upsert\" to update it");
          case PutOutcome::not_found:
            refuse(Status::not_found, "not_found", "no job " + id + " to replace");
        }
      }
      if (req.method() == http::verb::get) {
        auto j = co_await await_call<std::optional<Job>>(
            [&](auto cb) { c.get_async(topic, id, std::move(cb)); });
        if (!j) refuse(Status::not_found, "not_found", "no job " + id + " in topic " + topic);
        co_return ok_json(req, wire::job_json(*j));
      }
      method_is(req, {http::verb::put, http::verb::get, http::verb::delete_});
      auto removed =
          co_await await_call<bool>([&](auto cb) { c.remove_async(topic, id, std::move(cb)); });
      if (!removed) refuse(Status::not_found, "not_found", "no job " + id + " in topic " + topic);
      ctx.metrics.job_event("deleted", topic, id);
      co_return ok_json(req, json::object{{"deleted", true}});
    }
    if (n == 6) {
      method_is(req, {http::verb::post});
      const std::string& action = p.segments[5];
      json::object body = json_body(req);
      if (action == "ack") {
        only_fields(body, {"token", "keep_ms"});
        const auto token = token_field(body);
        const Millis keep{int_field(body, "keep_ms", 0, 315576000000).value_or(0)};
        auto o = co_await await_call<Outcome>(
            [&](auto cb) { c.ack_async(topic, id, token, keep, std::move(cb)); });
        if (o == Outcome::ok) ctx.metrics.job_event("acked", topic, id);
        co_return outcome_response(req, o, id);
      }
      if (action == "release") {
        only_fields(body, {"token", "delay_ms", "priority"});
        const auto token = token_field(body);
        const Millis delay{int_field(body, "delay_ms", 0, 315576000000).value_or(0)};
        std::optional<int> prio;
        if (auto p2 = int_field(body, "priority", 0, 1000)) prio = static_cast<int>(*p2);
        auto o = co_await await_call<Outcome>(
            [&](auto cb) { c.release_async(topic, id, token, delay, prio, std::move(cb)); });
        if (o == Outcome::ok) ctx.metrics.job_event("released", topic, id);
        co_return outcome_response(req, o, id);
      }
      if (action == "fail") {
        only_fields(body, {"token", "error", "dead"});
        const auto token = token_field(body);
        const auto error = string_field(body, "error").value_or("failed");
        if (error.size() > 8192) bad("\"error\" is over 8192 bytes");
        const bool dead = bool_field(body, "dead").value_or(false);
        auto f = co_await await_call<FailResult>([&](auto cb) {
          c.fail_async(topic, id, token, error, dead, std::nullopt, std::move(cb));
        });
        if (f.outcome == Outcome::ok) {
          ctx.metrics.job_event(f.state == JobState::dead ? "dead" : "failed", topic, id);
        }
        co_return outcome_response(req, f.outcome, id, json::object{{"state", to_string(f.state)}});
      }
      if (action == "touch") {
        only_fields(body, {"token", "ttr_ms"});
        const auto token = token_field(body);
        const Millis ttr{int_field(body, "ttr_ms", 1, 604800000).value_or(0)};
        auto t = co_await await_call<TouchResult>(
            [&](auto cb) { c.touch_async(topic, id, token, ttr, std::move(cb)); });
        co_return outcome_response(req, t.outcome, id, json::object{{"deadline", t.deadline_ms}});
      }
      refuse(Status::not_found, "not_found", "no such action: " + action);
    }
  }
  if (what == "webhook" && n == 4) co_return co_await ctx.pusher.route(req, topic);
  if (n == 4) {
    method_is(req, {http::verb::post});
    json::object body = json_body(req);
    if (what == "reserve") {
      only_fields(body, {"count", "ttr_ms", "wait_ms"});
      const int count = static_cast<int>(int_field(body, "count", 1, 1000).value_or(1));
      const Millis ttr{int_field(body, "ttr_ms", 1, 604800000).value_or(0)};
      const auto wait = int_field(body, "wait_ms", 0, ctx.max_wait_ms).value_or(0);
      auto r = co_await reserve_waiting(ctx, topic, count, ttr, wait);
      for (const auto& j : r.jobs) ctx.metrics.job_event("reserved", topic, j.id);
      co_return ok_json(req, taken_json(r, true));
    }
    if (what == "pull") {
      only_fields(body, {"count"});
      const int count = static_cast<int>(int_field(body, "count", 1, 1000).value_or(1));
      auto r = co_await await_call<ReserveResult>(
          [&](auto cb) { c.pull_async(topic, count, std::move(cb)); });
      for (const auto& j : r.jobs) ctx.metrics.job_event("pulled", topic, j.id);
      co_return ok_json(req, taken_json(r, false));
    }
    if (what == "kick") {
      only_fields(body, {"ids", "all", "limit"});
      int kicked = 0;
      if (bool_field(body, "all").value_or(false)) {
        const int limit = static_cast<int>(int_field(body, "limit", 1, 10000).value_or(1000));
        kicked = co_await await_call<int>(
            [&](auto cb) { c.kick_all_async(topic, limit, std::move(cb)); });
      } else {
        auto it = body.find("ids");
        if (it == body.end() || !it->value().is_array())
          bad("give \"ids\": [...] or \"all\": true");
        std::vector<std::string> ids;
        for (const auto& v : it->value().as_array()) {
          if (!v.is_string()) bad("\"ids\" must hold strings");
          ids.emplace_back(v.as_string());
        }
        if (ids.empty()) bad("\"ids\" is empty");
        kicked =
            co_await await_call<int>([&](auto cb) { c.kick_async(topic, ids, std::move(cb)); });
      }
      ctx.metrics.count("kicked", topic, static_cast<std::uint64_t>(kicked));
      co_return ok_json(req, json::object{{"kicked", kicked}});
    }
    if (what == "pause" || what == "resume") {
      only_fields(body, {});
      const bool pausing = what == "pause";
      auto changed = co_await await_call<bool>([&](auto cb) {
        if (pausing) {
          c.pause_async(topic, std::move(cb));
        } else {
          c.resume_async(topic, std::move(cb));
        }
      });
      co_return ok_json(req, json::object{{"paused", pausing}, {"changed", changed}});
    }
  }
  refuse(Status::not_found, "not_found", "no such route: " + std::string(req.target()));
}

awaitable<Response> dispatch(ApiContext& ctx, Request& req, const Path& p) {
  const auto& s = p.segments;
  if (s.size() == 1 && s[0] == "metrics") {
    method_is(req, {http::verb::get});
    std::map<std::string, TopicStats> topics;
    const auto all_topics = co_await await_call<std::vector<std::string>>(
        [&](auto cb) { ctx.client.topics_async(std::move(cb)); });
    for (const auto& t : all_topics) {
      topics[t] = co_await await_call<TopicStats>(
          [&](auto cb) { ctx.client.stats_async(t, std::move(cb)); });
    }
    Response res{Status::ok, req.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.keep_alive(req.keep_alive());
    res.body() = ctx.metrics.render(topics);
    res.prepare_payload();
    co_return res;
  }
  if (s.size() >= 2 && s[0] == "v1" && s[1] == "topics") {
    if (s.size() == 2) {
      method_is(req, {http::verb::get});
      json::array out;
      const auto all_topics = co_await await_call<std::vector<std::string>>(
          [&](auto cb) { ctx.client.topics_async(std::move(cb)); });
      for (const auto& t : all_topics) {
        auto st = co_await await_call<TopicStats>(
            [&](auto cb) { ctx.client.stats_async(t, std::move(cb)); });
        out.push_back(json::object{{"topic", t},
                                   {"delayed", st.delayed},
                                   {"ready", st.ready},
                                   {"reserved", st.reserved},
                                   {"dead", st.dead},
                                   {"paused", st.paused}});
      }
      co_return ok_json(req, json::object{{"topics", std::move(out)}});
    }
    co_return co_await topic_routes(ctx, req, p);
  }
  if (auto compat = co_await compat_route(ctx, req)) co_return std::move(*compat);
  refuse(Status::not_found, "not_found", "no such route: " + std::string(req.target()));
}

bool authorized(const ApiContext& ctx, const Request& req) {
  if (ctx.token.empty()) return true;
  const auto header = req[http::field::authorization];
  const std::string expected = "Bearer " + ctx.token;
  return header.size() == expected.size() &&
         CRYPTO_memcmp(header.data(), expected.data(), expected.size()) == 0;
}

}  // namespace

json::object json_body(const Request& req) {
  if (req.body().empty()) return {};
  boost::system::error_code ec;
  json::value v = json::parse(req.body(), ec);
  if (ec) bad("malformed JSON: " + ec.message());
  if (!v.is_object()) bad("the body must be a JSON object");
  return std::move(v.as_object());
}

awaitable<Response> route(ApiContext& ctx, Request& req) {
  const auto start = std::chrono::steady_clock::now();
  std::string label = "other";
  Response res;
  try {
    Path p = parse_target(req.target());
    if (auto file = dashboard_file(req)) {
      co_return std::move(*file);  // the page holds no data: no token needed
    }
    if (p.segments.size() == 1 && p.segments[0] == "healthz") {
      label = "healthz";
      try {
        co_await await_call<TopicStats>(
            [&](auto cb) { ctx.client.stats_async("healthz", std::move(cb)); });
        res = ok_json(req, json::object{{"status", "ok"}});
      } catch (const Error& e) {
        res = ok_json(req, json::object{{"status", "unavailable"}, {"error", e.what()}},
                      Status::service_unavailable);
      }
    } else if (!authorized(ctx, req)) {
      Response r = error_response(req, Status::unauthorized, "unauthorized",
                                  "this server needs \"Authorization: Bearer <token>\"");
      r.set(http::field::www_authenticate, "Bearer");
      co_return r;
    } else {
      if (!p.segments.empty())
        label =
            p.segments[0] == "v1" && p.segments.size() > 3 ? "v1/" + p.segments[3] : p.segments[0];
      res = co_await dispatch(ctx, req, p);
    }
  } catch (const HttpError& e) {
    res = error_response(req, e.status, e.code, e.message);
  } catch (const Error& e) {
    switch (e.code()) {
      case Errc::invalid_argument:
        res = error_response(req, Status::bad_request, "invalid_argument", e.what());
        break;
      case Errc::connection:
      case Errc::timeout:
      case Errc::closed:
      case Errc::auth:
        res = error_response(req, Status::service_unavailable, "unavailable", e.what());
        break;
      default:
        res = error_response(req, Status::internal_server_error, "internal", e.what());
    }
  }
  ctx.metrics.observe(
      "request", label,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  co_return res;
}

}  // namespace redisched::server
