// A Redis reply (RESP2), as the connection hands it to its caller.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <system_error>
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

// Called once per command. On a transport failure ec is set
// (Errc::connection, timeout, closed, protocol) and reply.str says what
// happened; otherwise ec is clear and reply is Redis's answer (which may be
// an error reply).
using ReplyHandler = std::function<void(std::error_code ec, Reply reply)>;

}  // namespace redisched::redis
