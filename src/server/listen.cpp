#include "server/listen.h"

#include <spdlog/spdlog.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <set>
#include <stdexcept>

#include "redisched/asio.h"
#include "redisched/runtime.h"

namespace redisched::server {

namespace asio = boost::asio;
using asio::ip::tcp;

std::vector<std::unique_ptr<tcp::acceptor>> listen_on(asio::io_context& io,
                                                      const std::string& address,
                                                      std::uint16_t port, std::string_view flag) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto found = resolver.resolve(address, std::to_string(port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) {
    throw std::runtime_error(std::string(flag) + ": cannot resolve " + address + ": " +
                             ec.message());
  }
  std::vector<std::unique_ptr<tcp::acceptor>> out;
  std::string failures;
  std::set<asio::ip::address> seen;
  for (const auto& entry : found) {
    if (!seen.insert(entry.endpoint().address()).second) continue;
    // With port 0, the first bound port is the one for every address.
    const tcp::endpoint endpoint(entry.endpoint().address(), port);
    auto acceptor = std::make_unique<tcp::acceptor>(io);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec && endpoint.protocol() == tcp::v6()) {
      acceptor->set_option(asio::ip::v6_only(true), ec);
    }
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      failures +=
          (failures.empty() ? "" : "; ") + endpoint.address().to_string() + ": " + ec.message();
      continue;
    }
    port = acceptor->local_endpoint().port();
    out.push_back(std::move(acceptor));
  }
  if (out.empty()) {
    throw std::runtime_error("cannot listen on " + address + ":" + std::to_string(port) + ": " +
                             failures);
  }
  if (!failures.empty()) {
    spdlog::warn("{}: listening on some addresses of {} only ({})", flag, address, failures);
  }
  return out;
}

namespace {

// After an accept that failed (out of descriptors, say): logs it, naming
// the face, and waits a moment on io, so that an accept loop does not spin
// while the cause lasts.
asio::awaitable<void> after_accept_error(asio::io_context& io, const boost::system::error_code& ec,
                                         std::string_view face) {
  // One warning a second at most, for the whole process: out of
  // descriptors, every face's accepts fail ten times a second while it lasts.
  using Clock = std::chrono::steady_clock;
  static std::atomic<Clock::rep> next_warning{0};
  const auto now = Clock::now().time_since_epoch().count();
  auto due = next_warning.load();
  if (now >= due && next_warning.compare_exchange_strong(
                        due, now + Clock::duration(std::chrono::seconds(1)).count())) {
    spdlog::warn("{} accept: {} (trying again every 100 ms while it lasts)", face, ec.message());
  }
  asio::steady_timer pause(io, std::chrono::milliseconds(100));
  boost::system::error_code ignored;
  co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

// One acceptor's loop (accept_on). face is a literal's view.
asio::awaitable<void> accept_each(Runtime& runtime, asio::io_context& accepting,
                                  tcp::acceptor& acceptor, const std::atomic<bool>& stopping,
                                  std::string_view face, std::function<void(tcp::socket)> take) {
  for (;;) {
    tcp::socket socket(shard_io(runtime, runtime.next_shard()));
    boost::system::error_code ec;
    co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (stopping) co_return;
      co_await after_accept_error(accepting, ec, face);
      continue;
    }
    take(std::move(socket));
  }
}

}  // namespace

void accept_on(Runtime& runtime, asio::io_context& accepting,
               const std::vector<std::unique_ptr<tcp::acceptor>>& acceptors,
               const std::atomic<bool>& stopping, std::string_view face,
               const std::function<void(tcp::socket)>& take) {
  for (const auto& a : acceptors) {
    asio::co_spawn(accepting, accept_each(runtime, accepting, *a, stopping, face, take),
                   asio::detached);
  }
}

std::shared_ptr<bool> Sessions::add(const Stream& stream) {
  auto idle = std::make_shared<bool>(false);
  std::lock_guard lock(mu_);
  open_.emplace(stream, idle);
  return idle;
}

void Sessions::remove(const Stream& stream) {
  std::lock_guard lock(mu_);
  open_.erase(stream);
}

void Sessions::cancel_idle() {
  std::lock_guard lock(mu_);
  for (const auto& [stream, idle] : open_) {
    asio::post(stream->get_executor(), [stream = stream, idle = idle] {
      if (*idle) stream->cancel();
    });
  }
}

void Sessions::close_all() {
  std::lock_guard lock(mu_);
  for (const auto& entry : open_) {
    asio::post(entry.first->get_executor(), [stream = entry.first] {
      boost::system::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->close();
    });
  }
}

}  // namespace redisched::server
