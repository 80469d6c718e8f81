// The HTTP/1.1 server under redisched serve: Boost.Beast on Asio coroutines,
// keep-alive, and everything that makes it safe to face a network: bounded
// heads, bodies, chunk framing and trailers; strict message framing (RFC 9112
// §6); timeouts on idle connections and on slow heads; a cap on connections;
// HEAD answered without a body; and a graceful stop (no new connections;
// requests in flight finish).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace redisched {
class Runtime;
}

namespace redisched::server {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
// Answers one request. A HEAD request reaches it as it came; the server
// sends the answer's head only.
using RequestHandler = std::function<boost::asio::awaitable<Response>(Request&)>;
// A handler that may claim a request and answer it by writing to the stream
// itself (server-sent events); returns false when it does not claim it. The
// connection closes after a claimed request. owed: the answers of requests
// before it on the connection (pipelined), not yet written; a claim writes
// them first.
using StreamHandler = std::function<boost::asio::awaitable<bool>(
    Request&, boost::beast::tcp_stream&, std::string& owed)>;

struct HttpOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 7171;
  std::size_t body_limit = 2 << 20;  // bytes of a request body
  // Bytes of a request head; also the most the server buffers of chunk
  // framing (chunk-size lines with their extensions, trailers). At most
  // kMaxHeaderLimit.
  std::size_t header_limit = 16 << 10;
  std::chrono::milliseconds idle_timeout{60000};    // keep-alive, waiting for a request
  std::chrono::milliseconds header_timeout{10000};  // a head, once its first byte came
  std::chrono::milliseconds body_timeout{60000};    // a body, once its head came
  int max_connections = 1024;                       // more are answered 503 and closed
  // Whether a request's handler may wait long (a long-poll): the answers of
  // the requests before it, held to go out together (pipelining), are
  // written before it runs. None: no request waits.
  std::function<bool(const Request&)> may_wait;
};

// The largest head the server takes: Beast keeps each field in at most
// 64 KiB, and a head or trailer that could hold a larger one must be refused
// before it is parsed.
inline constexpr std::size_t kMaxHeaderLimit = 65535;

// A JSON answer (content type application/json), with the request's
// keep-alive and version.
Response json_response(const Request& req, http::status status, std::string body);
// { "error": { "code": code, "message": message } }; message may hold any
// bytes: what is not valid UTF-8 is escaped.
Response error_response(const Request& req, http::status status, std::string_view code,
                        std::string_view message);

// Whether a request head is one this server reads: one Host (RFC 9112
// §3.2), and a body framed so that no two readers can disagree about where
// it ends (§6.1, §6.3): Transfer-Encoding only "chunked", alone, on
// HTTP/1.1, and never with Content-Length. Returns the refusal (400, or 501
// for a coding the server does not implement) when not.
struct Refusal {
  http::status status;
  std::string code;
  std::string message;
};
std::optional<Refusal> check_head(const Request& head);

// The longest request line (method, target, version).
inline constexpr std::size_t kMaxRequestLine = 8192;

// What the bytes buffered so far say about the request head at their start
// (sans-io): complete, refused (too large, a bare LF, a folded header, a
// request line over kMaxRequestLine), or neither yet. The whole head must be
// buffered before Beast parses it: Beast keeps each field line it parsed
// elsewhere, so a bounded buffer alone would not bound the head.
struct HeadScan {
  bool complete = false;
  std::optional<Refusal> refusal;
};
HeadScan scan_head(std::string_view buffered, std::size_t header_limit);

class HttpServer {
 public:
  // Accepts on the runtime's first shard and serves each connection on one
  // shard, in turn; handlers run there.
  HttpServer(Runtime& runtime, HttpOptions options, RequestHandler handler,
             StreamHandler stream_handler = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; throws std::runtime_error when it cannot.
  void start();
  std::uint16_t port() const;
  // Starts draining: stops accepting; open connections are still served
  // (the handlers decide what they answer while draining) and close once
  // idle for a second. Any thread.
  void stop();
  // stop(), and closes every open connection now (a drain that ran out of
  // time): their sessions end as soon as their threads get to them. Any
  // thread.
  void abort();
  // Requests being handled now.
  int in_flight() const;
  // Connections open now.
  int connections() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace redisched::server
