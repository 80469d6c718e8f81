// The HTTP/1.1 server under redisched serve: Boost.Beast on Asio coroutines,
// keep-alive, limits on header size, body size and idle time, and a
// graceful stop (no new connections; requests in flight finish).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace redisched::server {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using RequestHandler = std::function<boost::asio::awaitable<Response>(Request&)>;
// A handler that may claim a request and answer it by writing to the stream
// itself (server-sent events); returns false when it does not claim it. The
// connection closes after a claimed request.
using StreamHandler =
    std::function<boost::asio::awaitable<bool>(Request&, boost::beast::tcp_stream&)>;

struct HttpOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 7171;
  std::size_t body_limit = 2 << 20;     // bytes
  std::size_t header_limit = 16 << 10;  // bytes
  std::chrono::milliseconds idle_timeout{60000};
};

// A JSON answer (content type application/json), with the request's
// keep-alive and version.
Response json_response(const Request& req, http::status status, std::string body);
// { "error": { "code": code, "message": message } }
Response error_response(const Request& req, http::status status, std::string_view code,
                        std::string_view message);

class HttpServer {
 public:
  // Handlers run on io, which the caller runs on any number of threads.
  HttpServer(boost::asio::io_context& io, HttpOptions options, RequestHandler handler,
             StreamHandler stream_handler = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; throws std::runtime_error when it cannot.
  void start();
  std::uint16_t port() const;
  // Stops accepting, closes idle connections, lets requests in flight
  // finish (their connections close after the answer). Any thread.
  void stop();
  // Requests being handled now.
  int in_flight() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace redisched::server
