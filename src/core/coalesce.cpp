#include "core/coalesce.h"

#include <utility>
#include <vector>

namespace redisched::core {
namespace {

using redis::Reply;

// putmany and ackmany answer an array of the single call's answers.
class OnePerCall final : public redis::BatchKind {
 public:
  explicit OnePerCall(std::string_view function) : function_(function) {}
  std::string_view function() const override { return function_; }
  bool split(Reply reply, std::size_t n, std::vector<Reply>& parts) const override {
    if (reply.type != Reply::Type::array || reply.elements.size() != n) return false;
    parts = std::move(reply.elements);
    return true;
  }

 private:
  std::string_view function_;
};

// reserve answers {now, next, paused, job...}: the i-th call gets the i-th
// job, if any, as a reserve of one would have answered: next 0 ("call again
// at once") beside a job, the batch's next without one.
class Reserve final : public redis::BatchKind {
 public:
  std::string_view function() const override { return "redisched_reserve"; }
  bool split(Reply reply, std::size_t n, std::vector<Reply>& parts) const override {
    if (reply.type != Reply::Type::array || reply.elements.size() < 3 ||
        reply.elements.size() - 3 > n) {
      return false;
    }
    auto& e = reply.elements;
    const std::size_t jobs = e.size() - 3;
    parts.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      Reply& p = parts[i];
      p.type = Reply::Type::array;
      p.elements.reserve(i < jobs ? 4 : 3);
      p.elements.push_back(e[0]);
      if (i < jobs) {
        Reply zero;
        zero.type = Reply::Type::integer;
        p.elements.push_back(std::move(zero));
      } else {
        p.elements.push_back(e[1]);
      }
      p.elements.push_back(e[2]);
      if (i < jobs) p.elements.push_back(std::move(e[3 + i]));
    }
    return true;
  }
};

}  // namespace

const redis::BatchKind& put_kind() {
  static const OnePerCall kind("redisched_putmany");
  return kind;
}

const redis::BatchKind& ack_kind() {
  static const OnePerCall kind("redisched_ackmany");
  return kind;
}

const redis::BatchKind& reserve_kind() {
  static const Reserve kind;
  return kind;
}

redis::Batchable batchable(const redis::BatchKind& kind, std::string_view prefix,
                           std::string_view topic, const Command& single, const Command& part,
                           const Command& tail) {
  redis::Batchable b;
  b.kind = &kind;
  single.encode(b.single);
  Command head;
  head.add_keys(prefix, topic);
  head.encode_words(b.head);
  b.head_words = head.size();
  part.encode_words(b.part);
  b.part_words = part.size();
  tail.encode_words(b.tail);
  b.tail_words = tail.size();
  return b;
}

}  // namespace redisched::core
