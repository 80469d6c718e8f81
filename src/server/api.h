// The routes of redisched serve: the HTTP API under /v1 (docs/http-api.md),
// the original servers' routes (compat.cpp), the dashboard's files,
// /healthz and /metrics, as one table (router.h).
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "redisched/client.h"
#include "server/access.h"
#include "server/async_util.h"
#include "server/fields.h"
#include "server/http.h"
#include "server/router.h"

namespace redisched::server {

class WakeHub;
class Metrics;
class Pusher;
class Census;
class Sweeper;

struct ApiContext {
  Client& client;
  WakeHub& hub;
  Metrics& metrics;
  Pusher& pusher;
  Census& census;
  Sweeper& sweeper;
  Access access;  // the tokens every route but the open ones needs; none: open to all
  std::int64_t max_wait_ms = 60000;   // the longest long-poll
  std::atomic<bool> stopping{false};  // draining: long-polls answer at once, nothing is handed out
  Broadcast stopped{};                // fired with stopping: wakes the event streams
  // GET /v1/history's answers (one call a topic), by range, served again
  // for 10 s: when each was read, and its body.
  struct HistoryCache {
    std::mutex mu;
    std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::string>,
             std::less<>>
        answers;  // GUARDED_BY(mu)
  } history_cache{};

  // Starts the drain: nothing more is handed out, and each answer but those
  // that hand out or settle reservations closes its connection; long-polls
  // (reserves, waits on a job) and event streams answer at once.
  void stop();
};

// Every request of the server: routing, the token, the handler, errors as
// JSON, and the request's latency under its route's template in /metrics.
boost::asio::awaitable<Response> route(ApiContext& ctx, Request& req);
// Whether route may hold req long: a route the table marks a long-poll
// (RouteMethod::long_poll), asked to wait. HttpOptions::may_wait.
bool may_wait(const Request& req);

// The whole table (for tests and docs).
std::span<const Route> api_routes();

// The grant of the token the request carries in its one Authorization
// header (constant-time compare; the scheme is case-insensitive, RFC 9110
// §11.1), or nullptr.
const Grant* grant_of(const ApiContext& ctx, const Request& req);

// The original servers' routes (compat.cpp), for the table, and the shapes
// of their refusals.
Response original_refusal(const Request&, const HttpError&);
Response delay_queue_refusal(const Request&, const HttpError&);
boost::asio::awaitable<Response> schedule_route(ApiContext&, Request&, const Params&);
boost::asio::awaitable<Response> cancel_route(ApiContext&, Request&, const Params&);
boost::asio::awaitable<Response> push_route(ApiContext&, Request&, const Params&);
boost::asio::awaitable<Response> pop_route(ApiContext&, Request&, const Params&);
boost::asio::awaitable<Response> finish_route(ApiContext&, Request&, const Params&);

}  // namespace redisched::server
