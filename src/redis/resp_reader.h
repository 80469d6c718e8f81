// RESP replies from bytes: hiredis's reader with its reply-object callbacks
// building redis::Reply directly, once (no hiredis reply tree to copy).
// Sans-io: feed bytes, take complete replies; tested and fuzzed without a
// socket.
#pragma once

#include <cstddef>
#include <optional>

#include "redis/reply.h"

struct redisReader;

namespace redisched::redis {

class RespReader {
 public:
  // Arrays longer than this are refused as unreadable (a reply of the
  // library is at most a few thousand elements; this bounds what a broken
  // or hostile peer can make the client allocate).
  static constexpr std::size_t kMaxElements = 1 << 16;

  RespReader();
  ~RespReader();
  RespReader(const RespReader&) = delete;
  RespReader& operator=(const RespReader&) = delete;

  // Throws Error(Errc::protocol) when the bytes are not RESP.
  void feed(const char* data, std::size_t n);
  // The next complete reply, if one is buffered; throws Error(Errc::protocol).
  std::optional<Reply> next();

 private:
  [[noreturn]] void fail() const;
  redisReader* r_;
};

}  // namespace redisched::redis
