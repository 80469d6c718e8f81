// Redis Cluster's rules as src/redis/cluster.h implements them, against the
// values of the cluster specification and of a real redis-server.
#include <gtest/gtest.h>

#include "redis/cluster.h"
#include "redisched/error.h"

namespace redisched::redis {
namespace {

TEST(ClusterRules, HashSlotsAreRedisOwn) {
  EXPECT_EQ(hash_slot("123456789"), 0x31C3) << "the specification's CRC16 check value";
  EXPECT_EQ(hash_slot("foo"), 12182) << "as redis-server 7.0 answered MOVED for it";
  EXPECT_EQ(hash_slot("{user1000}.following"), hash_slot("user1000"));
  EXPECT_EQ(hash_slot("redisched:{topic}:meta"), hash_slot("topic"));
  EXPECT_EQ(hash_slot("redisched:{topic}:wake"), hash_slot("redisched:{topic}:ready"));
  EXPECT_NE(hash_slot("foo{}{bar}"), hash_slot("bar"));
  EXPECT_EQ(hash_slot("foo{{bar}}zap"), hash_slot("{bar")) << "the first { to the next }";
  EXPECT_EQ(hash_slot("foo{bar}{zap}"), hash_slot("bar"));
  EXPECT_EQ(hash_slot(""), 0);
}

TEST(ClusterRules, RedirectionsAreParsed) {
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->host, "127.0.0.1");
  EXPECT_EQ(moved->port, 6381);
  auto ask = parse_redirect("ASK 12 [::1]:7000");
  ASSERT_TRUE(ask);
  EXPECT_TRUE(ask->ask);
  EXPECT_EQ(ask->host, "::1");
  EXPECT_EQ(ask->port, 7000);
  EXPECT_FALSE(parse_redirect("ERR wrong number of arguments"));
  EXPECT_FALSE(parse_redirect("MOVED 16384 127.0.0.1:1")) << "no such slot";
  EXPECT_FALSE(parse_redirect("MOVED 1 127.0.0.1"));
  EXPECT_FALSE(parse_redirect("MOVED x 127.0.0.1:1"));
  EXPECT_TRUE(cluster_busy("TRYAGAIN Multiple keys request during rehashing of slot"));
  EXPECT_TRUE(cluster_busy("CLUSTERDOWN The cluster is down"));
  EXPECT_FALSE(cluster_busy("ERR nope"));
  EXPECT_TRUE(cluster_disabled("ERR This instance has cluster support disabled"));
  EXPECT_TRUE(cluster_disabled("NOPERM this user has no permissions to run the 'cluster' command"));
  EXPECT_FALSE(cluster_disabled("LOADING Redis is loading the dataset in memory"))
      << "a node of a cluster, restarting: ask again";
}

Reply str(std::string s) {
  Reply r;
  r.type = Reply::Type::string;
  r.str = std::move(s);
  return r;
}
Reply num(std::int64_t n) {
  Reply r;
  r.type = Reply::Type::integer;
  r.integer = n;
  return r;
}
Reply arr(std::vector<Reply> e) {
  Reply r;
  r.type = Reply::Type::array;
  r.elements = std::move(e);
  return r;
}
Reply node(const std::string& role, int port, const std::string& health = "online") {
  return arr({str("id"), str("abc"), str("port"), num(port), str("ip"), str("127.0.0.1"),
              str("endpoint"), str("127.0.0.1"), str("role"), str(role), str("health"),
              str(health)});
}

TEST(ClusterRules, TheMapOfClusterShardsHasItsOnlinePrimaries) {
  const Reply shards = arr({
      arr({str("slots"), arr({num(0), num(100), num(200), num(300)}), str("nodes"),
           arr({node("replica", 7004), node("master", 7001)})}),
      arr({str("slots"), arr({num(101), num(199)}), str("nodes"),
           arr({node("master", 7002, "failed"), node("master", 7005)})}),
      arr({str("slots"), arr({}), str("nodes"), arr({node("master", 7003)})}),
  });
  const auto primaries = parse_cluster_shards(shards);
  ASSERT_EQ(primaries.size(), 2u) << "a shard without slots serves nothing";
  EXPECT_EQ(primaries[0].port, 7001);
  EXPECT_EQ(primaries[0].host, "127.0.0.1");
  ASSERT_EQ(primaries[0].slots.size(), 2u);
  EXPECT_EQ(primaries[0].slots[1], (std::pair<std::uint16_t, std::uint16_t>{200, 300}));
  EXPECT_EQ(primaries[1].port, 7005) << "the failed primary is passed over";
  EXPECT_THROW(parse_cluster_shards(str("x")), Error);
  EXPECT_THROW(
      parse_cluster_shards(arr({arr({str("slots"), arr({num(5)}), str("nodes"), arr({})})})), Error)
      << "an odd list of bounds";
  EXPECT_THROW(parse_cluster_shards(
                   arr({arr({str("slots"), arr({num(5), num(16384)}), str("nodes"), arr({})})})),
               Error)
      << "a slot out of bounds";
}

}  // namespace
}  // namespace redisched::redis
