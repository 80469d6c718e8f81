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
                          "unix://", "redis://h?foo=1", "not a url", "rediss://h?verify=yes"}) {
    try {
      parse_url(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find("invalid Redis URL"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace redisched::redis
