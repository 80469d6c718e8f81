// serve: the HTTP server, on the embedded Redis unless --redis names one.
#include <memory>

#include "cli/commands.h"
#include "redisched/limits.h"
#include "server/http.h"
#include "server/push.h"
#include "server/serve.h"

namespace redisched::cli {
namespace {

// serve's flags (some also environment variables REDISCHED_<NAME>, and any
// of them in the [serve] section of the --config file).
void add_serve_options(CLI::App& s, server::ServeOptions& o) {
  s.add_option("--listen", o.listen,
               "address:port to listen on; a host name listens on each of its addresses "
               "(localhost: 127.0.0.1 and ::1)")
      ->envname("REDISCHED_LISTEN")
      ->capture_default_str();
  s.add_option("--threads", o.threads,
               "threads of the server: HTTP, its Redis calls, webhooks and the sweeper share them")
      ->envname("REDISCHED_THREADS")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  s.add_option("--token", o.token,
               "require \"Authorization: Bearer TOKEN\" on every route but /healthz (an admin "
               "token for every topic; --tokens adds scoped ones)")
      ->envname("REDISCHED_TOKEN");
  s.add_option("--tokens", o.tokens_file,
               "a file of scoped tokens, one a line: ROLE TOKEN [TOPIC_PREFIX], ROLE read, "
               "produce, consume or admin (docs/security.md)")
      ->envname("REDISCHED_TOKENS")
      ->check(CLI::ExistingFile);
  s.add_option("--webhook", o.webhooks,
               "TOPIC=URL: POST each due job of TOPIC to URL, http:// or https:// (2xx acks it); "
               "repeatable")
      ->envname("REDISCHED_WEBHOOK");
  s.add_option("--webhook-allow", o.webhook_allow,
               "HOST, HOST:PORT or *.DOMAIN[:PORT] that webhooks may reach (any other is "
               "refused, 403); repeatable; none: any")
      ->envname("REDISCHED_WEBHOOK_ALLOW");
  s.add_option("--webhook-ca", o.webhook_ca,
               "CA certificates (PEM) that https webhooks' certificates must chain to "
               "(default: the system's)")
      ->envname("REDISCHED_WEBHOOK_CA")
      ->check(CLI::ExistingFile);
  s.add_option("--webhook-concurrency", o.webhook_concurrency, "deliveries in flight per webhook")
      ->check(CLI::Range(1, server::kWebhookConcurrencyMax))
      ->capture_default_str();
  s.add_option("--webhook-timeout", o.webhook_timeout_ms,
               "ms a webhook may take to answer (counts against the job's time-to-run)")
      ->check(CLI::Range(std::int64_t{1}, server::kWebhookTimeoutMaxMs))
      ->capture_default_str();
  s.add_option("--max-request", o.max_request, "largest request body, bytes")
      ->check(CLI::Range(1024, 1 << 30))
      ->capture_default_str();
  s.add_option("--max-header", o.max_header,
               "largest request head (request line and headers), bytes; also bounds chunk-size "
               "lines and trailers")
      ->check(CLI::Range(std::size_t{1024}, server::kMaxHeaderLimit))
      ->capture_default_str();
  s.add_option("--idle-timeout", o.idle_timeout_ms,
               "ms an idle keep-alive connection is kept (also: ms a request body may take)")
      ->check(CLI::Range(100, 3600000))
      ->capture_default_str();
  s.add_option("--header-timeout", o.header_timeout_ms,
               "ms a request head may take once its first byte came (slow clients are closed)")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  s.add_option("--max-connections", o.max_connections,
               "connections served at once; more are answered 503 and closed")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  s.add_option("--max-wait", o.max_wait_ms, "longest long-poll a reserve may ask for, ms")
      ->check(CLI::Range(0, 3600000))
      ->capture_default_str();
  s.add_option("--shutdown-timeout", o.shutdown_timeout_ms,
               "ms that requests and deliveries in flight get to finish on SIGTERM")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  s.add_option("--beanstalk", o.beanstalk,
               "HOST:PORT to serve beanstalkd's protocol on too (beanstalkd's port is 11300); "
               "it takes no tokens, so a non-loopback HOST needs --beanstalk-any-address "
               "(docs/beanstalkd.md)")
      ->envname("REDISCHED_BEANSTALK");
  s.add_option("--beanstalk-max-job-size", o.beanstalk_max_job_size,
               "largest job body a beanstalkd client may put, bytes (beanstalkd's -z)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{limits::kBodyMaxDefault}))
      ->capture_default_str();
  s.add_flag("--beanstalk-any-address", o.beanstalk_any_address,
             "let --beanstalk listen on a non-loopback address: anyone who reaches it may put, "
             "take and delete jobs of every topic");
  s.add_option("--log-level", o.log_level, "trace, debug, info, warn, error (requests: debug)")
      ->envname("REDISCHED_LOG_LEVEL")
      ->capture_default_str();
}

}  // namespace

void add_serve_command(CLI::App& app, Action& selected) {
  struct Args {
    server::ServeOptions serve;
    std::string fsync = "everysec";
  };
  auto a = std::make_shared<Args>();
  auto* serve = app.add_subcommand(
      "serve", "run the HTTP server (with its own redis-server unless --redis is given)");
  add_serve_options(*serve, a->serve);
  serve->add_option("--fsync", a->fsync, "the embedded Redis's appendfsync: always, everysec, no")
      ->check(CLI::IsMember({"always", "everysec", "no"}))
      ->capture_default_str();
  serve->callback([a, &selected] {
    selected = [a](Session& s) {
      server::RedisChoice r;
      r.url = s.options().redis_url;
      r.data_dir = s.options().data_dir;
      r.prefix = s.options().prefix;
      r.replicas = s.options().replicas;
      r.replica_timeout_ms = s.options().replica_timeout_ms;
      r.fsync = a->fsync;
      return server::serve(a->serve, r);
    };
  });
}

}  // namespace redisched::cli
