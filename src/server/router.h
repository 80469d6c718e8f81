// The routes of the server as a table: a path template, the methods it takes
// with their handlers, and whether it is open without the token. Matching a
// request gives its route (whose template also names it in /metrics), the
// checked path parameters, and the decoded query; an unknown path is 404, a
// known path with another method 405 with Allow.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/access.h"
#include "server/http.h"

namespace redisched::server {

struct ApiContext;

// A request's path parameters and query, decoded (and checked by check_params).
struct Params {
  std::string path;   // the request's path, decoded
  std::string topic;  // {topic}: a valid topic name
  std::string id;     // {id}: a valid job id (fields.h, check_id)
  std::string name;   // {name}: a schedule's name (the library checks it)
  std::map<std::string, std::string> query;
  std::string repeated;  // a query parameter given twice, if any

  // The query parameter, or nullptr.
  const std::string* find(const std::string& key) const;
};

using RouteHandler = boost::asio::awaitable<Response> (*)(ApiContext&, Request&, const Params&);

struct RouteMethod {
  http::verb verb;
  RouteHandler handler;
  Role need;  // what a token must grant to call it (access.h)
  // A long-poll: when the request asks it to (wait_ms), it may wait long
  // before answering, so the answers held for pipelining go out first
  // (may_wait in api.h).
  bool long_poll = false;
};

struct HttpError;

// How a route answers a refusal (the original servers' routes keep their
// own shapes); nullptr: {"error": {code, message}} with the status.
using RefusalShape = Response (*)(const Request&, const HttpError&);

struct Route {
  // Segments are literals, {topic} or {id}: "/v1/topics/{topic}/jobs/{id}".
  std::string_view path;
  std::vector<RouteMethod> methods;
  bool open = false;  // answered without the token (the dashboard's files, /healthz)
  // Query parameters the route takes; any other is refused (a misspelt one
  // would be ignored silently). A null list takes any (the original
  // servers' routes ignored what they did not know).
  const std::vector<std::string_view>* query = nullptr;
  RefusalShape refusal = nullptr;
};

struct Match {
  const Route* route = nullptr;    // nullptr: no route has this path (404)
  RouteHandler handler = nullptr;  // nullptr with a route: not this method (405)
  Role need = Role::admin;         // the handler's (RouteMethod::need)
  bool long_poll = false;          // the handler's (RouteMethod::long_poll)
  Params params;
};

// Matches a request target (origin form) against routes; HEAD takes GET's
// handler. Throws HttpError 400 for a target that is not one.
Match match_route(std::span<const Route> routes, http::verb method, std::string_view target);

// Checks a match's parameters (after the token: a request without it learns
// nothing). Throws Error (invalid_argument, answered 400) for a bad topic or
// id, HttpError 400 for a repeated query parameter or one the route does not
// take.
void check_params(const Match& m);

// The methods of a route for the Allow header: "GET, HEAD, PUT".
std::string allowed_methods(const Route& route);

}  // namespace redisched::server
