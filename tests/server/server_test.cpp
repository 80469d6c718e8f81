// redisched serve over real sockets, with its embedded Redis: every route,
// the original servers' routes, webhook push, long-poll, auth, limits, bad
// requests, and the embedded Redis's life.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "redisched/version.h"
#include "serve_process.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

namespace redisched {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;
using test::HttpClient;
using test::ServeProcess;
using test::wait_until;

json::value parse(const std::string& s) { return json::parse(s); }

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { serve_ = new ServeProcess(); }
  static void TearDownTestSuite() {
    delete serve_;
    serve_ = nullptr;
  }

  test::HttpAnswer call(const std::string& method, const std::string& target,
                        const std::string& body = "") {
    return http_.request(method, target, body);
  }
  std::string error_code(const test::HttpAnswer& a) {
    return std::string(parse(a.body).at("error").at("code").as_string());
  }
  std::string topic_jobs() { return "/v1/topics/" + topic_ + "/jobs"; }

  static ServeProcess* serve_;
  HttpClient http_{serve_->port()};
  std::string topic_ =
      std::string("t_") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
};
ServeProcess* ServerTest::serve_ = nullptr;

TEST_F(ServerTest, PutGetDeleteWithClientAndGeneratedIds) {
  auto put = call("PUT", topic_jobs() + "/need_some_help_email_42",
                  R"({"body":"{\"user\":42}","delay_ms":60000,"priority":7,"ttr_ms":5000,)"
                  R"("attempts":3,"backoff":{"kind":"fixed","base_ms":250}})");
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(parse(put.body).at("outcome"), "created");
  EXPECT_EQ(call("PUT", topic_jobs() + "/need_some_help_email_42", R"({"body":"x"})").status, 409);
  auto got = call("GET", topic_jobs() + "/need_some_help_email_42");
  ASSERT_EQ(got.status, 200);
  auto j = parse(got.body).as_object();
  EXPECT_EQ(j.at("state"), "delayed");
  EXPECT_EQ(j.at("body"), "{\"user\":42}");
  EXPECT_EQ(j.at("priority").as_int64(), 7);
  EXPECT_EQ(j.at("due").as_int64() - j.at("created").as_int64(), 60000);
  EXPECT_EQ(j.at("ttr").as_int64(), 5000);
  EXPECT_EQ(j.at("max_attempts").as_int64(), 3);
  EXPECT_EQ(j.at("backoff").at("kind"), "fixed");
  auto upd =
      call("PUT", topic_jobs() + "/need_some_help_email_42", R"({"body":"new","mode":"replace"})");
  EXPECT_EQ(upd.status, 200);
  EXPECT_EQ(parse(upd.body).at("outcome"), "updated");
  EXPECT_EQ(call("DELETE", topic_jobs() + "/need_some_help_email_42").status, 200);
  EXPECT_EQ(call("DELETE", topic_jobs() + "/need_some_help_email_42").status, 404);
  EXPECT_EQ(call("GET", topic_jobs() + "/need_some_help_email_42").status, 404);

  auto gen = call("POST", topic_jobs(), R"({"body":"generated"})");
  ASSERT_EQ(gen.status, 201);
  const std::string id(parse(gen.body).at("id").as_string());
  EXPECT_EQ(parse(call("GET", topic_jobs() + "/" + id).body).at("body"), "generated");
}

TEST_F(ServerTest, BinaryBodiesTravelAsBase64) {
  const std::string b64 = "AAEC/wA=";  // 00 01 02 ff 00
  ASSERT_EQ(call("PUT", topic_jobs() + "/bin", R"({"body_base64":")" + b64 + "\"}").status, 201);
  auto j = parse(call("GET", topic_jobs() + "/bin").body).as_object();
  EXPECT_FALSE(j.contains("body"));
  EXPECT_EQ(j.at("body_base64").as_string(), b64);
}

// A put may ask for replicas; a Redis without any cannot confirm it, and
// the answer says that the job is there all the same.
TEST_F(ServerTest, APutWaitsForTheReplicasItAsksFor) {
  auto r = call("PUT", topic_jobs() + "/durable", R"({"body":"x","replicas":1})");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("done on the primary, but only 0 of 1 replicas"), std::string::npos)
      << r.body;
  EXPECT_EQ(call("GET", topic_jobs() + "/durable").status, 200);
  EXPECT_EQ(call("PUT", topic_jobs() + "/plain", R"({"body":"x","replicas":0})").status, 201);
  auto bad = call("PUT", topic_jobs() + "/bad", R"({"body":"x","replicas":17})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("replicas"), std::string::npos) << bad.body;
}

// One job by its id (library version 38): behind a job of a higher
// priority, then settled with its token; held, absent or bad: refused.
TEST_F(ServerTest, ReserveOneJobByItsId) {
  call("PUT", topic_jobs() + "/high", R"({"body":"H","priority":9})");
  call("PUT", topic_jobs() + "/low", R"({"body":"L"})");
  const std::string base = topic_jobs();
  auto r = call("POST", base + "/low/reserve", R"({"ttr_ms":60000,"worker":"box-2"})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto job = parse(r.body).at("job");
  EXPECT_EQ(job.at("id"), "low");
  EXPECT_EQ(job.at("body"), "L");
  EXPECT_EQ(parse(call("GET", base + "/low").body).at("worker"), "box-2");
  EXPECT_EQ(call("POST", base + "/low/reserve", "{}").status, 409);
  EXPECT_EQ(call("POST", base + "/nope/reserve", "{}").status, 404);
  EXPECT_EQ(call("POST", base + "/high/reserve", R"({"count":2})").status, 400);
  EXPECT_EQ(call("POST", base + "/high/reserve", R"({"ttr_ms":0})").status, 400);
  EXPECT_EQ(call("POST", base + "/high/reserve", R"({"worker":""})").status, 400);
  EXPECT_EQ(call("POST", base + "/low/ack",
                 R"({"token":)" + std::to_string(job.at("token").as_int64()) + "}")
                .status,
            200);
  auto rest = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", R"({"count":5})").body);
  ASSERT_EQ(rest.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(rest.at("jobs").at(0).at("id"), "high");
}

TEST_F(ServerTest, ReserveAckReleaseFailTouch) {
  call("PUT", topic_jobs() + "/a", R"({"body":"A","priority":9})");
  call("PUT", topic_jobs() + "/b", R"({"body":"B","attempts":1})");
  const std::string reserve = "/v1/topics/" + topic_ + "/reserve";
  EXPECT_EQ(call("POST", reserve, R"({"worker":""})").status, 400);
  EXPECT_EQ(call("POST", reserve, R"({"worker":"a\u0001b"})").status, 400);
  EXPECT_EQ(call("POST", reserve, R"({"worker":")" + std::string(129, 'w') + R"("})").status, 400);
  auto r = parse(call("POST", reserve, R"({"count":2,"ttr_ms":60000,"worker":"box-1:42"})").body);
  auto jobs = r.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].at("id"), "a");
  const auto ta = jobs[0].at("token").as_int64();
  const auto tb = jobs[1].at("token").as_int64();
  const std::string base = topic_jobs();
  EXPECT_EQ(parse(call("GET", base + "/b").body).at("worker"), "box-1:42");
  auto touched = call("POST", base + "/a/touch", R"({"token":)" + std::to_string(ta) + "}");
  EXPECT_EQ(touched.status, 200);
  EXPECT_GT(parse(touched.body).at("deadline").as_int64(), 0);
  EXPECT_EQ(
      call("POST", base + "/a/release", R"({"token":)" + std::to_string(ta) + R"(,"delay_ms":0})")
          .status,
      200);
  // The old token is over.
  auto stale = call("POST", base + "/a/ack", R"({"token":)" + std::to_string(ta) + "}");
  EXPECT_EQ(stale.status, 409);
  auto failed =
      call("POST", base + "/b/fail", R"({"token":)" + std::to_string(tb) + R"(,"error":"boom"})");
  EXPECT_EQ(failed.status, 200);
  EXPECT_EQ(parse(failed.body).at("state"), "dead");
  auto again =
      parse(call("POST", "/v1/topics/" + topic_ + "/reserve", "{}").body).at("jobs").as_array();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].at("attempt").as_int64(), 1);  // a release is no attempt
  EXPECT_EQ(call("POST", base + "/a/ack",
                 R"({"token":)" + std::to_string(again[0].at("token").as_int64()) + "}")
                .status,
            200);
  EXPECT_EQ(call("GET", base + "/a").status, 404);
  // Dead b: listed, kicked back, pulled for good.
  auto dead = parse(call("GET", base + "?state=dead").body);
  EXPECT_EQ(dead.at("total").as_int64(), 1);
  EXPECT_EQ(dead.at("jobs").at(0).at("error"), "boom");
  // Its attempt, with when, why and where (library version 30).
  const auto b = parse(call("GET", base + "/b").body);
  ASSERT_EQ(b.at("history").as_array().size(), 1u);
  const auto& attempt = b.at("history").at(0).as_object();
  EXPECT_EQ(attempt.at("attempt").as_int64(), 1);
  EXPECT_EQ(attempt.at("outcome"), "failed");
  EXPECT_EQ(attempt.at("worker"), "box-1:42");
  EXPECT_EQ(attempt.at("error"), "boom");
  EXPECT_LE(attempt.at("started").as_int64(), attempt.at("ended").as_int64());
  EXPECT_FALSE(attempt.contains("error_cut"));
  EXPECT_FALSE(b.as_object().contains("worker")) << "no longer reserved";
  EXPECT_EQ(parse(call("POST", "/v1/topics/" + topic_ + "/kick", R"({"ids":["b"]})").body)
                .at("kicked")
                .as_int64(),
            1);
  auto pulled = parse(call("POST", "/v1/topics/" + topic_ + "/pull", R"({"count":5})").body)
                    .at("jobs")
                    .as_array();
  ASSERT_EQ(pulled.size(), 1u);
  EXPECT_FALSE(pulled[0].as_object().contains("token"));
  EXPECT_EQ(call("GET", base + "/b").status, 404);
  // Many deleted at once; bad requests change nothing.
  for (const char* id : {"c1", "c2", "c3"}) call("PUT", base + "/" + id, R"({"body":"x"})");
  const std::string del = "/v1/topics/" + topic_ + "/delete";
  for (const char* bad : {"{}", R"({"ids":[]})", R"({"ids":"c1"})", R"({"ids":[1]})",
                          R"({"ids":["c1"],"all":true})", R"({"ids":["a\u0001"]})"}) {
    EXPECT_EQ(call("POST", del, bad).status, 400) << bad;
  }
  auto deleted = call("POST", del, R"({"ids":["c1","c3","nothing"]})");
  EXPECT_EQ(deleted.status, 200);
  EXPECT_EQ(parse(deleted.body).at("deleted").as_int64(), 2);
  EXPECT_EQ(call("GET", base + "/c1").status, 404);
  EXPECT_EQ(call("GET", base + "/c2").status, 200);
}

TEST_F(ServerTest, TopicsStatsPauseResume) {
  call("PUT", topic_jobs() + "/x", R"({"body":"x"})");
  EXPECT_EQ(parse(call("POST", "/v1/topics/" + topic_ + "/pause").body).at("changed"), true);
  auto none = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", "{}").body);
  EXPECT_TRUE(none.at("jobs").as_array().empty());
  EXPECT_EQ(none.at("paused"), true);
  auto stats = parse(call("GET", "/v1/topics/" + topic_).body);
  EXPECT_EQ(stats.at("ready").as_int64(), 1);
  EXPECT_EQ(stats.at("paused"), true);
  EXPECT_EQ(stats.at("pause_end").as_int64(), -1);
  call("POST", "/v1/topics/" + topic_ + "/resume");
  // For a time: it ends by itself.
  EXPECT_EQ(call("POST", "/v1/topics/" + topic_ + "/pause", R"({"for_ms":0})").status, 400);
  EXPECT_EQ(call("POST", "/v1/topics/" + topic_ + "/pause", R"({"for":5})").status, 400);
  EXPECT_EQ(parse(call("POST", "/v1/topics/" + topic_ + "/pause", R"({"for_ms":600000})").body)
                .at("changed"),
            true);
  stats = parse(call("GET", "/v1/topics/" + topic_).body);
  EXPECT_EQ(stats.at("paused"), true);
  EXPECT_GT(stats.at("pause_end").as_int64(), 0);
  // (1 ms in its place: ended however slow the machine is)
  call("POST", "/v1/topics/" + topic_ + "/pause", R"({"for_ms":1})");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(parse(call("GET", "/v1/topics/" + topic_).body).at("paused"), false);
  auto topics = parse(call("GET", "/v1/topics").body).at("topics").as_array();
  bool found = false;
  for (const auto& t : topics) found = found || t.at("topic").as_string() == topic_;
  EXPECT_TRUE(found);
}

// A webhook's worker keeps an entry in the worker registry, served by
// GET /v1/workers with its topic and concurrency; it leaves when the
// webhook goes.
TEST_F(ServerTest, TopicsComeInPagesByNameWithAPrefix) {
  const std::string base = "pg" + topic_;  // (a prefix no other test's topics share)
  for (const char* t : {"-c", "-a", "-e", "-b", "-d"}) {
    call("PUT", "/v1/topics/" + base + t + "/jobs/j", R"({"body":"x"})");
  }
  call("PUT", "/v1/topics/" + base + "x/jobs/j", R"({"body":"x","delay_ms":60000})");
  auto page = [&](const std::string& query) {
    auto r = call("GET", "/v1/topics?" + query);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    auto o = parse(r.body).as_object();
    std::vector<std::string> names;
    for (const auto& t : o.at("topics").as_array()) {
      names.emplace_back(t.at("topic").as_string());
      EXPECT_EQ(t.at("ready").as_int64() + t.at("delayed").as_int64(), 1) << names.back();
    }
    const auto& next = o.at("next");
    return std::pair{names, next.is_null() ? std::string("(none)") : std::string(next.as_string())};
  };
  const std::string pre = "prefix=" + base + "-&count=2";
  EXPECT_EQ(page(pre),
            (std::pair{std::vector<std::string>{base + "-a", base + "-b"}, base + "-b"}));
  EXPECT_EQ(page(pre + "&after=" + base + "-b"),
            (std::pair{std::vector<std::string>{base + "-c", base + "-d"}, base + "-d"}));
  EXPECT_EQ(page(pre + "&after=" + base + "-d"),
            (std::pair{std::vector<std::string>{base + "-e"}, std::string("(none)")}));
  // The prefix alone: its topics, the one beside them left out.
  EXPECT_EQ(page("prefix=" + base + "-").first.size(), 5u);
  EXPECT_EQ(page("prefix=" + base + "x").first, std::vector<std::string>{base + "x"});
  EXPECT_EQ(page("prefix=" + base + "-zz").first, std::vector<std::string>{});
  // contains, in any case, with how many match (the dashboard's overview).
  const std::string upper_base = [&] {
    std::string u = base;
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u;
  }();
  EXPECT_EQ(page("contains=" + upper_base + "-&count=2"),
            (std::pair{std::vector<std::string>{base + "-a", base + "-b"}, base + "-b"}));
  auto total = [&](const std::string& query) {
    return parse(call("GET", "/v1/topics?" + query).body).at("total").as_int64();
  };
  EXPECT_EQ(total("contains=" + base + "&count=1"), 6);
  EXPECT_EQ(total("prefix=" + base + "-&contains=D"), 1);
  // Bad queries: a clear 400.
  const std::string long_after = "after=" + std::string(257, 'a');
  for (const std::string bad :
       {"count=0", "count=1001", "count=x", "prefix=a/b", "prefix=a&prefix=b", "cursor=1",
        "contains=a%20b", long_after.c_str()}) {
    auto r = call("GET", "/v1/topics?" + bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  // after is only compared: any name a page's next gave comes back.
  EXPECT_EQ(page("prefix=" + base + "-&after=" + base + "-c%20x").first,
            (std::vector<std::string>{base + "-d", base + "-e"}));
  // Without a query: every topic, as before (no "next").
  auto all = parse(call("GET", "/v1/topics").body).as_object();
  EXPECT_FALSE(all.contains("next"));
  std::size_t mine = 0;
  for (const auto& t : all.at("topics").as_array()) {
    mine += std::string_view(t.at("topic").as_string()).starts_with(base) ? 1 : 0;
  }
  EXPECT_EQ(mine, 6u);
}

TEST_F(ServerTest, RedisSaysItsModeAndEachNodeWithMemoryClientsAndPersistence) {
  auto r = call("GET", "/v1/redis");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto o = parse(r.body).as_object();
  const bool cluster = test::on_cluster();
  EXPECT_EQ(o.at("mode"), cluster ? "cluster" : "single");
  const auto& nodes = o.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), cluster ? 3u : 1u);
  std::set<std::string> addresses;
  std::int64_t keys = 0;
  for (const auto& v : nodes) {
    const auto& n = v.as_object();
    addresses.emplace(n.at("address").as_string());
    EXPECT_EQ(n.at("role"), "master");
    EXPECT_TRUE(std::string_view(n.at("version").as_string()).starts_with("7.")) << n;
    EXPECT_GT(n.at("memory").at("used").as_int64(), 0);
    EXPECT_GE(n.at("clients").at("connected").as_int64(), 1);
    EXPECT_GE(n.at("commands_total").as_int64(), 1);
    EXPECT_TRUE(n.at("persistence").at("aof_enabled").is_int64());
    // (Replicas: ServerRedis.RedisListsThePrimarysReplicas.)
    EXPECT_EQ(n.at("replicas"), static_cast<std::int64_t>(n.at("replica_nodes").as_array().size()));
    keys += n.at("keys").as_int64();
  }
  EXPECT_EQ(addresses.size(), nodes.size()) << "each node once";
  // host:port, or a unix socket's path (serve's embedded Redis)
  for (const auto& a : addresses) {
    EXPECT_TRUE(a.find(':') != std::string::npos || a.starts_with('/')) << a;
  }
  // A put shows in the keys (a topic's keys, at least its jobs hash).
  call("PUT", topic_jobs() + "/k", R"({"body":"x"})");
  std::int64_t after = 0;
  const auto again = parse(call("GET", "/v1/redis").body);
  for (const auto& v : again.at("nodes").as_array()) after += v.at("keys").as_int64();
  EXPECT_GT(after, keys);
}

// A primary's replicas (Sentinel's and a cluster's are the ones a failover
// promotes), as its INFO lists them, with how far behind each is.
TEST(ServerRedis, RedisListsThePrimarysReplicas) {
  test::RedisServer primary, replica;
  test::RawRedis to_replica(replica.port());
  to_replica.call({"REPLICAOF", "127.0.0.1", std::to_string(primary.port())});
  test::RawRedis to_primary(primary.port());
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = to_primary.call({"INFO", "replication"});
        return std::string(r->str, r->len).find("state=online") != std::string::npos;
      },
      20s))
      << "the replica did not come online";
  ServeProcess serve({}, "", {"--redis", primary.url()});
  HttpClient http(serve.port());
  const auto o = parse(http.request("GET", "/v1/redis").body).as_object();
  EXPECT_EQ(o.at("mode"), "single");
  const auto& node = o.at("nodes").at(0).as_object();
  EXPECT_EQ(node.at("replicas"), 1);
  const auto& replicas = node.at("replica_nodes").as_array();
  ASSERT_EQ(replicas.size(), 1u) << node;
  const auto& r = replicas[0].as_object();
  EXPECT_EQ(r.at("address").as_string(), "127.0.0.1:" + std::to_string(replica.port()));
  EXPECT_EQ(r.at("state"), "online");
  EXPECT_LE(r.at("offset").as_int64(), node.at("replication_offset").as_int64());
  EXPECT_GE(r.at("lag_s").as_int64(), 0);
}

TEST_F(ServerTest, WorkersListsAWebhooksWorker) {
  auto mine = [&]() -> boost::json::object {
    auto a = call("GET", "/v1/workers");
    EXPECT_EQ(a.status, 200) << a.body;
    const auto doc = parse(a.body);
    for (const auto& w : doc.at("workers").as_array()) {
      for (const auto& t : w.at("topics").as_array()) {
        if (t.at("topic").as_string() == topic_) return w.as_object();
      }
    }
    return {};
  };
  ASSERT_EQ(call("PUT", "/v1/topics/" + topic_ + "/webhook",
                 R"({"url":"http://127.0.0.1:9/hook","concurrency":7,"timeout_ms":1000})")
                .status,
            200);
  ASSERT_TRUE(test::wait_until([&] { return !mine().empty(); })) << "no entry for the webhook";
  const auto w = mine();
  EXPECT_EQ(w.at("pid").as_int64(), serve_->pid());
  EXPECT_EQ(w.at("version").as_string(), std::string(version()));
  EXPECT_FALSE(w.at("host").as_string().empty());
  EXPECT_EQ(w.at("topics").as_array()[0].at("concurrency").as_int64(), 7);
  EXPECT_TRUE(w.at("running").as_array().empty());
  EXPECT_GT(w.at("expires").as_int64(), w.at("beat").as_int64());
  EXPECT_EQ(call("DELETE", "/v1/topics/" + topic_ + "/webhook").status, 200);
  EXPECT_TRUE(test::wait_until([&] { return mine().empty(); })) << "the webhook's worker left";
}

TEST_F(ServerTest, LongPollIsWokenByAPutAndEndsEmptyAfterItsWait) {
  auto t0 = std::chrono::steady_clock::now();
  auto empty = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", R"({"wait_ms":300})").body);
  EXPECT_TRUE(empty.at("jobs").as_array().empty());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 290ms);

  std::thread putter([&] {
    std::this_thread::sleep_for(200ms);
    HttpClient other(serve_->port());
    other.request("PUT", topic_jobs() + "/late", R"({"body":"late"})");
  });
  t0 = std::chrono::steady_clock::now();
  auto got = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", R"({"wait_ms":10000})").body);
  const auto waited = std::chrono::steady_clock::now() - t0;
  putter.join();
  ASSERT_EQ(got.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(got.at("jobs").at(0).at("id"), "late");
  EXPECT_LT(waited, 2s);  // woken by the put, not the 10 s wait
}

// A producer puts a job that asks to be kept and long-polls it; a worker
// acks it with a result; the long-poll answers with the result at once.
TEST_F(ServerTest, ALongPollOnAJobAnswersWithItsResult) {
  ASSERT_EQ(call("PUT", topic_jobs() + "/report", R"({"body":"r","keep_ms":60000})").status, 201);
  auto taken = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", "{}").body);
  const auto& job = taken.at("jobs").at(0);
  EXPECT_EQ(job.at("keep").as_int64(), 60000) << "reserve says how long to keep it";
  const std::string token = std::to_string(job.at("token").as_int64());
  const std::string ack = topic_jobs() + "/report/ack";
  // (Without keep_ms a result stays for the retry window, for a job that may
  // come to wait for this one; with none, it has nowhere to go: refused.)
  ASSERT_EQ(
      call("PUT", "/v1/topics/" + topic_ + "/retry-window", R"({"retry_window_ms":0})").status,
      200);
  auto bad = call("POST", ack, R"({"token":)" + token + R"(,"result":"x"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("retry window is 0"), std::string::npos) << bad.body;
  EXPECT_EQ(
      call("POST", ack, R"({"token":)" + token + R"(,"keep_ms":1,"result_base64":"!"})").status,
      400);

  std::thread worker([&] {
    std::this_thread::sleep_for(200ms);
    HttpClient other(serve_->port());
    other.request("POST", ack,
                  R"({"token":)" + token + R"(,"keep_ms":60000,"result_base64":"AP8="})");
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto waited = call("GET", topic_jobs() + "/report?wait_ms=10000");
  const auto took = std::chrono::steady_clock::now() - t0;
  worker.join();
  ASSERT_EQ(waited.status, 200) << waited.body;
  auto done = parse(waited.body);
  EXPECT_EQ(done.at("state"), "done");
  EXPECT_EQ(done.at("result_base64"), "AP8=") << "bytes that are not UTF-8 travel as base64";
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 2s) << "woken by the ack, not the 10 s wait";

  // A job still waiting: as it is once the wait is over; none: 404.
  call("PUT", topic_jobs() + "/later", R"({"body":"l","delay_ms":60000})");
  auto later = call("GET", topic_jobs() + "/later?wait_ms=200");
  EXPECT_EQ(parse(later.body).at("state"), "delayed");
  EXPECT_EQ(call("GET", topic_jobs() + "/nothing?wait_ms=200").status, 404);
  EXPECT_EQ(call("GET", topic_jobs() + "/later?wait_ms=-1").status, 400);
}

// A wait on a job put without keep_ms ends as soon as the job goes dead or
// is deleted (library 19), not at its timeout (issue 31).
TEST_F(ServerTest, ALongPollOnAJobEndsWhenItGoesDeadOrIsDeleted) {
  for (const std::string how : {"dead", "deleted"}) {
    const std::string job = topic_jobs() + "/" + how;
    ASSERT_EQ(call("PUT", job, R"({"body":"x"})").status, 201);
    auto taken = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", "{}").body);
    const std::string token = std::to_string(taken.at("jobs").at(0).at("token").as_int64());
    std::thread worker([&] {
      std::this_thread::sleep_for(200ms);
      HttpClient other(serve_->port());
      if (how == "dead") {
        other.request("POST", job + "/fail",
                      R"({"token":)" + token + R"(,"error":"no","dead":true})");
      } else {
        other.request("DELETE", job);
      }
    });
    const auto t0 = std::chrono::steady_clock::now();
    auto waited = call("GET", job + "?wait_ms=20000");
    const auto took = std::chrono::steady_clock::now() - t0;
    worker.join();
    if (how == "dead") {
      ASSERT_EQ(waited.status, 200) << waited.body;
      EXPECT_EQ(parse(waited.body).at("state"), "dead");
    } else {
      EXPECT_EQ(waited.status, 404) << waited.body;
    }
    EXPECT_LT(took, 10s) << how << ": woken by the change, not the 20 s wait";
  }
}

// A schedule set over HTTP runs on the server's own scheduler: its ticks'
// jobs appear; it is listed with its next runs, paused, resumed, deleted.
TEST_F(ServerTest, SchedulesRunOnTheServerAndAreManagedOverHttp) {
  const std::string base = "/v1/topics/" + topic_ + "/schedules";
  auto put = call("PUT", base + "/pulse",
                  R"({"every_ms":200,"body":"beat","priority":3,"keep_ms":60000})");
  ASSERT_EQ(put.status, 200) << put.body;
  auto s = parse(put.body);
  EXPECT_EQ(s.at("every_ms").as_int64(), 200);
  EXPECT_EQ(s.at("next_runs").as_array().size(), 5u);
  EXPECT_EQ(s.at("last_tick"), nullptr);
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = parse(call("GET", topic_jobs() + "?state=ready").body);
        return jobs.at("total").as_int64() >= 2;
      },
      5s))
      << "the server's scheduler puts the ticks";
  auto jobs = parse(call("GET", topic_jobs() + "?state=ready").body).at("jobs").as_array();
  EXPECT_EQ(std::string(jobs[0].at("id").as_string()).substr(0, 6), "pulse@");
  EXPECT_EQ(jobs[0].at("priority").as_int64(), 3);
  EXPECT_EQ(jobs[0].at("keep").as_int64(), 60000);
  auto listed = parse(call("GET", base).body).at("schedules").as_array();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_NE(listed[0].at("last_tick"), nullptr);

  EXPECT_EQ(parse(call("POST", base + "/pulse/pause").body).at("changed"), true);
  EXPECT_EQ(parse(call("GET", base + "/pulse").body).at("paused"), true);
  EXPECT_EQ(parse(call("POST", base + "/pulse/resume").body).at("changed"), true);
  auto cron =
      call("PUT", base + "/nightly",
           R"({"cron":"30 2 * * *","time_zone":"Europe/Berlin","body":"n","catch_up":"last"})");
  ASSERT_EQ(cron.status, 200) << cron.body;
  EXPECT_EQ(parse(cron.body).at("time_zone"), "Europe/Berlin");
  EXPECT_EQ(parse(cron.body).at("catch_up"), "last");
  EXPECT_EQ(call("DELETE", base + "/pulse").status, 200);
  EXPECT_EQ(call("DELETE", base + "/pulse").status, 404);
  EXPECT_EQ(call("GET", base + "/pulse").status, 404);

  auto bad_cron = call("PUT", base + "/x", R"({"cron":"61 * * * *","body":"b"})");
  EXPECT_EQ(bad_cron.status, 400);
  EXPECT_NE(bad_cron.body.find("minutes: 61"), std::string::npos) << bad_cron.body;
  EXPECT_EQ(call("PUT", base + "/x", R"({"cron":"* * * * *","time_zone":"Nowhere/Land"})").status,
            400);
  EXPECT_EQ(call("PUT", base + "/x", R"({"body":"no rule"})").status, 400);
  EXPECT_EQ(call("PUT", base + "/x", R"({"every_ms":5,"cron":"* * * * *"})").status, 400);
  EXPECT_EQ(call("PUT", base + "/bad%20name", R"({"every_ms":1000})").status, 400);
  EXPECT_EQ(call("PUT", base + "/x", R"({"every_ms":1000,"delay_ms":5})").status, 400);
  EXPECT_EQ(parse(call("GET", base).body).at("schedules").as_array().size(), 1u)
      << "only nightly: nothing refused was stored";
  EXPECT_EQ(call("DELETE", base + "/nightly").status, 200);
}

TEST_F(ServerTest, BadRequestsGetClearErrorsAndChangeNothing) {
  ASSERT_EQ(call("PUT", topic_jobs() + "/keep", R"({"body":"original"})").status, 201);
  struct Case {
    std::string method, target, body;
    int status;
    std::string code;
  };
  const std::string keep = topic_jobs() + "/keep";
  const std::vector<Case> cases = {
      {"PUT", keep, "{not json", 400, "invalid_argument"},
      {"PUT", keep, "[1,2]", 400, "invalid_argument"},
      {"PUT", keep, R"({"body":"x","priority":"high","mode":"upsert"})", 400, "invalid_argument"},
      {"PUT", keep, R"({"body":"x","priority":5000,"mode":"upsert"})", 400, "invalid_argument"},
      {"PUT", keep, R"({"body":"x","delay_ms":-1,"mode":"upsert"})", 400, "invalid_argument"},
      {"PUT", keep, R"({"body":"x","dealy_ms":10,"mode":"upsert"})", 400, "invalid_argument"},
      {"PUT", keep, R"({"body":42,"mode":"upsert"})", 400, "invalid_argument"},
      {"PUT", keep, R"({"body_base64":"!!!","mode":"upsert"})", 400, "invalid_argument"},
      {"PUT", keep, R"({"body":"x","delay_ms":10,"due_at_ms":10,"mode":"upsert"})", 400,
       "invalid_argument"},
      {"PUT", "/v1/topics/bad%20topic/jobs/x", R"({"body":"x"})", 400, "invalid_argument"},
      {"PUT", topic_jobs() + "/" + std::string(300, 'i'), R"({"body":"x"})", 400,
       "invalid_argument"},
      {"PATCH", keep, "{}", 405, "method_not_allowed"},
      {"POST", "/v1/topics/" + topic_ + "/reserve", R"({"count":0})", 400, "invalid_argument"},
      {"POST", "/v1/topics/" + topic_ + "/reserve", R"({"count":2.5})", 400, "invalid_argument"},
      {"POST", keep + "/ack", R"({})", 400, "invalid_argument"},
      {"POST", keep + "/ack", R"({"token":12345})", 409, "wrong_state"},
      {"POST", keep + "/explode", R"({})", 404, "not_found"},
      {"GET", "/nowhere", "", 404, "not_found"},
  };
  for (const auto& c : cases) {
    auto a = call(c.method, c.target, c.body);
    EXPECT_EQ(a.status, c.status) << c.method << " " << c.target << " " << c.body << " -> "
                                  << a.body;
    EXPECT_EQ(error_code(a), c.code) << c.body;
    EXPECT_FALSE(std::string(parse(a.body).at("error").at("message").as_string()).empty());
  }
  // A body over the job limit (1 MiB) and a request over the request limit.
  auto big =
      call("PUT", keep, R"({"mode":"upsert","body":")" + std::string((1 << 20) + 10, 'x') + "\"}");
  EXPECT_EQ(big.status, 400);
  auto huge = call("PUT", keep, R"({"mode":"upsert","body":")" + std::string(3 << 20, 'x') + "\"}");
  EXPECT_EQ(huge.status, 413);
  // A truncated request on a raw socket: the server answers or closes, and lives.
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(serve_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string partial =
        "PUT " + keep + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"body\":";
    ASSERT_GT(::write(fd, partial.data(), partial.size()), 0);
    ::shutdown(fd, SHUT_WR);
    char buf[256];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
    ::close(fd);
  }
  HttpClient fresh(serve_->port());
  auto kept = parse(fresh.request("GET", keep).body);
  EXPECT_EQ(kept.at("body"), "original");
  EXPECT_EQ(kept.at("priority").as_int64(), 0);
}

// A flow over HTTP (library version 35): the parent waits, blocked, and
// serve's sweeper, told by the sweep signal, carries out the outboxes that
// hand the children's outcomes over to it. Nobody else moves them here.
TEST_F(ServerTest, AFlowOverHttpIsCarriedOutByTheSweeper) {
  const std::string kids = topic_ + "_kids", more = topic_ + "_more";
  const std::string body = R"({"body":"send it","after":[{"topic":")" + kids +
                           R"(","id":"x"},{"topic":")" + more +
                           R"(","id":"y","on_failure":"ignore"}]})";
  ASSERT_EQ(call("PUT", topic_jobs() + "/invoice", body).status, 201);
  auto parent = parse(call("GET", topic_jobs() + "/invoice").body);
  EXPECT_EQ(parent.at("state"), "blocked");
  EXPECT_EQ(parent.at("deps_total").as_int64(), 2);
  EXPECT_EQ(parent.at("deps").as_array()[1].at("on_failure"), "ignore");
  EXPECT_EQ(parse(call("GET", "/v1/topics/" + topic_).body).at("blocked").as_int64(), 1);
  // Work each child: x done with a result, y failed for good.
  auto work = [&](const std::string& t, const std::string& id, const std::string& how) {
    ASSERT_EQ(call("PUT", "/v1/topics/" + t + "/jobs/" + id, R"({"body":"b"})").status, 201);
    auto r = parse(call("POST", "/v1/topics/" + t + "/reserve", R"({"count":1})").body);
    ASSERT_EQ(r.at("jobs").as_array().size(), 1u);
    const auto token = std::to_string(r.at("jobs").as_array()[0].at("token").as_int64());
    auto a = call("POST", "/v1/topics/" + t + "/jobs/" + id + "/" + how,
                  how == "ack" ? R"({"token":)" + token + R"(,"result":"pdf"})"
                               : R"({"token":)" + token + R"(,"error":"no paper","dead":true})");
    EXPECT_EQ(a.status, 200) << a.body;
  };
  work(kids, "x", "ack");
  work(more, "y", "fail");
  ASSERT_TRUE(test::wait_until([&] {
    return parse(call("GET", topic_jobs() + "/invoice").body).at("state") == "ready";
  })) << call("GET", topic_jobs() + "/invoice").body;
  parent = parse(call("GET", topic_jobs() + "/invoice").body);
  EXPECT_EQ(parent.at("deps_left").as_int64(), 0);
  const auto& deps = parent.at("deps").as_array();
  EXPECT_EQ(deps[0].at("outcome"), "done");
  EXPECT_EQ(deps[0].at("value"), "pdf");
  EXPECT_EQ(deps[1].at("outcome"), "failed");
  EXPECT_EQ(deps[1].at("value"), "no paper");
  EXPECT_EQ(parse(call("GET", "/v1/topics/" + kids).body).at("outbox").as_int64(), 0);
  // A bad "after" is refused with what is wrong, and puts nothing.
  auto bad = call("PUT", topic_jobs() + "/p2",
                  R"({"after":[{"topic":"t","id":"x","on_failure":"later"}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("on_failure"), std::string::npos) << bad.body;
  EXPECT_EQ(call("GET", topic_jobs() + "/p2").status, 404);
}

// A batch over HTTP (library version 36): made, given members, sealed; its
// callbacks (on success, on complete) wait for it, and run once every
// member finished, the sweeper carrying the news over.
TEST_F(ServerTest, ABatchOverHttpRunsItsCallbacks) {
  const std::string members = topic_ + "_members";
  const std::string batch = "/v1/topics/" + topic_ + "/batches/nightly";
  auto made = call("POST", batch,
                   R"({"add":[{"topic":")" + members + R"(","id":"m1"},{"topic":")" + members +
                       R"(","id":"m2"}],"keep_ms":60000})");
  ASSERT_EQ(made.status, 200) << made.body;
  auto b = parse(made.body);
  EXPECT_EQ(b.at("state"), "blocked");
  EXPECT_EQ(b.at("batch").at("total").as_int64(), 2);
  EXPECT_EQ(b.at("batch").at("pending").as_int64(), 2);
  EXPECT_EQ(b.at("batch").at("sealed"), false);
  auto callback = [&](const std::string& id, const std::string& policy) {
    return call("PUT", topic_jobs() + "/" + id,
                R"({"body":"cb","after":[{"topic":")" + topic_ +
                    R"(","id":"nightly","on_failure":")" + policy + R"("}]})");
  };
  ASSERT_EQ(callback("on_success", "fail").status, 201);
  ASSERT_EQ(callback("on_complete", "ignore").status, 201);
  for (const char* id : {"m1", "m2"}) {
    ASSERT_EQ(call("PUT", "/v1/topics/" + members + "/jobs/" + id, R"({"body":"b"})").status, 201);
    auto r = parse(call("POST", "/v1/topics/" + members + "/reserve", R"({"count":1})").body);
    ASSERT_EQ(r.at("jobs").as_array().size(), 1u);
    const auto token = std::to_string(r.at("jobs").as_array()[0].at("token").as_int64());
    const std::string got = std::string(r.at("jobs").as_array()[0].at("id").as_string());
    EXPECT_EQ(call("POST", "/v1/topics/" + members + "/jobs/" + got + "/ack",
                   R"({"token":)" + token + "}")
                  .status,
              200);
  }
  ASSERT_TRUE(test::wait_until([&] {
    return parse(call("GET", batch).body).at("batch").at("done").as_int64() == 2;
  })) << call("GET", batch).body;
  EXPECT_EQ(parse(call("GET", topic_jobs() + "/on_success").body).at("state"), "blocked")
      << "open: more members may come";
  auto sealed = parse(call("POST", batch, R"({"seal":true})").body);
  EXPECT_EQ(sealed.at("state"), "done");
  EXPECT_EQ(sealed.at("batch").at("sealed"), true);
  for (const char* id : {"on_success", "on_complete"}) {
    EXPECT_TRUE(test::wait_until([&] {
      return parse(call("GET", topic_jobs() + "/" + id).body).at("state") == "ready";
    })) << id
        << ": " << call("GET", topic_jobs() + "/" + id).body;
  }
  // Refusals say what is wrong and change nothing.
  auto late = call("POST", batch, R"({"add":[{"topic":"t","id":"x"}]})");
  EXPECT_EQ(late.status, 400);
  EXPECT_NE(late.body.find("has finished"), std::string::npos) << late.body;
  EXPECT_EQ(call("POST", batch, R"({"add":[{"topic":"t"}]})").status, 400);
  EXPECT_EQ(call("POST", batch, R"({"seal":"yes"})").status, 400);
  EXPECT_EQ(call("POST", batch, R"({"colour":"red"})").status, 400);
  EXPECT_EQ(call("GET", "/v1/topics/" + topic_ + "/batches/on_success").status, 404)
      << "a job is not a batch";
  EXPECT_EQ(call("POST", "/v1/topics/" + topic_ + "/batches/on_success", "{}").status, 400);
}

// A topic spread over shards through HTTP: jobs by id, reserve, stats and
// the listing show it as one topic.
TEST_F(ServerTest, ATopicSpreadOverShards) {
  auto put = call("PUT", "/v1/topics/" + topic_ + "/shards", R"({"count":3})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(parse(put.body).at("count").as_int64(), 3);
  EXPECT_EQ(parse(put.body).at("shards").as_array().size(), 3u);
  EXPECT_EQ(parse(call("GET", "/v1/topics/" + topic_ + "/shards").body).at("shards"),
            parse(put.body).at("shards"));
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(call("PUT", topic_jobs() + "/s" + std::to_string(i), R"({"body":"b"})").status, 201);
  }
  EXPECT_EQ(parse(call("GET", topic_jobs() + "/s7").body).at("body"), "b");
  auto stats = parse(call("GET", "/v1/topics/" + topic_).body);
  EXPECT_EQ(stats.at("ready").as_int64(), 30);
  EXPECT_EQ(stats.at("shards").as_int64(), 3);
  auto r = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", R"({"count":30})").body);
  EXPECT_EQ(r.at("jobs").as_array().size(), 30u);
  auto topics = call("GET", "/v1/topics").body;
  EXPECT_EQ(topics.find(topic_ + "~"), std::string::npos) << "shards are listed as their topic";
  EXPECT_NE(topics.find(topic_), std::string::npos);

  auto busy = call("PUT", "/v1/topics/" + topic_ + "/shards", R"({"count":2})");
  EXPECT_EQ(busy.status, 409) << "not while it holds jobs";
  EXPECT_EQ(error_code(busy), "conflict");
  EXPECT_EQ(call("PUT", "/v1/topics/" + topic_ + "/shards", R"({"count":0})").status, 400);
  EXPECT_EQ(call("PUT", "/v1/topics/" + topic_ + "/shards", R"({})").status, 400);
}

TEST_F(ServerTest, HealthzAndMetrics) {
  auto h = call("GET", "/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(parse(h.body).at("status"), "ok");
  EXPECT_EQ(parse(h.body).at("version").as_string(), redisched::version());
  call("PUT", topic_jobs() + "/m", R"({"body":"m"})");
  EXPECT_EQ(call("PUT", "/v1/topics/" + topic_ + "/limits", R"({"concurrency":6})").status, 200);
  // Counts come from the server's shared reading, at most a second old.
  test::HttpAnswer m;
  EXPECT_TRUE(wait_until([&] {
    m = call("GET", "/metrics");
    return m.body.find("redisched_jobs{topic=\"" + topic_ + "\",state=\"ready\"} 1") !=
               std::string::npos &&
           m.body.find("redisched_topic_limit_concurrency{topic=\"" + topic_ + "\"} 6") !=
               std::string::npos &&
           // the history's totals (library version 34): the put above
           m.body.find("redisched_topic_put_total{topic=\"" + topic_ + "\"} 1") !=
               std::string::npos;
  })) << m.body;
  EXPECT_NE(m.body.find("redisched_topic_done_total{topic=\"" + topic_ + "\"} 0"),
            std::string::npos);
  EXPECT_NE(m.body.find("redisched_topic_wait_seconds_total{topic=\"" + topic_ + "\"} 0"),
            std::string::npos);
  EXPECT_NE(m.body.find("redisched_topic_limit_rate{topic=\"" + topic_ + "\"} 0"),
            std::string::npos);
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("redisched_events_total{event=\"put\",topic=\"" + topic_ + "\"}"),
            std::string::npos);
  EXPECT_NE(m.body.find("redisched_request_seconds_bucket"), std::string::npos);
  EXPECT_NE(m.body.find("redisched_build_info{version=\"" + std::string(redisched::version()) +
                        "\",library_version=\""),
            std::string::npos);
}

// The Redis delay queue's exact answers (../shared/seeds/001_...): HTTP 200
// with Resp{Code, Message, Data} from generateSuccessBody (code 200, message
// "") or generateFailureBody (code 500, the error's text, data null).
TEST_F(ServerTest, DelayQueueAnswersAsItsGoServerDid) {
  auto success = [&](const test::HttpAnswer& a) {
    EXPECT_EQ(a.status, 200);
    auto v = parse(a.body).as_object();
    EXPECT_EQ(v.at("code").as_int64(), 200) << a.body;
    EXPECT_EQ(v.at("message"), "") << a.body;
    return v;
  };
  auto failure = [&](const test::HttpAnswer& a) {
    EXPECT_EQ(a.status, 200);
    auto v = parse(a.body).as_object();
    EXPECT_EQ(v.at("code").as_int64(), 500) << a.body;
    EXPECT_FALSE(v.at("message").as_string().empty());
    EXPECT_TRUE(v.at("data").is_null());
    return v;
  };
  // push: data null; the generated id beside it, as job_id.
  auto pushed = success(
      call("POST", "/push", R"({"topic":")" + topic_ + R"(","delay":0,"ttr":1,"body":"hello"})"));
  EXPECT_TRUE(pushed.at("data").is_null());
  const std::string id(pushed.at("job_id").as_string());
  // pop: data is the body itself; job_id is what finish takes.
  auto popped = success(call("GET", "/pop?topic=" + topic_));
  EXPECT_EQ(popped.at("data"), "hello");
  const std::string handle(popped.at("job_id").as_string());
  EXPECT_NE(handle.find(id), std::string::npos);
  failure(call("GET", "/pop?topic=" + topic_));  // nothing ready: "redis: nil"
  // Not finished within its ttr (1 s): it comes back, with a new job_id.
  json::object again;
  ASSERT_TRUE(wait_until(
      [&] {
        again = parse(call("GET", "/pop?topic=" + topic_).body).as_object();
        return again.at("code").as_int64() == 200;
      },
      5s));
  EXPECT_EQ(again.at("data"), "hello");
  const std::string handle2(again.at("job_id").as_string());
  // The first pop's job_id is over: it cannot finish the second pop's job.
  failure(call("GET", "/finish?job_id=" + handle));
  success(call("GET", "/finish?job_id=" + handle2));
  success(call("GET", "/finish?job_id=" + handle2));  // finishing again is harmless, as it was
  EXPECT_EQ(call("GET", topic_jobs() + "/" + id).status, 404);
  // A job reserved through /v1 cannot be finished with a made-up job_id.
  call("PUT", topic_jobs() + "/v1job", R"({"body":"x"})");
  auto r = parse(call("POST", "/v1/topics/" + topic_ + "/reserve", "{}").body);
  const auto token = r.at("jobs").at(0).at("token").as_int64();
  failure(call("GET", "/finish?job_id=v1job"));
  failure(call("GET", "/finish?job_id=" + topic_ + "/v1job/" + std::to_string(token + 1)));
  EXPECT_EQ(parse(call("GET", topic_jobs() + "/v1job").body).at("state"), "reserved");
  // ttr 0: gone once popped.
  auto once =
      success(call("POST", "/push", R"({"topic":")" + topic_ + R"(","ttr":0,"body":"once"})"));
  EXPECT_EQ(success(call("GET", "/pop?topic=" + topic_)).at("data"), "once");
  // Gone in the same call that popped it: nothing to finish, nothing to come back.
  EXPECT_EQ(call("GET", topic_jobs() + "/" + std::string(once.at("job_id").as_string())).status,
            404);
  auto stats = parse(call("GET", "/v1/topics/" + topic_).body);
  EXPECT_EQ(stats.at("ready").as_int64(), 0);
  EXPECT_EQ(stats.at("reserved").as_int64(), 1);  // v1job only
  // Negative delay and ttr clamp to 0, as the original did.
  success(
      call("POST", "/push", R"({"topic":")" + topic_ + R"(","delay":-5,"ttr":-1,"body":"neg"})"));
  EXPECT_EQ(success(call("GET", "/pop?topic=" + topic_)).at("data"), "neg");
  // Failures: its own shape, and nothing stored.
  EXPECT_EQ(failure(call("POST", "/push", R"({"delay":1,"body":"x"})")).at("message"),
            "topic is empty");
  EXPECT_EQ(failure(call("POST", "/push", R"({"topic":"","body":"x"})")).at("message"),
            "topic is empty");
  failure(call("POST", "/push", "{oops"));
  failure(call("POST", "/push", R"({"topic":")" + topic_ + R"(","delay":18446744073709552})"));
  failure(call("POST", "/push", R"({"topic":")" + topic_ + R"(","ttr":18446744073709551615})"));
  failure(call("POST", "/push", R"({"topic":")" + topic_ + R"(","delay":1.5})"));
  failure(call("GET", "/pop"));
  failure(call("GET", "/finish?job_id="));
  stats = parse(call("GET", "/v1/topics/" + topic_).body);
  EXPECT_EQ(stats.at("ready").as_int64() + stats.at("delayed").as_int64(), 0);
}

// The original redisched's browser frontend, unchanged (its Node server
// coerced the form's strings: "delay" * 1000).
TEST_F(ServerTest, OriginalFrontendRequestsAreAcceptedAsItsNodeServerDid) {
  auto scheduled = call("POST", "/schedule/" + topic_,
                        R"({"id":"m1","contents":"hello","delay":"2","created_at":1732900000000,)"
                        R"("status":"pending","topic":")" +
                            topic_ + R"("})");
  ASSERT_EQ(scheduled.status, 200) << scheduled.body;
  EXPECT_EQ(parse(scheduled.body).at("success"), true);
  auto job = parse(call("GET", topic_jobs() + "/m1").body);
  EXPECT_EQ(job.at("due").as_int64() - job.at("created").as_int64(), 2000);
  // Numbers and fractions of seconds too.
  call("POST", "/schedule/" + topic_, R"({"id":"m2","contents":{"a":1},"delay":1.5})");
  job = parse(call("GET", topic_jobs() + "/m2").body);
  EXPECT_EQ(job.at("due").as_int64() - job.at("created").as_int64(), 1500);
  auto cancelled = call("POST", "/cancel/" + topic_,
                        R"({"id":"m1","type":"cancellation","topic":")" + topic_ + R"("})");
  EXPECT_EQ(cancelled.status, 200);
  EXPECT_EQ(parse(cancelled.body).at("success"), true);
  EXPECT_EQ(call("GET", topic_jobs() + "/m1").status, 404);
  // What it could not have taken is refused, with success false, and changes nothing.
  for (const char* body : {R"({"id":"m3","delay":"soon"})", R"({"id":"m3","delay":1e300})",
                           R"({"contents":"no id"})", "{broken"}) {
    auto a = call("POST", "/schedule/" + topic_, body);
    EXPECT_EQ(a.status, 400) << body;
    EXPECT_EQ(parse(a.body).at("success"), false) << body;
  }
  EXPECT_EQ(call("GET", topic_jobs() + "/m3").status, 404);
}

TEST(ServerAuth, TokenIsNeededEverywhereButHealthz) {
  ServeProcess serve({"--token", "s3cret"});
  HttpClient http(serve.port());
  EXPECT_EQ(http.request("GET", "/v1/topics").status, 401);
  EXPECT_EQ(http.request("GET", "/v1/topics", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(http.request("GET", "/v1/topics", "", {{"Authorization", "Bearer s3cret"}}).status,
            200);
  EXPECT_EQ(http.request("POST", "/schedule/t", R"({"id":"x"})").status, 401);
  EXPECT_EQ(http.request("GET", "/healthz").status, 200);
}

TEST(ServerAuth, TokenFromTheConfigFile) {
  const std::string config = "/tmp/redisched-config-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(config) << "[serve]\ntoken = \"from-file\"\n";
  ServeProcess serve({}, "", {"--config", config});
  HttpClient http(serve.port());
  EXPECT_EQ(http.request("GET", "/v1/topics").status, 401);
  EXPECT_EQ(http.request("GET", "/v1/topics", "", {{"Authorization", "Bearer from-file"}}).status,
            200);
  std::filesystem::remove(config);
}

TEST(ServerPush, OriginalScheduleIsPushedToTheWebhookAndRemovedOn2xx) {
  std::atomic<int> fail_first{1};
  test::Receiver receiver([&](const std::string&) { return fail_first-- > 0 ? 500 : 200; });
  ServeProcess serve(
      {"--webhook", "orig=http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook"});
  HttpClient http(serve.port());
  auto r =
      http.request("POST", "/schedule/orig", R"({"id":"e1","contents":{"user":42},"delay":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  // First answer 500: failed, retried after the job's backoff (1 s); then 200.
  ASSERT_TRUE(wait_until([&] { return receiver.bodies().size() >= 2; }, 10s));
  auto first = parse(receiver.bodies()[0]);
  EXPECT_EQ(first.at("topic"), "orig");
  EXPECT_EQ(first.at("id"), "e1");
  EXPECT_EQ(first.at("contents").at("user").as_int64(), 42);
  EXPECT_EQ(parse(receiver.bodies()[1]).at("attempt").as_int64(), 2);
  ASSERT_TRUE(
      wait_until([&] { return http.request("GET", "/v1/topics/orig/jobs/e1").status == 404; }));
  // Cancel before due: never pushed.
  http.request("POST", "/schedule/orig", R"({"id":"e2","contents":"x","delay":1})");
  EXPECT_EQ(
      parse(http.request("POST", "/cancel/orig", R"({"id":"e2"})").body).at("deleted").as_int64(),
      1);
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(receiver.bodies().size(), 2u);
}

TEST(ServerPush, ReceiverDownFailsTheJobWhichIsRetried) {
  int port = 0;
  {
    test::Receiver gone([](const std::string&) { return 200; });
    port = gone.port();
  }  // nothing listens there now
  ServeProcess serve({"--webhook", "down=http://127.0.0.1:" + std::to_string(port) + "/",
                      "--webhook-timeout", "500"});
  HttpClient http(serve.port());
  http.request("PUT", "/v1/topics/down/jobs/j", R"({"body":"x","attempts":2})");
  ASSERT_TRUE(wait_until(
      [&] {
        auto j = parse(http.request("GET", "/v1/topics/down/jobs/j").body);
        return j.at("state") == "dead";
      },
      10s));
  auto j = parse(http.request("GET", "/v1/topics/down/jobs/j").body);
  EXPECT_NE(std::string(j.at("error").as_string()).find("webhook"), std::string::npos);
}

// A topic written by library version 8 (format 1 records): serve's sweeper
// rewrites it in the background once serve starts (docs/redis-api.md,
// "Migrations"), and marks it done.
TEST(ServerMigration, ATopicOfAnOlderFormatIsMigratedInTheBackground) {
  test::RedisServer redis;
  test::RawRedis raw(redis.port());
  std::ifstream in(std::string(REDISCHED_FIXTURES_DIR) + "/redisched_v8.lua");
  const std::string v8((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(raw.call({"FUNCTION", "LOAD", "REPLACE", v8})->type, REDIS_REPLY_STRING);
  const std::string base = "redisched:{old}:";
  std::vector<std::string> put = {"FCALL", "redisched_put", "8"};
  for (const char* k : {"jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases"}) {
    put.push_back(base + k);
  }
  for (int i = 0; i < 50; ++i) {
    auto call = put;
    call.insert(call.end(), {"j" + std::to_string(i), "body", "DELAY", "3600000"});
    ASSERT_EQ(raw.call(call)->integer, 1);
  }
  ServeProcess serve({}, "", {"--redis", redis.url()});
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = raw.call({"HGET", base + "meta", "migrated"});
        return r->type == REDIS_REPLY_STRING;
      },
      20s))
      << "serve did not migrate the topic";
  auto recs = raw.call({"HVALS", base + "jobs"});
  ASSERT_EQ(recs->elements, 50u);
  for (std::size_t i = 0; i < recs->elements; ++i) {
    EXPECT_NE(static_cast<unsigned char>(recs->element[i]->str[0]) & 128, 0) << "format 2";
  }
  HttpClient http(serve.port());
  auto job = parse(http.request("GET", "/v1/topics/old/jobs/j7").body);
  EXPECT_EQ(job.at("state").as_string(), "delayed");
}

TEST(ServerPush, WebhookSubscriptionsByApi) {
  test::Receiver receiver([](const std::string&) { return 204; });
  ServeProcess serve;
  HttpClient http(serve.port());
  const std::string url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/in";
  EXPECT_EQ(
      http.request("PUT", "/v1/topics/api/webhook", R"({"url":")" + url + R"(","concurrency":2})")
          .status,
      200);
  EXPECT_EQ(parse(http.request("GET", "/v1/topics/api/webhook").body).at("url").as_string(), url);
  EXPECT_EQ(http.request("PUT", "/v1/topics/api/webhook", R"({"url":"ftp://x"})").status, 400);
  http.request("PUT", "/v1/topics/api/jobs/j", R"({"body":"x"})");
  ASSERT_TRUE(wait_until([&] { return receiver.bodies().size() == 1; }));
  EXPECT_EQ(http.request("DELETE", "/v1/topics/api/webhook").status, 200);
  EXPECT_EQ(http.request("GET", "/v1/topics/api/webhook").status, 404);
}

// The runtime: serve --threads 2 runs every part (HTTP, Redis calls, five
// webhooks' workers, the sweeper, 100 topics) on its two threads, plus the
// one that waits for signals.
TEST(ServerRuntime, TwoThreadsServeFiveWebhooksAndAHundredTopics) {
  test::Receiver receiver([](const std::string&) { return 200; });
  std::vector<std::string> args = {"--threads", "2"};
  for (int i = 0; i < 5; ++i) {
    args.push_back("--webhook");
    args.push_back("hook" + std::to_string(i) +
                   "=http://127.0.0.1:" + std::to_string(receiver.port()) + "/in");
  }
  ServeProcess serve(args, "", {"--prefix", "runtime"});  // its own topics, on any target
  HttpClient http(serve.port());
  for (int i = 0; i < 100; ++i) {
    const std::string topic = i < 5 ? "hook" + std::to_string(i) : "t" + std::to_string(i);
    ASSERT_EQ(http.request("PUT", "/v1/topics/" + topic + "/jobs/j", R"({"body":"x"})").status,
              201);
  }
  ASSERT_TRUE(wait_until([&] { return receiver.bodies().size() == 5; }));
  EXPECT_EQ(http.request("GET", "/metrics").status, 200);
  EXPECT_EQ(parse(http.request("GET", "/v1/topics").body).at("topics").as_array().size(), 100u);
  const int threads = test::thread_count(std::to_string(serve.pid()));
  std::cout << "serve --threads 2, 5 webhooks, 100 topics: " << threads << " threads\n";
  // On failure, what the threads are (their names, and where each waits).
  std::string names;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(serve.pid()) + "/task")) {
    std::ifstream comm(e.path() / "comm"), wchan(e.path() / "wchan");
    std::string name, waits;
    std::getline(comm, name);
    std::getline(wchan, waits);
    names += " " + name + "(" + waits + ")";
  }
  EXPECT_LE(threads, 4) << names;
}

TEST(ServerEmbedded, OneServePerDataDirNoOrphanAndDataSurvivesARestart) {
  char tmpl[] = "/tmp/redisched-embedded-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  pid_t redis_pid = -1;
  {
    ServeProcess serve({}, dir);
    redis_pid = serve.redis_pid();
    ASSERT_TRUE(test::process_alive(redis_pid));
    HttpClient http(serve.port());
    ASSERT_EQ(http.request("PUT", "/v1/topics/keep/jobs/j", R"({"body":"kept","delay_ms":3600000})")
                  .status,
              201);
    // A second serve on the same data dir refuses, clearly.
    auto [status, out] =
        test::run_redisched({"--data-dir", dir + "/data", "serve", "--listen", "127.0.0.1:0"});
    EXPECT_NE(status, 0);
    EXPECT_NE(out.find("another redisched serve is using"), std::string::npos) << out;
    EXPECT_NE(out.find("(pid " + std::to_string(serve.pid()) + ")"), std::string::npos) << out;
    // The CLI without --redis uses the running serve's Redis.
    auto [st, got] =
        test::run_redisched({"--data-dir", dir + "/data", "--json", "get", "keep", "j"});
    EXPECT_EQ(st, 0) << got;
    EXPECT_NE(got.find("\"body\":\"kept\""), std::string::npos);
    EXPECT_EQ(serve.stop(), 0);
    // serve exits after its redis-server: the data dir is free at once.
    EXPECT_FALSE(test::process_alive(redis_pid));
  }
  {
    ServeProcess serve({}, dir);
    HttpClient http(serve.port());
    auto j = parse(http.request("GET", "/v1/topics/keep/jobs/j").body);
    EXPECT_EQ(j.at("body"), "kept");  // from the append-only file
  }
  std::filesystem::remove_all(dir);
}

TEST(ServerEmbedded, SigtermAnswersRequestsInFlightThenStops) {
  ServeProcess serve;
  const pid_t redis_pid = serve.redis_pid();
  test::HttpAnswer answer;
  std::thread poller([&] {
    HttpClient http(serve.port());
    answer = http.request("POST", "/v1/topics/bye/reserve", R"({"wait_ms":30000})");
  });
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(serve.stop(), 0);
  poller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // not the 30 s wait
  EXPECT_EQ(answer.status, 200);
  EXPECT_TRUE(parse(answer.body).at("jobs").as_array().empty());
  EXPECT_FALSE(test::process_alive(redis_pid)) << "serve exited before its redis-server";
}

// While draining, a keep-alive client is told to close with its next answer,
// so that it leaves at once instead of holding the drain up.
TEST(ServerEmbedded, DrainClosesKeepAliveConnectionsWithTheirNextAnswer) {
  ServeProcess serve;
  HttpClient http(serve.port());
  ASSERT_EQ(http.request("PUT", "/v1/topics/drain/jobs/a", R"({"body":"x"})").status, 201);
  // The idle connection holds the drain up for a second (--shutdown-timeout
  // is not reached): time to ask again on it.
  ::kill(serve.pid(), SIGTERM);
  // The acceptors close as the drain begins: a new connection is refused.
  ASSERT_TRUE(wait_until([&] {
    try {
      HttpClient probe(serve.port());
      probe.request("GET", "/healthz");
      return false;
    } catch (const std::exception&) {
      return true;
    }
  }));
  auto a = http.request("PUT", "/v1/topics/drain/jobs/b", R"({"body":"x"})");
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(a.headers["Connection"], "close");
  // The server closed that connection: the drain ends by itself, with no
  // second signal (stop() would send one).
  EXPECT_EQ(serve.wait(), 0);
}

// A serve killed outright: its redis-server gets SIGTERM, writes its
// append-only file and exits; a serve started at once on the same dir waits
// for it (never two redis-servers on one dir) and has the data.
TEST(ServerEmbedded, AServeStartedRightAfterAKillWaitsForTheOldRedisAndHasTheData) {
  char tmpl[] = "/tmp/redisched-embedded-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  for (const char* fsync : {"always", "everysec"}) {
    pid_t old_redis = -1;
    {
      ServeProcess serve({"--fsync", fsync}, dir);
      old_redis = serve.redis_pid();
      HttpClient http(serve.port());
      for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(http.request("PUT", "/v1/topics/k/jobs/" + std::string(fsync) + std::to_string(i),
                               R"({"body":"kept"})")
                      .status,
                  201);
      }
      EXPECT_EQ(serve.stop(SIGKILL), 128 + SIGKILL);
    }
    ServeProcess next({"--fsync", fsync}, dir);
    EXPECT_FALSE(test::process_alive(old_redis)) << "two redis-servers on one data dir";
    HttpClient http(next.port());
    auto stats = parse(http.request("GET", "/v1/topics/k").body);
    EXPECT_EQ(stats.at("ready").as_int64(), std::string(fsync) == "always" ? 200 : 400);
  }
  std::filesystem::remove_all(dir);
}

TEST(ServerEmbedded, KilledServeLeavesNoRedisBehind) {
  ServeProcess serve;
  const pid_t redis_pid = serve.redis_pid();
  ASSERT_TRUE(test::process_alive(redis_pid));
  ::kill(serve.pid(), SIGKILL);
  EXPECT_TRUE(wait_until([&] { return !test::process_alive(redis_pid); }, 5s));
}

TEST(ServerEmbedded, MissingRedisServerSaysHowToInstallIt) {
  char tmpl[] = "/tmp/redisched-nopath-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", dir.c_str(), 1);
  auto [status, out] = test::run_redisched({"--data-dir", dir + "/data", "serve"});
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("apt-get install redis-server"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace redisched
