// Coalescing: single calls that Redis can take as one batched call (puts as
// one putmany, acks as one ackmany, reserves of one job as one reserve of
// many). When such calls of one kind and topic are queued one right after
// another on a connection, waiting for the same write, the pipeline sends
// them as one command and hands each caller its own part of the reply. A
// lone call goes out as itself: nothing waits for company.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.h"

namespace redisched::redis {

// What calls of one kind share: the batched function and how its reply
// divides among the calls. One static instance per kind (core/batch.cpp).
class BatchKind {
 public:
  virtual ~BatchKind() = default;
  // The batched call is FCALL <function> <head> <count> <parts...> <tail>.
  virtual std::string_view function() const = 0;
  // The replies of the n calls, in order, from the batched call's reply (not
  // an error reply). False when it has not the expected shape.
  virtual bool split(Reply reply, std::size_t n, std::vector<Reply>& parts) const = 0;
};

// One call that may be coalesced. The words are RESP-encoded without an
// array header (redis::append_words); calls merge when their kind, head and
// tail are equal.
struct Batchable {
  const BatchKind* kind = nullptr;
  std::string single;  // the whole command, sent when the call goes alone
  std::string head;    // the batched call's words before its count: numkeys, keys
  int head_words = 0;
  std::string part;  // this call's words in the batched call
  int part_words = 0;
  std::string tail;  // words after the parts, the same for every call: options
  int tail_words = 0;
};

// The most calls in one batched call. Not the library's 1000: with one
// batch of everything in flight, Redis would wait while the client handles
// its answers, and the client while Redis works; several smaller ones keep
// both busy (put, single calls, 512 in flight: 150,000/s with 1000,
// 250,000/s with 256; bench/HISTORY.md).
inline constexpr std::size_t kMaxCoalesced = 256;
// Nor more than this many bytes of parts (a call larger goes alone): Redis
// runs a batched call in one go, and large bodies gain nothing by it.
inline constexpr std::size_t kMaxCoalescedBytes = 1 << 20;

}  // namespace redisched::redis
