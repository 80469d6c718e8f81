#include "testutil/raw_redis.h"

#include <stdexcept>

#include "core/keys.h"

namespace redisched::test {

RawRedis::RawRedis(int port) : ctx_(redisConnect("127.0.0.1", port)) {
  if (ctx_ == nullptr || ctx_->err != 0) throw std::runtime_error("cannot connect to redis");
}

RawRedis::RawRedis(const std::string& unix_path) : ctx_(redisConnectUnix(unix_path.c_str())) {
  if (ctx_ == nullptr || ctx_->err != 0) throw std::runtime_error("cannot connect to " + unix_path);
}

RawRedis::~RawRedis() { redisFree(ctx_); }

ReplyPtr RawRedis::call(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  void* r = redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
  if (r == nullptr) throw std::runtime_error(std::string("redis: ") + ctx_->errstr);
  return ReplyPtr(static_cast<redisReply*>(r));
}

ReplyPtr RawRedis::next() {
  void* r = nullptr;
  if (redisGetReply(ctx_, &r) != REDIS_OK || r == nullptr) {
    throw std::runtime_error(std::string("redis: ") + ctx_->errstr);
  }
  return ReplyPtr(static_cast<redisReply*>(r));
}

ReplyPtr RawRedis::fcall(const std::string& op, const std::string& topic,
                         const std::vector<std::string>& args) {
  const auto keys = core::topic_keys("redisched", topic);
  std::vector<std::string> all = {"FCALL", "redisched_" + op, std::to_string(keys.size())};
  all.insert(all.end(), keys.begin(), keys.end());
  all.insert(all.end(), args.begin(), args.end());
  return call(all);
}

}  // namespace redisched::test
