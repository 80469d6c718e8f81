// One pipelined connection to one node (redis/node_connection.h): connect,
// handshake, write and read loops, watchdog, reconnection.
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <deque>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "redis/command.h"
#include "redis/handshake.h"
#include "redis/library.h"
#include "redis/node_connection.h"
#include "redis/pipeline.h"
#include "redis/resp_reader.h"
#include "redisched/error.h"

namespace redisched::redis {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;  // NOLINT(google-build-using-namespace)
using Clock = std::chrono::steady_clock;

// Calls queued while replies are handled that go out before the rest of the
// read is handled (read_loop).
constexpr std::size_t kEarlyWrite = 64;

class ConnectionImpl final : public Connection,
                             public std::enable_shared_from_this<ConnectionImpl> {
 public:
  ConnectionImpl(asio::io_context& io, ConnectionConfig config, PushHooks hooks)
      : io_(io),
        cfg_(std::move(config)),
        hooks_(std::move(hooks)),
        pipeline_(hooks_.on_push),
        wake_(io, 1),
        retry_(io),
        ssl_(asio::ssl::context::tls_client) {
    if (cfg_.endpoint.tls) {
      if (cfg_.endpoint.ca_file.empty()) {
        ssl_.set_default_verify_paths();
      } else {
        ssl_.load_verify_file(cfg_.endpoint.ca_file);
      }
      ssl_.set_verify_mode(cfg_.endpoint.tls_verify ? asio::ssl::verify_peer
                                                    : asio::ssl::verify_none);
      if (!cfg_.endpoint.cert_file.empty()) {
        ssl_.use_certificate_chain_file(cfg_.endpoint.cert_file);
        ssl_.use_private_key_file(cfg_.endpoint.key_file, asio::ssl::context::pem);
      }
    }
  }

  void start() override {
    asio::co_spawn(
        io_, [self = shared_from_this()] { return self->run(); }, asio::detached);
  }

  // On the I/O thread, maybe inside the caller's own call: a refusal is
  // posted, so that no callback runs before the call returns.
  // enqueue, for a write that answers once `replicas` replicas have it.
  void enqueue_replicated(const std::string& command, int replicas,
                          std::chrono::milliseconds timeout, ReplyHandler done) override {
    if (closing_ || state_ == State::down) return enqueue(command, std::move(done));
    pipeline_.enqueue_replicated(command, replicas, timeout, std::move(done));
    wake_.try_send(boost::system::error_code{});
  }

  void enqueue(const std::string& command, ReplyHandler done) override {
    if (!accepting(done)) return;
    pipeline_.enqueue(command, std::move(done));
    wake_.try_send(boost::system::error_code{});  // a wake-up already pending is enough
  }

  // A call that may go out coalesced (Pipeline::enqueue_batchable).
  void enqueue_batchable(Batchable call, ReplyHandler done) override {
    if (!accepting(done)) return;
    pipeline_.enqueue_batchable(std::move(call), std::move(done));
    wake_.try_send(boost::system::error_code{});
  }

  // SUNSUBSCRIBE of channel (Pipeline::enqueue_unsubscribe).
  void enqueue_unsubscribe(const std::string& command, std::string channel,
                           ReplyHandler done) override {
    if (!accepting(done)) return;
    pipeline_.enqueue_unsubscribe(command, std::move(channel), std::move(done));
    wake_.try_send(boost::system::error_code{});
  }

  // On the I/O thread.
  void close() override {
    closing_ = true;
    if (close_stream_) close_stream_();
    wake_.cancel();
    retry_.cancel();
    fail_all(Errc::closed, "the client is closed");
  }

 private:
  // A command can be queued; else done fails soon (closed, or Redis down).
  bool accepting(ReplyHandler& done) {
    if (closing_) {
      fail_later(std::move(done), Errc::closed, "the client is closed");
      return false;
    }
    if (state_ == State::down) {
      // Refused credentials stay an auth error for every call until they
      // change, whichever call comes first.
      fail_later(std::move(done), last_code_ == Errc::auth ? Errc::auth : Errc::connection,
                 "not connected to Redis at " + cfg_.endpoint.describe() + ": " + last_error_);
      return false;
    }
    return true;
  }

  enum class State { connecting, up, down };

  static void fail(ReplyHandler& done, Errc code, std::string message) {
    Reply r;
    r.type = Reply::Type::error;
    r.str = std::move(message);
    done(make_error_code(code), std::move(r));
  }

  void fail_later(ReplyHandler done, Errc code, std::string message) {
    asio::post(io_, [done = std::move(done), code, message = std::move(message)]() mutable {
      fail(done, code, std::move(message));
    });
  }

  void fail_all(Errc code, const std::string& message) { pipeline_.fail_all(code, message); }

  awaitable<void> run() {
    auto backoff = cfg_.reconnect_min;
    while (!closing_) {
      state_ = State::connecting;
      ConnectionLost lost = co_await connect_and_serve();
      if (closing_) break;
      const bool was_up = state_ == State::up;
      state_ = State::down;
      last_error_ = lost.message;
      last_code_ = lost.code;
      fail_all(lost.code, lost.message + " (Redis at " + cfg_.endpoint.describe() + ")");
      if (was_up) backoff = cfg_.reconnect_min;
      retry_.expires_after(backoff);
      boost::system::error_code ignored;
      co_await retry_.async_wait(asio::redirect_error(use_awaitable, ignored));
      backoff = std::min(backoff * 2, cfg_.reconnect_max);
    }
  }

  // close() closes the socket being connected too: a connect that
  // completes after close() must not start serving (the runtime would never
  // run out of work).
  template <class Socket>
  void closes(Socket& socket) {
    close_stream_ = [&socket] {
      boost::system::error_code ignored;
      socket.close(ignored);
    };
  }
  void stop_if_closing() const {
    if (closing_) throw ConnectionLost{Errc::closed, "the client is closed"};
  }
  struct ResetClose {
    std::function<void()>& f;
    ~ResetClose() { f = nullptr; }
  };

  // Connects tcp to host:port, each step within connect_timeout.
  awaitable<void> connect_tcp(asio::ip::tcp::socket& tcp, const std::string& host,
                              std::uint16_t port) {
    closes(tcp);
    // An address needs no lookup (Asio's asynchronous lookup runs on a
    // thread of its own).
    boost::system::error_code not_address;
    const auto address = asio::ip::make_address(host, not_address);
    if (!not_address) {
      co_await with_timeout(
          tcp.async_connect(asio::ip::tcp::endpoint(address, port), use_awaitable), "connect");
    } else {
      asio::ip::tcp::resolver resolver(io_);
      auto endpoints = co_await with_timeout(
          resolver.async_resolve(host, std::to_string(port), use_awaitable), "resolve");
      stop_if_closing();  // a lookup is not cancelled by close()
      co_await with_timeout(asio::async_connect(tcp, endpoints, use_awaitable), "connect");
    }
    tcp.set_option(asio::ip::tcp::no_delay(true));
  }

  // Redis Sentinel: the primary's address, from the first sentinel that
  // names it (starting with the one that answered last). Every connection
  // asks afresh, so a reconnection after a failover finds the new primary.
  awaitable<std::pair<std::string, std::uint16_t>> ask_sentinels() {
    const Endpoint& e = cfg_.endpoint;
    std::string why;
    for (std::size_t n = 0; n < e.sentinels.size(); ++n) {
      const std::size_t i = (sentinel_turn_ + n) % e.sentinels.size();
      const auto& s = e.sentinels[i];
      const std::string where = s.host + ":" + std::to_string(s.port);
      try {
        asio::ip::tcp::socket tcp(io_);
        ResetClose forget{close_stream_};  // (before the socket goes)
        co_await connect_tcp(tcp, s.host, s.port);
        RespReader reader;
        if (!e.sentinel_password.empty()) {
          std::string auth = e.sentinel_user.empty()
                                 ? encode_command({"AUTH", e.sentinel_password})
                                 : encode_command({"AUTH", e.sentinel_user, e.sentinel_password});
          Reply r = co_await with_timeout(roundtrip(tcp, reader, std::move(auth)), "sentinel AUTH");
          if (r.is_error()) {
            why = where + ": AUTH refused: " + r.str;
            continue;
          }
        }
        std::string ask = encode_command({"SENTINEL", "get-master-addr-by-name", e.service});
        Reply r = co_await with_timeout(roundtrip(tcp, reader, std::move(ask)), "sentinel");
        int port = 0;
        if (r.type == Reply::Type::array && r.elements.size() == 2) {
          const std::string& p = r.elements[1].str;
          std::from_chars(p.data(), p.data() + p.size(), port);
        }
        if (port > 0 && port < 65536) {
          sentinel_turn_ = i;
          co_return std::pair{r.elements[0].str, static_cast<std::uint16_t>(port)};
        }
        why = where + ": " + (r.is_error() ? r.str : "knows no primary named '" + e.service + "'");
      } catch (const ConnectionLost& lost) {
        why = where + ": " + lost.message;
      } catch (const boost::system::system_error& err) {
        why = where + ": " + err.code().message();
      }
      stop_if_closing();
    }
    throw ConnectionLost{Errc::connection, "no sentinel named the primary of '" + e.service +
                                               "' (last: " + why + ")"};
  }

  awaitable<ConnectionLost> connect_and_serve() {
    const Endpoint& e = cfg_.endpoint;
    ResetClose reset{close_stream_};
    try {
      if (e.kind == Endpoint::Kind::unix_socket) {
        asio::local::stream_protocol::socket s(io_);
        closes(s);
        co_await with_timeout(
            s.async_connect(asio::local::stream_protocol::endpoint(e.path), use_awaitable),
            "connect");
        co_return co_await serve(s, s);
      }
      std::string host = e.host;
      std::uint16_t port = e.port;
      if (e.via_sentinel()) std::tie(host, port) = co_await ask_sentinels();
      primary_ = host + ":" + std::to_string(port);
      asio::ip::tcp::socket tcp(io_);
      co_await connect_tcp(tcp, host, port);
      if (!e.tls) co_return co_await serve(tcp, tcp);
      asio::ssl::stream<asio::ip::tcp::socket> tls(std::move(tcp), ssl_);
      closes(tls.next_layer());
      // SSL_set_tlsext_host_name, without the macro's C cast.
      if (SSL_ctrl(tls.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                   const_cast<char*>(e.host.c_str())) != 1) {
        co_return ConnectionLost{Errc::connection, "cannot set the TLS server name"};
      }
      if (e.tls_verify) tls.set_verify_callback(asio::ssl::host_name_verification(e.host));
      co_await with_timeout(tls.async_handshake(asio::ssl::stream_base::client, use_awaitable),
                            "TLS handshake");
      stop_if_closing();
      co_return co_await serve(tls, tls.next_layer());
    } catch (const ConnectionLost& lost) {
      co_return lost;
    } catch (const boost::system::system_error& err) {
      co_return ConnectionLost{Errc::connection, err.code().message()};
    } catch (const std::exception& err) {
      co_return ConnectionLost{Errc::connection, err.what()};
    }
  }

  // Awaits op, or throws ConnectionLost once connect_timeout has passed.
  // (Asio's || waits for the first *success*, so op's failure is caught
  // here and rethrown after the race.)
  template <class T>
  awaitable<T> with_timeout(awaitable<T> op, const char* what) {
    std::exception_ptr failure;
    auto guarded = [&failure](awaitable<T> o) -> awaitable<std::optional<T>> {
      try {
        co_return co_await std::move(o);
      } catch (...) {
        failure = std::current_exception();
        co_return std::nullopt;
      }
    };
    asio::steady_timer timer(io_, cfg_.connect_timeout);
    auto result = co_await (guarded(std::move(op)) || timer.async_wait(use_awaitable));
    if (result.index() == 1) throw ConnectionLost{Errc::timeout, std::string(what) + " timed out"};
    if (failure) std::rethrow_exception(failure);
    co_return std::move(*std::get<0>(result));
  }
  awaitable<void> with_timeout(awaitable<void> op, const char* what) {
    auto as_value = [](awaitable<void> o) -> awaitable<bool> {
      co_await std::move(o);
      co_return true;
    };
    co_await with_timeout(as_value(std::move(op)), what);
  }

  // Runs one of the loops of a live connection; the first to end (by
  // failure, or the others' cancellation) records why in lost_.
  awaitable<void> until_lost(awaitable<void> loop) {
    try {
      co_await std::move(loop);
    } catch (const ConnectionLost& lost) {
      if (!lost_) lost_ = lost;
    } catch (const Error& err) {  // the reader's: bytes that are not RESP
      if (!lost_) lost_ = ConnectionLost{err.code(), err.what()};
    } catch (const boost::system::system_error& err) {
      if (!lost_) {
        lost_ = err.code() == asio::error::eof
                    ? ConnectionLost{Errc::connection, "Redis closed the connection"}
                    : ConnectionLost{Errc::connection, err.code().message()};
      }
    } catch (const std::exception& err) {
      if (!lost_) lost_ = ConnectionLost{Errc::connection, err.what()};
    }
  }

  template <class Stream, class Socket>
  awaitable<ConnectionLost> serve(Stream& stream, Socket& socket) {
    RespReader reader;
    closes(socket);
    stop_if_closing();
    try {
      co_await with_timeout(handshake(stream, reader), "handshake");
      state_ = State::up;
      lost_.reset();
      if (hooks_.on_up) hooks_.on_up();
      co_await (until_lost(read_loop(stream, reader)) || until_lost(write_loop(stream)) ||
                until_lost(watchdog()));
      co_return lost_.value_or(ConnectionLost{Errc::connection, "connection closed"});
    } catch (const ConnectionLost& lost) {
      co_return lost;
    } catch (const Error& err) {  // the reader's, during the handshake
      co_return ConnectionLost{err.code(), err.what()};
    } catch (const boost::system::system_error& err) {
      if (err.code() == asio::error::eof) {
        co_return ConnectionLost{Errc::connection, "Redis closed the connection"};
      }
      co_return ConnectionLost{Errc::connection, err.code().message()};
    } catch (const std::exception& err) {
      co_return ConnectionLost{Errc::connection, err.what()};
    }
  }

  // One command and its reply, before the pipeline runs. (Commands are
  // encoded outside the co_await expression: see encode_command.)
  template <class Stream>
  awaitable<Reply> roundtrip(Stream& stream, RespReader& reader, std::string cmd) {
    co_await asio::async_write(stream, asio::buffer(cmd), use_awaitable);
    std::vector<char> buf(16384);
    for (;;) {
      if (auto reply = reader.next()) co_return std::move(*reply);
      const size_t n = co_await stream.async_read_some(asio::buffer(buf), use_awaitable);
      reader.feed(buf.data(), n);
    }
  }

  // The steps of redis/handshake.h, each command's reply awaited.
  template <class Stream>
  awaitable<void> handshake(Stream& stream, RespReader& reader) {
    Handshake steps(cfg_.endpoint, cfg_.load_library, primary_);
    while (auto command = steps.next()) {
      Reply r = co_await roundtrip(stream, reader, std::move(*command));
      steps.reply(r);
    }
  }

  template <class Stream>
  awaitable<void> read_loop(Stream& stream, RespReader& reader) {
    std::vector<char> buf(65536);
    for (;;) {
      const size_t n = co_await stream.async_read_some(asio::buffer(buf), use_awaitable);
      reader.feed(buf.data(), n);
      while (auto reply = reader.next()) {
        bool demoted = false;
        if (reply->is_error()) {
          reload_if_lost(reply->str);
          // Sentinel: a failover made this primary a replica. The call
          // fails; the connection asks the sentinels again.
          demoted = cfg_.endpoint.via_sentinel() && reply->str.starts_with("READONLY");
        }
        pipeline_.deliver(std::move(*reply));  // throws for a reply nobody asked for
        if (demoted) {
          throw ConnectionLost{Errc::connection,
                               primary_ + " is a replica now (failover): asking the sentinels"};
        }
        // The calls these replies' callers queued go out now, while the
        // rest of the read is handled, so Redis works on them meanwhile
        // instead of waiting for all of it (a read holds up to 64 KB of
        // replies, a batched reserve's alone hundreds of jobs).
        if (pipeline_.unsent() >= kEarlyWrite) co_await asio::post(io_, use_awaitable);
      }
    }
  }

  // The library vanished since the handshake (FUNCTION FLUSH, or an older
  // one loaded by hand): load ours again, once, behind the calls in flight.
  // The call that found out still fails; the ones after it work.
  void reload_if_lost(const std::string& error) {
    if (!cfg_.load_library || reloading_ || !library_missing(error)) {
      return;
    }
    reloading_ = true;
    enqueue(encode_command({"FUNCTION", "LOAD", "REPLACE", kLibraryCode}),
            [this, self = shared_from_this()](std::error_code, Reply) { reloading_ = false; });
  }

  template <class Stream>
  awaitable<void> write_loop(Stream& stream) {
    std::string sending;
    for (;;) {
      if (!pipeline_.has_output()) {
        boost::system::error_code ignored;
        co_await wake_.async_receive(asio::redirect_error(use_awaitable, ignored));
        // Woken by enqueue, or cancelled because the connection is ending.
        auto cs = co_await asio::this_coro::cancellation_state;
        if (closing_ || cs.cancelled() != asio::cancellation_type::none) co_return;
        continue;
      }
      // Everything queued meanwhile goes out in one write.
      pipeline_.take_output(sending);
      co_await asio::async_write(stream, asio::buffer(sending), use_awaitable);
    }
  }

  awaitable<void> watchdog() {
    if (cfg_.command_timeout.count() <= 0) {
      asio::steady_timer forever(io_, Clock::time_point::max());
      co_await forever.async_wait(use_awaitable);
      co_return;
    }
    asio::steady_timer tick(io_);
    for (;;) {
      tick.expires_after(
          std::min<Clock::duration>(cfg_.command_timeout / 4, std::chrono::seconds(1)));
      co_await tick.async_wait(use_awaitable);
      const auto oldest = pipeline_.oldest();
      if (oldest && Clock::now() - *oldest > cfg_.command_timeout) {
        throw ConnectionLost{
            Errc::timeout,
            "Redis did not answer within " + std::to_string(cfg_.command_timeout.count()) + " ms"};
      }
    }
  }

  asio::io_context& io_;
  ConnectionConfig cfg_;
  PushHooks hooks_;
  Pipeline pipeline_;  // commands not yet written, callers awaiting replies
  // The writer sleeps on it; enqueue wakes it. (A channel, not a cancelled
  // timer: waking costs no timerfd update and no system call.)
  asio::experimental::channel<void(boost::system::error_code)> wake_;
  asio::steady_timer retry_;  // the pause before reconnecting
  asio::ssl::context ssl_;
  State state_ = State::connecting;
  bool closing_ = false;
  std::string last_error_;
  Errc last_code_ = Errc::connection;  // why the last connection ended
  std::function<void()> close_stream_;
  std::optional<ConnectionLost> lost_;  // why the live connection ended
  bool reloading_ = false;              // a FUNCTION LOAD is in flight
  std::size_t sentinel_turn_ = 0;       // the sentinel to ask first
  std::string primary_;                 // host:port connected to (for messages)
};

}  // namespace

std::shared_ptr<Connection> Connection::make(asio::io_context& io, ConnectionConfig config,
                                             PushHooks hooks) {
  return std::make_shared<ConnectionImpl>(io, std::move(config), std::move(hooks));
}

}  // namespace redisched::redis
