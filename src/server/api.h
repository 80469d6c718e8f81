// The routes of redisched serve: the HTTP API under /v1 (docs/http-api.md),
// the original servers' routes (compat.cpp), /healthz and /metrics.
#pragma once

#include <atomic>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "redisched/client.h"
#include "server/http.h"

namespace redisched::server {

class WakeHub;
class Metrics;
class Pusher;

struct ApiContext {
  Client& client;
  WakeHub& hub;
  Metrics& metrics;
  Pusher& pusher;
  std::string token;                  // bearer token every route but /healthz needs; empty: none
  std::int64_t max_wait_ms = 60000;   // the longest long-poll
  std::atomic<bool> stopping{false};  // long-polls answer at once
};

// Every request of the server.
boost::asio::awaitable<Response> route(ApiContext& ctx, Request& req);

// The original servers' routes; nullopt when the path is none of theirs.
boost::asio::awaitable<std::optional<Response>> compat_route(ApiContext& ctx, Request& req);

// A request refused: the HTTP status, the error code and the message.
struct HttpError {
  http::status status;
  std::string code;
  std::string message;
};

// Parses the body as a JSON object (an empty body is {}); throws HttpError.
boost::json::object json_body(const Request& req);

// Awaits one asynchronous Client call: start(callback) begins it.
template <class T, class Start>
boost::asio::awaitable<T> await_call(Start start) {
  namespace asio = boost::asio;
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>,
                                          void(std::exception_ptr, T)>(
      [start](auto handler) mutable {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto deliver = [h](std::exception_ptr e, T v) {
          auto ex = asio::get_associated_executor(*h);
          asio::post(ex, [h, e, v = std::move(v)]() mutable { std::move (*h)(e, std::move(v)); });
        };
        try {
          start(Callback<T>([deliver](Result<T> r) {
            if (r.ok()) {
              deliver(nullptr, std::move(r).value());
            } else {
              deliver(std::make_exception_ptr(r.error()), T{});
            }
          }));
        } catch (...) {
          deliver(std::current_exception(), T{});
        }
      },
      asio::use_awaitable);
}

}  // namespace redisched::server
