// What the integration suites put and whom they connect: one definition, so
// that their sources can share a translation unit (the unity build).
#pragma once

#include <string>
#include <utility>

#include "redisched/client.h"
#include "testutil/redis_server.h"

namespace redisched::test {

// A Client's options for the suite's target (a Redis, or a Redis Cluster).
inline ClientOptions client_options() {
  ClientOptions o;
  o.redis_url = target_url();
  return o;
}

inline JobSpec job(std::string id, std::string body = "body") {
  JobSpec s;
  s.id = std::move(id);
  s.body = std::move(body);
  return s;
}

inline JobSpec job(std::string id, int priority) {
  JobSpec s = job(std::move(id));
  s.priority = priority;
  return s;
}

}  // namespace redisched::test
