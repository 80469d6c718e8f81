// How the Client reaches Redis: URLs, AUTH, databases, the Functions library
// check, failures and reconnection. Each test owns its redis-server.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <thread>

#include "redisched/asio.h"
#include "redisched/client.h"
#include "redisched/runtime.h"
#include "testutil/black_hole.h"
#include "testutil/expect_error.h"
#include "testutil/jobs.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"

namespace redisched {
namespace {

using test::RawRedis;
using test::RedisServer;

using test::job;

ClientOptions at(const std::string& url) {
  ClientOptions o;
  o.redis_url = url;
  o.connect_timeout = Millis(2000);
  return o;
}

TEST(ConnectionTest, UnixSocketAndDatabaseSelection) {
  RedisServer server;
  Client client(at(server.unix_url() + "?db=3"));
  client.put("t", job("a"));
  RawRedis raw(server.port());
  raw.call({"SELECT", "3"});
  EXPECT_EQ(raw.call({"HLEN", "redisched:{t}:jobs"})->integer, 1);
  raw.call({"SELECT", "0"});
  EXPECT_EQ(raw.call({"EXISTS", "redisched:{t}:jobs"})->integer, 0);
}

TEST(ConnectionTest, PasswordAndAclUser) {
  RedisServer server({.append_only = false,
                      .extra_config = "requirepass secret\nuser alice on >wonder ~* &* +@all"});
  EXPECT_NO_THROW(Client(at("redis://:secret@127.0.0.1:" + std::to_string(server.port()))));
  EXPECT_NO_THROW(Client(at("redis://alice:wonder@127.0.0.1:" + std::to_string(server.port()))));
  const std::string port = std::to_string(server.port());
  EXPECT_REDISCHED_ERROR(Client(at("redis://127.0.0.1:" + port)), Errc::auth,
                         "requires a password");
  EXPECT_REDISCHED_ERROR(Client(at("redis://:wrong@127.0.0.1:" + port)), Errc::auth,
                         "AUTH refused");
}

TEST(ConnectionTest, UnreachableRedisFailsWithAClearError) {
  int port;
  {
    RedisServer gone;
    port = gone.port();
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string where = "127.0.0.1:" + std::to_string(port);
  EXPECT_REDISCHED_ERROR(Client(at("redis://" + where)), Errc::connection, where);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST(ConnectionTest, LoadsTheLibraryWhenMissingOrOlder) {
  RedisServer server;
  RawRedis raw(server.port());
  EXPECT_EQ(raw.call({"FCALL", "redisched_version", "0"})->type, REDIS_REPLY_ERROR);
  { Client c(at(server.url())); }
  auto v = raw.call({"FCALL", "redisched_version", "0"});
  ASSERT_EQ(v->type, REDIS_REPLY_INTEGER);
  const long long ours = v->integer;
  // An older library is replaced.
  raw.call({"FUNCTION", "LOAD", "REPLACE",
            "#!lua name=redisched\nredis.register_function('redisched_version', function() return "
            "0 end)"});
  { Client c(at(server.url())); }
  EXPECT_EQ(raw.call({"FCALL", "redisched_version", "0"})->integer, ours);
}

TEST(ConnectionTest, ReloadsTheLibraryWhenItVanishes) {
  RedisServer server;
  Client client(at(server.url()));
  RawRedis raw(server.port());
  raw.call({"FUNCTION", "FLUSH"});
  // The call that finds the library gone fails; the library comes back.
  EXPECT_THROW(client.put("t", job("lost")), Error);
  EXPECT_EQ(client.put("t", job("after")), PutOutcome::created);
}

TEST(ConnectionTest, FailsFastWhileRedisIsDownAndRecoversWhenItReturns) {
  RedisServer server({.append_only = true, .extra_config = ""});
  ClientOptions o = at(server.url());
  o.reconnect_max = Millis(100);
  Client client(o);
  client.put("t", job("before"));
  server.stop();
  const auto start = std::chrono::steady_clock::now();
  bool failed = false;
  for (int i = 0; i < 3; ++i) {
    try {
      client.put("t", job("during"));
    } catch (const Error& e) {
      failed = true;
      EXPECT_EQ(e.code(), Errc::connection) << e.what();
    }
  }
  EXPECT_TRUE(failed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << "fail fast";
  server.start();
  // Reconnects by itself; the job put before the restart is still there (AOF).
  std::optional<Job> j;
  for (int i = 0; i < 100 && !j; ++i) {
    try {
      j = client.get("t", "before");
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_TRUE(j);
  EXPECT_EQ(client.put("t", job("after")), PutOutcome::created);
}

// A Redis that restarts loads its dataset first, answering LOADING: a
// Client that connects meanwhile waits as for a Redis not up yet (connection
// errors, then its calls go through), and never refuses a call for it, which
// a Worker would take as final and drop the acks it held (a clean run lost an
// ack so: WorkerRestart.PendingAcksGoBeforeTheNextReserveAfterAReconnect).
TEST(ConnectionTest, ARedisLoadingItsDatasetIsOneNotUpYet) {
  // A snapshot at shutdown, loaded a key every 0.3 ms: about a second of LOADING.
  RedisServer server({.extra_config = "save 3600 1\nkey-load-delay 300\n"
                                      "loading-process-events-interval-bytes 1024"});
  {
    RawRedis raw(server.port());
    for (int i = 0; i < 3000; ++i) raw.call({"SET", "filler:" + std::to_string(i), "x"});
  }
  ClientOptions o = at(server.url());
  o.reconnect_max = Millis(50);
  Client client(o);
  client.put("t", job("before"));
  std::atomic<bool> restarted{false};
  std::thread restart([&] {
    server.restart();
    restarted = true;
  });
  int unreachable = 0, answered = 0;
  std::vector<std::string> refusals;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until && !(restarted && answered > 0)) {
    try {
      EXPECT_TRUE(client.get("t", "before")) << "kept in the snapshot";
      if (restarted) ++answered;
    } catch (const Error& e) {
      if (e.code() == Errc::connection || e.code() == Errc::timeout) {
        ++unreachable;
      } else {
        refusals.emplace_back(e.what());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  restart.join();
  EXPECT_TRUE(refusals.empty()) << refusals.size()
                                << " calls refused, the first: " << refusals.front();
  EXPECT_GT(unreachable, 0) << "calls during the restart met a Redis not up";
  EXPECT_GT(answered, 0);
}

TEST(ConnectionTest, AnUnresponsiveRedisTimesOut) {
  RedisServer server;
  ClientOptions o = at(server.url());
  o.command_timeout = Millis(300);
  Client client(o);
  server.freeze();
  EXPECT_REDISCHED_ERROR(client.put("t", job("x")), Errc::timeout, "did not answer");
  server.thaw();
}

// Several seeds where connecting hangs: the first call, waiting for the
// map, fails after its own timeout, not after the connect timeout.
TEST(ConnectionTest, ACallWaitingForSeedsKeepsItsDeadline) {
  test::BlackHole first;
  test::BlackHole second;
  ClientOptions o = at(first.url() + "," + second.url());
  o.connect_timeout = Millis(6000);
  o.command_timeout = Millis(1000);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_REDISCHED_ERROR(Client{o}, Errc::timeout, "no seed of the cluster answered");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::milliseconds(3000)) << "held until the connect timed out";
}

// A topic listing while no seed answers fails, rather than list the first
// seed's topics as if it were the whole cluster.
TEST(ConnectionTest, ATopicListingWithoutAMapFails) {
  test::BlackHole first;
  test::BlackHole second;
  boost::asio::io_context io;
  ClientOptions o = at(first.url() + "," + second.url());
  o.connect_timeout = Millis(6000);
  o.command_timeout = Millis(500);
  o.runtime = make_runtime(io);
  std::optional<Result<std::vector<std::string>>> got;
  {
    Client client(o);
    client.topics_async([&](Result<std::vector<std::string>> r) { got = std::move(r); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!got && std::chrono::steady_clock::now() < deadline) {
      io.run_one_for(std::chrono::milliseconds(100));
    }
  }
  io.run();  // the Client's close, then nothing left
  ASSERT_TRUE(got) << "no answer within 3 s";
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code(), Errc::timeout) << got->error().what();
}

// A Client dropped while its connection is still connecting: the socket is
// closed with it, and the runtime runs out of work at once (it used to
// wait for the connect, and serve forever if it completed).
TEST(ConnectionTest, AClientClosedWhileConnectingLeavesNothingRunning) {
  test::BlackHole hole;
  boost::asio::io_context io;
  ClientOptions o = at(hole.url());
  o.connect_timeout = Millis(6000);
  o.runtime = make_runtime(io);
  { Client client(o); }
  const auto start = std::chrono::steady_clock::now();
  io.run();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(3000));
}

TEST(ConnectionTest, TlsWithTheServersCertificate) {
  RedisServer server({.append_only = false, .extra_config = "", .tls = true});
  const std::string base = "rediss://localhost:" + std::to_string(server.tls_port());
  Client client(at(base + "?ca=" + server.tls_ca()));
  EXPECT_EQ(client.put("t", job("over-tls")), PutOutcome::created);
  EXPECT_TRUE(client.get("t", "over-tls"));
  // A certificate nobody vouches for is refused, unless verification is off.
  EXPECT_REDISCHED_ERROR(Client(at(base)), Errc::connection, "certificate");
  Client unverified(at(base + "?verify=0"));
  EXPECT_TRUE(unverified.get("t", "over-tls"));
}

TEST(ConnectionTest, TlsWithAClientCertificate) {
  RedisServer server(
      {.append_only = false, .extra_config = "", .tls = true, .tls_client_certs = true});
  const std::string base =
      "rediss://localhost:" + std::to_string(server.tls_port()) + "?ca=" + server.tls_ca();
  EXPECT_THROW(Client(at(base)), Error) << "the server demands a certificate";
  // The server's own certificate is signed by the CA it trusts (itself).
  Client client(at(base + "&cert=" + server.tls_ca() + "&key=" + server.dir() + "/key.pem"));
  EXPECT_EQ(client.put("t", job("mutual")), PutOutcome::created);
}

TEST(ConnectionTest, ManyConnectionsSpreadTopics) {
  RedisServer server;
  ClientOptions o = at(server.url());
  o.connections = 4;
  Client client(o);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(client.put("t" + std::to_string(t), job("a")), PutOutcome::created);
  }
  RawRedis raw(server.port());
  auto clients = raw.call({"CLIENT", "LIST"});
  std::string list(clients->str, clients->len);
  EXPECT_GE(std::count(list.begin(), list.end(), '\n'), 5);
}

}  // namespace
}  // namespace redisched
