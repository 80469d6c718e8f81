#include "redis/url.h"

#include <gtest/gtest.h>

#include "redisched/error.h"

namespace redisched::redis {
namespace {

TEST(UrlTest, HostPortAndDatabase) {
  auto e = parse_url("redis://example.org:6380/3");
  EXPECT_EQ(e.kind, Endpoint::Kind::tcp);
  EXPECT_EQ(e.host, "example.org");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 3);
  EXPECT_FALSE(e.tls);
}

TEST(UrlTest, DefaultsToPort6379AndDatabase0) {
  auto e = parse_url("redis://localhost");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 0);
}

TEST(UrlTest, UserAndPasswordAreDecoded) {
  auto e = parse_url("redis://alice:p%40ss@h:1");
  EXPECT_EQ(e.user, "alice");
  EXPECT_EQ(e.password, "p@ss");
  auto only_password = parse_url("redis://:secret@h");
  EXPECT_EQ(only_password.user, "");
  EXPECT_EQ(only_password.password, "secret");
  auto koda_style = parse_url("redis://secret@h");
  EXPECT_EQ(koda_style.password, "secret");
}

TEST(UrlTest, TlsWithItsOptions) {
  auto e = parse_url("rediss://h:6390?ca=/etc/ca.pem&verify=0");
  EXPECT_TRUE(e.tls);
  EXPECT_EQ(e.ca_file, "/etc/ca.pem");
  EXPECT_FALSE(e.tls_verify);
}

TEST(UrlTest, TlsClientCertificate) {
  auto e = parse_url("rediss://h?cert=/c.pem&key=/k.pem");
  EXPECT_EQ(e.cert_file, "/c.pem");
  EXPECT_EQ(e.key_file, "/k.pem");
  EXPECT_THROW(parse_url("rediss://h?cert=/c.pem"), Error);
}

TEST(UrlTest, UnixSocketWithDatabase) {
  auto e = parse_url("unix:///run/redis/redis.sock?db=2");
  EXPECT_EQ(e.kind, Endpoint::Kind::unix_socket);
  EXPECT_EQ(e.path, "/run/redis/redis.sock");
  EXPECT_EQ(e.db, 2);
}

TEST(UrlTest, DescribeNeverShowsThePassword) {
  EXPECT_EQ(parse_url("redis://u:secret@h:7").describe(), "redis://h:7");
}

TEST(UrlTest, MalformedUrlsAreRefusedWithTheReason) {
  for (const char* bad : {"http://h", "redis://", "redis://h:0", "redis://h/x", "redis://h/-1",
                          "unix://", "redis://h?foo=1", "not a url", "rediss://h?verify=yes",
                          // Sentinel: no service, a bad port, an empty sentinel, a path
                          // that is no database, a TLS option, a broken userinfo.
                          "redis+sentinel://h", "redis+sentinel://h/", "redis+sentinel://h:0/m",
                          "redis+sentinel://a,,b/m", "redis+sentinel://h/m/x",
                          "redis+sentinel://h/m?ca=/x", "redis+sentinel://u@p@/m",
                          // (found by fuzz_url: a '#' in the userinfo ended the URL)
                          "redis+sentinel://u#x@h/m", "redis+sentinel://h/m#x"}) {
    try {
      parse_url(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find("invalid Redis URL"), std::string::npos) << e.what();
    }
  }
}

TEST(UrlTest, SeveralNodesOfAClusterAreCommaSeparated) {
  const auto seeds = parse_urls("redis://10.0.0.1:7000,rediss://u:p@10.0.0.2:7001");
  ASSERT_EQ(seeds.size(), 2u);
  EXPECT_EQ(seeds[0].host, "10.0.0.1");
  EXPECT_EQ(seeds[1].port, 7001);
  EXPECT_TRUE(seeds[1].tls);
  EXPECT_EQ(seeds[1].password, "p");
  EXPECT_EQ(parse_urls("redis://h:1").size(), 1u);
  EXPECT_THROW(parse_urls("redis://h:1,"), Error) << "an empty one";
  EXPECT_THROW(parse_urls("redis://h:1,h:2"), Error) << "each a whole URL";
}

TEST(UrlTest, SentinelsServiceAuthAndDatabase) {
  const auto e = parse_url(
      "redis+sentinel://:p%40ss@10.0.0.1:26380,sentinel-b,[::1]:5/mymaster/2"
      "?sentinel_password=s3&sentinel_user=watcher");
  ASSERT_EQ(e.sentinels.size(), 3u);
  EXPECT_TRUE(e.via_sentinel());
  EXPECT_EQ(e.sentinels[0].host, "10.0.0.1");
  EXPECT_EQ(e.sentinels[0].port, 26380);
  EXPECT_EQ(e.sentinels[1].host, "sentinel-b");
  EXPECT_EQ(e.sentinels[1].port, 26379) << "a sentinel's default port";
  EXPECT_EQ(e.sentinels[2].port, 5);
  EXPECT_EQ(e.service, "mymaster");
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.user, "");
  EXPECT_EQ(e.password, "p@ss") << "the userinfo is the Redis nodes'";
  EXPECT_EQ(e.sentinel_user, "watcher");
  EXPECT_EQ(e.sentinel_password, "s3");
  EXPECT_EQ(e.describe().find("p@ss"), std::string::npos);
  EXPECT_EQ(parse_url("redis+sentinel://h/m?db=4").db, 4);
  // One URL, whose commas part its sentinels, not a list of cluster seeds.
  const auto seeds = parse_urls("redis+sentinel://a:1,b:2/m");
  ASSERT_EQ(seeds.size(), 1u);
  EXPECT_EQ(seeds[0].sentinels.size(), 2u);
}

}  // namespace
}  // namespace redisched::redis
