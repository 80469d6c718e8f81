// build/redisched: the command-line face of redisched.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "redisched/error.h"
#include "redisched/version.h"

int main(int argc, char** argv) {
  CLI::App app{"redisched: a delayed/priority job queue on Redis"};
  app.require_subcommand(1);
  // Global options may come after the subcommand too: redisched serve --redis URL.
  app.fallthrough();
  redisched::cli::GlobalOptions global;
  redisched::cli::Action selected;  // what the parsed subcommand will do
  app.add_option("--redis", global.redis_url,
                 "Redis URL: redis://[user:password@]host[:port][/db], rediss://..., "
                 "unix:///path; for a Redis Cluster, the URL of any primary; for Redis "
                 "Sentinel, redis+sentinel://[user:password@]host[:port][,host[:port]...]/"
                 "service[?sentinel_password=...]. Without it: "
                 "the Redis of a serve running on --data-dir, else a redis-server started "
                 "there for the command")
      ->envname("REDISCHED_REDIS");
  app.add_option("--data-dir", global.data_dir, "where the embedded Redis keeps its data")
      ->envname("REDISCHED_DATA_DIR")
      ->capture_default_str();
  app.add_option("--prefix", global.prefix, "key prefix")->capture_default_str();
  app.add_option("--replicas", global.replicas,
                 "writes of jobs answer once this many replicas have them (WAIT); 0: once the "
                 "primary has them")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  app.add_option("--replica-timeout", global.replica_timeout_ms,
                 "how long a write waits for its replicas before it fails, ms")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{9999}))
      ->capture_default_str();
  app.set_config("--config", "",
                 "read options from this TOML/INI file: global ones as key = value, serve's "
                 "under [serve]");
  app.add_flag("--json", global.json, "print JSON (one object per line) for scripts");
  redisched::cli::add_job_commands(app, selected);
  redisched::cli::add_reservation_commands(app, selected);
  redisched::cli::add_topic_commands(app, selected);
  redisched::cli::add_transfer_commands(app, selected);
  redisched::cli::add_schedule_commands(app, selected);
  redisched::cli::add_serve_command(app, selected);
  redisched::cli::add_bench_command(app, selected);
  app.set_version_flag(
      "--version", fmt::format("redisched {} (Functions library version {})", redisched::version(),
                               redisched::functions_library_version()));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every refusal exits 1, as failures do.
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    if (!selected) return 2;
    redisched::cli::Session session(global);
    return selected(session);
  } catch (const redisched::Error& e) {
    std::cerr << "redisched: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "redisched: " << e.what() << "\n";
    return 1;
  }
}
