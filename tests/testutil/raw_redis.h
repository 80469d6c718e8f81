// A plain blocking Redis connection (hiredis), to drive the Functions library
// without the Client, as a user of any language would.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

namespace redisched::test {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RawRedis {
 public:
  explicit RawRedis(int port);
  // Over a unix socket (the embedded Redis of redisched serve).
  explicit RawRedis(const std::string& unix_path);
  ~RawRedis();
  RawRedis(const RawRedis&) = delete;
  RawRedis& operator=(const RawRedis&) = delete;

  ReplyPtr call(const std::vector<std::string>& args);
  // FCALL redisched_<op> <the topic's keys, from core/keys.h> args...
  ReplyPtr fcall(const std::string& op, const std::string& topic,
                 const std::vector<std::string>& args);
  // The next reply the server sends: on a subscribed connection, its next
  // message (blocks until one comes).
  ReplyPtr next();

 private:
  redisContext* ctx_;
};

}  // namespace redisched::test
