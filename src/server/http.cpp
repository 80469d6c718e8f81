#include "server/http.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <mutex>
#include <set>

namespace redisched::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

Response json_response(const Request& req, http::status status, std::string body) {
  Response res{status, req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response error_response(const Request& req, http::status status, std::string_view code,
                        std::string_view message) {
  boost::json::value v = {{"error", {{"code", code}, {"message", message}}}};
  return json_response(req, status, boost::json::serialize(v));
}

struct HttpServer::State : std::enable_shared_from_this<State> {
  State(asio::io_context& i, HttpOptions o, RequestHandler h, StreamHandler sh)
      : io(i),
        opts(std::move(o)),
        handler(std::move(h)),
        stream_handler(std::move(sh)),
        acceptor(i) {}

  asio::io_context& io;
  HttpOptions opts;
  RequestHandler handler;
  StreamHandler stream_handler;
  tcp::acceptor acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<int> in_flight{0};
  std::mutex mu;
  std::set<std::shared_ptr<beast::tcp_stream>> idle;  // waiting for a request

  awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket(asio::make_strand(io));
      boost::system::error_code ec;
      co_await acceptor.async_accept(socket, asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (stopping) co_return;
        spdlog::warn("accept: {}", ec.message());
        continue;
      }
      auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
      asio::co_spawn(stream->get_executor(), session(stream), asio::detached);
    }
  }

  void set_idle(const std::shared_ptr<beast::tcp_stream>& s, bool is_idle) {
    std::lock_guard lock(mu);
    if (is_idle) {
      idle.insert(s);
    } else {
      idle.erase(s);
    }
  }

  awaitable<void> session(std::shared_ptr<beast::tcp_stream> stream) {
    auto self = shared_from_this();
    beast::flat_buffer buffer;
    for (;;) {
      if (stopping) break;
      http::request_parser<http::string_body> parser;
      parser.body_limit(opts.body_limit);
      parser.header_limit(static_cast<std::uint32_t>(opts.header_limit));
      stream->expires_after(opts.idle_timeout);
      set_idle(stream, true);
      boost::system::error_code ec;
      co_await http::async_read(*stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
      set_idle(stream, false);
      if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
          ec == beast::error::timeout || ec == asio::error::connection_reset ||
          ec == asio::error::eof) {
        break;
      }
      if (ec) {
        // Malformed, too large, truncated: answer when we still can, then close.
        Request bad;
        bad.version(11);
        const bool too_big = ec == http::error::body_limit || ec == http::error::header_limit;
        Response res = error_response(
            bad,
            ec == http::error::header_limit ? http::status::request_header_fields_too_large
            : too_big                       ? http::status::payload_too_large
                                            : http::status::bad_request,
            too_big ? "too_large" : "bad_request",
            too_big ? "the request is larger than this server accepts (" + ec.message() + ")"
                    : "malformed HTTP request: " + ec.message());
        res.keep_alive(false);
        stream->expires_after(std::chrono::seconds(5));
        co_await http::async_write(*stream, res, asio::redirect_error(use_awaitable, ec));
        // Let the client finish sending before closing, so that the close is
        // not a reset that destroys the answer before the client reads it.
        stream->socket().shutdown(tcp::socket::shutdown_send, ec);
        stream->expires_after(std::chrono::seconds(1));
        std::array<char, 16384> sink{};
        for (std::size_t drained = 0; !ec && drained < (8u << 20);) {
          drained += co_await stream->async_read_some(asio::buffer(sink),
                                                      asio::redirect_error(use_awaitable, ec));
        }
        break;
      }
      Request req = parser.release();
      if (stream_handler) {
        bool claimed = false;
        try {
          claimed = co_await stream_handler(req, *stream);
        } catch (const std::exception& e) {
          spdlog::debug("stream {}: {}", std::string(req.target()), e.what());
          claimed = true;
        }
        if (claimed) break;
      }
      ++in_flight;
      Response res;
      try {
        res = co_await handler(req);
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", std::string(req.method_string()), std::string(req.target()),
                      e.what());
        res = error_response(req, http::status::internal_server_error, "internal", e.what());
      }
      if (stopping) res.keep_alive(false);
      stream->expires_after(opts.idle_timeout);
      co_await http::async_write(*stream, res, asio::redirect_error(use_awaitable, ec));
      --in_flight;
      if (ec || !res.keep_alive()) break;
    }
    boost::system::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream->close();
  }
};

HttpServer::HttpServer(asio::io_context& io, HttpOptions options, RequestHandler handler,
                       StreamHandler stream_handler)
    : state_(std::make_shared<State>(io, std::move(options), std::move(handler),
                                     std::move(stream_handler))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  auto& s = *state_;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(s.opts.address, ec);
  if (ec) throw std::runtime_error("--listen: not an IP address: " + s.opts.address);
  const tcp::endpoint endpoint(address, s.opts.port);
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw std::runtime_error("cannot listen on " + s.opts.address + ":" +
                             std::to_string(s.opts.port) + ": " + ec.message());
  }
  asio::co_spawn(s.acceptor.get_executor(), s.accept_loop(), asio::detached);
}

std::uint16_t HttpServer::port() const { return state_->acceptor.local_endpoint().port(); }

void HttpServer::stop() {
  auto s = state_;
  if (s->stopping.exchange(true)) return;
  asio::post(s->acceptor.get_executor(), [s] {
    boost::system::error_code ignored;
    s->acceptor.close(ignored);
  });
  std::lock_guard lock(s->mu);
  for (const auto& stream : s->idle) {
    asio::post(stream->get_executor(), [stream] { stream->cancel(); });
  }
}

int HttpServer::in_flight() const { return state_->in_flight; }

}  // namespace redisched::server
