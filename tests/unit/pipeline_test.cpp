// The pipeline of a connection without a socket: what goes out, which
// caller each reply reaches, pub/sub messages apart, failures.
#include "redis/pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/command.h"
#include "testutil/replies.h"

namespace redisched::redis {
namespace {

using test::array;
using test::integer;
using test::text;

Reply message(const std::string& kind, const std::string& channel, const std::string& payload) {
  Reply r;
  r.type = Reply::Type::array;
  for (const auto& s : {kind, channel, payload}) {
    Reply e;
    e.type = Reply::Type::string;
    e.str = s;
    r.elements.push_back(e);
  }
  return r;
}

// A caller that records what it got.
struct Got {
  std::vector<std::string> log;
  ReplyHandler as(const std::string& name) {
    return [this, name](std::error_code ec, Reply r) {
      log.push_back(name + (ec             ? " failed: " + r.str
                            : r.is_error() ? " error: " + r.str
                                           : " " + std::to_string(r.integer)));
    };
  }
};

TEST(PipelineTest, WhatIsQueuedGoesOutInOneWriteAndRepliesReachTheirCallersInOrder) {
  Pipeline p;
  Got got;
  p.enqueue("A", got.as("a"));
  p.enqueue("B", got.as("b"));
  EXPECT_TRUE(p.has_output());
  std::string out;
  p.take_output(out);
  EXPECT_EQ(out, "AB");
  EXPECT_FALSE(p.has_output());
  p.enqueue("C", got.as("c"));
  p.take_output(out);
  EXPECT_EQ(out, "C") << "each write carries only what came since the last";
  EXPECT_EQ(p.waiting(), 3u);
  p.deliver(integer(1));
  p.deliver(integer(2));
  p.deliver(integer(3));
  EXPECT_EQ(got.log, (std::vector<std::string>{"a 1", "b 2", "c 3"}));
  EXPECT_EQ(p.waiting(), 0u);
}

// Writes that wait for replicas share one WAIT behind the batch they went
// out in; each caller's answer is its own reply, judged by its own count.
TEST(PipelineTest, ReplicatedWritesOfABatchShareOneWait) {
  using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
  Pipeline p;
  Got got;
  p.enqueue_replicated("A", 1, 100ms, got.as("a"));
  p.enqueue("B", got.as("b"));
  p.enqueue_replicated("C", 2, 300ms, got.as("c"));
  p.enqueue_replicated("D", 1, 100ms, got.as("d"));
  std::string out;
  p.take_output(out);
  EXPECT_EQ(out, "ABCD*3\r\n$4\r\nWAIT\r\n$1\r\n2\r\n$3\r\n300\r\n")
      << "one WAIT for the most replicas and the longest timeout, behind them all";
  p.deliver(integer(1));
  p.deliver(integer(2));
  p.deliver(integer(3));
  Reply refused;
  refused.type = Reply::Type::error;
  refused.str = "ERR no such job";
  p.deliver(refused);
  EXPECT_EQ(got.log, std::vector<std::string>{"b 2"}) << "the writes wait for WAIT";
  p.deliver(integer(1));  // one replica had them
  EXPECT_EQ(got.log, (std::vector<std::string>{"b 2", "a 1",
                                               "c failed: done on the primary, but only 1 of 2 "
                                               "replicas had it within 300 ms (a failover may "
                                               "lose it)",
                                               "d error: ERR no such job"}))
      << "a has its replica; c wanted two; d's own error reply is its answer";
  p.take_output(out);
  EXPECT_EQ(out, "") << "no WAIT without a replicated write";

  // A connection that ends before the WAIT went out fails its writes.
  p.enqueue_replicated("E", 1, 100ms, got.as("e"));
  p.fail_all(Errc::connection, "gone");
  EXPECT_EQ(got.log.back(), "e failed: gone");
}

// Callers hear of a failed connection in the order of their commands, a
// replicated write like any other, written or not, and each once.
TEST(PipelineTest, AFailedConnectionAnswersReplicatedWritesInOrder) {
  using namespace std::chrono_literals;
  Pipeline p;
  Got got;
  std::string out;
  p.enqueue_replicated("A", 1, 100ms, got.as("a"));
  p.enqueue("B", got.as("b"));
  p.take_output(out);  // A, B, WAIT written
  p.enqueue_replicated("C", 1, 100ms, got.as("c"));
  p.enqueue("D", got.as("d"));  // not written
  p.fail_all(Errc::connection, "gone");
  EXPECT_EQ(got.log, (std::vector<std::string>{"a failed: gone", "b failed: gone", "c failed: gone",
                                               "d failed: gone"}));
  EXPECT_EQ(p.waiting(), 0u);
}

TEST(PipelineTest, PubSubMessagesGoToTheirHookNotToACaller) {
  std::vector<std::string> pushed;
  Pipeline p([&](const Reply& r) { pushed.push_back(r.elements[2].str); });
  Got got;
  p.enqueue("SSUBSCRIBE x", got.as("subscribe"));
  p.deliver(message("smessage", "x", "42"));
  EXPECT_TRUE(got.log.empty());
  p.deliver(integer(1));
  EXPECT_EQ(pushed, std::vector<std::string>{"42"});
  EXPECT_EQ(got.log, std::vector<std::string>{"subscribe 1"});
}

// Redis Cluster ends the shard subscriptions of a slot that moved with an
// sunsubscribe nobody asked for; the reply to our own SUNSUBSCRIBE names its
// channel, and only that one is the caller's.
TEST(PipelineTest, AnUnaskedSunsubscribeIsAPushEvenWhileOneIsAwaited) {
  std::vector<std::string> pushed;
  Pipeline p(
      [&](const Reply& r) { pushed.push_back(r.elements[0].str + " " + r.elements[1].str); });
  Got got;
  p.enqueue_unsubscribe("SUNSUBSCRIBE y", "y", got.as("unsubscribe"));
  p.deliver(message("sunsubscribe", "x", "0"));  // slot of x moved
  EXPECT_EQ(pushed, std::vector<std::string>{"sunsubscribe x"});
  EXPECT_TRUE(got.log.empty());
  p.deliver(message("sunsubscribe", "y", "0"));
  EXPECT_EQ(got.log, std::vector<std::string>{"unsubscribe 0"});
  EXPECT_EQ(pushed.size(), 1u);
}

TEST(PipelineTest, WithoutAHookAMessageShapedReplyIsACallersReply) {
  Pipeline p;
  Got got;
  p.enqueue("LRANGE", got.as("lrange"));
  p.deliver(message("message", "a", "b"));
  EXPECT_EQ(got.log, std::vector<std::string>{"lrange 0"});
}

TEST(PipelineTest, AReplyNobodyAskedForIsAProtocolError) {
  Pipeline p;
  try {
    p.deliver(integer(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::protocol);
  }
}

TEST(PipelineTest, FailAllFailsEveryCallerInOrderAndDropsWhatWasNotWritten) {
  Pipeline p;
  Got got;
  p.enqueue("A", got.as("a"));
  p.enqueue("B", got.as("b"));
  p.fail_all(Errc::connection, "gone");
  EXPECT_EQ(got.log, (std::vector<std::string>{"a failed: gone", "b failed: gone"}));
  EXPECT_FALSE(p.has_output());
  EXPECT_EQ(p.waiting(), 0u);
  EXPECT_FALSE(p.oldest());
}

TEST(PipelineTest, ACallbackMayQueueMore) {
  Pipeline p;
  Got got;
  p.enqueue("A", [&](std::error_code, Reply) { p.enqueue("B", got.as("b")); });
  p.deliver(integer(1));
  EXPECT_EQ(p.waiting(), 1u);
  p.deliver(integer(2));
  EXPECT_EQ(got.log, std::vector<std::string>{"b 2"});
}

// The command timeout counts from the later of the oldest caller's command
// and the last reply: commands held behind a blocking one (a WAIT) are not
// a hang while Redis answers.
TEST(PipelineTest, OldestCountsFromTheFirstWaitingCommandOrTheLastReply) {
  Pipeline p;
  const auto t0 = Pipeline::Clock::time_point(std::chrono::seconds(5));
  const auto t1 = t0 + std::chrono::seconds(1);
  EXPECT_FALSE(p.oldest());
  p.enqueue(
      "A", [](std::error_code, Reply) {}, t0);
  p.enqueue(
      "B", [](std::error_code, Reply) {}, t1);
  p.enqueue(
      "C", [](std::error_code, Reply) {}, t1);
  EXPECT_EQ(p.oldest(), t0);
  p.deliver(integer(1), t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(p.oldest(), t1) << "B was queued after A's reply";
  p.deliver(integer(2), t1 + std::chrono::seconds(3));
  EXPECT_EQ(p.oldest(), t1 + std::chrono::seconds(3)) << "C waits behind B, which answered";
  p.deliver(integer(3), t1 + std::chrono::seconds(4));
  EXPECT_FALSE(p.oldest());
}

// Coalescing (redis/batch.h): a kind whose batched reply is one reply per call.
class EachItsOwn final : public BatchKind {
 public:
  std::string_view function() const override { return "many"; }
  bool split(Reply reply, std::size_t n, std::vector<Reply>& parts) const override {
    if (reply.type != Reply::Type::array || reply.elements.size() != n) return false;
    parts = std::move(reply.elements);
    return true;
  }
};
const EachItsOwn kEachItsOwn;

std::string words(std::initializer_list<std::string_view> w) {
  std::string out;
  append_words(out, std::span<const std::string_view>(w.begin(), w.size()));
  return out;
}

// A call "one <head> <arg> <tail>" alone, "many <head> <n> <arg>... <tail>" batched.
Batchable call(const std::string& arg, const std::string& head = "h",
               const std::string& tail = "t") {
  Batchable b;
  b.kind = &kEachItsOwn;
  b.single = encode_command({"FCALL", "one", head, arg, tail});
  b.head = words({head});
  b.head_words = 1;
  b.part = words({arg});
  b.part_words = 1;
  b.tail = words({tail});
  b.tail_words = 1;
  return b;
}

TEST(PipelineTest, CallsOfOneKindQueuedTogetherGoOutAsOneBatchedCall) {
  Pipeline p;
  Got got;
  p.enqueue_batchable(call("x"), got.as("x"));
  p.enqueue_batchable(call("y"), got.as("y"));
  p.enqueue_batchable(call("z"), got.as("z"));
  EXPECT_TRUE(p.has_output());
  std::string out;
  p.take_output(out);
  EXPECT_EQ(out, encode_command({"FCALL", "many", "h", "3", "x", "y", "z", "t"}));
  EXPECT_EQ(p.waiting(), 1u) << "one command, one reply";
  p.deliver(array({integer(1), integer(2), integer(3)}));
  EXPECT_EQ(got.log, (std::vector<std::string>{"x 1", "y 2", "z 3"}));
}

TEST(PipelineTest, ACallQueuedAloneGoesOutAsItself) {
  Pipeline p;
  Got got;
  p.enqueue_batchable(call("x"), got.as("x"));
  std::string out;
  p.take_output(out);
  EXPECT_EQ(out, encode_command({"FCALL", "one", "h", "x", "t"}));
  p.enqueue_batchable(call("y"), got.as("y"));
  p.take_output(out);
  EXPECT_EQ(out, encode_command({"FCALL", "one", "h", "y", "t"}))
      << "a call already written does not wait for company";
  p.deliver(integer(1));
  p.deliver(integer(2));
  EXPECT_EQ(got.log, (std::vector<std::string>{"x 1", "y 2"}));
}

// Commands keep their order: a batch takes only calls queued one right after
// another, with the same head and tail.
TEST(PipelineTest, AnyOtherCommandInBetweenEndsTheBatch) {
  Pipeline p;
  Got got;
  p.enqueue_batchable(call("a"), got.as("a"));
  p.enqueue_batchable(call("b"), got.as("b"));
  p.enqueue("GET\r\n", got.as("get"));
  p.enqueue_batchable(call("c"), got.as("c"));
  p.enqueue_batchable(call("d", "other"), got.as("d"));
  p.enqueue_batchable(call("e", "other", "t2"), got.as("e"));
  std::string out;
  p.take_output(out);
  EXPECT_EQ(out, encode_command({"FCALL", "many", "h", "2", "a", "b", "t"}) + "GET\r\n" +
                     encode_command({"FCALL", "one", "h", "c", "t"}) +
                     encode_command({"FCALL", "one", "other", "d", "t"}) +
                     encode_command({"FCALL", "one", "other", "e", "t2"}));
  p.deliver(array({integer(1), integer(2)}));
  for (int i = 3; i <= 6; ++i) p.deliver(integer(i));
  EXPECT_EQ(got.log, (std::vector<std::string>{"a 1", "b 2", "get 3", "c 4", "d 5", "e 6"}));
}

// The connection writes early once enough callers wait (read_loop): each
// caller counts, batched or not, until the output is taken.
TEST(PipelineTest, UnsentCountsEveryCallerQueuedSinceTheLastWrite) {
  Pipeline p;
  Got got;
  EXPECT_EQ(p.unsent(), 0u);
  p.enqueue_batchable(call("a"), got.as("a"));
  p.enqueue_batchable(call("b"), got.as("b"));
  p.enqueue("GET\r\n", got.as("get"));
  p.enqueue_batchable(call("c"), got.as("c"));
  EXPECT_EQ(p.unsent(), 4u);
  std::string out;
  p.take_output(out);
  EXPECT_EQ(p.unsent(), 0u);
  EXPECT_EQ(p.waiting(), 3u) << "a batch of two, GET, c alone";
  p.enqueue_batchable(call("d"), got.as("d"));
  EXPECT_EQ(p.unsent(), 1u);
  p.fail_all(Errc::connection, "gone");
  EXPECT_EQ(p.unsent(), 0u) << "what was not written is dropped";
}

TEST(PipelineTest, ABatchHoldsAtMostTheLimitOfCalls) {
  Pipeline p;
  Got got;
  const std::size_t n = kMaxCoalesced + 3;
  for (std::size_t i = 0; i < n; ++i) p.enqueue_batchable(call("x"), got.as("x"));
  std::string out;
  p.take_output(out);
  EXPECT_EQ(p.waiting(), 2u);
  EXPECT_EQ(out.rfind(encode_command({"FCALL", "many", "h", "3", "x", "x", "x", "t"})),
            out.size() - encode_command({"FCALL", "many", "h", "3", "x", "x", "x", "t"}).size());
}

// Calls a and b, written as one batched call.
void write_a_batch_of_two(Pipeline& p, Got& got) {
  p.enqueue_batchable(call("a"), got.as("a"));
  p.enqueue_batchable(call("b"), got.as("b"));
  std::string out;
  p.take_output(out);
}

// An error reply to a batched call (the node moved, is read-only, ...) is
// every caller's answer; nothing is sent again.
TEST(PipelineTest, AnErrorReplyToABatchedCallIsEachCallersAnswer) {
  Pipeline p;
  Got got;
  write_a_batch_of_two(p, got);
  p.deliver(text("MOVED 1 :7001", Reply::Type::error));
  EXPECT_EQ(got.log,
            (std::vector<std::string>{"a error: MOVED 1 :7001", "b error: MOVED 1 :7001"}));
  EXPECT_FALSE(p.has_output());
}

// A batch holds at most 1 MiB of parts: a call that would pass it starts
// the next one.
TEST(PipelineTest, ABatchHoldsAtMostAMebibyteOfCalls) {
  Pipeline p;
  Got got;
  const std::string big(600 * 1024, 'x');
  p.enqueue_batchable(call("a"), got.as("a"));
  p.enqueue_batchable(call(big), got.as("big1"));
  p.enqueue_batchable(call(big), got.as("big2"));
  p.enqueue_batchable(call("b"), got.as("b"));
  std::string out;
  p.take_output(out);
  EXPECT_EQ(out, encode_command({"FCALL", "many", "h", "2", "a", big, "t"}) +
                     encode_command({"FCALL", "many", "h", "2", big, "b", "t"}));
}

TEST(PipelineTest, ABatchedCallFailsForEachOfItsCallers) {
  Pipeline p;
  Got got;
  write_a_batch_of_two(p, got);
  p.enqueue_batchable(call("c"), got.as("c"));  // not yet written
  p.deliver(array({integer(1)}));               // not one reply per call
  p.fail_all(Errc::connection, "gone");
  EXPECT_EQ(got.log, (std::vector<std::string>{"a failed: unexpected reply to a batched many",
                                               "b failed: unexpected reply to a batched many",
                                               "c failed: gone"}));
  EXPECT_FALSE(p.has_output());
}

}  // namespace
}  // namespace redisched::redis
