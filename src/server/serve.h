// redisched serve: wires the embedded Redis (or --redis), the Client, the
// HTTP server, push delivery and metrics, and runs until SIGINT/SIGTERM.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redisched/limits.h"

namespace redisched::server {

struct ServeOptions {
  std::string listen = "localhost:7171";  // a name listens on each of its addresses
  int threads = 2;
  std::string token;                       // one admin token for every topic
  std::string tokens_file;                 // scoped tokens (access.h), one a line
  std::vector<std::string> webhooks;       // TOPIC=URL
  std::vector<std::string> webhook_allow;  // HOST[:PORT] webhooks may reach; none: any
  std::string webhook_ca;                  // CAs (PEM) for https webhooks; empty: the system\'s
  int webhook_concurrency = 10;
  std::int64_t webhook_timeout_ms = 10000;
  std::size_t max_request = 2 << 20;
  std::size_t max_header = 16 << 10;
  std::int64_t idle_timeout_ms = 60000;
  std::int64_t header_timeout_ms = 10000;
  int max_connections = 1024;
  std::int64_t max_wait_ms = 60000;
  std::int64_t shutdown_timeout_ms = 10000;
  std::string log_level = "info";
  // The beanstalkd face (beanstalk.h): HOST:PORT, empty for none. It has no
  // tokens: it listens on a loopback address only, unless
  // beanstalk_any_address says the network in between is trusted.
  std::string beanstalk;
  std::size_t beanstalk_max_job_size = 65535;
  bool beanstalk_any_address = false;
};

// Where Redis is: --redis, or the embedded default in data_dir.
struct RedisChoice {
  std::string url;  // given with --redis (or REDISCHED_REDIS); empty: embedded
  std::string data_dir = "redisched-data";
  std::string fsync = "everysec";
  std::string prefix = "redisched";
  std::size_t max_body = static_cast<std::size_t>(limits::kBodyMaxDefault);
  int replicas = 0;  // ClientOptions::replicas and replica_timeout
  std::int64_t replica_timeout_ms = 1000;
};

// Runs the server; returns the exit status.
int serve(const ServeOptions& o, const RedisChoice& redis);

}  // namespace redisched::server
