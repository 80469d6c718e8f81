// The routes of the two servers redisched replaces, with their request and
// answer shapes, so that their clients work unchanged (docs/http-api.md,
// "The original interfaces"):
//  - the original redisched: POST /schedule/{topic} {id, contents, delay}
//    and POST /cancel/{topic} {id}; due jobs are pushed to --webhook;
//  - the Redis delay queue: POST /push, GET /pop?topic=, GET /finish?job_id=,
//    answering {code, message, data}.
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include "server/api.h"
#include "server/metrics.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using asio::awaitable;
using Status = http::status;

constexpr int kDelayQueueAttempts = 1000;  // its ttr re-arms "forever"
// A delay-queue job with ttr 0 is removed when popped; it is stored with
// this time-to-run (a week less a millisecond), which /pop recognises and
// acks at once.
constexpr Millis kRemoveOnPop{604799999};

Response ok(const Request& req, const json::value& v) {
  return json_response(req, Status::ok, json::serialize(v));
}

// The delay queue's answers: HTTP 200 with {code, message, data}.
Response dq(const Request& req, int code, std::string_view message, json::value data = nullptr) {
  return ok(req, json::object{{"code", code}, {"message", message}, {"data", std::move(data)}});
}

std::int64_t seconds_field(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return 0;
  const auto& v = it->value();
  if (v.is_int64() && v.as_int64() >= 0) return v.as_int64();
  if (v.is_uint64()) return static_cast<std::int64_t>(v.as_uint64());
  if (v.is_double() && v.as_double() >= 0)
    return static_cast<std::int64_t>(v.as_double() * 1000) / 1000;
  throw HttpError{Status::bad_request, "invalid_argument",
                  "\"" + std::string(name) + "\" must be a number of seconds, at least 0"};
}

std::string query_param(const Request& req, std::string_view name) {
  auto u = boost::urls::parse_origin_form(req.target());
  if (!u) return {};
  auto it = u->params().find(name);
  return it == u->params().end() ? std::string() : std::string((*it).value);
}

// --- the original redisched

awaitable<Response> schedule(ApiContext& ctx, Request& req, const std::string& topic) {
  json::object o = json_body(req);
  auto id = o.find("id");
  if (id == o.end() || !id->value().is_string() || id->value().as_string().empty()) {
    throw HttpError{Status::bad_request, "invalid_argument", "\"id\" (a string) is missing"};
  }
  JobSpec s;
  s.id = std::string(id->value().as_string());
  auto contents = o.find("contents");
  s.body = contents == o.end() ? "null" : json::serialize(contents->value());
  s.delay = Millis{seconds_field(o, "delay") * 1000};
  s.mode = PutMode::upsert;  // scheduling an id again reschedules it
  co_await await_call<PutOutcome>([&](auto cb) { ctx.client.put_async(topic, s, std::move(cb)); });
  ctx.metrics.job_event("put", topic, s.id);
  co_return ok(req, json::object{{"id", s.id}, {"topic", topic}});
}

awaitable<Response> cancel(ApiContext& ctx, Request& req, const std::string& topic) {
  json::object o = json_body(req);
  auto id = o.find("id");
  if (id == o.end() || !id->value().is_string()) {
    throw HttpError{Status::bad_request, "invalid_argument", "\"id\" (a string) is missing"};
  }
  const std::string job(id->value().as_string());
  auto removed = co_await await_call<bool>(
      [&](auto cb) { ctx.client.remove_async(topic, job, std::move(cb)); });
  co_return ok(req, json::object{{"id", job}, {"deleted", removed ? 1 : 0}});
}

// --- the Redis delay queue

awaitable<Response> push(ApiContext& ctx, Request& req) {
  json::object o;
  try {
    o = json_body(req);
  } catch (const HttpError& e) {
    co_return dq(req, 1, e.message);
  }
  auto topic = o.find("topic");
  if (topic == o.end() || !topic->value().is_string()) co_return dq(req, 1, "topic is missing");
  const std::string t(topic->value().as_string());
  JobSpec s;
  auto body = o.find("body");
  if (body != o.end() && !body->value().is_null()) {
    s.body = body->value().is_string() ? std::string(body->value().as_string())
                                       : json::serialize(body->value());
  }
  std::int64_t delay = 0, ttr = 0;
  try {
    delay = seconds_field(o, "delay");
    ttr = seconds_field(o, "ttr");
  } catch (const HttpError& e) {
    co_return dq(req, 1, e.message);
  }
  s.delay = Millis{delay * 1000};
  s.ttr = ttr > 0 ? Millis{ttr * 1000} : kRemoveOnPop;
  s.max_attempts = kDelayQueueAttempts;
  s.backoff = Backoff{BackoffKind::fixed, Millis{0}, Millis{0}};
  auto id = o.find("id");
  try {
    std::string job_id;
    if (id != o.end() && id->value().is_string() && !id->value().as_string().empty()) {
      s.id = std::string(id->value().as_string());
      s.mode = PutMode::upsert;
      co_await await_call<PutOutcome>([&](auto cb) { ctx.client.put_async(t, s, std::move(cb)); });
      job_id = s.id;
    } else {
      job_id = co_await await_call<std::string>(
          [&](auto cb) { ctx.client.add_async(t, s, std::move(cb)); });
    }
    ctx.metrics.count("put", t);
    co_return dq(req, 0, "success", json::object{{"id", job_id}});
  } catch (const Error& e) {
    co_return dq(req, 1, e.what());
  }
}

awaitable<Response> pop(ApiContext& ctx, Request& req) {
  const std::string topic = query_param(req, "topic");
  if (topic.empty()) co_return dq(req, 1, "topic is missing");
  try {
    auto r = co_await await_call<ReserveResult>(
        [&](auto cb) { ctx.client.reserve_async(topic, 1, Millis{0}, std::move(cb)); });
    if (r.jobs.empty()) co_return dq(req, 0, "success");
    const auto& j = r.jobs.front();
    if (j.deadline_ms - r.now_ms == kRemoveOnPop.count()) {
      co_await await_call<Outcome>(
          [&](auto cb) { ctx.client.ack_async(topic, j.id, j.token, Millis{0}, std::move(cb)); });
    }
    ctx.metrics.count("reserved", topic);
    co_return dq(req, 0, "success", json::object{{"id", j.id}, {"body", j.body}});
  } catch (const Error& e) {
    co_return dq(req, 1, e.what());
  }
}

awaitable<Response> finish(ApiContext& ctx, Request& req) {
  const std::string id = query_param(req, "job_id");
  if (id.empty()) co_return dq(req, 1, "job_id is missing");
  try {
    // Its ids carry no topic: find the topic that holds it reserved.
    const auto all_topics = co_await await_call<std::vector<std::string>>(
        [&](auto cb) { ctx.client.topics_async(std::move(cb)); });
    for (const auto& topic : all_topics) {
      auto j = co_await await_call<std::optional<Job>>(
          [&](auto cb) { ctx.client.get_async(topic, id, std::move(cb)); });
      if (!j || j->state != JobState::reserved) continue;
      auto o = co_await await_call<Outcome>(
          [&](auto cb) { ctx.client.ack_async(topic, id, j->token, Millis{0}, std::move(cb)); });
      if (o == Outcome::ok) {
        ctx.metrics.count("acked", topic);
        co_return dq(req, 0, "success");
      }
    }
    co_return dq(req, 1, "no reserved job " + id);
  } catch (const Error& e) {
    co_return dq(req, 1, e.what());
  }
}

}  // namespace

awaitable<std::optional<Response>> compat_route(ApiContext& ctx, Request& req) {
  auto u = boost::urls::parse_origin_form(req.target());
  if (!u) co_return std::nullopt;
  std::vector<std::string> seg;
  for (auto s : u->segments()) seg.emplace_back(s);
  auto need = [&](http::verb v) {
    if (req.method() != v) {
      throw HttpError{Status::method_not_allowed, "method_not_allowed",
                      "use " + std::string(http::to_string(v)) + " here"};
    }
  };
  if (seg.size() == 2 && (seg[0] == "schedule" || seg[0] == "cancel")) {
    need(http::verb::post);
    Client::validate_topic(seg[1]);
    if (seg[0] == "schedule") co_return co_await schedule(ctx, req, seg[1]);
    co_return co_await cancel(ctx, req, seg[1]);
  }
  if (seg.size() == 1 && seg[0] == "push") {
    need(http::verb::post);
    co_return co_await push(ctx, req);
  }
  if (seg.size() == 1 && seg[0] == "pop") {
    need(http::verb::get);
    co_return co_await pop(ctx, req);
  }
  if (seg.size() == 1 && seg[0] == "finish") {
    need(http::verb::get);
    co_return co_await finish(ctx, req);
  }
  co_return std::nullopt;
}

}  // namespace redisched::server
