#include "server/http.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/value.hpp>

#include "redisched/asio.h"
#include "redisched/runtime.h"
#include "server/listen.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

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
  boost::json::value v = {{"error", {{"code", code}, {"message", wire::printable(message)}}}};
  return json_response(req, status, wire::to_text(v));
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 §5.6.2: a token.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

Refusal bad_framing(std::string message) {
  return {http::status::bad_request, "bad_request", std::move(message)};
}

}  // namespace

std::optional<Refusal> check_head(const Request& head) {
  // RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one before.
  const auto hosts = head.count(http::field::host);
  if (hosts > 1 || (hosts == 0 && head.version() >= 11)) {
    return bad_framing("an HTTP/1.1 request needs exactly one Host header");
  }
  const auto codings = head.count(http::field::transfer_encoding);
  if (codings == 0) return std::nullopt;
  if (head.version() < 11) return bad_framing("Transfer-Encoding is not allowed in HTTP/1.0");
  if (head.count(http::field::content_length) > 0) {
    return bad_framing("a request may not have both Content-Length and Transfer-Encoding");
  }
  if (codings > 1) return bad_framing("Transfer-Encoding is given more than once");
  const std::string_view value = trim(head[http::field::transfer_encoding]);
  if (beast::iequals(value, "chunked")) return std::nullopt;
  // Anything else: a list naming chunked (twice, or not last) is malformed;
  // a list of codings the server does not implement is 501.
  bool tokens = true;
  bool names_chunked = false;
  std::string_view rest = value;
  while (tokens) {
    const auto comma = rest.find(',');
    const auto item = trim(rest.substr(0, comma));
    tokens = is_token(item);
    names_chunked = names_chunked || beast::iequals(item, "chunked");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (!tokens || names_chunked) {
    return bad_framing("Transfer-Encoding '" + std::string(value.substr(0, 64)) +
                       "' is malformed: a request body may be sent as is or chunked, once");
  }
  return Refusal{http::status::not_implemented, "not_implemented",
                 "Transfer-Encoding '" + std::string(value.substr(0, 64)) +
                     "' is not supported: send the body as is or chunked"};
}

HeadScan scan_head(std::string_view data, std::size_t header_limit) {
  HeadScan scan;
  const auto end = data.find("\r\n\r\n");
  const auto line_end = data.find("\r\n");
  if ((line_end == std::string_view::npos ? data.size() : line_end) > kMaxRequestLine) {
    scan.refusal =
        Refusal{http::status::uri_too_long, "too_large",
                "the request line is longer than " + std::to_string(kMaxRequestLine) + " bytes"};
    return scan;
  }
  // Lines end in CRLF (RFC 9112 §2.2 lets a server refuse a bare LF).
  const auto head = data.substr(0, end == std::string_view::npos ? data.size() : end + 2);
  for (auto lf = head.find('\n'); lf != std::string_view::npos; lf = head.find('\n', lf + 1)) {
    if (lf == 0 || head[lf - 1] != '\r') {
      scan.refusal = Refusal{http::status::bad_request, "bad_request",
                             "a line of the request head does not end in CRLF"};
      return scan;
    }
  }
  if (end == std::string_view::npos) {
    if (data.size() >= header_limit) {
      scan.refusal = Refusal{http::status::request_header_fields_too_large, "too_large",
                             "the request head is larger than this server accepts (--max-header)"};
    }
    return scan;
  }
  if (end + 4 > header_limit) {
    scan.refusal = Refusal{http::status::request_header_fields_too_large, "too_large",
                           "the request head is larger than this server accepts (--max-header)"};
    return scan;
  }
  // RFC 9112 §5.2: obs-fold is refused rather than unfolded, so that no two
  // readers of this head can disagree about a field.
  if (head.find("\r\n ") != std::string_view::npos ||
      head.find("\r\n\t") != std::string_view::npos) {
    scan.refusal = Refusal{http::status::bad_request, "bad_request",
                           "a header field is folded over lines (obs-fold)"};
    return scan;
  }
  scan.complete = true;
  return scan;
}

namespace {

// The answer to a request that could not be read whole, and then the
// connection closes.
Refusal read_refusal(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return {http::status::request_header_fields_too_large, "too_large",
            "the request head, a chunk-size line or the trailers are larger than this server "
            "accepts (--max-header)"};
  }
  if (ec == http::error::body_limit) {
    return {http::status::payload_too_large, "too_large",
            "the request body is larger than this server accepts (--max-request)"};
  }
  if (ec == beast::error::timeout) {
    return {http::status::request_timeout, "timeout", "the request did not arrive in time"};
  }
  return {http::status::bad_request, "bad_request", "malformed HTTP request: " + ec.message()};
}

// The peer went away, or we are stopping: nothing to answer.
bool gone(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
         ec == asio::error::connection_reset || ec == asio::error::eof ||
         ec == asio::error::broken_pipe;
}

// An answer's bytes, as Beast's serializer writes them (its fields as they
// are; json_response set Content-Length): the status line, the fields, and
// the body unless head_only.
void append_answer(std::string& out, const Response& res, bool head_only) {
  out += res.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(res.result_int());
  out += ' ';
  out += res.reason();
  out += "\r\n";
  for (const auto& field : res) {
    out += field.name_string();
    out += ": ";
    out += field.value();
    out += "\r\n";
  }
  out += "\r\n";
  if (!head_only) out += res.body();
}

}  // namespace

struct HttpServer::State : std::enable_shared_from_this<State> {
  State(Runtime& r, HttpOptions o, RequestHandler h, StreamHandler sh)
      : runtime(r),
        opts(std::move(o)),
        handler(std::move(h)),
        stream_handler(std::move(sh)),
        accepting(shard_io(r, 0)) {
    opts.header_limit = std::min(opts.header_limit, kMaxHeaderLimit);
  }

  Runtime& runtime;
  HttpOptions opts;
  RequestHandler handler;
  StreamHandler stream_handler;
  asio::io_context& accepting;                            // the acceptors' shard
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;  // one per address of the host
  std::atomic<bool> stopping{false};
  std::atomic<int> in_flight{0};
  std::atomic<int> connections{0};
  // While draining, how long an open connection may sit idle before it closes.
  static constexpr std::chrono::seconds kDrainIdle{1};
  // The most bytes of pipelined answers held back for one write.
  static constexpr std::size_t kGatherMax = 64 << 10;
  Sessions sessions;

  // A connection accepted: its session, unless there are as many as it takes.
  void take(tcp::socket socket) {
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    if (connections >= opts.max_connections) {
      asio::co_spawn(stream->get_executor(), turn_away(stream), asio::detached);
      return;
    }
    ++connections;
    asio::co_spawn(stream->get_executor(), session(stream), asio::detached);
  }

  // Over --max-connections: a 503 and close, without reading.
  static awaitable<void> turn_away(std::shared_ptr<beast::tcp_stream> stream) {
    static constexpr std::string_view kBody =
        R"({"error":{"code":"unavailable","message":"this server has as many connections as it takes"}})";
    static const std::string kBusy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nRetry-After: 1\r\nContent-Length: " +
        std::to_string(kBody.size()) + "\r\n\r\n" + std::string(kBody);
    boost::system::error_code ec;
    stream->expires_after(std::chrono::seconds(1));
    co_await asio::async_write(*stream, asio::buffer(kBusy),
                               asio::redirect_error(use_awaitable, ec));
    stream->socket().shutdown(tcp::socket::shutdown_both, ec);
    stream->close();
  }

  // Answers a request that cannot be served and leaves the connection to
  // close: lets the client finish sending first (bounded), so that the close
  // is not a reset that destroys the answer before the client reads it.
  static awaitable<void> refuse(beast::tcp_stream& stream, const Refusal& r, unsigned version,
                                bool head) {
    Request req;
    req.version(version == 10 ? 10 : 11);
    Response res = error_response(req, r.status, r.code, r.message);
    res.keep_alive(false);
    boost::system::error_code ec;
    stream.expires_after(std::chrono::seconds(5));
    if (head) {
      http::response_serializer<http::string_body> sr{res};
      co_await http::async_write_header(stream, sr, asio::redirect_error(use_awaitable, ec));
    } else {
      co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
    }
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream.expires_after(std::chrono::seconds(1));
    std::array<char, 16384> sink{};
    for (std::size_t drained = 0; !ec && drained < (8u << 20);) {
      drained += co_await stream.async_read_some(asio::buffer(sink),
                                                 asio::redirect_error(use_awaitable, ec));
    }
  }

  // What reading one request gave: the request; or a refusal to answer
  // before closing; or neither (the peer left, or an idle connection ends).
  struct Incoming {
    std::optional<Request> request;
    std::optional<Refusal> refusal;
    unsigned version = 11;
    bool head = false;  // a HEAD request: the refusal has no body either
  };

  // The whole head must be in the buffer before Beast parses it: Beast
  // holds each field line it has parsed elsewhere, so the buffer's bound
  // alone would not bound the head. Returns a refusal for a head that is
  // too large or folded, or sets ec.
  awaitable<std::optional<Refusal>> read_head(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                              boost::system::error_code& ec) {
    // (A head read whole with its first bytes, the usual case, arms no timer.)
    bool timed = false;
    for (;;) {
      const std::string_view data(static_cast<const char*>(buffer.data().data()), buffer.size());
      auto scan = scan_head(data, opts.header_limit);
      if (scan.refusal) co_return std::move(scan.refusal);
      if (scan.complete) co_return std::nullopt;
      if (!timed) stream.expires_after(opts.header_timeout);
      timed = true;
      const auto n = co_await stream.async_read_some(
          buffer.prepare(std::min<std::size_t>(4096, buffer.max_size() - buffer.size())),
          asio::redirect_error(use_awaitable, ec));
      if (ec) co_return std::nullopt;
      buffer.commit(n);
    }
  }

  // answers: those of the requests before, not yet written (pipelining);
  // written before a 100 Continue, which must follow them.
  // idle: the session's flag (Sessions::add), set while it waits between
  // requests.
  awaitable<Incoming> read_request(const std::shared_ptr<beast::tcp_stream>& stream, bool& idle,
                                   beast::flat_buffer& buffer, std::string& answers,
                                   int& unwritten) {
    Incoming in;
    boost::system::error_code ec;
    // Idle until the first byte of the next request (it may be buffered
    // already). While the server drains, a connection may still bring the
    // acks of jobs it holds, but not sit idle for long.
    while (buffer.size() == 0) {
      // Idle before reading stopping: a stop() whose cancel finds this
      // connection busy has set stopping already.
      idle = true;
      stream->expires_after(stopping ? kDrainIdle : opts.idle_timeout);
      const auto n = co_await stream->async_read_some(
          buffer.prepare(std::min<std::size_t>(4096, buffer.max_size())),
          asio::redirect_error(use_awaitable, ec));
      idle = false;
      // stop() cut the idle wait short: wait again, briefly.
      if (ec == asio::error::operation_aborted && stopping) continue;
      if (ec) co_return in;  // idle timeout, or the peer left
      buffer.commit(n);
    }
    // A bad head is refused; Beast may still have seen whether it was HEAD.
    in.head = std::string_view(static_cast<const char*>(buffer.data().data()), buffer.size())
                  .starts_with("HEAD ");
    in.refusal = co_await read_head(*stream, buffer, ec);
    if (in.refusal || ec) {
      if (ec && !gone(ec)) in.refusal = read_refusal(ec);
      co_return in;
    }
    http::request_parser<http::string_body> parser;
    parser.body_limit(opts.body_limit);
    parser.header_limit(static_cast<std::uint32_t>(opts.header_limit));
    co_await http::async_read_header(*stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (!gone(ec)) in.refusal = read_refusal(ec);
      co_return in;
    }
    in.version = parser.get().version();
    if (auto bad = check_head(parser.get())) {
      in.refusal = std::move(bad);
      co_return in;
    }
    if (!parser.is_done()) {
      // Answers held for pipelining do not wait for a body still coming;
      // a 100 Continue goes out after them.
      if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        answers += kContinue;
      }
      co_await write_answers(*stream, answers, unwritten, ec);
      if (ec) co_return in;
      stream->expires_after(opts.body_timeout);
      co_await http::async_read(*stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (!gone(ec)) in.refusal = read_refusal(ec);
        co_return in;
      }
    }
    in.request = parser.release();
    co_return in;
  }

  // Whether the head of another request is buffered whole: its answer can
  // go out with the one before (pipelining).
  bool next_buffered(const beast::flat_buffer& buffer) const {
    const std::string_view data(static_cast<const char*>(buffer.data().data()), buffer.size());
    return !data.empty() && scan_head(data, opts.header_limit).complete;
  }

  // Writes the answers gathered (each counted in_flight until written).
  awaitable<void> write_answers(beast::tcp_stream& stream, std::string& answers, int& unwritten,
                                boost::system::error_code& ec) {
    if (!answers.empty()) {
      stream.expires_after(opts.idle_timeout);
      co_await asio::async_write(stream, asio::buffer(answers),
                                 asio::redirect_error(use_awaitable, ec));
      answers.clear();
    }
    in_flight -= unwritten;
    unwritten = 0;
  }

  awaitable<void> session(std::shared_ptr<beast::tcp_stream> stream) {
    auto self = shared_from_this();
    const auto idle = sessions.add(stream);
    // The buffer's bound is what bounds a head, a chunk-size line with its
    // extensions, and the trailers: each must fit whole before it is parsed.
    beast::flat_buffer buffer(opts.header_limit);
    // Answers not yet written: while the client's next request is buffered
    // already (it pipelines), an answer waits for the next one's, and they
    // go out in one write, in order (RFC 9112 §9.3.2).
    std::string answers;
    int unwritten = 0;
    boost::system::error_code ec;
    for (;;) {
      auto in = co_await read_request(stream, *idle, buffer, answers, unwritten);
      if (!in.request) {
        co_await write_answers(*stream, answers, unwritten, ec);
        if (in.refusal && !ec) co_await refuse(*stream, *in.refusal, in.version, in.head);
        break;
      }
      auto& req = in.request;
      if (stream_handler) {
        bool claimed = false;
        try {
          claimed = co_await stream_handler(*req, *stream, answers);
        } catch (const std::exception& e) {
          spdlog::debug("stream {}: {}", std::string(req->target()), e.what());
          claimed = true;
        }
        if (claimed) break;
      }
      if (!answers.empty() && opts.may_wait && opts.may_wait(*req)) {
        co_await write_answers(*stream, answers, unwritten, ec);
        if (ec) break;
      }
      ++in_flight;
      Response res;
      try {
        res = co_await handler(*req);
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", std::string(req->method_string()),
                      wire::printable(req->target()), e.what());
        res = error_response(*req, http::status::internal_server_error, "internal", e.what());
      }
      // HEAD: the head GET would send, Content-Length included, and no body.
      append_answer(answers, res, req->method() == http::verb::head);
      ++unwritten;
      // (An answer whose end is the connection's, without a length, closes it.)
      const bool keep_alive = res.keep_alive() && !res.need_eof();
      if (!keep_alive || answers.size() >= kGatherMax || !next_buffered(buffer)) {
        co_await write_answers(*stream, answers, unwritten, ec);
      }
      if (ec || !keep_alive) break;
    }
    in_flight -= unwritten;
    boost::system::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream->close();
    sessions.remove(stream);
    --connections;
  }
};

HttpServer::HttpServer(Runtime& runtime, HttpOptions options, RequestHandler handler,
                       StreamHandler stream_handler)
    : state_(std::make_shared<State>(runtime, std::move(options), std::move(handler),
                                     std::move(stream_handler))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  auto& s = *state_;
  s.acceptors = listen_on(s.accepting, s.opts.address, s.opts.port, "--listen");
  accept_on(s.runtime, s.accepting, s.acceptors, s.stopping, "http",
            [state = state_](tcp::socket socket) { state->take(std::move(socket)); });
}

std::uint16_t HttpServer::port() const {
  return state_->acceptors.front()->local_endpoint().port();
}

void HttpServer::stop() {
  auto s = state_;
  if (s->stopping.exchange(true)) return;
  asio::post(s->accepting, [s] {
    boost::system::error_code ignored;
    for (auto& a : s->acceptors) a->close(ignored);
  });
  s->sessions.cancel_idle();
}

void HttpServer::abort() {
  stop();
  state_->sessions.close_all();
}

int HttpServer::in_flight() const { return state_->in_flight; }

int HttpServer::connections() const { return state_->connections; }

}  // namespace redisched::server
