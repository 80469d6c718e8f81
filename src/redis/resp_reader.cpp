#include "redis/resp_reader.h"

#include <hiredis/read.h>

#include <memory>
#include <new>
#include <string>

#include "redisched/error.h"

namespace redisched::redis {
namespace {

// Where a value goes: a new root, or its slot in the parent array, which
// createArray sized up front (so the slot's address is stable).
Reply* place(const redisReadTask* task) {
  if (task->parent == nullptr) return new (std::nothrow) Reply();
  auto* parent = static_cast<Reply*>(task->parent->obj);
  return &parent->elements[static_cast<std::size_t>(task->idx)];
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  Reply* r = place(task);
  if (r == nullptr) return nullptr;
  r->type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::error
            : task->type == REDIS_REPLY_STATUS ? Reply::Type::status
                                               : Reply::Type::string;
  r->str.assign(str, len);
  return r;
}

void* create_array(const redisReadTask* task, int elements) {
  if (elements < 0 || static_cast<std::size_t>(elements) > RespReader::kMaxElements) {
    return nullptr;  // hiredis reports it as an error
  }
  Reply* r = place(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::array;
  r->elements.resize(static_cast<std::size_t>(elements));
  return r;
}

void* create_integer(const redisReadTask* task, long long value) {
  Reply* r = place(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::integer;
  r->integer = value;
  return r;
}

void* create_nil(const redisReadTask* task) {
  Reply* r = place(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::nil;
  return r;
}

// hiredis frees only roots (an unfinished one on error, and ours after
// redisReaderGetReply hands it over); a root owns its elements.
void free_object(void* obj) { delete static_cast<Reply*>(obj); }

redisReplyObjectFunctions kBuildReplies = {create_string, create_array, create_integer, create_nil,
                                           free_object};

}  // namespace

RespReader::RespReader() : r_(redisReaderCreateWithFunctions(&kBuildReplies)) {
  if (r_ == nullptr) throw std::bad_alloc();
  r_->maxbuf = 0;  // keep no idle buffer limit: replies can be large
}

RespReader::~RespReader() { redisReaderFree(r_); }

void RespReader::feed(const char* data, std::size_t n) {
  if (redisReaderFeed(r_, data, n) != REDIS_OK) fail();
}

std::optional<Reply> RespReader::next() {
  void* raw = nullptr;
  if (redisReaderGetReply(r_, &raw) != REDIS_OK) fail();
  if (raw == nullptr) return std::nullopt;
  std::unique_ptr<Reply> root(static_cast<Reply*>(raw));
  return std::move(*root);
}

void RespReader::fail() const {
  throw Error(Errc::protocol, std::string("unreadable reply from Redis: ") + r_->errstr);
}

}  // namespace redisched::redis
