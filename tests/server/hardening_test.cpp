// redisched serve facing hostile input and shutting down, over raw sockets:
// heads, trailers and chunk framing held to their limits; framing that
// cannot be read refused and the connection closed; HEAD without a body;
// 405 with Allow; /metrics bounded and valid for promtool; /healthz that
// writes nothing and answers when Redis hangs; the background sweeper;
// long-poll subscriptions that end; one reading for every dashboard stream;
// and a drain that hands out no job it cannot take back.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <thread>

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

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes or nothing comes for quiet.
std::string read_all(int fd, std::chrono::milliseconds quiet = 2000ms) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(quiet.count())) <= 0) break;
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Sends bytes on a fresh connection; returns everything that came back.
std::string exchange(int port, std::string_view bytes, std::chrono::milliseconds quiet = 2000ms) {
  const int fd = connect_to(port);
  if (fd < 0) return "<connect failed>";
  write_all(fd, bytes);
  auto out = read_all(fd, quiet);
  ::close(fd);
  return out;
}

int status_of(const std::string& answer) {
  std::smatch m;
  static const std::regex status(R"(^HTTP/1\.[01] (\d{3}) )");
  return std::regex_search(answer, m, status) ? std::stoi(m[1]) : 0;
}

int answers_in(const std::string& text) {
  int n = 0;
  for (size_t at = text.find("HTTP/1."); at != std::string::npos;
       at = text.find("HTTP/1.", at + 1)) {
    if (at == 0 || text[at - 1] == '\n') ++n;
  }
  return n;
}

std::string redis_socket(const ServeProcess& s) { return s.data_dir() + "/data/redis.sock"; }

// The Redis behind a serve: its embedded one, or every primary of the
// shared cluster (the suites' second target, tests/testutil/redis_server.h).
struct Behind {
  explicit Behind(const ServeProcess& s) {
    if (!test::on_cluster()) {
      nodes.push_back(std::make_unique<test::RawRedis>(redis_socket(s)));
      return;
    }
    for (int port : test::target_ports()) nodes.push_back(std::make_unique<test::RawRedis>(port));
  }
  std::vector<std::unique_ptr<test::RawRedis>> nodes;
};

// Every key (matching pattern) with its serialized value and time to live:
// equal dumps mean an unchanged keyspace. On the cluster, which the suite's
// tests share, a test names the keys of its own topics: other topics' jobs
// (webhook retries, lapsed reservations) move on their own meanwhile.
std::map<std::string, std::string> keyspace(Behind& redis, const std::string& pattern = "*") {
  std::map<std::string, std::string> out;
  for (auto& node : redis.nodes) {
    auto keys = node->call({"KEYS", pattern});
    for (size_t i = 0; i < keys->elements; ++i) {
      const std::string key(keys->element[i]->str, keys->element[i]->len);
      auto dump = node->call({"DUMP", key});
      auto ttl = node->call({"PTTL", key});
      out[key] = std::string(dump->str ? std::string(dump->str, dump->len) : "") + "|" +
                 std::to_string(ttl->integer);
    }
  }
  return out;
}

long peak_rss_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class HardeningTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { serve_ = new ServeProcess(); }
  static void TearDownTestSuite() {
    delete serve_;
    serve_ = nullptr;
  }
  static ServeProcess* serve_;
  int port() const { return serve_->port(); }
};
ServeProcess* HardeningTest::serve_ = nullptr;

TEST_F(HardeningTest, TrailersChunkExtensionsAndHeadsAreHeldToTheHeaderLimit) {
  Behind redis(*serve_);
  const auto before = keyspace(redis, "*{t}*");  // (the topic its requests name)
  // A trailer field of 65,534 bytes once crashed the server (Beast keeps a
  // field in at most 64 KiB and threw).
  const std::string trailer =
      "POST /v1/topics/t/jobs HTTP/1.1\r\nHost: x\r\n"
      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: " +
      std::string(65534, 'a') + "\r\n\r\n";
  EXPECT_EQ(status_of(exchange(port(), trailer)), 431);
  // One header of 70,000 bytes.
  EXPECT_EQ(status_of(exchange(port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                           std::string(70000, 'b') + "\r\n\r\n")),
            431);
  // A chunk extension of 64 MiB, sent in pieces: refused once it passes the
  // limit, without reading it whole.
  const long rss_before = peak_rss_kb(serve_->pid());
  {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    write_all(fd,
              "POST /v1/topics/t/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;");
    const std::string piece(1 << 20, 'a');
    for (int i = 0; i < 64 && write_all(fd, piece); ++i) {
    }
    EXPECT_EQ(status_of(read_all(fd)), 431);
    ::close(fd);
  }
  EXPECT_LT(peak_rss_kb(serve_->pid()) - rss_before, 32 * 1024) << "KiB of peak memory";
  EXPECT_TRUE(test::process_alive(serve_->pid()));
  EXPECT_EQ(keyspace(redis, "*{t}*"), before);
  // --max-header past what Beast can hold is refused at the start.
  auto [status, out] = test::run_redisched({"serve", "--max-header", "1048576"});
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--max-header"), std::string::npos) << out;
}

TEST_F(HardeningTest, FramingThatCannotBeReadIsRefusedAndNothingAfterItRuns) {
  Behind redis(*serve_);
  const auto before = keyspace(redis, "*{alpha}*");  // (the topic its requests name)
  const std::string smuggled = "GET /v1/topics HTTP/1.1\r\nHost: x\r\n\r\n";
  struct Case {
    std::string head;
    int status;
  };
  const std::vector<Case> cases = {
      {"Transfer-Encoding: chunked, gzip\r\n", 400},
      {"Transfer-Encoding: gzip\r\n", 501},
      {"Transfer-Encoding: xchunked\r\n", 501},
      {"Transfer-Encoding: identity\r\n", 501},
      {"Transfer-Encoding: chunked, chunked\r\n", 400},
      {"Transfer-Encoding: \"chunked\"\r\n", 400},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", 400},
      {"Content-Length: 4\r\nContent-Length: 5\r\n", 400},
      {"Content-Length: -4\r\n", 400},
      {"Content-Length: 0x10\r\n", 400},
  };
  for (const auto& c : cases) {
    const std::string request = "POST /v1/topics/alpha/jobs HTTP/1.1\r\nHost: x\r\n" + c.head +
                                "\r\n2\r\n{}\r\n0\r\n\r\n" + smuggled;
    const auto answer = exchange(port(), request);
    EXPECT_EQ(status_of(answer), c.status) << c.head << answer;
    EXPECT_EQ(answers_in(answer), 1) << c.head << answer;
  }
  // HTTP/1.0 with chunked framing.
  EXPECT_EQ(status_of(exchange(port(),
                               "POST /v1/topics/alpha/jobs HTTP/1.0\r\nTransfer-Encoding: "
                               "chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")),
            400);
  EXPECT_EQ(keyspace(redis, "*{alpha}*"), before);
}

TEST_F(HardeningTest, HeadAnswersHaveNoBodyAndKeepTheConnectionInStep) {
  for (const char* target : {"/", "/app.js", "/healthz", "/v1/topics", "/metrics"}) {
    const std::string request = std::string("HEAD ") + target + " HTTP/1.1\r\nHost: x\r\n\r\n" +
                                "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    const auto answer = exchange(port(), request);
    ASSERT_EQ(answers_in(answer), 2) << target << "\n" << answer;
    const auto second = answer.find("HTTP/1.1", 1);
    const auto head = answer.substr(0, second);
    EXPECT_EQ(status_of(head), 200) << target;
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << target << ": a body followed";
    EXPECT_NE(head.find("Content-Length: "), std::string::npos) << target;
    EXPECT_NE(head.find("Content-Length: 0\r\n"), 0u);
    EXPECT_EQ(status_of(answer.substr(second)), 200) << target;
  }
}

// Pipelined requests (RFC 9112 §9.3.2) are answered in order, their answers
// gathered into few writes: 100 puts, then 100 gets whose answers (about
// 1 KiB each) pass the 64 KiB the server gathers at most.
TEST_F(HardeningTest, PipelinedRequestsAreAnsweredInOrder) {
  const std::string topic = test::unique_topic();
  const auto body_of = [](int i) { return "g" + std::to_string(i) + "-" + std::string(1000, 'x'); };
  std::string puts, gets;
  for (int i = 0; i < 100; ++i) {
    const std::string json = R"({"body":")" + body_of(i) + R"("})";
    puts += "PUT /v1/topics/" + topic + "/jobs/g" + std::to_string(i) +
            " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(json.size()) + "\r\n\r\n" +
            json;
    gets += "GET /v1/topics/" + topic + "/jobs/g" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n" +
            (i == 99 ? "Connection: close\r\n" : "") + "\r\n";
  }
  // (A JSON answer ends without a newline: the next one follows its "}".)
  const auto count = [](const std::string& text) {
    int n = 0;
    for (auto at = text.find("HTTP/1.1 "); at != std::string::npos;
         at = text.find("HTTP/1.1 ", at + 1)) {
      ++n;
    }
    return n;
  };
  const auto put_answers =
      exchange(port(), puts + "GET /healthz HTTP/1.1\r\nHost: x\r\n" + "Connection: close\r\n\r\n");
  ASSERT_EQ(count(put_answers), 101) << put_answers.substr(0, 300);
  std::size_t at = 0;
  for (int i = 0; i < 100; ++i) {
    at = put_answers.find("HTTP/1.1 201 ", at);
    ASSERT_NE(at, std::string::npos) << "put " << i;
    const auto id = put_answers.find(R"("id":"g)" + std::to_string(i) + "\"", at);
    ASSERT_NE(id, std::string::npos) << "put " << i;
    at = id;
  }
  const auto got = exchange(port(), gets);
  ASSERT_EQ(count(got), 100) << got.size();
  at = 0;
  for (int i = 0; i < 100; ++i) {
    at = got.find("HTTP/1.1 200 ", at);
    ASSERT_NE(at, std::string::npos) << "get " << i;
    const auto next = got.find("HTTP/1.1 ", at + 1);
    EXPECT_NE(got.substr(at, next - at).find(body_of(i)), std::string::npos) << "get " << i;
    at = next;
  }
  // An answer is not held behind a request that waits: a long-poll, or a
  // body still coming.
  const auto first_answer_within = [&](const std::string& bytes) {
    const int fd = connect_to(port());
    write_all(fd, bytes);
    const auto began = std::chrono::steady_clock::now();
    std::string head;
    char buf[4096];
    pollfd p{fd, POLLIN, 0};
    while (head.find("\r\n\r\n") == std::string::npos && ::poll(&p, 1, 5000) > 0) {
      const auto n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    EXPECT_EQ(status_of(head), 201) << head;
    return std::chrono::steady_clock::now() - began;
  };
  const std::string put_w =
      "PUT /v1/topics/" + topic + "/jobs/w HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  EXPECT_LT(first_answer_within(put_w + "GET /v1/topics/" + topic +
                                "/jobs/w?wait_ms=3000 HTTP/1.1\r\nHost: x\r\n\r\n"),
            1s);
  // The same behind a reserve that waits (wait_ms in its body, on a topic
  // without jobs): the answers before a body go out before it is read.
  const std::string put_x =
      "PUT /v1/topics/" + topic + "/jobs/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  const std::string wait_body = R"({"wait_ms":3000})";
  EXPECT_LT(first_answer_within(put_x + "POST /v1/topics/" + topic +
                                "-empty/reserve HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                std::to_string(wait_body.size()) + "\r\n\r\n" + wait_body),
            1s);
  const std::string put_v =
      "PUT /v1/topics/" + topic + "/jobs/v HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  EXPECT_LT(first_answer_within(put_v + "PUT /v1/topics/" + topic +
                                "/jobs/u HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"bo"),
            1s);
  // An answer that ends only with the connection (no length) closes it, as
  // Beast's writer did: the request after it is not answered.
  const auto absolute = exchange(port(),
                                 "GET http://x/v1/events HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz "
                                 "HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(count(absolute), 1) << absolute;
  // An event stream claimed after pipelined requests comes after their
  // answers.
  const auto streamed = exchange(
      port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n",
      500ms);
  EXPECT_EQ(status_of(streamed), 200) << streamed;
  const auto events = streamed.find("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream");
  ASSERT_NE(events, std::string::npos) << streamed;
  EXPECT_GT(events, 0u) << "the stream came before the answer of the request before it";
}

TEST_F(HardeningTest, WrongMethodsAre405WithAllowAndUnknownPathsAre404) {
  HttpClient http(port());
  const std::vector<std::tuple<std::string, std::string, std::string>> wrong = {
      {"DELETE", "/", "GET, HEAD"},
      {"POST", "/app.js", "GET, HEAD"},
      {"PUT", "/style.css", "GET, HEAD"},
      {"POST", "/index.html", "GET, HEAD"},
      {"POST", "/v1/events", "GET, HEAD"},
      {"PATCH", "/v1/topics/alpha/jobs/r1", "GET, HEAD, PUT, DELETE"},
      {"GET", "/v1/topics/alpha/reserve", "POST"},
      {"GET", "/push", "POST"},
      {"POST", "/pop", "GET, HEAD"},
  };
  for (const auto& [method, target, allow] : wrong) {
    auto a = http.request(method, target);
    EXPECT_EQ(a.status, 405) << method << " " << target;
    EXPECT_EQ(a.headers["Allow"], allow) << method << " " << target;
  }
  for (const char* target : {"/v1/topics/alpha/bogus", "/v1/topics/alpha/jobs/r1/bogus", "/v1",
                             "/v1/nope", "/v1/topics/alpha/jobs/r1/ack/extra"}) {
    EXPECT_EQ(http.request("GET", target).status, 404) << target;
  }
}

TEST_F(HardeningTest, MetricsKeepRouteTemplatesAndPassPromtool) {
  HttpClient http(port());
  const auto before = http.request("GET", "/metrics").body.size();
  for (int i = 0; i < 300; ++i) {
    http.request("GET",
                 "/nowhere/" + std::to_string(i) + "%22%0Ainjected_metric%7Bx%3D%221%22%7D%201");
  }
  http.request("PUT", "/v1/topics/metrics_t/jobs/a", R"({"body":"x"})");
  const auto body = http.request("GET", "/metrics").body;
  EXPECT_LT(body.size(), before + 4096);
  EXPECT_EQ(body.find("injected_metric"), std::string::npos);
  EXPECT_EQ(body.find("nowhere"), std::string::npos);
  EXPECT_NE(body.find(R"(route="/v1/topics/{topic}/jobs/{id}")"), std::string::npos);
  EXPECT_NE(body.find(R"(route="unmatched")"), std::string::npos);
  const std::string file = "/tmp/redisched-metrics-" + std::to_string(::getpid()) + ".txt";
  std::ofstream(file) << body;
  const int rc =
      std::system(("promtool check metrics < " + file + " > " + file + ".out 2>&1").c_str());
  std::ifstream out(file + ".out");
  const std::string said((std::istreambuf_iterator<char>(out)), {});
  EXPECT_EQ(rc, 0) << said;
  std::remove(file.c_str());
  std::remove((file + ".out").c_str());
}

TEST(ServerHealth, HealthzWritesNothingAndAnswersWithinASecondWhenRedisHangs) {
  SKIP_ON_CLUSTER("it freezes the embedded Redis (a frozen cluster node: tests/cluster)");
  ServeProcess serve;
  HttpClient http(serve.port());
  Behind redis(serve);
  const auto before = keyspace(redis);
  auto ok = http.request("GET", "/healthz");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(json::parse(ok.body).at("status"), "ok");
  EXPECT_EQ(keyspace(redis), before);
  ASSERT_EQ(::kill(serve.redis_pid(), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  auto down = HttpClient(serve.port()).request("GET", "/healthz");
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(serve.redis_pid(), SIGCONT);
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_LT(took, 2s);
}

TEST(ServerSweeper, LapsedReservationsComeBackWithoutAnyReserve) {
  ServeProcess serve;
  HttpClient http(serve.port());
  http.request("PUT", "/v1/topics/swept/jobs/j", R"({"body":"x","ttr_ms":1000})");
  auto r = json::parse(http.request("POST", "/v1/topics/swept/reserve", "{}").body);
  ASSERT_EQ(r.at("jobs").as_array().size(), 1u);
  // Nobody reserves from the topic again: the server's sweeper requeues it
  // within about a second of its deadline.
  ASSERT_TRUE(wait_until(
      [&] {
        return json::parse(http.request("GET", "/v1/topics/swept/jobs/j").body).at("state") ==
               "ready";
      },
      4s));
  auto stats = json::parse(http.request("GET", "/v1/topics/swept").body);
  EXPECT_EQ(stats.at("lapsed_total").as_int64(), 1);
}

// Reservations taken by anyone (here by FCALL, not through serve) come back
// at their deadlines: heard of by the sweep signal while serve listens,
// found by the pass serve makes when it starts and when its subscription
// comes back.
TEST(ServerSweeper, ReservationsTakenAnywhereComeBackAtTheirDeadlines) {
  test::RedisServer redis;
  test::RawRedis raw(redis.port());
  const auto stat = [&](const std::string& topic, const std::string& name) {
    auto r = raw.fcall("stats", topic, {});
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) == name) return r->element[i + 1]->integer;
    }
    return -1LL;
  };
  const auto lease = [&](const std::string& topic) {
    ASSERT_EQ(raw.fcall("put", topic, {"j", "x"})->integer, 1);
    auto r = raw.fcall("reserve", topic, {"1", "TTR", "1000"});
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->elements, 4u) << "one job handed out";
  };
  const auto comes_back = [&](const std::string& topic) {
    return wait_until([&] { return stat(topic, "lapsed_total") == 1; }, 5s);
  };
  {
    ServeProcess serve({}, "", {"--redis", redis.url()});
    ASSERT_TRUE(wait_until([&] { return stat("t0", "reserved") == 0; }));  // the library is in
    lease("heard");
    EXPECT_TRUE(comes_back("heard")) << "the signal";
    serve.stop();
  }
  lease("unheard");  // while no serve listens
  // A topic named with characters the C++ Client does not take (put by
  // another client): left out of the pass, which does not fail for it.
  lease("odd topic");
  ServeProcess serve({}, "", {"--redis", redis.url()});
  EXPECT_TRUE(comes_back("unheard")) << "serve's first pass";
  // The subscription drops: signals may go unheard until it is back, and
  // then a pass looks at every topic.
  raw.call({"CLIENT", "KILL", "TYPE", "pubsub"});
  lease("dropped");
  EXPECT_TRUE(comes_back("dropped")) << "the signal, or the pass after the subscription is back";
  EXPECT_EQ(stat("dropped", "ready"), 1);
}

// An idle serve costs Redis nothing per topic: with 300 topics that each
// hold a delayed job, and nothing reserved, it sends (almost) no command;
// the sweeper of version 28 called each topic every second.
TEST(ServerSweeper, AnIdleServerSendsRedisNoCommandPerTopic) {
  SKIP_ON_CLUSTER("Redis's counts of commands are shared with the other tests on the cluster");
  ServeProcess serve;
  HttpClient http(serve.port());
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(http.request("PUT", "/v1/topics/idle" + std::to_string(i) + "/jobs/j",
                           R"({"body":"x","delay_ms":3600000})")
                  .status,
              201);
  }
  Behind redis(serve);
  const auto commands = [&] {
    auto info = redis.nodes.front()->call({"INFO", "stats"});
    const std::string text(info->str, info->len);
    std::smatch m;
    std::regex_search(text, m, std::regex("total_commands_processed:(\\d+)"));
    return std::stoll(m[1]);
  };
  const auto before = commands();
  std::this_thread::sleep_for(3s);
  // Beside the two INFOs: the health checks of serve's connections.
  EXPECT_LT(commands() - before, 30);
}

// A topic that uses flows is heard on its own outbox channel too (library
// version 36: a cluster's bus delays the sweep channel's messages now and
// then), once its first outbox signal came; a topic without flows is not.
TEST(ServerSweeper, ListensOnTheOutboxChannelOfATopicThatUsesFlows) {
  ServeProcess serve;
  HttpClient http(serve.port());
  ASSERT_EQ(http.request("PUT", "/v1/topics/ob_plain/jobs/j", R"({"body":"x"})").status, 201);
  ASSERT_EQ(http.request("PUT", "/v1/topics/ob_parents/jobs/p",
                         R"({"body":"x","after":[{"topic":"ob_kids","id":"k"}]})")
                .status,
            201);
  Behind redis(serve);
  auto listeners = [&](const std::string& topic) {
    long long n = 0;
    for (auto& node : redis.nodes) {
      auto r = node->call({"PUBSUB", "SHARDNUMSUB", "redisched:{" + topic + "}:outbox"});
      n += r->element[1]->integer;
    }
    return n;
  };
  EXPECT_TRUE(test::wait_until([&] { return listeners("ob_parents") > 0; }))
      << "the parents' outbox held a depend";
  ASSERT_EQ(http.request("PUT", "/v1/topics/ob_kids/jobs/k", R"({"body":"x"})").status, 201);
  auto r = json::parse(http.request("POST", "/v1/topics/ob_kids/reserve", "{}").body);
  const auto token = std::to_string(r.at("jobs").as_array()[0].at("token").as_int64());
  ASSERT_EQ(
      http.request("POST", "/v1/topics/ob_kids/jobs/k/ack", R"({"token":)" + token + "}").status,
      200);
  EXPECT_TRUE(test::wait_until([&] { return listeners("ob_kids") > 0; }))
      << "the kids' outbox held a resolve";
  EXPECT_TRUE(test::wait_until([&] {
    return json::parse(http.request("GET", "/v1/topics/ob_parents/jobs/p").body).at("state") ==
           "ready";
  }));
  EXPECT_EQ(listeners("ob_plain"), 0);
}

TEST(ServerLongPoll, SubscriptionsEndWhenNoLongPollWaits) {
  ServeProcess serve;
  Behind redis(serve);
  std::vector<std::thread> polls;
  for (int i = 0; i < 30; ++i) {
    polls.emplace_back([&, i] {
      HttpClient http(serve.port());
      http.request("POST", "/v1/topics/lp" + std::to_string(i) + "/reserve", R"({"wait_ms":300})");
    });
  }
  for (auto& t : polls) t.join();
  auto channels = [&] {
    std::size_t n = 0;
    // The long-polls' channels (on a cluster shared with other tests, a
    // server also listens to the schedules of topics that have some).
    for (auto& node : redis.nodes) {
      n += node->call({"PUBSUB", "SHARDCHANNELS", "redisched:{lp*"})->elements;
    }
    return n;
  };
  EXPECT_GT(channels(), 0u);
  EXPECT_TRUE(wait_until([&] { return channels() == 0; }, 8s)) << channels() << " left";
}

// Redis's count of calls of a command so far (on every node).
long long calls_of(Behind& redis, const std::string& command) {
  long long calls = 0;
  for (auto& node : redis.nodes) {
    auto info = node->call({"INFO", "commandstats"});
    const std::string text(info->str, info->len);
    std::smatch m;
    const std::regex re("cmdstat_" + command + ":calls=(\\d+)");
    if (std::regex_search(text, m, re)) calls += std::stoll(m[1]);
  }
  return calls;
}

TEST(ServerDashboard, EventStreamsShareOneReadingOfTheTopics) {
  ServeProcess serve({}, "", {"--prefix", "feeds"});  // its five topics only, on any target
  HttpClient http(serve.port());
  for (int i = 0; i < 5; ++i) {
    http.request("PUT", "/v1/topics/feed" + std::to_string(i) + "/jobs/j", R"({"body":"x"})");
  }
  Behind redis(serve);
  std::vector<int> streams;
  for (int i = 0; i < 40; ++i) {
    const int fd = connect_to(serve.port());
    write_all(fd, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n");
    streams.push_back(fd);
  }
  std::this_thread::sleep_for(1500ms);
  const auto scans = calls_of(redis, "scan");
  const auto fcalls = calls_of(redis, "fcall") + calls_of(redis, "fcall_ro");
  std::this_thread::sleep_for(3s);
  // 40 streams for 3 s: one reading a second for all (a SCAN per node and
  // one stats per topic), not one per stream (which would be 120 SCANs).
  EXPECT_LE(calls_of(redis, "scan") - scans, 8 * static_cast<long long>(redis.nodes.size()));
  EXPECT_LE(calls_of(redis, "fcall") + calls_of(redis, "fcall_ro") - fcalls, 60);
  for (int fd : streams) {
    char buf[256];
    EXPECT_GT(::read(fd, buf, sizeof buf), 0);
    ::close(fd);
  }
}

// The feed's messages as they come (each "data: {...}" parsed), for up to
// `for_` or until n have come.
std::vector<boost::json::object> feed_messages(int fd, std::size_t n,
                                               std::chrono::milliseconds for_) {
  std::vector<boost::json::object> out;
  std::string buffer;
  const auto until = std::chrono::steady_clock::now() + for_;
  char buf[65536];
  while (out.size() < n && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const auto got = ::read(fd, buf, sizeof buf);
    if (got <= 0) break;
    buffer.append(buf, static_cast<std::size_t>(got));
    for (auto at = buffer.find("data: "); at != std::string::npos; at = buffer.find("data: ")) {
      const auto end = buffer.find("\n\n", at);
      if (end == std::string::npos) break;
      out.push_back(boost::json::parse(buffer.substr(at + 6, end - at - 6)).as_object());
      buffer.erase(0, end + 2);
    }
  }
  return out;
}

// A dashboard on one topic's page follows that topic alone: the server reads
// its counts only (no census of every topic), and after the first message
// ("full") sends its row only when it changed.
TEST(ServerDashboard, AFeedOfNamedTopicsSendsTheirRowsOnlyWhenTheyChange) {
  ServeProcess serve({}, "", {"--prefix", "namedfeed"});
  HttpClient http(serve.port());
  for (int i = 0; i < 3; ++i) {
    http.request("PUT", "/v1/topics/nf" + std::to_string(i) + "/jobs/j", R"({"body":"x"})");
  }
  EXPECT_EQ(http.request("GET", "/v1/events?topics=nf1,bad%20name").status, 400);
  EXPECT_EQ(http.request("GET", "/v1/events?topics=").status, 400);
  std::string many = "nf0";
  for (int i = 1; i <= 100; ++i) many += ",t" + std::to_string(i);
  EXPECT_EQ(http.request("GET", "/v1/events?topics=" + many).status, 400) << "101 topics";
  Behind redis(serve);
  const auto scans = calls_of(redis, "scan");
  const int fd = connect_to(serve.port());
  write_all(fd, "GET /v1/events?topics=nf1,nf2,nf1 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto first = feed_messages(fd, 1, 5000ms);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].at("full"), true);
  std::vector<std::string> rows;
  for (const auto& t : first[0].at("topics").as_array())
    rows.emplace_back(t.at("topic").as_string());
  EXPECT_EQ(rows, (std::vector<std::string>{"nf1", "nf2"})) << "the named topics, each once";
  // Nothing changes: the next messages carry no row.
  auto quiet = feed_messages(fd, 2, 5000ms);
  ASSERT_EQ(quiet.size(), 2u);
  for (const auto& m : quiet) {
    EXPECT_EQ(m.at("full"), false);
    EXPECT_TRUE(m.at("topics").as_array().empty()) << boost::json::serialize(m);
  }
  // A put to nf2 (through this server): its row comes again, with the new
  // count and the event; nf0's put is not this feed's.
  http.request("PUT", "/v1/topics/nf0/jobs/k", R"({"body":"x"})");
  http.request("PUT", "/v1/topics/nf2/jobs/k", R"({"body":"x"})");
  bool seen = false;
  for (const auto& m : feed_messages(fd, 3, 5000ms)) {
    for (const auto& t : m.at("topics").as_array()) {
      EXPECT_EQ(t.at("topic"), "nf2");
      seen = seen || t.at("ready").as_int64() == 2;
    }
    for (const auto& e : m.at("events").as_array()) EXPECT_EQ(e.at("topic"), "nf2");
  }
  EXPECT_TRUE(seen) << "nf2's row with its second job";
  // (one SCAN per node may be the sweeper's pass, made once when serve
  // starts; a census would have made one a second for the 3 s and more)
  EXPECT_LE(calls_of(redis, "scan") - scans, static_cast<long long>(redis.nodes.size()))
      << "no reading of every topic";
  ::close(fd);
}

// The Send page's feed (counts=none): the events of every topic, and no
// topic's counts read for it.
TEST(ServerDashboard, AFeedOfEventsAloneReadsNoTopic) {
  ServeProcess serve({}, "", {"--prefix", "eventsfeed"});
  HttpClient http(serve.port());
  http.request("PUT", "/v1/topics/ev1/jobs/j", R"({"body":"x"})");
  EXPECT_EQ(http.request("GET", "/v1/events?counts=some").status, 400);
  Behind redis(serve);
  const auto scans = calls_of(redis, "scan");
  const int fd = connect_to(serve.port());
  write_all(fd, "GET /v1/events?counts=none HTTP/1.1\r\nHost: x\r\n\r\n");
  auto first = feed_messages(fd, 1, 5000ms);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].at("topics").as_array().empty()) << boost::json::serialize(first[0]);
  http.request("PUT", "/v1/topics/ev2/jobs/k", R"({"body":"x"})");
  bool seen = false;
  for (const auto& m : feed_messages(fd, 3, 5000ms)) {
    EXPECT_TRUE(m.at("topics").as_array().empty());
    for (const auto& e : m.at("events").as_array()) seen = seen || e.at("topic") == "ev2";
  }
  EXPECT_TRUE(seen) << "ev2's put, an event of another topic than any named";
  EXPECT_LE(calls_of(redis, "scan") - scans, static_cast<long long>(redis.nodes.size()))
      << "no reading of every topic";
  ::close(fd);
}

// A job page's feed (its topic named) carries the job's progress and log
// lines as they are reported, by any client: here over HTTP.
TEST(ServerDashboard, AFeedOfNamedTopicsCarriesTheirJobsReports) {
  ServeProcess serve({}, "", {"--prefix", "reportfeed"});
  HttpClient http(serve.port());
  http.request("PUT", "/v1/topics/rf/jobs/j", R"({"body":"x"})");
  const auto reserved =
      boost::json::parse(http.request("POST", "/v1/topics/rf/reserve", R"({"count":1})").body);
  const auto token = reserved.at("jobs").at(0).at("token").as_int64();
  const int fd = connect_to(serve.port());
  write_all(fd, "GET /v1/events?topics=rf HTTP/1.1\r\nHost: x\r\n\r\n");
  auto first = feed_messages(fd, 1, 5000ms);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].at("reports").as_array().empty()) << "nothing reported yet";
  const std::string body =
      R"({"token":)" + std::to_string(token) + R"(,"progress":{"percent":40},"log":["page 4"]})";
  ASSERT_EQ(http.request("POST", "/v1/topics/rf/jobs/j/report", body).status, 200);
  boost::json::object got;
  for (const auto& m : feed_messages(fd, 3, 5000ms)) {
    for (const auto& r : m.at("reports").as_array()) got = r.as_object();
    if (!got.empty()) break;
  }
  ASSERT_FALSE(got.empty()) << "the report came on the feed";
  EXPECT_EQ(got.at("topic"), "rf");
  EXPECT_EQ(got.at("id"), "j");
  EXPECT_EQ(got.at("state"), "reserved");
  EXPECT_EQ(got.at("progress").at("percent"), 40);
  EXPECT_EQ(got.at("log").at(0).at("line"), "page 4");
  EXPECT_FALSE(got.contains("body")) << "a report, not the job";
  ::close(fd);
}

// A long-poll on a job answers at once when the server drains: with the
// job as it is, not after its wait.
TEST(ServerDrain, SigtermEndsLongPollsOnJobs) {
  ServeProcess serve;
  HttpClient http(serve.port());
  ASSERT_EQ(
      http.request("PUT", "/v1/topics/drainwait/jobs/j", R"({"body":"x","keep_ms":60000})").status,
      201);
  test::HttpAnswer answer;
  std::chrono::steady_clock::duration took{};
  // Connected here, and the drain starts only once the poll is being sent:
  // under load the thread could start after it (a refused connection).
  HttpClient other(serve.port());
  std::atomic<bool> asking{false};
  std::string failed;
  std::thread poll([&] {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      asking = true;
      answer = other.request("GET", "/v1/topics/drainwait/jobs/j?wait_ms=30000");
      took = std::chrono::steady_clock::now() - t0;
    } catch (const std::exception& e) {
      failed = e.what();
    }
  });
  while (!asking) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(serve.stop(), 0);
  poll.join();
  EXPECT_EQ(failed, "");
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_NE(answer.body.find("\"state\":\"ready\""), std::string::npos) << answer.body;
  EXPECT_LT(took, 5s) << "the drain ended the wait";
}

// SIGTERM and SIGINT, one every 0.2 ms from the first until serve has
// exited: during the drain, while its Redis writes its file and as the
// process ends, each later one is absorbed.
TEST(ServerDrain, SignalsAfterTheFirstAreAbsorbedUntilTheEnd) {
  ServeProcess serve;
  // Left open and idle: the drain waits a second for it to go.
  HttpClient idle(serve.port());
  ASSERT_EQ(idle.request("PUT", "/v1/topics/twice/jobs/j", R"({"body":"x"})").status, 201);
  const pid_t pid = serve.pid();
  std::atomic<bool> exited{false};
  std::atomic<int> sent{0};
  std::thread signaller([&] {
    while (!exited) {
      ::kill(pid, sent % 2 ? SIGINT : SIGTERM);
      ++sent;
      std::this_thread::sleep_for(200us);
    }
  });
  // Exited but not reaped (WNOWAIT): the pid stays serve's while signalled.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  exited = true;
  signaller.join();
  EXPECT_GT(sent.load(), 100) << "signals came after the first, through the drain";
  EXPECT_EQ(serve.wait(), 0);
  ServeProcess again({}, serve.data_dir());
  HttpClient http(again.port());
  EXPECT_EQ(http.request("GET", "/v1/topics/twice/jobs/j").status, 200) << "the job was kept";
}

TEST(ServerDrain, SigtermHandsOutNoJobThatCannotBeAcked) {
  char tmpl[] = "/tmp/redisched-drain-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  constexpr int kJobs = 3000;
  std::atomic<int> handed{0}, acked{0};
  {
    ServeProcess serve({}, dir);
    {
      HttpClient http(serve.port());
      for (int i = 0; i < kJobs; ++i) {
        http.request("PUT", "/v1/topics/drain/jobs/j" + std::to_string(i), R"({"body":"x"})");
      }
    }
    std::atomic<bool> go{true};
    std::vector<std::thread> workers;
    for (int w = 0; w < 6; ++w) {
      workers.emplace_back([&] {
        try {
          HttpClient http(serve.port());
          while (go) {
            auto r = http.request("POST", "/v1/topics/drain/reserve", R"({"wait_ms":200})");
            if (r.status != 200) break;
            const auto answer = json::parse(r.body);
            for (const auto& j : answer.at("jobs").as_array()) {
              ++handed;
              auto a = http.request(
                  "POST", "/v1/topics/drain/jobs/" + std::string(j.at("id").as_string()) + "/ack",
                  "{\"token\":" + std::to_string(j.at("token").as_int64()) + "}");
              if (a.status == 200) ++acked;
            }
          }
        } catch (const std::exception&) {
          // the server went away
        }
      });
    }
    ASSERT_TRUE(wait_until([&] { return handed > 200; }, 10s));
    EXPECT_EQ(serve.stop(), 0);
    go = false;
    for (auto& t : workers) t.join();
  }
  // Every job handed out was acked: none was left reserved by the drain.
  EXPECT_GT(handed.load(), 0);
  EXPECT_EQ(handed.load(), acked.load());
  ServeProcess again({}, dir);
  HttpClient http(again.port());
  auto stats = json::parse(http.request("GET", "/v1/topics/drain").body);
  EXPECT_EQ(stats.at("reserved").as_int64(), 0);
  EXPECT_EQ(stats.at("ready").as_int64(), kJobs - acked.load());
}

}  // namespace
}  // namespace redisched
