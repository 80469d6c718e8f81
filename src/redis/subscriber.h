// A pub/sub connection: SSUBSCRIBE to channels (sharded pub/sub, so on a
// Redis Cluster each channel lives with its topic's slot), messages to a
// callback. Subscriptions are renewed after every reconnection, and on_ready
// says so: messages published while the connection was down are lost, so
// the listener must look again.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>

#include "redis/connection.h"

namespace redisched::redis {

class Subscriber {
 public:
  using OnMessage = std::function<void(const std::string& channel, const std::string& payload)>;
  using OnReady = std::function<void()>;

  // Callbacks run on io's thread, which the caller runs.
  Subscriber(boost::asio::io_context& io, ConnectionConfig config, OnMessage on_message,
             OnReady on_ready);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // On io's thread. on_ready follows once Redis confirms.
  void subscribe(const std::string& channel);
  // On io's thread: no more messages of channel (after those in flight).
  void unsubscribe(const std::string& channel);
  // Channels subscribed now (or to be, once the connection is up).
  std::size_t channels() const { return channels_.size(); }
  void close();

 private:
  void send_subscribe(const std::string& channel);

  std::unordered_set<std::string> channels_;
  OnMessage on_message_;
  OnReady on_ready_;
  std::unique_ptr<Link> link_;
  int unconfirmed_ = 0;  // SSUBSCRIBEs awaiting Redis's answer
  bool up_ = false;
};

}  // namespace redisched::redis
