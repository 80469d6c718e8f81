#include "core/coalesce.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "redisched/limits.h"

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

bool put_takes(std::string_view id, const JobSpec& job) {
  const auto within = [](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    return v >= lo && v <= hi;
  };
  return !id.empty() && job.after.empty() && !(job.delay && job.due_at_ms) &&
         (!job.delay || within(job.delay->count(), 0, limits::kDelayMax)) &&
         (!job.due_at_ms || within(*job.due_at_ms, 0, limits::kMsMax)) &&
         within(job.priority, limits::kPrioMin, limits::kPrioMax) &&
         (!job.ttr || within(job.ttr->count(), 0, limits::kTtrMax)) &&
         (!job.max_attempts || within(*job.max_attempts, 1, limits::kAttemptsMax)) &&
         within(job.keep.count(), 0, limits::kDelayMax);
  // The id's length and characters, the body's size and the backoff:
  // check_spec.
}

bool ack_takes(std::string_view id, std::uint64_t token) {
  const auto control = [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  };
  return !id.empty() && id.size() <= static_cast<std::size_t>(limits::kIdMax) &&
         std::none_of(id.begin(), id.end(), control) &&
         token <= static_cast<std::uint64_t>(limits::kSeqMax);
}

redis::Batchable batchable(const redis::BatchKind& kind, std::string_view prefix,
                           std::string_view topic, bool history, const Command& single,
                           const Command& part, const Command& tail) {
  redis::Batchable b;
  b.kind = &kind;
  single.encode(b.single);
  Command head;
  head.add_keys(prefix, topic, history);
  head.encode_words(b.head);
  b.head_words = head.size();
  part.encode_words(b.part);
  b.part_words = part.size();
  tail.encode_words(b.tail);
  b.tail_words = tail.size();
  return b;
}

}  // namespace redisched::core
