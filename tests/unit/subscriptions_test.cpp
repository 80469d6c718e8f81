// A link's subscriptions without a socket: what a subscriber connection
// sends as callers come and go and the connection drops and comes back,
// whom Redis's confirmations and messages reach, and what is asked for
// again after a refusal.
#include "redis/subscriptions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace redisched::redis {
namespace {

// A caller's subscription, recording what reached it.
struct Caller {
  std::vector<std::string> got;
  int ready = 0;
};

std::pair<std::uint64_t, std::shared_ptr<Subscriber>> subscribe(SubscriberTable& t,
                                                                const std::string& channel,
                                                                Caller& c) {
  return t.add(
      channel, [&c](const std::string& payload) { c.got.push_back(payload); }, [&c] { ++c.ready; });
}

void deliver(const ChannelTable& t, const std::string& channel, const std::string& payload) {
  for (const auto& s : t.subscribers(channel)) s->message(payload);
}

// A subscriber connection that is up, with callers a on "c" and b on "d".
struct TwoChannels {
  SubscriberTable subscribers;
  ChannelTable channels;
  Caller a, b;
  std::uint64_t ida = 0, idb = 0;
  TwoChannels() {
    channels.up();
    auto [ia, sa] = subscribe(subscribers, "c", a);
    auto [ib, sb] = subscribe(subscribers, "d", b);
    EXPECT_TRUE(channels.want(ia, sa));
    EXPECT_TRUE(channels.want(ib, sb));
    ida = ia;
    idb = ib;
  }
};

TEST(Subscriptions, IdsAreUniqueAndARemovedSubscriberIsSilent) {
  SubscriberTable subscribers;
  Caller a;
  auto [id1, s1] = subscribe(subscribers, "c", a);
  auto [id2, s2] = subscribe(subscribers, "c", a);
  EXPECT_NE(id1, id2);
  EXPECT_EQ(subscribers.remove(id1), s1);
  EXPECT_FALSE(s1->active);
  EXPECT_EQ(subscribers.remove(id1), nullptr);  // once
  s1->message("late");
  s1->ready();
  s2->message("on time");
  EXPECT_EQ(a.got, std::vector<std::string>{"on time"});
  EXPECT_EQ(a.ready, 0);
}

TEST(Subscriptions, OneSubscribePerChannelAndOnlyWhileUp) {
  SubscriberTable subscribers;
  ChannelTable channels;
  Caller a, b;
  auto [ida, sa] = subscribe(subscribers, "c", a);
  EXPECT_FALSE(channels.want(ida, sa));  // down: nothing goes out yet
  EXPECT_EQ(channels.up(), std::vector<std::string>{"c"});
  auto [idb, sb] = subscribe(subscribers, "c", b);
  EXPECT_FALSE(channels.want(idb, sb));  // asked for already
  EXPECT_EQ(b.ready, 0);                 // not confirmed yet
  channels.confirmed("c");
  EXPECT_EQ(a.ready, 1);
  EXPECT_EQ(b.ready, 1);
  Caller c;
  auto [idc, sc] = subscribe(subscribers, "d", c);
  EXPECT_TRUE(channels.want(idc, sc));  // a new channel, up: SSUBSCRIBE now
  auto [idc2, sc2] = subscribe(subscribers, "c", c);
  EXPECT_FALSE(channels.want(idc2, sc2));
  EXPECT_EQ(c.ready, 1);  // "c" is confirmed: ready at once
}

TEST(Subscriptions, TheLastToLeaveUnsubscribes) {
  SubscriberTable subscribers;
  ChannelTable channels;
  channels.up();
  Caller a, b;
  auto [ida, sa] = subscribe(subscribers, "c", a);
  auto [idb, sb] = subscribe(subscribers, "c", b);
  EXPECT_TRUE(channels.want(ida, sa));
  EXPECT_FALSE(channels.want(idb, sb));
  channels.confirmed("c");
  deliver(channels, "c", "one");
  EXPECT_FALSE(channels.drop(ida));
  deliver(channels, "c", "two");
  EXPECT_TRUE(channels.drop(idb));  // SUNSUBSCRIBE
  EXPECT_FALSE(channels.drop(idb));
  EXPECT_FALSE(channels.wanted("c"));
  deliver(channels, "c", "three");
  EXPECT_EQ(a.got, std::vector<std::string>{"one"});
  EXPECT_EQ(b.got, (std::vector<std::string>{"one", "two"}));
  // Down, the channel is left without a word to Redis (the connection's
  // subscriptions went with it).
  auto [idc, sc] = subscribe(subscribers, "e", a);
  channels.want(idc, sc);
  channels.down();
  EXPECT_FALSE(channels.drop(idc));
  EXPECT_TRUE(channels.up().empty());
}

TEST(Subscriptions, AReconnectionAsksForEveryChannelAndConfirmsAgain) {
  TwoChannels t;
  auto& [subscribers, channels, a, b, ida, idb] = t;
  channels.confirmed("c");
  channels.confirmed("d");
  channels.down();
  Caller c;
  auto [idc, sc] = subscribe(subscribers, "c", c);
  EXPECT_FALSE(channels.want(idc, sc));
  EXPECT_EQ(c.ready, 0);  // not confirmed on the lost connection
  EXPECT_EQ(channels.up(), (std::vector<std::string>{"c", "d"}));
  channels.confirmed("c");
  EXPECT_EQ(a.ready, 2);
  EXPECT_EQ(c.ready, 1);
  EXPECT_EQ(b.ready, 1);
}

TEST(Subscriptions, ARefusedChannelIsAskedForAgainWhileWanted) {
  TwoChannels t;
  auto& [subscribers, channels, a, b, ida, idb] = t;
  channels.refused("c");
  channels.confirmed("d");
  channels.refused("d");  // ended by Redis (its slot moved)
  channels.refused("x");  // nobody wants it: nothing to ask for
  EXPECT_EQ(channels.retry(), (std::vector<std::string>{"c", "d"}));
  EXPECT_TRUE(channels.retry().empty());  // asked once per refusal
  channels.refused("c");
  channels.drop(ida);
  EXPECT_TRUE(channels.retry().empty());  // left meanwhile
  channels.refused("d");
  channels.down();
  EXPECT_TRUE(channels.retry().empty());  // down: up() asks for all
  EXPECT_EQ(channels.up(), std::vector<std::string>{"d"});
  EXPECT_TRUE(channels.retry().empty());
  EXPECT_EQ(a.ready, 0);
  EXPECT_EQ(b.ready, 1);
}

}  // namespace
}  // namespace redisched::redis
