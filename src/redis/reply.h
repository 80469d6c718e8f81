// A Redis reply (RESP2), as the connection hands it to its caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace redisched::redis {

struct Reply {
  enum class Type { nil, integer, string, status, error, array };
  Type type = Type::nil;
  std::int64_t integer = 0;
  std::string str;  // string, status and error replies
  std::vector<Reply> elements;

  bool is_error() const noexcept { return type == Type::error; }
  bool is_nil() const noexcept { return type == Type::nil; }
};

}  // namespace redisched::redis
