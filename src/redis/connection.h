// Connections to Redis: commands pipelined on one socket, replies matched to
// their callers in order; reconnection with backoff; the Functions library
// checked once per connection and loaded when missing or older.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "redis/batch.h"
#include "redis/reply.h"
#include "redis/url.h"

namespace boost::asio {
class io_context;
}

namespace redisched::redis {

struct ConnectionConfig {
  Endpoint endpoint;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds command_timeout{10000};  // 0 = none
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2000};
  bool load_library = true;  // check and load lua/redisched.lua on connect
  // Redis Cluster: a subscription was refused with MOVED, or ended by Redis
  // (its slot moved). Runs on the link's thread; the cluster link refreshes
  // its map and moves the subscription.
  std::function<void()> on_slot_moved;
};

// A message of a subscribed channel (its payload), and the news that a
// subscription is (again) in place.
using MessageHandler = std::function<void(const std::string& payload)>;
using ReadyHandler = std::function<void()>;

// Where commands and subscriptions go: the seam between the Client and the
// nodes. One Redis node today (make_node_link); a Redis Cluster link takes
// its place, routing by the key each command names and each channel's slot,
// without the Client, the Worker or the server changing.
class Link {
 public:
  virtual ~Link() = default;
  // Sends one RESP-encoded command; any thread. Replies come in the order
  // of sends from one thread. route_key names a key of the command (its
  // node); empty for a command any node may answer.
  virtual void send(std::string_view route_key, std::string command, ReplyHandler done) = 0;

  // send, for a call that may go out coalesced with calls of its kind
  // queued right before or after it on the same connection (redis/batch.h).
  // Without coalescing (a link that answers from memory), the call alone.
  virtual void send_batchable(std::string_view route_key, Batchable call, ReplyHandler done) {
    send(route_key, std::move(call.single), std::move(done));
  }

  // send, and WAIT right behind it on the same connection: done gets the
  // command's reply once `replicas` replicas have its writes, or
  // Errc::timeout when fewer had them within timeout (the write is done on
  // the primary, and a failover may lose it). Any thread.
  virtual void send_replicated(std::string_view route_key, std::string command, int replicas,
                               std::chrono::milliseconds timeout, ReplyHandler done) = 0;

  // The nodes that hold keys now, for commands every one of them must run
  // (SCAN for topics): done gets their ids, a snapshot that stays valid for
  // send_to_node while the primaries change (a cluster's first map is
  // waited for; ec when it did not come: closed, or no seed answered within
  // the command timeout). Any thread; done runs on the link's I/O thread,
  // never before this returned.
  virtual void primaries(std::function<void(std::error_code, std::vector<std::size_t>)> done) = 0;
  virtual void send_to_node(std::size_t node, std::string command, ReplyHandler done) = 0;

  // Subscribes to a channel: a shard channel (SSUBSCRIBE, on the node that
  // owns it) when its name has a hash tag ({...}, as every topic's
  // channels), else a classic one (SUBSCRIBE, which every node of a cluster
  // hears; is_shard_channel). Any thread. on_message and on_ready run on the link's I/O thread;
  // on_ready runs once Redis confirmed the subscription and again after
  // every reconnection (messages published meanwhile were lost: look
  // again). A subscription Redis refuses (an ACL without the channel, say)
  // is not confirmed: it is asked for again, every few seconds, and logged.
  // Returns the id unsubscribe takes.
  virtual std::uint64_t subscribe(const std::string& channel, MessageHandler on_message,
                                  ReadyHandler on_ready) = 0;
  // Any thread. No callback of the subscription starts after it returns
  // (one running on the I/O thread may finish). The channel is left once
  // nobody subscribes to it.
  virtual void unsubscribe(std::uint64_t id) = 0;

  // Fails what is pending with Errc::closed and stops reconnecting.
  virtual void close() = 0;
};

// connections (>= 1) pipelined connections to one node, used in turn. Runs
// on io, which the caller runs on one thread.
std::unique_ptr<Link> make_node_link(boost::asio::io_context& io, ConnectionConfig config,
                                     int connections);

// The Client's link: the node at config.endpoint, or the Redis Cluster it
// belongs to (found out from it, or from the other seeds when it does not
// answer: src/redis/cluster_link.cpp), with connections per node. Runs on
// io, which the caller runs on one thread.
std::unique_ptr<Link> make_link(boost::asio::io_context& io, ConnectionConfig config,
                                int connections, const std::vector<Endpoint>& seeds = {});

}  // namespace redisched::redis
