#include "core/codec.h"

#include <gtest/gtest.h>

#include "core/coalesce.h"
#include "redisched/limits.h"
#include "testutil/replies.h"

namespace redisched::core {
namespace {

using redis::Reply;

using test::array;
using test::integer;
// A string (or, with t, a status or error) reply.
Reply str(std::string s, Reply::Type t = Reply::Type::string) {
  return test::text(std::move(s), t);
}

// A call the library would refuse is not coalesced (its refusal would be
// the whole batch's): the library's limits, at their edges.
TEST(CodecTest, OnlyCallsTheLibraryTakesAreCoalesced) {
  JobSpec j;
  j.id = "a";
  EXPECT_TRUE(put_takes("a", j));
  EXPECT_FALSE(put_takes("", j)) << "an empty id";
  j.priority = limits::kPrioMax;
  EXPECT_TRUE(put_takes("a", j));
  j.priority = limits::kPrioMax + 1;
  EXPECT_FALSE(put_takes("a", j));
  j.priority = limits::kPrioMin;  // (library version 37)
  EXPECT_TRUE(put_takes("a", j));
  j.priority = limits::kPrioMin - 1;
  EXPECT_FALSE(put_takes("a", j));
  j.priority = 0;
  j.delay = Millis(limits::kDelayMax + 1);
  EXPECT_FALSE(put_takes("a", j));
  j.delay = Millis(5);
  j.due_at_ms = 5;
  EXPECT_FALSE(put_takes("a", j)) << "DELAY and AT";
  j.delay.reset();
  j.due_at_ms = limits::kMsMax + 1;
  EXPECT_FALSE(put_takes("a", j));
  j.due_at_ms.reset();
  j.ttr = Millis(0);
  EXPECT_TRUE(put_takes("a", j)) << "TTR 0: at most once";
  j.ttr = Millis(limits::kTtrMax + 1);
  EXPECT_FALSE(put_takes("a", j));
  j.ttr.reset();
  j.max_attempts = 0;
  EXPECT_FALSE(put_takes("a", j));
  j.max_attempts = static_cast<int>(limits::kAttemptsMax);
  EXPECT_TRUE(put_takes("a", j));

  EXPECT_TRUE(ack_takes("a", 1));
  EXPECT_FALSE(ack_takes("", 1));
  EXPECT_FALSE(ack_takes("a\tb", 1));
  EXPECT_FALSE(ack_takes(std::string(limits::kIdMax + 1, 'a'), 1));
  EXPECT_FALSE(ack_takes("a", static_cast<std::uint64_t>(limits::kSeqMax) + 1));
}

TEST(CodecTest, PutCodes) {
  EXPECT_EQ(parse_put(integer(1)), PutOutcome::created);
  EXPECT_EQ(parse_put(integer(2)), PutOutcome::updated);
  EXPECT_EQ(parse_put(integer(-1)), PutOutcome::exists);
  EXPECT_EQ(parse_put(integer(0)), PutOutcome::not_found);
  EXPECT_THROW(parse_put(integer(7)), Error);
}

TEST(CodecTest, OutcomeCodes) {
  auto v = parse_outcomes(array({integer(1), integer(0), integer(-2), integer(-3)}));
  EXPECT_EQ(v, (std::vector<Outcome>{Outcome::ok, Outcome::not_found, Outcome::wrong_state,
                                     Outcome::stale_token}));
}

TEST(CodecTest, ReserveReply) {
  auto r = parse_reserve(array({integer(1000), integer(0), integer(0),
                                array({str("a"), str("body"), integer(42), integer(1), integer(5),
                                       integer(7), integer(900), integer(950), integer(31000)})}),
                         true);
  EXPECT_EQ(r.now_ms, 1000);
  EXPECT_EQ(r.next_ms, 0);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].id, "a");
  EXPECT_EQ(r.jobs[0].token, 42u);
  EXPECT_EQ(r.jobs[0].priority, 7);
  EXPECT_EQ(r.jobs[0].deadline_ms, 31000);
}

TEST(CodecTest, JobFields) {
  auto j = parse_get(array({str("id"), str("x"), str("state"), str("dead"), str("body"),
                            str(std::string("\0\1", 2)), str("priority"), integer(3), str("error"),
                            str("boom"), str("future_field"), integer(1)}));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::dead);
  EXPECT_EQ(j->body, std::string("\0\1", 2));
  EXPECT_EQ(j->error, "boom");
  EXPECT_FALSE(parse_get(Reply{}));
}

TEST(CodecTest, FailAndTouch) {
  EXPECT_EQ(parse_fail(str("dead", Reply::Type::status)).state, JobState::dead);
  EXPECT_EQ(parse_fail(integer(-3)).outcome, Outcome::stale_token);
  EXPECT_EQ(parse_touch(integer(123456)).deadline_ms, 123456);
  EXPECT_EQ(parse_touch(integer(-2)).outcome, Outcome::wrong_state);
}

TEST(CodecTest, ErrorRepliesMapToCodes) {
  auto e = error_from_reply("BADARG PRIORITY must be from 0 to 1000, got 2000");
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_EQ(word_of(e), Word::badarg);
  EXPECT_STREQ(e.what(), "PRIORITY must be from 0 to 1000, got 2000");
  EXPECT_EQ(error_from_reply("OOM command not allowed").code(), Errc::server);
  EXPECT_EQ(word_of(error_from_reply("OOM command not allowed")), Word::none);
  EXPECT_EQ(error_from_reply("BADSTATE the topic's counter is used up").code(), Errc::conflict);
  // The whole first word: BUSYKEY is not BUSY.
  EXPECT_EQ(error_from_reply("BUSYKEY Target key name already exists").code(), Errc::server);
  EXPECT_EQ(error_from_reply("LOADING Redis is loading the dataset in memory").code(),
            Errc::connection);
  for (const auto& w : kErrorWords) {
    const auto got = error_from_reply(std::string(w.word) + " what it says");
    EXPECT_EQ(got.code(), w.code) << w.word;
    EXPECT_EQ(word_of(got), w.is) << w.word;
    EXPECT_NE(std::string_view(got.what()).find("what it says"), std::string_view::npos);
  }
}

// The Client decides on the reply's word, never on the message: an Error
// that only reads like one is not one.
TEST(CodecTest, SpreadAndOlderFormatAreKnownByTheirWordNotTheirText) {
  EXPECT_TRUE(is_sharded(error_from_reply("SHARDED a b")));
  EXPECT_TRUE(is_older_format(error_from_reply("OLDFORMAT migrate first")));
  EXPECT_FALSE(is_sharded(Error(Errc::conflict, std::string(kSpreadTopic) + "a b")));
  EXPECT_FALSE(is_older_format(Error(Errc::bad_format, std::string(kOlderFormat) + "x")));
  // A copy keeps its word (Results hand Errors on by value).
  const Error copied = error_from_reply("SHARDED a");
  Error assigned(Errc::ok, "");
  assigned = copied;
  EXPECT_TRUE(is_sharded(assigned));
}

TEST(CodecTest, LinkFailuresKeepTheirCodeOrAreConnectionErrors) {
  EXPECT_EQ(error_from_link(make_error_code(Errc::timeout), "late").code(), Errc::timeout);
  EXPECT_EQ(error_from_link(make_error_code(Errc::closed), "closed").code(), Errc::closed);
  // Another category's code is not cast: ECONNRESET's value is no Errc.
  const auto reset = error_from_link(std::make_error_code(std::errc::connection_reset), "lost");
  EXPECT_EQ(reset.code(), Errc::connection);
  EXPECT_NE(std::string_view(reset.what()).find("lost"), std::string_view::npos);
}

TEST(CodecTest, TopicNames) {
  EXPECT_NO_THROW(check_topic("emails.v2-high_prio"));
  EXPECT_THROW(check_topic(""), Error);
  EXPECT_THROW(check_topic("a{b}"), Error);
  EXPECT_THROW(check_topic("with space"), Error);
  EXPECT_THROW(check_topic(std::string(129, 'a')), Error);
}

TEST(CodecTest, PutOptionWordsMatchTheWordsAdded) {
  JobSpec s;
  s.delay = Millis(5);
  s.priority = 3;
  s.backoff = Backoff{};
  s.mode = PutMode::upsert;
  Command cmd;
  add_put_options(cmd, s);
  std::string out;
  cmd.encode(out);
  EXPECT_EQ(out.substr(0, 4), "*" + std::to_string(put_option_words(s)) + "\r\n");
}

}  // namespace
}  // namespace redisched::core
