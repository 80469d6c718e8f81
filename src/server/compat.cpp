// The routes of the two servers redisched replaces, with their exact request
// and answer shapes (../shared/seeds/, docs/http-api.md "The original
// interfaces"), so that their clients work unchanged:
//  - the original redisched: POST /schedule/{topic} {id, contents, delay}
//    and POST /cancel/{topic} {id}, answered {"success": true, ...}; due
//    jobs are pushed to --webhook as {topic, id, contents};
//  - the Redis delay queue: POST /push, GET /pop?topic=, GET /finish?job_id=,
//    always HTTP 200 with {code, message, data}: code 200 and message ""
//    on success, code 500 and the error's text on failure.
#include <charconv>

#include "core/checks.h"
#include "redisched/limits.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/sweeper.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using asio::awaitable;
using Status = http::status;

// A delay-queue job is re-armed after each ttr "forever" (up to this many times).
constexpr int kDelayQueueAttempts = static_cast<int>(limits::kAttemptsMax);

Response ok(const Request& req, const json::value& v, Status status = Status::ok) {
  return json_response(req, status, wire::to_text(v));
}

// ---- the original redisched

// Its failures: the status, and {"success": false, "error": {code, message}}.
Response original_failure(const Request& req, Status status, std::string_view code,
                          std::string_view message) {
  return ok(req,
            json::object{{"success", false},
                         {"error", {{"code", code}, {"message", wire::printable(message)}}}},
            status);
}

// Its Node server took the browser form's fields as they came: ids as
// strings (or numbers), unknown fields ignored.
std::string original_id(const json::object& o) {
  auto it = o.find("id");
  if (it != o.end() && it->value().is_int64()) return std::to_string(it->value().as_int64());
  if (it == o.end() || !it->value().is_string() || it->value().as_string().empty()) {
    bad_request("\"id\" (a string) is missing");
  }
  std::string id(it->value().as_string());
  core::check_id(id);
  return id;
}

}  // namespace

Response original_refusal(const Request& req, const HttpError& e) {
  return original_failure(req, e.status, e.code, e.message);
}

awaitable<Response> schedule_route(ApiContext& ctx, Request& req, const Params& p) {
  {
    const json::object o = json_object(req.body());
    JobSpec s;
    s.id = original_id(o);
    auto contents = o.find("contents");
    // As the request spells it: Boost.JSON's value would write 0.1 as 1E-1.
    s.body = contents == o.end() ? "null"
                                 : wire::scan_json(req.body(), "contents").member.value_or("null");
    s.delay = Millis{seconds_field(o, "delay", Seconds::lenient, limits::kDelayMax).value_or(0)};
    s.mode = PutMode::upsert;  // scheduling an id again reschedules it
    co_await ctx.client.put_async(p.topic, s, asio::use_awaitable);
    ctx.metrics.job_event("put", p.topic, s.id);
    co_return ok(req, json::object{{"success", true}, {"id", s.id}, {"topic", p.topic}});
  }
}

awaitable<Response> cancel_route(ApiContext& ctx, Request& req, const Params& p) {
  {
    const json::object o = json_object(req.body());
    const std::string id = original_id(o);
    auto removed = co_await ctx.client.remove_async(p.topic, id, asio::use_awaitable);
    if (removed) ctx.metrics.job_event("deleted", p.topic, id);
    co_return ok(req, json::object{{"success", true}, {"id", id}, {"deleted", removed ? 1 : 0}});
  }
}

// ---- the Redis delay queue

namespace {

// generateSuccessBody / generateFailureBody. job_id, beside them, is ours:
// a Go client unmarshalling into Resp{Code, Message, Data} ignores it.
Response dq_success(const Request& req, json::value data, std::string_view job_id = {}) {
  json::object o{{"code", 200}, {"message", ""}, {"data", std::move(data)}};
  if (!job_id.empty()) o["job_id"] = job_id;
  return ok(req, o);
}

Response dq_failure(const Request& req, std::string_view message) {
  return ok(req,
            json::object{{"code", 500}, {"message", wire::printable(message)}, {"data", nullptr}});
}

std::string query_topic(const Params& p) {
  const std::string* t = p.find("topic");
  if (!t || t->empty()) bad_request("topic is empty");
  Client::validate_topic(*t);
  return *t;
}

// The job_id /pop hands out and /finish takes: "<topic>/<id>/<token>". Topics
// hold no '/', tokens are digits, so the id between them may hold any.
std::string pop_handle(const std::string& topic, const Reservation& j) {
  return topic + "/" + j.id + "/" + std::to_string(j.token);
}

struct Handle {
  std::string topic, id;
  std::uint64_t token = 0;  // 0: the job was removed when popped (ttr 0)
};

std::optional<Handle> parse_handle(std::string_view s) {
  const auto first = s.find('/');
  const auto last = s.rfind('/');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  Handle h{std::string(s.substr(0, first)), std::string(s.substr(first + 1, last - first - 1))};
  const auto digits = s.substr(last + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), h.token);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  try {
    Client::validate_topic(h.topic);
    core::check_id(h.id);
  } catch (...) {
    return std::nullopt;
  }
  return h;
}

}  // namespace

// Every failure: HTTP 200 and code 500, the shape its clients check.
Response delay_queue_refusal(const Request& req, const HttpError& e) {
  return dq_failure(req, e.message);
}

awaitable<Response> push_route(ApiContext& ctx, Request& req, const Params&) {
  {
    const json::object o = json_object(req.body());
    auto topic = o.find("topic");
    if (topic != o.end() && !topic->value().is_string()) bad_request("\"topic\" must be a string");
    if (topic == o.end() || topic->value().as_string().empty()) bad_request("topic is empty");
    const std::string t(topic->value().as_string());
    Client::validate_topic(t);
    JobSpec s;
    s.body = string_field(o, "body").value_or("");
    // Its job is {id, topic, delay, ttr, body} in seconds; it made up the
    // id (uuid.New()) whatever the client sent, and so do we.
    s.delay = Millis{seconds_field(o, "delay", Seconds::whole, limits::kDelayMax).value_or(0)};
    // ttr 0: gone once popped, which a job put with TTR 0 is (reserve
    // hands it out for good, in the same call).
    s.ttr = Millis{seconds_field(o, "ttr", Seconds::whole, limits::kTtrMax).value_or(0)};
    s.max_attempts = kDelayQueueAttempts;
    s.backoff = Backoff{BackoffKind::fixed, Millis{0}, Millis{0}};
    auto id = co_await ctx.client.add_async(t, s, asio::use_awaitable);
    ctx.metrics.job_event("put", t, id);
    co_return dq_success(req, nullptr, id);
  }
}

awaitable<Response> pop_route(ApiContext& ctx, Request& req, const Params& p) {
  {
    const std::string topic = query_topic(p);
    if (ctx.stopping) {
      Response res = dq_failure(req, "the server is stopping; pop from another");
      res.keep_alive(false);  // nothing to wait for here
      co_return res;
    }
    auto r = co_await ctx.client.reserve_async(topic, 1, Millis{0}, asio::use_awaitable);
    // Its message when the queue is empty was go-redis's "redis: nil".
    if (r.jobs.empty()) bad_request("no job at present (redis: nil)");
    const auto& j = r.jobs.front();
    ctx.metrics.job_event(j.token ? "reserved" : "pulled", topic, j.id);
    co_return dq_success(req, json::string(wire::printable(j.body)), pop_handle(topic, j));
  }
}

awaitable<Response> finish_route(ApiContext& ctx, Request& req, const Params& p) {
  {
    const std::string* given = p.find("job_id");
    if (!given || given->empty()) bad_request("job_id is empty");
    auto h = parse_handle(*given);
    if (!h) bad_request("job_id " + *given + " is not one that /pop handed out");
    if (h->token == 0) co_return dq_success(req, nullptr);  // removed when popped
    auto o =
        co_await ctx.client.ack_async(h->topic, h->id, h->token, Millis{0}, asio::use_awaitable);
    switch (o) {
      case Outcome::ok:
        ctx.metrics.job_event("acked", h->topic, h->id);
        co_return dq_success(req, nullptr);
      case Outcome::not_found:  // finished already: finishing is idempotent, as it was
        co_return dq_success(req, nullptr);
      case Outcome::wrong_state:
        bad_request("job " + h->id + " is not popped: its ttr ran out and it is back in the queue");
      case Outcome::stale_token:
        bad_request("job " + h->id +
                    " was popped again after its ttr ran out; this job_id is over");
    }
    bad_request("unknown outcome");
  }
}

}  // namespace redisched::server
