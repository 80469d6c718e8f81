// redisched_http_bench: redisched serve's HTTP API under load, beside the
// client library's figures measured in the same run against the same Redis.
//
// It starts its own redis-server and `redisched serve --redis ...` (2
// threads), then drives keep-alive connections from a load generator of its
// own (Asio coroutines, one request in flight per connection):
//  - HTTP put: PUT /v1/topics/bench/jobs/{id} with a 100-byte body;
//  - HTTP reserve+ack: POST .../reserve (count 1), then POST .../ack;
//  - the library's put (put_async, the same number of calls in flight);
//  - batched: POST .../put with --batch jobs a request, and POST .../reserve
//    of --batch jobs then POST .../ack of them all.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "beanstalk.h"
#include "bench_util.h"
#include "redisched/client.h"

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace bench = redisched::bench;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// `redisched serve` on a free port, stopped at the end.
class Server {
 public:
  Server(const std::string& binary, const std::string& redis_url, int threads,
         bool beanstalk = false) {
    char tmpl[] = "/tmp/redisched-httpbench-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const std::string log = dir_ + "/serve.log";
    std::vector<std::string> args = {
        binary,        "--redis",     redis_url,   "serve",
        "--listen",    "127.0.0.1:0", "--threads", std::to_string(threads),
        "--log-level", "warn"};
    if (beanstalk) {
      args.emplace_back("--beanstalk");
      args.emplace_back("127.0.0.1:0");
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot start " + args[0]);
    }
    posix_spawn_file_actions_destroy(&fa);
    ::close(fd);
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 1000 && port_ == 0; ++i) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::smatch m;
      if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (port_ == 0) throw std::runtime_error("redisched serve did not start; see " + log);
    const std::regex beanstalk_port(R"(beanstalkd's protocol on 127\.0\.0\.1:(\d+))");
    for (int i = 0; beanstalk && i < 1000 && beanstalk_port_ == 0; ++i) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::smatch m;
      if (std::regex_search(text, m, beanstalk_port)) beanstalk_port_ = std::stoi(m[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Server() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  int port() const { return port_; }
  int beanstalk_port() const { return beanstalk_port_; }
  pid_t pid() const { return pid_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int beanstalk_port_ = 0;
};

struct Load {
  int port;
  std::atomic<long> next{0};
  long total;
  std::atomic<long> failures{0};
};

asio::awaitable<http::response<http::string_body>> roundtrip(beast::tcp_stream& s,
                                                             beast::flat_buffer& buf,
                                                             http::verb verb, std::string target,
                                                             std::string body) {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.body() = std::move(body);
  req.prepare_payload();
  co_await http::async_write(s, req, asio::use_awaitable);
  http::response<http::string_body> res;
  co_await http::async_read(s, buf, res, asio::use_awaitable);
  co_return res;
}

asio::awaitable<void> connect(beast::tcp_stream& s, int port) {
  co_await s.async_connect(
      tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
      asio::use_awaitable);
}

// One connection doing puts until the shared counter reaches total.
asio::awaitable<void> putter(Load& load) {
  beast::tcp_stream s(co_await asio::this_coro::executor);
  co_await connect(s, load.port);
  beast::flat_buffer buf;
  for (long i = load.next++; i < load.total; i = load.next++) {
    const auto job = bench::job(i);
    auto res = co_await roundtrip(s, buf, http::verb::put, "/v1/topics/bench/jobs/" + job.id,
                                  "{\"body\":\"" + job.body + "\"}");
    if (res.result_int() != 201) ++load.failures;
  }
}

// The text after the first `after` in body, up to one of the characters
// of `end` ("" when either is missing). (A regex here held the batched
// reserve+ack down: 77-81k jobs/s with it, 95-108k without, same serve.)
std::string_view field_text(std::string_view body, std::string_view after, std::string_view end) {
  const auto at = body.find(after);
  if (at == std::string_view::npos) return {};
  const auto from = at + after.size();
  const auto to = body.find_first_of(end, from);
  return to == std::string_view::npos ? std::string_view{} : body.substr(from, to - from);
}

// One connection doing reserve then ack until total reservations were made.
asio::awaitable<void> worker(Load& load) {
  beast::tcp_stream s(co_await asio::this_coro::executor);
  co_await connect(s, load.port);
  beast::flat_buffer buf;
  for (long i = load.next++; i < load.total; i = load.next++) {
    auto res = co_await roundtrip(s, buf, http::verb::post, "/v1/topics/bench/reserve",
                                  R"({"count":1,"ttr_ms":60000})");
    const auto id = field_text(res.body(), "\"id\":\"", "\"");
    const auto token = field_text(res.body(), "\"token\":", ",}");
    if (id.empty() || token.empty()) {
      ++load.failures;
      continue;
    }
    auto ack = co_await roundtrip(s, buf, http::verb::post,
                                  "/v1/topics/bench/jobs/" + std::string(id) + "/ack",
                                  "{\"token\":" + std::string(token) + "}");
    if (ack.result_int() != 200) ++load.failures;
  }
}

// One connection putting `batch` jobs a request (POST .../put) until the
// shared counter reaches total.
asio::awaitable<void> batch_putter(Load& load, long batch) {
  beast::tcp_stream s(co_await asio::this_coro::executor);
  co_await connect(s, load.port);
  beast::flat_buffer buf;
  for (long i = load.next.fetch_add(batch); i < load.total; i = load.next.fetch_add(batch)) {
    const long n = std::min(batch, load.total - i);
    std::string body = "{\"jobs\":[";
    for (long k = 0; k < n; ++k) {
      const auto job = bench::job(i + k);
      if (k > 0) body += ',';
      body += "{\"id\":\"" + job.id + "\",\"body\":\"" + job.body + "\"}";
    }
    body += "]}";
    auto res = co_await roundtrip(s, buf, http::verb::post, "/v1/topics/bench-many/put", body);
    long created = 0;
    for (auto at = res.body().find("\"created\""); at != std::string::npos;
         at = res.body().find("\"created\"", at + 1)) {
      ++created;
    }
    if (res.result_int() != 200 || created != n) ++load.failures;
  }
}

// One connection reserving `batch` jobs a request and acking them in one
// (POST .../ack), until total jobs were taken.
asio::awaitable<void> batch_worker(Load& load, long batch) {
  beast::tcp_stream s(co_await asio::this_coro::executor);
  co_await connect(s, load.port);
  beast::flat_buffer buf;
  const std::string reserve = fmt::format(R"({{"count":{},"ttr_ms":60000}})", batch);
  while (load.next < load.total) {
    auto res =
        co_await roundtrip(s, buf, http::verb::post, "/v1/topics/bench-many/reserve", reserve);
    std::string acks = "{\"jobs\":[";
    long n = 0;
    // Each reservation's id, then its token.
    for (std::string_view rest = res.body();;) {
      const auto id = field_text(rest, "\"id\":\"", "\"");
      if (id.empty()) break;
      rest.remove_prefix(static_cast<std::size_t>(id.data() - rest.data()) + id.size());
      const auto token = field_text(rest, "\"token\":", ",}");
      if (token.empty()) break;
      rest.remove_prefix(static_cast<std::size_t>(token.data() - rest.data()) + token.size());
      if (n++ > 0) acks += ',';
      acks += "{\"id\":\"" + std::string(id) + "\",\"token\":" + std::string(token) + "}";
    }
    if (n == 0) continue;  // the others hold the rest
    load.next += n;
    acks += "]}";
    auto ack = co_await roundtrip(s, buf, http::verb::post, "/v1/topics/bench-many/ack", acks);
    if (ack.result_int() != 200 || ack.body().find("\"ok\"") == std::string::npos) {
      ++load.failures;
    }
  }
}

// A figure of serve: jobs/s, and the CPU each of the three processes
// sharing the machine used a job, in microseconds: serve's (its process's
// user and system time over the run), Redis's main thread's, and the load
// generator's (this process).
struct Figure {
  double rate = 0;
  double serve_us = 0;
  double redis_us = 0;
  double load_us = 0;
};

template <class Conn>
Figure drive(const Server& server, bench::Admin& redis, long total, int connections, int threads,
             Conn conn) {
  const int port = server.port();
  const double cpu0 = bench::cpu_seconds(server.pid());
  const double redis0 = redis.cpu_seconds();
  const double load0 = bench::process_cpu_seconds();
  asio::io_context io(threads);
  Load load{port, {0}, total, {0}};
  for (int c = 0; c < connections; ++c) {
    asio::co_spawn(io, conn(load), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
  }
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (load.failures > 0)
    throw std::runtime_error(fmt::format("{} requests failed", load.failures.load()));
  const double cpu = bench::cpu_seconds(server.pid()) - cpu0;
  const double redis_cpu = redis.cpu_seconds() - redis0;
  const double load_cpu = bench::process_cpu_seconds() - load0;
  const auto per_job = [total](double seconds) {
    return seconds * 1e6 / static_cast<double>(total);
  };
  return {static_cast<double>(total) / secs, per_job(cpu), per_job(redis_cpu), per_job(load_cpu)};
}

// (serve_us stays 0: the library's own client is the load here.)
Figure library_put(const std::string& url, bench::Admin& redis, long total, int window) {
  const double redis0 = redis.cpu_seconds();
  const double load0 = bench::process_cpu_seconds();
  redisched::ClientOptions o;
  o.redis_url = url;
  redisched::Client client(o);
  std::atomic<long> next{0}, finished{0};
  std::promise<void> done;
  std::function<void()> launch = [&] {
    const long i = next++;
    if (i >= total) return;
    client.put_async("libbench", bench::job(i), [&](redisched::Result<redisched::PutOutcome> r) {
      r.value();
      if (++finished == total) {
        done.set_value();
      } else {
        launch();
      }
    });
  };
  const auto t0 = Clock::now();
  for (int w = 0; w < window; ++w) launch();
  done.get_future().wait();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto per_job = [total](double seconds) {
    return seconds * 1e6 / static_cast<double>(total);
  };
  return {static_cast<double>(total) / secs, 0, per_job(redis.cpu_seconds() - redis0),
          per_job(bench::process_cpu_seconds() - load0)};
}

// beanstalkd, then serve --beanstalk on a Redis of its own (no
// persistence, as beanstalkd runs without its binlog), one after the other,
// twice: jobs/s and CPU seconds per 100,000 jobs (put and reserve+delete
// together; serve's and its Redis's for redisched).
int beanstalk_faces(const std::string& binary, long jobs, int connections, int threads) {
  fmt::print(
      "beanstalkd's protocol: Debian's beanstalkd 1.12 against redisched serve --beanstalk "
      "(--threads {}, its own redis-server), {} connections, one command in flight each, "
      "{} jobs a figure, 100-byte bodies\n\n",
      threads, connections, jobs);
  fmt::print("{:<12} {:>10} {:>16} {:>26}\n", "server", "put/s", "reserve+delete/s",
             "CPU s per 100k jobs");
  for (int round = 0; round < 2; ++round) {
    const auto b = bench::beanstalkd_figures(jobs, connections);
    fmt::print("{:<12} {:>10.0f} {:>16.0f} {:>26.2f}\n", "beanstalkd", b.put, b.reserve_delete,
               b.cpu_seconds * 100000.0 / static_cast<double>(jobs));
    bench::OwnRedis redis;
    bench::Target target;
    target.port = redis.port();
    Server server(binary, target.url(), threads, true);
    const double serve0 = bench::cpu_seconds(server.pid());
    const double redis0 = bench::cpu_seconds(redis.pid());
    const auto r = bench::beanstalk_figures_at(
        "127.0.0.1", static_cast<unsigned short>(server.beanstalk_port()), jobs, connections);
    const double per = 100000.0 / static_cast<double>(jobs);
    const double serve_cpu = (bench::cpu_seconds(server.pid()) - serve0) * per;
    const double redis_cpu = (bench::cpu_seconds(redis.pid()) - redis0) * per;
    fmt::print("{:<12} {:>10.0f} {:>16.0f} {:>26}\n", "redisched", r.put, r.reserve_delete,
               fmt::format("{:.2f} (serve {:.2f}, Redis {:.2f})", serve_cpu + redis_cpu, serve_cpu,
                           redis_cpu));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"redisched HTTP benchmark: put and reserve+ack through redisched serve"};
  long jobs = 200000;
  int connections = 50;
  int server_threads = 2;
  // (A restructure's before-and-after sitting runs a saved binary of before.)
  std::string binary = REDISCHED_BINARY;
  app.add_option("--jobs", jobs, "requests per figure")->capture_default_str();
  app.add_option("--connections", connections, "keep-alive connections")->capture_default_str();
  app.add_option("--server-threads", server_threads, "serve's --threads")->capture_default_str();
  long batch = 100;
  app.add_option("--batch", batch,
                 "jobs a request of the batched figures (0: none, for a server without the "
                 "batch routes)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--serve-binary", binary, "the redisched binary to serve with")
      ->capture_default_str();
  bool beanstalk = false;
  app.add_flag("--beanstalk", beanstalk,
               "instead: serve's beanstalkd face against Debian's beanstalkd, the same load "
               "(bench/beanstalk.cpp: one command in flight per connection), with each side's CPU");
  int beanstalk_at = 0;
  app.add_option("--beanstalk-at", beanstalk_at,
                 "instead: only the beanstalkd load, against a server already on this port of "
                 "127.0.0.1 (to profile it)");
  CLI11_PARSE(app, argc, argv);
  if (beanstalk_at > 0) {
    const auto r = bench::beanstalk_figures_at(
        "127.0.0.1", static_cast<unsigned short>(beanstalk_at), jobs, connections);
    fmt::print("put {:.0f}/s, reserve+delete {:.0f}/s\n", r.put, r.reserve_delete);
    return 0;
  }
  if (beanstalk) return beanstalk_faces(binary, jobs, connections, server_threads);

  bench::OwnRedis redis;
  bench::Target target;
  target.port = redis.port();
  bench::Admin admin(target);
  const auto lib_put = library_put(target.url(), admin, jobs, connections);
  admin.str("FLUSHALL");
  Server server(binary, target.url(), server_threads);
  const auto http_put = drive(server, admin, jobs, connections, 1, putter);
  const auto http_reserve = drive(server, admin, jobs, connections, 1, worker);
  const auto batched = [batch](auto conn) { return [=](Load& load) { return conn(load, batch); }; };
  Figure http_batch_put, http_batch_reserve;
  if (batch > 0) {
    http_batch_put = drive(server, admin, jobs, connections, 1, batched(batch_putter));
    http_batch_reserve = drive(server, admin, jobs, connections, 1, batched(batch_worker));
  }

  fmt::print(
      "redisched HTTP benchmark (redisched serve --threads {}, {} keep-alive connections, "
      "{} jobs a figure, 100-byte bodies)\n\n",
      server_threads, connections, jobs);
  fmt::print("{:<48} {:>8}   {}\n", "figure", "jobs/s", "CPU us a job: serve, Redis, load");
  const auto row = [&](const std::string& name, const Figure& f, bool ratio) {
    fmt::print("{:<48} {:>8.0f}   {:>5.1f} {:>5.1f} {:>5.1f}", name, f.rate, f.serve_us, f.redis_us,
               f.load_us);
    if (ratio) fmt::print("   {:.2f} of the library's", f.rate / lib_put.rate);
    fmt::print("\n");
  };
  row("library put (put_async, same calls in flight)", lib_put, false);
  row("HTTP put (PUT /v1/topics/t/jobs/id)", http_put, true);
  row("HTTP reserve+ack (two requests a job)", http_reserve, false);
  if (batch == 0) return 0;
  row(fmt::format("HTTP put, {} a request (POST .../put)", batch), http_batch_put, true);
  row(fmt::format("HTTP reserve {0} + ack {0} (POST .../ack)", batch), http_batch_reserve, false);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "redisched_http_bench: %s\n", e.what());
  return 1;
}
