// One pipelined connection to one Redis node: it connects (TCP, TLS, a
// Unix socket, or the primary Sentinel names), runs the handshake
// (redis/handshake.h), writes what is queued in one write, hands each reply
// to its caller in order, and reconnects with backoff. The links
// (node_link.cpp, cluster_link.cpp) are made of these. Private to redis/.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "redis/batch.h"
#include "redis/connection.h"

namespace boost::asio {
class io_context;
}

namespace redisched::redis {

// A subscriber connection's two hooks: pub/sub messages (smessage arrays) go
// to on_push instead of to a caller, and on_up runs each time the
// connection is (re)established, to subscribe again.
struct PushHooks {
  std::function<void(const Reply&)> on_push;
  std::function<void()> on_up;
};

// All on the I/O thread of io (the link posts there). A call refused (the
// connection closed, or Redis down) is answered later, never inline.
class Connection {
 public:
  static std::shared_ptr<Connection> make(boost::asio::io_context& io, ConnectionConfig config,
                                          PushHooks hooks = {});
  virtual ~Connection() = default;

  // Connects, and keeps connecting until close().
  virtual void start() = 0;
  virtual void enqueue(const std::string& command, ReplyHandler done) = 0;
  // A call that may go out coalesced (Pipeline::enqueue_batchable).
  virtual void enqueue_batchable(Batchable call, ReplyHandler done) = 0;
  // enqueue, for a write that answers once `replicas` replicas have it.
  virtual void enqueue_replicated(const std::string& command, int replicas,
                                  std::chrono::milliseconds timeout, ReplyHandler done) = 0;
  // SUNSUBSCRIBE of channel (Pipeline::enqueue_unsubscribe).
  virtual void enqueue_unsubscribe(const std::string& command, std::string channel,
                                   ReplyHandler done) = 0;
  // Fails what is pending with Errc::closed and stops reconnecting.
  virtual void close() = 0;
};

}  // namespace redisched::redis
