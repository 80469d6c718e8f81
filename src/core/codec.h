// Commands for the Functions library and the meaning of its replies: pure
// functions, no I/O (tested in tests/unit/codec_test.cpp).
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/checks.h"
#include "redis/reply.h"
#include "redisched/error.h"
#include "redisched/job.h"

namespace redisched::core {

// The words of one command. Views must outlive encode(); numbers and other
// computed words are kept here.
class Command {
 public:
  Command() = default;
  // Moves keep the owned words where they are (std::deque); a copy would
  // leave its views pointing into the original, so there is none.
  Command(Command&&) = default;
  Command& operator=(Command&&) = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  Command& add(std::string_view word) {
    words_.push_back(word);
    return *this;
  }
  Command& add_owned(std::string word) {
    owned_.push_back(std::move(word));
    words_.emplace_back(owned_.back());
    return *this;
  }
  Command& add(std::int64_t n) { return add_owned(std::to_string(n)); }
  // FCALL redisched_<op> <number of keys> <the topic's keys>
  Command& fcall(std::string_view op, std::string_view prefix, std::string_view topic);
  // <number of keys> <the topic's keys>
  Command& add_keys(std::string_view prefix, std::string_view topic);
  // Appends the RESP encoding to out.
  void encode(std::string& out) const;
  // The same, of words that are part of a command (no array header).
  void encode_words(std::string& out) const;
  int size() const { return static_cast<int>(words_.size()); }

 private:
  std::vector<std::string_view> words_;
  std::deque<std::string> owned_;
};

// The per-job options of put (DELAY, PRIORITY, ...), as words.
void add_put_options(Command& cmd, const JobSpec& job);
// How many words add_put_options adds.
int put_option_words(const JobSpec& job);

// The Error for a Redis error reply (codes BADARG, BADKEYS, BADSTATE, SHARDED
// -> invalid_argument, BADFORMAT and OLDFORMAT -> bad_format, anything else
// -> server).
Error error_from_reply(const std::string& text);
// OLDFORMAT's message starts so: the topic holds data of an older stored
// format, refused until it is migrated (docs/redis-api.md, "Migrations"; a
// call that meets it migrates the topic and runs once more).
inline constexpr std::string_view kOlderFormat = "an older stored format: ";
bool is_older_format(const Error& e);
// SHARDED's message starts so: the call was meant for the jobs of a topic
// spread over shards (a client that did not know reads the list and calls
// again; is_sharded finds it).
inline constexpr std::string_view kSpreadTopic = "the topic is spread over shards: ";
bool is_sharded(const Error& e);

// Whether a write's answer says it changed nothing (a refusal: the job
// exists, is gone, or is not reserved by this token): such an answer stands
// whatever the replicas did (a WAIT that fell short follows a change only).
inline bool changed_nothing(PutOutcome o) {
  return o == PutOutcome::exists || o == PutOutcome::not_found;
}
inline bool changed_nothing(Outcome o) { return o != Outcome::ok; }
inline bool changed_nothing(const FailResult& r) { return r.outcome != Outcome::ok; }
inline bool changed_nothing(const ReserveResult& r) { return r.jobs.empty(); }
inline bool changed_nothing(bool changed) { return !changed; }
inline bool changed_nothing(const std::string& /*new_id*/) { return false; }
template <class T>
bool changed_nothing(const std::vector<T>& each) {
  for (const auto& one : each) {
    if (!changed_nothing(one)) return false;
  }
  return true;
}

PutOutcome parse_put(const redis::Reply& r);
std::vector<PutOutcome> parse_put_many(const redis::Reply& r);
std::optional<Job> parse_get(const redis::Reply& r);
ReserveResult parse_reserve(const redis::Reply& r, bool reserved);
Outcome parse_outcome_code(std::int64_t code);
Outcome parse_outcome(const redis::Reply& r);
std::vector<Outcome> parse_outcomes(const redis::Reply& r);
FailResult parse_fail(const redis::Reply& r);
TouchResult parse_touch(const redis::Reply& r);
TopicStats parse_stats(const redis::Reply& r);
TopicLimits parse_limits(const redis::Reply& r);
RetryWindow parse_retry_window(const redis::Reply& r);
// One redisched_migrate call's reply, {done, rewritten, read}.
struct MigrateStep {
  Migration did;
  bool done = false;
};
MigrateStep parse_migrate_step(const redis::Reply& r);
ListPage parse_list(const redis::Reply& r);
ScheduleList parse_schedules(const redis::Reply& r);
RequeueResult parse_requeue(const redis::Reply& r);
std::int64_t parse_integer(const redis::Reply& r);

}  // namespace redisched::core
