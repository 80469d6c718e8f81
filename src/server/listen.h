// Listening sockets for serve's faces (HTTP, beanstalkd): one acceptor per
// address a host name resolves to.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redisched::server {

// Binds and listens on each address of address (a name: every address it
// resolves to, so that clients reach it whichever family they prefer), all
// on one port (port 0: the first one bound). Throws std::runtime_error,
// naming flag, when none could be bound; warns when some could not.
std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> listen_on(boost::asio::io_context& io,
                                                                       const std::string& address,
                                                                       std::uint16_t port,
                                                                       std::string_view flag);

// After an accept that failed (out of descriptors, say): logs it, naming
// the face, and waits a moment on io, so that an accept loop does not spin
// while the cause lasts.
boost::asio::awaitable<void> after_accept_error(boost::asio::io_context& io,
                                                const boost::system::error_code& ec,
                                                std::string_view face);

}  // namespace redisched::server
