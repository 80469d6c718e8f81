#include "server/serve.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "embedded/redis_process.h"
#include "redisched/asio.h"
#include "redisched/limits.h"
#include "redisched/runtime.h"
#include "redisched/scheduler.h"
#include "server/api.h"
#include "server/beanstalk.h"
#include "server/census.h"
#include "server/dashboard.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/push.h"
#include "server/sweeper.h"
#include "server/wake_hub.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;

std::pair<std::string, std::uint16_t> split_listen(const std::string& listen,
                                                   const std::string& flag = "--listen") {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error(flag + " wants ADDRESS:PORT, got " + listen);
  int port = -1;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535) throw std::runtime_error(flag + ": bad port in " + listen);
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, static_cast<std::uint16_t>(port)};
}

// The drain after a signal, within --shutdown-timeout: nothing more is
// handed out or accepted; long-polls, waits and event streams answer at
// once; keep-alive clients are told to close with their next answer; the
// requests and webhook deliveries in flight finish. Connections still open
// at the deadline are closed.
void drain(const ServeOptions& o, ApiContext& ctx, HttpServer& server, BeanstalkServer* beanstalk,
           Sweeper& sweeper, Scheduler& scheduler, Pusher& pusher) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(o.shutdown_timeout_ms);
  const auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                    std::chrono::milliseconds(0));
  };
  ctx.stop();
  server.stop();
  if (beanstalk) beanstalk->stop();
  const auto open = [&] {
    return server.connections() + (beanstalk ? beanstalk->connections() : 0);
  };
  sweeper.stop(std::chrono::milliseconds(0));
  scheduler.stop();
  pusher.stop(left());
  // Connections still open may bring the acks of jobs they hold.
  while (open() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (open() > 0) {
    spdlog::warn("{} connections still open after --shutdown-timeout: closing them", open());
    server.abort();
    if (beanstalk) beanstalk->abort();
    const auto grace = Clock::now() + std::chrono::seconds(1);
    while (open() > 0 && Clock::now() < grace) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  sweeper.stop(std::max(left(), std::chrono::milliseconds(100)));
}

// SIGINT and SIGTERM, blocked in every thread from serve's first step to the
// process's exit (the threads it starts inherit the mask) and taken with
// sigwait: the first starts the drain; later ones stay pending, never
// delivered. (asio's signal_set puts the default action, death, back when it
// goes, which let a second SIGTERM kill serve as it stopped its Redis.)
class StopSignals {
 public:
  StopSignals() {
    ::sigemptyset(&set_);
    ::sigaddset(&set_, SIGINT);
    ::sigaddset(&set_, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  // Blocks until a signal (one that came before the call counts).
  int wait() const {
    int sig = 0;
    ::sigwait(&set_, &sig);
    return sig;
  }

 private:
  sigset_t set_{};
};

// The beanstalkd face's options, checked before anything starts; nullopt
// without --beanstalk.
std::optional<BeanstalkOptions> beanstalk_choice(const ServeOptions& o, const RedisChoice& r) {
  if (o.beanstalk.empty()) return std::nullopt;
  const auto [address, port] = split_listen(o.beanstalk, "--beanstalk");
  if (!o.beanstalk_any_address && !loopback_only(address)) {
    throw std::runtime_error("--beanstalk " + o.beanstalk +
                             ": beanstalkd's protocol has no tokens; listen on a loopback "
                             "address, or add --beanstalk-any-address to serve every job of "
                             "every topic to whoever reaches it");
  }
  if (o.beanstalk_max_job_size > r.max_body) {
    throw std::runtime_error("--beanstalk-max-job-size is over the largest body (" +
                             std::to_string(r.max_body) + " bytes)");
  }
  BeanstalkOptions bo;
  bo.address = address;
  bo.port = port;
  bo.max_job_size = o.beanstalk_max_job_size;
  return bo;
}

// Connections take descriptors: as many as the hard limit allows (a
// beanstalkd face with thousands of clients would run out of 1024).
void raise_open_files() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// Everything but the embedded Redis, from start to the end of the drain.
int run(const ServeOptions& o, const RedisChoice& r, const std::string& url,
        const std::string& embedded_dir, Access access, const StopSignals& signals) {
  const auto [address, port] = split_listen(o.listen);
  const auto beanstalk_options = beanstalk_choice(o, r);
  // Every part of the server runs on these threads: the HTTP connections,
  // their Redis calls, the webhooks' workers, the sweeper.
  auto runtime = std::make_shared<Runtime>(o.threads);
  ClientOptions co;
  co.redis_url = url;
  co.prefix = r.prefix;
  co.max_body = r.max_body;
  co.replicas = r.replicas;
  co.replica_timeout = Millis{r.replica_timeout_ms};
  co.runtime = runtime;
  Client client(co);

  asio::io_context& first = shard_io(*runtime, 0);
  WakeHub hub(client, asio::make_strand(first));
  Metrics metrics;
  Census census(client);
  Pusher pusher(client, metrics, o.webhook_ca);
  pusher.allow(o.webhook_allow);
  for (const auto& flag : o.webhooks) {
    auto [topic, sub] = parse_webhook_flag(flag);
    sub.concurrency = o.webhook_concurrency;
    sub.timeout = std::chrono::milliseconds(o.webhook_timeout_ms);
    pusher.subscribe(topic, sub);
  }
  Scheduler scheduler(client);
  Sweeper sweeper(first, client, census, metrics);
  sweeper.run_schedules(scheduler);
  sweeper.start();
  ApiContext ctx{client, hub, metrics, pusher, census, sweeper, std::move(access), o.max_wait_ms};

  HttpOptions ho;
  ho.address = address;
  ho.port = port;
  ho.body_limit = o.max_request;
  ho.header_limit = o.max_header;
  ho.idle_timeout = std::chrono::milliseconds(o.idle_timeout_ms);
  ho.body_timeout = std::chrono::milliseconds(o.idle_timeout_ms);
  ho.header_timeout = std::chrono::milliseconds(o.header_timeout_ms);
  ho.max_connections = o.max_connections;
  ho.may_wait = may_wait;
  HttpServer server(
      *runtime, ho, [&ctx](Request& req) { return route(ctx, req); },
      [&ctx](Request& req, boost::beast::tcp_stream& s, std::string& owed) {
        return events_stream(ctx, req, s, owed);
      });
  // The beanstalkd listener binds first: if it cannot, nothing serves yet.
  std::unique_ptr<BeanstalkServer> beanstalk;
  if (beanstalk_options) {
    beanstalk = std::make_unique<BeanstalkServer>(*runtime, *beanstalk_options, ctx);
    beanstalk->start();
  }
  server.start();
  // The first line on stdout, for scripts (and tests that listen on port 0).
  std::cout << "redisched serve listening on http://" << address << ":" << server.port()
            << " (Redis " << (embedded_dir.empty() ? url : "embedded, " + embedded_dir) << ")"
            << std::endl;
  if (beanstalk) {
    std::cout << "beanstalkd's protocol on " << beanstalk_options->address << ":"
              << beanstalk->port() << std::endl;
  }

  // This thread waits for SIGINT or SIGTERM, then drains.
  const int sig = signals.wait();
  const auto began = std::chrono::steady_clock::now();
  spdlog::info("signal {}: stopping", sig);
  drain(o, ctx, server, beanstalk.get(), sweeper, scheduler, pusher);
  // Nothing is left running now: what still waits (a Redis connection's
  // reader) is destroyed with the shards, before the objects it refers to.
  runtime->stop();
  spdlog::info("drained in {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - began)
                                       .count());
  return 0;
}

}  // namespace

int serve(const ServeOptions& o, const RedisChoice& r) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  // From here on a signal drains (at once, if it came during the start).
  const StopSignals signals;
  raise_open_files();
  // The tokens first: a bad --tokens file starts nothing.
  Access access = Access::from(o.token, o.tokens_file);
  std::unique_ptr<embedded::RedisProcess> embedded;
  std::string url = r.url;
  if (url.empty()) {
    embedded =
        std::make_unique<embedded::RedisProcess>(embedded::embedded_default(r.data_dir, r.fsync));
    url = embedded->unix_url();
    spdlog::info("started redis-server (pid {}) with its data in {}", embedded->pid(), r.data_dir);
  }
  const int status = run(o, r, url, embedded ? r.data_dir : "", std::move(access), signals);
  if (embedded) {
    // Its append-only file written and its socket gone before we exit, so
    // that a serve started right after us finds the data dir free.
    const pid_t pid = embedded->pid();
    embedded->stop();
    spdlog::info("redis-server (pid {}) exited", pid);
  }
  spdlog::info("stopped");
  return status;
}

}  // namespace redisched::server
