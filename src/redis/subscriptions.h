// A link's subscriptions without I/O (sans-io, as Boost.Redis's
// subscription_tracker): what its callers asked for, and, for one
// subscriber connection, what to send Redis and whom to tell when Redis
// answers. NodeLink and ClusterLink both keep their callers' subscriptions
// in a SubscriberTable; NodeLink's subscriber connection follows a
// ChannelTable's decisions. tests/unit/subscriptions_test.cpp drives both.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/connection.h"

namespace redisched::redis {

// Whether channel is a shard channel (SSUBSCRIBE): named with a hash tag,
// as a topic's channels are; a channel without one is classic (SUBSCRIBE),
// as the sweep signal's.
inline bool is_shard_channel(std::string_view channel) {
  const auto open = channel.find('{');
  return open != std::string_view::npos && channel.find('}', open + 1) != std::string_view::npos;
}

// One subscribe() of a caller. Its handlers run only while it is active:
// unsubscribe() clears that first, from any thread.
struct Subscriber {
  std::string channel;
  MessageHandler on_message;
  ReadyHandler on_ready;
  std::atomic<bool> active{true};

  void message(const std::string& payload) const {
    if (active && on_message) on_message(payload);
  }
  void ready() const {
    if (active && on_ready) on_ready();
  }
};

// The subscriptions a link's callers hold, by the ids subscribe() handed
// out. Any thread (a lock of its own, off the request path: subscriptions
// are long-lived).
class SubscriberTable {
 public:
  std::pair<std::uint64_t, std::shared_ptr<Subscriber>> add(std::string channel,
                                                            MessageHandler on_message,
                                                            ReadyHandler on_ready);
  // Ends subscription id: inactive from now on (no callback of it starts),
  // and returned for its link to let go of the channel; nullptr when there
  // is no such id (ended already).
  std::shared_ptr<Subscriber> remove(std::uint64_t id);

 private:
  std::mutex mu_;
  std::uint64_t next_id_ = 0;                                   // GUARDED_BY(mu_)
  std::map<std::uint64_t, std::shared_ptr<Subscriber>> by_id_;  // GUARDED_BY(mu_)
};

// The channels of one subscriber connection: which are wanted, which Redis
// confirmed, which it refused (or ended) and are to be asked for again.
// Each call says what to send; the connection sends it. On the
// connection's I/O thread.
class ChannelTable {
 public:
  // A subscriber wants its channel. True: send SSUBSCRIBE now (the first
  // for the channel, on a connection that is up). On a channel Redis has
  // confirmed already, the subscriber is told it is ready at once.
  bool want(std::uint64_t id, const std::shared_ptr<Subscriber>& s);
  // The subscriber let go. True: send SUNSUBSCRIBE now (nobody else wants
  // the channel, on a connection that is up).
  bool drop(std::uint64_t id);

  // The connection is (again) up: SSUBSCRIBE each of these.
  std::vector<std::string> up();
  // It dropped: nothing is confirmed, nothing can be sent until up().
  void down();

  // Redis confirmed the channel: its subscribers are told (if still wanted).
  void confirmed(const std::string& channel);
  // Redis refused the channel, or ended it on its own (a cluster slot
  // moved): asked for again by retry(), if still wanted.
  void refused(const std::string& channel);
  // The channels refused since the last retry, still wanted, to SSUBSCRIBE
  // again (none while down: up() asks for every channel).
  std::vector<std::string> retry();
  bool wanted(const std::string& channel) const { return channels_.count(channel) > 0; }

  // The subscribers of a channel a message came on (a copy: a callback may
  // unsubscribe, itself or others).
  std::vector<std::shared_ptr<Subscriber>> subscribers(const std::string& channel) const;

 private:
  bool up_ = false;
  std::map<std::string, std::map<std::uint64_t, std::shared_ptr<Subscriber>>> channels_;
  std::map<std::uint64_t, std::string> channel_of_;
  std::set<std::string> confirmed_;
  std::set<std::string> refused_;
};

}  // namespace redisched::redis
