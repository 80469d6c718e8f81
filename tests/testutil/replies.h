// Redis replies built by hand, for tests that decode or route them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "redis/reply.h"

namespace redisched::test {

inline redis::Reply integer(std::int64_t n) {
  redis::Reply r;
  r.type = redis::Reply::Type::integer;
  r.integer = n;
  return r;
}

inline redis::Reply text(std::string s, redis::Reply::Type type = redis::Reply::Type::string) {
  redis::Reply r;
  r.type = type;
  r.str = std::move(s);
  return r;
}

inline redis::Reply array(std::vector<redis::Reply> elements) {
  redis::Reply r;
  r.type = redis::Reply::Type::array;
  r.elements = std::move(elements);
  return r;
}

}  // namespace redisched::test
