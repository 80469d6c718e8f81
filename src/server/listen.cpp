#include "server/listen.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <set>
#include <stdexcept>

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

boost::asio::awaitable<void> after_accept_error(boost::asio::io_context& io,
                                                const boost::system::error_code& ec,
                                                std::string_view face) {
  spdlog::warn("{} accept: {}", face, ec.message());
  boost::asio::steady_timer pause(io, std::chrono::milliseconds(100));
  boost::system::error_code ignored;
  co_await pause.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ignored));
}

}  // namespace redisched::server
