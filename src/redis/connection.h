// Connections to Redis: commands pipelined on one socket, replies matched to
// their callers in order; reconnection with backoff; the Functions library
// checked once per connection and loaded when missing or older.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "redis/reply.h"
#include "redis/url.h"
#include "redisched/job.h"

namespace boost::asio {
class io_context;
}

namespace redisched::redis {

struct ConnectionConfig {
  Endpoint endpoint;
  Millis connect_timeout{5000};
  Millis command_timeout{10000};  // 0 = none
  Millis reconnect_min{50};
  Millis reconnect_max{2000};
  bool load_library = true;  // check and load lua/redisched.lua on connect
  // Subscriber connections: pub/sub messages (smessage/message arrays) go
  // here instead of to a caller, and on_up runs on the I/O thread each time
  // the connection is (re)established, to subscribe again.
  std::function<void(const Reply&)> on_push;
  std::function<void()> on_up;
};

// Called once per command on the I/O thread. On a transport failure ec is
// set (Errc::connection, timeout, closed, protocol) and reply.str says what
// happened; otherwise ec is clear and reply is Redis's answer (which may be
// an error reply).
using Handler = std::function<void(std::error_code ec, Reply reply)>;

// Where commands go. One Redis node today; a Redis Cluster router can take
// its place (routing by the key each command names) without the Client
// changing.
class Link {
 public:
  virtual ~Link() = default;
  // Sends one RESP-encoded command; any thread. Replies come in the order
  // of sends from one thread. route_key names a key of the command (for a
  // cluster router); empty for keyless commands.
  virtual void send(std::string_view route_key, std::string command, Handler done) = 0;
  // Fails what is pending with Errc::closed and stops reconnecting.
  virtual void close() = 0;
};

// connections (>= 1) pipelined connections to one node, used in turn. Runs
// on io, which the caller runs on one thread.
std::unique_ptr<Link> make_node_link(boost::asio::io_context& io, ConnectionConfig config,
                                     int connections);

}  // namespace redisched::redis
