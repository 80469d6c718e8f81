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

namespace redisched {
enum class TickOutcome;  // core/client_access.h
}

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
    push(word);
    return *this;
  }
  Command& add_owned(std::string word) {
    owned_.push_back(std::move(word));
    push(owned_.back());
    return *this;
  }
  Command& add(std::int64_t n) { return add_owned(std::to_string(n)); }
  // FCALL redisched_<op> <number of keys> <the topic's keys> (without its
  // history key unless history)
  Command& fcall(std::string_view op, std::string_view prefix, std::string_view topic,
                 bool history = true);
  // FCALL redisched_<op> 2 <the worker registry's keys>
  Command& fcall_registry(std::string_view op, std::string_view prefix);
  // <number of keys> <the topic's keys> (without its history key unless history)
  Command& add_keys(std::string_view prefix, std::string_view topic, bool history = true);
  // Appends the RESP encoding to out.
  void encode(std::string& out) const;
  // The same, of words that are part of a command (no array header).
  void encode_words(std::string& out) const;
  int size() const { return static_cast<int>(words_.size()); }

 private:
  // Room for a put's words at the first: the vector grows once, not five
  // times (and a Command that stays empty allocates nothing).
  static constexpr std::size_t kWordsReserved = 32;
  void push(std::string_view word) {
    if (words_.capacity() == 0) words_.reserve(kWordsReserved);
    words_.push_back(word);
  }
  std::vector<std::string_view> words_;
  std::deque<std::string> owned_;
};

// The per-job options of put (DELAY, PRIORITY, ...), as words.
void add_put_options(Command& cmd, const JobSpec& job);
// How many words add_put_options adds.
int put_option_words(const JobSpec& job);

// The error replies an Error can come from, by their first word: the
// library's refusals (docs/redis-api.md, "Conventions") and Redis's "not
// now" answers.
enum class Word : unsigned char {
  none,       // not from an error reply, or from one of another word
  badarg,     // BADARG, BADKEYS: the arguments (or the keys) are wrong
  badstate,   // BADSTATE: the topic cannot take the call as it is
  badformat,  // BADFORMAT: a stored job of a newer format
  oldformat,  // OLDFORMAT: data of an older stored format, to migrate first
  sharded,    // SHARDED: the call was meant for a spread topic's shards
  not_now,    // LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN
  // Not a reply's word: a write done on the primary whose replicas fell
  // short (Options::replicas); the change was made (a refusal is answered
  // as itself).
  short_of_replicas,
};

// The one table of error replies: each word, what it is, and the Errc the
// caller sees (docs/http-api.md quotes it; unit/codec_test checks that).
struct ErrorWord {
  std::string_view word;
  Word is;
  Errc code;
};
inline constexpr ErrorWord kErrorWords[] = {
    {"BADARG", Word::badarg, Errc::invalid_argument},
    {"BADKEYS", Word::badarg, Errc::invalid_argument},
    {"BADSTATE", Word::badstate, Errc::conflict},
    {"BADFORMAT", Word::badformat, Errc::bad_format},
    {"OLDFORMAT", Word::oldformat, Errc::bad_format},
    {"SHARDED", Word::sharded, Errc::conflict},
    {"LOADING", Word::not_now, Errc::connection},
    {"BUSY", Word::not_now, Errc::connection},
    {"MASTERDOWN", Word::not_now, Errc::connection},
    {"TRYAGAIN", Word::not_now, Errc::connection},
    {"CLUSTERDOWN", Word::not_now, Errc::connection},
};

// The Error for a Redis error reply: by kErrorWords, else Errc::server.
Error error_from_reply(const std::string& text);
// The Error for a failure of the link (no reply): its Errc when the link
// said one, else Errc::connection.
Error error_from_link(std::error_code ec, const std::string& text);
// The word an Error came from.
Word word_of(const Error& e);
// OLDFORMAT's message starts so: the topic holds data of an older stored
// format, refused until it is migrated (docs/redis-api.md, "Migrations"; a
// call that meets it migrates the topic and runs once more).
inline constexpr std::string_view kOlderFormat = "an older stored format: ";
inline bool is_older_format(const Error& e) { return word_of(e) == Word::oldformat; }
// SHARDED's message starts so: the call was meant for the jobs of a topic
// spread over shards (a client that did not know reads the list and calls
// again).
inline constexpr std::string_view kSpreadTopic = "the topic is spread over shards: ";
inline bool is_sharded(const Error& e) { return word_of(e) == Word::sharded; }

// Whether a write's answer says it changed nothing (a refusal: the job
// exists, is gone, or is not reserved by this token): such an answer stands
// whatever the replicas did (a WAIT that fell short follows a change only).
// A put that found its job there (exists) vouches for an earlier write,
// which the replicas may not have: a retry's `exists` must be confirmed as
// a create is, or a failover loses a job the producer was told it has.
inline bool changed_nothing(PutOutcome o) { return o == PutOutcome::not_found; }
inline bool changed_nothing(Outcome o) { return o != Outcome::ok; }
inline bool changed_nothing(const FailResult& r) { return r.outcome != Outcome::ok; }
inline bool changed_nothing(const ReserveResult& r) { return r.jobs.empty(); }
inline bool changed_nothing(const ReserveJobResult& r) { return r.outcome != Outcome::ok; }
inline bool changed_nothing(bool changed) { return !changed; }
inline bool changed_nothing(const std::string& /*new_id*/) { return false; }
inline bool changed_nothing(const Job& /*batch after a change*/) { return false; }
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
// A job of reserve's reply (reserved) or pull's.
Reservation parse_reservation(const redis::Reply& r, bool reserved);
ReserveResult parse_reserve(const redis::Reply& r, bool reserved);
ReserveJobResult parse_reserve_job(const redis::Reply& r);
Outcome parse_outcome_code(std::int64_t code);
Outcome parse_outcome(const redis::Reply& r);
std::vector<Outcome> parse_outcomes(const redis::Reply& r);
FailResult parse_fail(const redis::Reply& r);
TouchResult parse_touch(const redis::Reply& r);
TopicStats parse_stats(const redis::Reply& r);
// redisched_history's answer: {now, {t, put, started, done, failed, dead,
// lapsed, wait}...}.
std::vector<HistoryRow> parse_history(const redis::Reply& r);
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
TickOutcome parse_tick(const redis::Reply& r);

}  // namespace redisched::core

namespace redisched::detail {
// Reads and sets an Error's word (error.h keeps it private).
struct ErrorAccess {
  static core::Word word(const Error& e) { return static_cast<core::Word>(e.word_); }
  static void set_word(Error& e, core::Word w) { e.word_ = static_cast<unsigned char>(w); }
};
}  // namespace redisched::detail
