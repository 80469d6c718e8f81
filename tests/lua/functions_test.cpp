// The Functions library called with plain FCALLs (no Client), with time
// under the test's control through the NOW argument.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <sstream>

#include "core/keys.h"
#include "testutil/raw_redis.h"
#include "testutil/redis_server.h"

namespace redisched::test {
namespace {

using Args = std::vector<std::string>;

std::string library_source() {
  std::ifstream in(REDISCHED_LUA_PATH);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FunctionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static bool loaded = false;
    if (!loaded) {
      auto r = redis_.call({"FUNCTION", "LOAD", "REPLACE", library_source()});
      ASSERT_EQ(r->type, REDIS_REPLY_STRING) << (r->str ? r->str : "");
      loaded = true;
    }
  }

  ReplyPtr call(const std::string& op, Args args) { return redis_.fcall(op, topic_, args); }

  // An integer reply, or a failure naming what came back.
  long long integer(const std::string& op, Args args) {
    auto r = call(op, std::move(args));
    EXPECT_EQ(r->type, REDIS_REPLY_INTEGER) << op << ": " << (r->str ? r->str : "");
    return r->integer;
  }

  std::string error(const std::string& op, Args args) {
    auto r = call(op, std::move(args));
    EXPECT_EQ(r->type, REDIS_REPLY_ERROR) << op << " was accepted";
    return r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
  }

  struct Taken {
    std::string id, body;
    long long token = 0, attempt = 0, max_attempts = 0, deadline = 0;
  };
  struct Reserve {
    long long now = 0, next = 0, paused = 0;
    std::vector<Taken> jobs;
  };
  Reserve reserve(int count, long long now, Args extra = {}) {
    Args args = {std::to_string(count), "NOW", std::to_string(now)};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = call("reserve", args);
    Reserve out;
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << (r->str ? r->str : "");
    if (r->type != REDIS_REPLY_ARRAY) return out;
    out.now = r->element[0]->integer;
    out.next = r->element[1]->integer;
    out.paused = r->element[2]->integer;
    for (size_t i = 3; i < r->elements; ++i) {
      auto* j = r->element[i];
      out.jobs.push_back({std::string(j->element[0]->str, j->element[0]->len),
                          std::string(j->element[1]->str, j->element[1]->len),
                          j->element[2]->integer, j->element[3]->integer, j->element[4]->integer,
                          j->element[8]->integer});
    }
    return out;
  }
  std::vector<std::string> ids(const Reserve& r) {
    std::vector<std::string> out;
    for (const auto& j : r.jobs) out.push_back(j.id);
    return out;
  }

  // The value of one field of redisched_get, "" when absent; at time now
  // (the server's clock when negative): a delayed job reads as ready once due.
  std::string field(const std::string& id, const std::string& name, long long now = -1) {
    auto r = call("get", now < 0 ? Args{id} : Args{id, "NOW", std::to_string(now)});
    if (r->type != REDIS_REPLY_ARRAY) return "";
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) == name) {
        auto* v = r->element[i + 1];
        if (v->type == REDIS_REPLY_INTEGER) return std::to_string(v->integer);
        return std::string(v->str, v->len);
      }
    }
    return "";
  }
  std::string state(const std::string& id, long long now = -1) {
    auto r = call("get", {id});
    return r->type == REDIS_REPLY_NIL ? "absent" : field(id, "state", now);
  }
  long long stat(const std::string& name, long long now = -1) {
    auto r = call("stats", now < 0 ? Args{} : Args{"NOW", std::to_string(now)});
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) == name) return r->element[i + 1]->integer;
    }
    ADD_FAILURE() << "no stat " << name;
    return -1;
  }

  void put(const std::string& id, long long now, Args options = {}) {
    Args args = {id, "body of " + id};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"NOW", std::to_string(now)});
    EXPECT_EQ(integer("put", args), 1) << id;
  }

  RawRedis redis_{shared_redis().port()};
  std::string topic_ = unique_topic();
};

TEST_F(FunctionsTest, DelayedJobIsDueExactlyAtItsMillisecond) {
  put("x", 1000, {"DELAY", "100"});
  auto early = reserve(1, 1099);
  EXPECT_TRUE(early.jobs.empty());
  EXPECT_EQ(early.next, 1100) << "a waiter learns when to look again";
  auto on_time = reserve(1, 1100);
  ASSERT_EQ(ids(on_time), Args{"x"});
  EXPECT_EQ(on_time.jobs[0].body, "body of x");
  EXPECT_EQ(on_time.jobs[0].attempt, 1);
}

TEST_F(FunctionsTest, OrderIsPriorityThenDueTimeThenPutOrder) {
  put("low", 1000);
  put("late-due", 1000, {"DELAY", "50", "PRIORITY", "5"});
  put("early-due", 1000, {"DELAY", "20", "PRIORITY", "5"});
  put("high-1", 1001, {"PRIORITY", "9"});
  put("high-2", 1001, {"PRIORITY", "9"});
  // Same priority, same due millisecond: put order, whatever the ids' order.
  put("c", 1002, {"DELAY", "10"});
  put("b", 1002, {"DELAY", "10"});
  put("a", 1002, {"DELAY", "10"});
  auto r = reserve(100, 2000);
  EXPECT_EQ(ids(r), (Args{"high-1", "high-2", "early-due", "late-due", "low", "c", "b", "a"}));
}

TEST_F(FunctionsTest, TimesFarAheadKeepEveryMillisecondAndThePutOrder) {
  // 2100-01-01: past 2^53 / 4096 ms, where a stamp computed as one Lua
  // number would round its put sequence away.
  const long long t = 4102444800001;
  Args put_order;
  for (int i = 19; i >= 0; --i) {  // ids sort against put order
    put_order.push_back("j" + std::to_string(100 + i));
    put(put_order.back(), t, {"DELAY", "5"});
  }
  EXPECT_EQ(field("j100", "created"), std::to_string(t));
  EXPECT_EQ(ids(reserve(50, t + 5)), put_order);
}

TEST_F(FunctionsTest, BatchPutKeepsPutOrderForTheSameDueTime) {
  Args args = {"5"};
  for (const char* id : {"e", "d", "c", "b", "a"})
    args.insert(args.end(), {id, "x", "2", "DELAY", "10"});
  args.insert(args.end(), {"NOW", "1000"});
  auto r = call("putmany", args);
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(ids(reserve(10, 1010)), (Args{"e", "d", "c", "b", "a"}));
}

TEST_F(FunctionsTest, AJobDueNowWaitsBehindABacklogOfOlderDueJobs) {
  // 1200 jobs due at 1001..1200: more than one call promotes at once.
  for (int batch = 0; batch < 2; ++batch) {
    Args args = {"600"};
    for (int i = 0; i < 600; ++i) {
      const int n = batch * 600 + i + 1;
      args.insert(args.end(), {"j" + std::to_string(n), "x", "2", "DELAY", std::to_string(n)});
    }
    args.insert(args.end(), {"NOW", "1000"});
    ASSERT_EQ(call("putmany", args)->type, REDIS_REPLY_ARRAY);
  }
  put("now", 5000);
  auto first = reserve(1000, 5000);
  auto rest = reserve(1000, 5000);
  ASSERT_EQ(first.jobs.size(), 1000u);
  ASSERT_EQ(rest.jobs.size(), 201u);
  EXPECT_EQ(first.jobs[0].id, "j1");
  EXPECT_EQ(rest.jobs[199].id, "j1200");
  EXPECT_EQ(rest.jobs[200].id, "now");
}

TEST_F(FunctionsTest, StarAsksForAGeneratedId) {
  auto r = call("put", {"*", "b", "NOW", "1000"});
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  const std::string first(r->str, r->len);
  EXPECT_EQ(first.rfind("1000-", 0), 0u) << first;
  EXPECT_EQ(state(first), "ready");
  auto many = call("putmany", {"2", "*", "b", "0", "x", "b", "0", "NOW", "1001"});
  ASSERT_EQ(many->elements, 2u);
  ASSERT_EQ(many->element[0]->type, REDIS_REPLY_STRING);
  EXPECT_NE(std::string(many->element[0]->str), first);
  EXPECT_EQ(many->element[1]->integer, 1);
  EXPECT_EQ(ids(reserve(5, 1001)), (Args{first, many->element[0]->str, "x"}));
  EXPECT_EQ(error("put", {"*", "b", "UPSERT"}).rfind("BADARG a generated id", 0), 0u);
}

TEST_F(FunctionsTest, PutOfAnExistingIdReportsItAndChangesNothing) {
  put("x", 1000);
  EXPECT_EQ(integer("put", {"x", "other", "NOW", "1001"}), -1);
  EXPECT_EQ(field("x", "body"), "body of x");
  EXPECT_EQ(integer("put", {"missing", "b", "REPLACE", "NOW", "1001"}), 0);
  EXPECT_EQ(state("missing"), "absent");
}

// CONFIRM (version 37): a put answered -1 writes all the same (a field of
// the topic's meta, written and deleted), so that a WAIT after it on this
// connection waits for the replicas to have the job; without CONFIRM it
// writes nothing. Redis counts writes in rdb_changes_since_last_save (the
// tests' servers never save).
TEST_F(FunctionsTest, ConfirmMakesAPutOfAnExistingIdWriteAndChangeNothing) {
  const auto writes = [&] {
    auto info = redis_.call({"INFO", "persistence"});
    const std::string text(info->str, info->len);
    const std::string field = "rdb_changes_since_last_save:";
    return std::stoll(text.substr(text.find(field) + field.size()));
  };
  put("x", 1000);
  const std::string meta = "redisched:{" + topic_ + "}:meta";
  const auto meta_before = redis_.call({"HGETALL", meta});
  auto at = writes();
  EXPECT_EQ(integer("put", {"x", "other", "NOW", "1001"}), -1);
  EXPECT_EQ(writes(), at) << "no CONFIRM: nothing written";
  EXPECT_EQ(integer("put", {"x", "other", "CONFIRM", "NOW", "1001"}), -1);
  EXPECT_EQ(writes(), at + 2) << "the field written and deleted";
  at = writes();
  auto codes = call("putmany", {"2", "x", "b", "0", "x", "c", "0", "CONFIRM", "NOW", "1001"});
  ASSERT_EQ(codes->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(codes->element[0]->integer, -1);
  EXPECT_EQ(writes(), at + 2) << "once for the call";
  const auto meta_after = redis_.call({"HGETALL", meta});
  ASSERT_EQ(meta_after->elements, meta_before->elements);
  for (std::size_t i = 0; i < meta_after->elements; ++i) {
    EXPECT_EQ(std::string(meta_after->element[i]->str, meta_after->element[i]->len),
              std::string(meta_before->element[i]->str, meta_before->element[i]->len));
  }
  EXPECT_EQ(field("x", "body"), "body of x");
  // A put that writes anyway writes only its job.
  at = writes();
  EXPECT_EQ(integer("put", {"y", "b", "CONFIRM", "NOW", "1001"}), 1);
  const auto plain = writes() - at;
  at = writes();
  EXPECT_EQ(integer("put", {"z", "b", "NOW", "1001"}), 1);
  EXPECT_EQ(writes() - at, plain);
}

TEST_F(FunctionsTest, ReplaceUpdatesBodyAndScheduleInEveryState) {
  // delayed -> updated, ready at its new due time
  put("d", 1000, {"DELAY", "5000"});
  EXPECT_EQ(integer("put", {"d", "new", "DELAY", "10", "PRIORITY", "3", "REPLACE", "NOW", "1001"}),
            2);
  EXPECT_EQ(state("d", 1001), "delayed");
  EXPECT_EQ(field("d", "due"), "1011");
  EXPECT_EQ(field("d", "created"), "1000") << "an update keeps the creation time";
  // ready -> delayed by the new schedule
  put("r", 1000);
  EXPECT_EQ(integer("put", {"r", "new", "DELAY", "100", "UPSERT", "NOW", "1001"}), 2);
  EXPECT_EQ(state("r", 1001), "delayed");
  // reserved -> the reservation ends (its token goes stale), the new version waits
  put("v", 1000, {"PRIORITY", "1000"});
  auto got = reserve(1, 1002);
  ASSERT_EQ(ids(got), Args{"v"});
  EXPECT_EQ(integer("put", {"v", "v2", "UPSERT", "NOW", "1003"}), 2);
  EXPECT_EQ(state("v"), "ready");
  EXPECT_EQ(field("v", "body"), "v2");
  EXPECT_EQ(integer("ack", {"v", std::to_string(got.jobs[0].token)}), -2)
      << "the old reservation is over";
  // dead -> alive again, attempts from zero
  put("z", 1000, {"ATTEMPTS", "1", "PRIORITY", "1000"});
  auto z = reserve(1, 1004);
  ASSERT_EQ(ids(z), Args{"z"});
  ASSERT_EQ(call("fail", {"z", std::to_string(z.jobs[0].token), "boom", "NOW", "1004"})->str,
            std::string("dead"));
  EXPECT_EQ(integer("put", {"z", "z2", "REPLACE", "NOW", "1005"}), 2);
  EXPECT_EQ(state("z"), "ready");
  EXPECT_EQ(field("z", "attempts"), "0");
}

TEST_F(FunctionsTest, DeleteWorksInEveryState) {
  put("delayed", 1000, {"DELAY", "100000"});
  put("ready", 1000);
  put("reserved", 1000, {"PRIORITY", "1000"});
  ASSERT_EQ(ids(reserve(1, 1001)), Args{"reserved"});
  put("dead", 1000, {"ATTEMPTS", "1", "PRIORITY", "999"});
  auto d = reserve(1, 1001);
  call("fail", {"dead", std::to_string(d.jobs[0].token), "x", "NOW", "1001"});
  ASSERT_EQ(state("dead"), "dead");
  for (const char* id : {"delayed", "ready", "reserved", "dead"}) {
    EXPECT_EQ(integer("delete", {id}), 1) << id;
    EXPECT_EQ(state(id), "absent") << id;
    EXPECT_EQ(integer("delete", {id}), 0) << id;
  }
  EXPECT_EQ(stat("delayed") + stat("ready") + stat("reserved") + stat("dead"), 0);
}

TEST_F(FunctionsTest, LapsedReservationComesBackAndTheOldTokenIsRefused) {
  put("x", 1000);
  auto first = reserve(1, 1000, {"TTR", "100"});
  ASSERT_EQ(first.jobs.size(), 1u);
  auto rq = call("requeue", {"NOW", "1099"});
  EXPECT_EQ(rq->element[0]->integer, 0) << "not lapsed before its deadline";
  rq = call("requeue", {"NOW", "1100"});
  EXPECT_EQ(rq->element[0]->integer, 1);
  EXPECT_EQ(field("x", "attempts"), "1") << "a lapse counts as an attempt";
  auto second = reserve(1, 1101);
  ASSERT_EQ(second.jobs.size(), 1u);
  EXPECT_EQ(second.jobs[0].attempt, 2);
  EXPECT_NE(second.jobs[0].token, first.jobs[0].token);
  for (const char* op : {"ack", "release"}) {
    EXPECT_EQ(integer(op, {"x", std::to_string(first.jobs[0].token)}), -3) << op;
  }
  EXPECT_EQ(integer("fail", {"x", std::to_string(first.jobs[0].token), "late"}), -3);
  EXPECT_EQ(integer("touch", {"x", std::to_string(first.jobs[0].token)}), -3);
  EXPECT_EQ(integer("ack", {"x", std::to_string(second.jobs[0].token)}), 1);
  EXPECT_EQ(state("x"), "absent");
}

// ackmany settles a batch of held jobs in one ZREM; with any pair not held
// (or an id twice) each job still gets its own code, and only the held
// ones end.
TEST_F(FunctionsTest, AckManyAnswersEachJobAsIfAckedOneByOne) {
  for (const char* id : {"a", "b", "c", "d"}) put(id, 1000);
  put("waiting", 1000, {"DELAY", "60000"});
  auto held = reserve(4, 1000);
  ASSERT_EQ(ids(held), (Args{"a", "b", "c", "d"}));
  auto token = [&](size_t i) { return std::to_string(held.jobs[i].token); };
  auto codes = [&](Args args) {
    std::vector<long long> out;
    auto r = call("ackmany", std::move(args));
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << (r->str ? r->str : "");
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
      out.push_back(r->element[i]->integer);
    }
    return out;
  };
  // All held: one batch.
  EXPECT_EQ(codes({"2", "a", token(0), "b", token(1)}), (std::vector<long long>{1, 1}));
  EXPECT_EQ(state("a"), "absent");
  EXPECT_EQ(state("b"), "absent");
  // Mixed: held, stale token, not reserved, no such job, acked twice.
  const std::string stale = std::to_string(held.jobs[3].token + 1000);
  EXPECT_EQ(codes({"5", "c", token(2), "d", stale, "waiting", "1", "gone", "1", "c", token(2)}),
            (std::vector<long long>{1, -3, -2, 0, 0}));
  EXPECT_EQ(state("c"), "absent");
  EXPECT_EQ(state("d"), "reserved") << "a stale token leaves the reservation";
  EXPECT_EQ(state("waiting", 1000), "delayed");
  // A token written another way names the same reservation.
  EXPECT_EQ(codes({"1", "d", "0" + token(3)}), (std::vector<long long>{1}));
  EXPECT_EQ(stat("reserved"), 0);
}

// ackmany checks a batch's ids and tokens all at once in its common case;
// a bad pair anywhere in it is refused, named, before any job is acked.
TEST_F(FunctionsTest, AckManyRefusesABatchWithABadPairAndAcksNone) {
  for (const char* id : {"a", "b", "c"}) put(id, 1000);
  auto held = reserve(3, 1000);
  ASSERT_EQ(ids(held), (Args{"a", "b", "c"}));
  auto token = [&](size_t i) { return std::to_string(held.jobs[i].token); };
  const std::vector<std::pair<Args, std::string>> bad = {
      {{"3", "a", token(0), "b", token(1), "c", "x1"}, "BADARG token must be an integer"},
      {{"3", "a", token(0), "b", "", "c", token(2)}, "BADARG token must be an integer"},
      {{"3", "a", token(0), "b", "-4", "c", token(2)}, "BADARG token must be from 0"},
      {{"3", "a", token(0), "b", token(1), "", token(2)}, "BADARG job id is empty"},
      {{"3", "a", token(0), std::string("b\nb"), token(1), "c", token(2)},
       "BADARG job id contains a control character"},
      {{"3", "a", token(0), std::string(257, 'b'), token(1), "c", token(2)},
       "BADARG job id is longer than 256 bytes"},
  };
  for (const auto& [args, message] : bad) {
    const std::string err = error("ackmany", args);
    EXPECT_EQ(err.rfind(message, 0), 0u) << err;
  }
  for (const char* id : {"a", "b", "c"}) EXPECT_EQ(state(id), "reserved") << id;
  EXPECT_EQ(stat("reserved"), 3);
}

// The leases hash stays a hash table (its one long field): a listpack of
// hundreds of leases was scanned for every lease set or deleted.
TEST_F(FunctionsTest, LeasesAreAHashTableFromTheFirstReservation) {
  put("one", 1000);
  auto held = reserve(1, 1000);
  ASSERT_EQ(held.jobs.size(), 1u);
  const std::string leases = "redisched:{" + topic_ + "}:leases";
  auto enc = redis_.call({"OBJECT", "ENCODING", leases});
  ASSERT_EQ(enc->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(enc->str, enc->len), "hashtable");
  EXPECT_EQ(redis_.call({"HLEN", leases})->integer, 2) << "the lease and the pin";
  EXPECT_EQ(integer("ack", {"one", std::to_string(held.jobs[0].token)}), 1);
  EXPECT_EQ(redis_.call({"HLEN", leases})->integer, 1) << "the pin stays";
  EXPECT_EQ(stat("reserved"), 0);
}

// The reserved set stays a skiplist (its one long member, at +inf): a
// listpack of a busy worker's few dozen reservations was scanned, and its
// scores parsed, for every reservation added or taken out. Nothing that
// counts or lists reservations, or says when the next one lapses, sees it.
TEST_F(FunctionsTest, ReservedIsASkiplistAndItsPinIsNoReservation) {
  const std::string reserved = "redisched:{" + topic_ + "}:reserved";
  auto encoding = [&] {
    auto enc = redis_.call({"OBJECT", "ENCODING", reserved});
    return enc->type == REDIS_REPLY_STRING ? std::string(enc->str, enc->len) : "none";
  };
  // A set as version 15 left it: a listpack of reservations, no pin.
  put("old", 1000);
  auto old = reserve(1, 1000, {"TTR", "500"});
  ASSERT_EQ(old.jobs.size(), 1u);
  const std::string old_member = "old" + std::string(1, '\0') + std::to_string(old.jobs[0].token);
  ASSERT_EQ(redis_.call({"DEL", reserved})->integer, 1);
  ASSERT_EQ(redis_.call({"ZADD", reserved, "1500", old_member})->integer, 1);
  ASSERT_EQ(encoding(), "listpack");

  for (const char* id : {"a", "b", "c"}) put(id, 1000);
  auto held = reserve(2, 1000, {"TTR", "1000"});
  ASSERT_EQ(ids(held), (Args{"a", "b"}));
  EXPECT_EQ(encoding(), "skiplist");
  EXPECT_EQ(redis_.call({"ZCARD", reserved})->integer, 4) << "three reservations and the pin";
  EXPECT_EQ(stat("reserved", 1000), 3);
  auto listed = call("list", {"reserved", "0", "10", "NOW", "1000"});
  ASSERT_EQ(listed->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(listed->element[0]->integer, 3);
  EXPECT_EQ(listed->elements, 4u) << "the three reservations, no pin";

  // Acked, released and lapsed, the reservations go; the pin stays, and
  // nothing is said to lapse at +inf.
  EXPECT_EQ(integer("ack", {"a", std::to_string(held.jobs[0].token)}), 1);
  EXPECT_EQ(integer("ack", {"b", std::to_string(held.jobs[1].token)}), 1);
  auto requeued = call("requeue", {"NOW", "1600"});
  ASSERT_EQ(requeued->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(requeued->element[0]->integer, 1) << "old lapsed";
  EXPECT_EQ(requeued->element[2]->integer, -1) << "no reservation left to lapse";
  EXPECT_EQ(stat("reserved", 1600), 0);
  EXPECT_EQ(redis_.call({"ZCARD", reserved})->integer, 1) << "the pin stays";
  auto last = reserve(5, 1600);
  auto last_ids = ids(last);
  std::sort(last_ids.begin(), last_ids.end());
  EXPECT_EQ(last_ids, (Args{"c", "old"}));
  EXPECT_EQ(last.next, 31600) << "the earliest deadline, not the pin's +inf";
  for (const auto& j : last.jobs) EXPECT_EQ(integer("ack", {j.id, std::to_string(j.token)}), 1);
  EXPECT_EQ(reserve(1, 1700).next, -1) << "nothing scheduled, nothing reserved";
}

// The ready set stays a skiplist too (a put walked a listpack of a few
// dozen ready jobs to its end), and every read of it steps around the pin:
// counts, pages, the plain take, the pop behind a mark, priority aging.
// (A job out of the ready list's order goes to the set: "a" here.)
TEST_F(FunctionsTest, ReadyIsASkiplistAndItsPinIsNoJob) {
  const std::string ready = "redisched:{" + topic_ + "}:ready";
  put("z", 1000);
  put("a", 1000, {"PRIORITY", "1"});
  auto enc = redis_.call({"OBJECT", "ENCODING", ready});
  ASSERT_EQ(enc->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(enc->str, enc->len), "skiplist");
  EXPECT_EQ(redis_.call({"ZCARD", ready})->integer, 2) << "the job and the pin";
  auto codes = call("putmany", {"2", "b", "x", "0", "c", "x", "0", "NOW", "1000"});
  ASSERT_EQ(codes->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(codes->elements, 2u);
  EXPECT_EQ(codes->element[1]->integer, 1);
  EXPECT_EQ(stat("ready", 1000), 4);
  auto listed = call("list", {"ready", "0", "10", "NOW", "1000"});
  ASSERT_EQ(listed->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(listed->element[0]->integer, 4);
  EXPECT_EQ(listed->elements, 5u) << "four jobs, no pin";

  // The take asks for more than there are: the pin stays behind.
  EXPECT_EQ(ids(reserve(10, 1000)), (Args{"a", "z", "b", "c"}));
  EXPECT_EQ(redis_.call({"ZCARD", ready})->integer, 1) << "the pin stays";
  EXPECT_EQ(stat("ready", 1000), 0);
  EXPECT_TRUE(reserve(10, 1000).jobs.empty());
  // The plain take, from the set alone (the list emptied by a delete).
  put("w", 1000);
  put("y", 1000, {"PRIORITY", "1"});
  EXPECT_EQ(integer("delete", {"w"}), 1);
  EXPECT_EQ(redis_.call({"EXISTS", "redisched:{" + topic_ + "}:queue"})->integer, 0);
  EXPECT_EQ(ids(reserve(10, 1000)), (Args{"y"}));
  EXPECT_EQ(redis_.call({"ZCARD", ready})->integer, 1) << "the pin stays";

  // Paused (the pop path, behind the mark), resumed (the plain take
  // again), and under limits with aging (the pop path, then aging's
  // walk over the priorities): no pin handed out, the pin still there.
  for (const char* id : {"d", "e"}) put(id, 1000);
  EXPECT_EQ(integer("pause", {}), 1);
  EXPECT_TRUE(reserve(10, 1000).jobs.empty());
  EXPECT_EQ(integer("resume", {}), 1);
  auto pulled = call("pull", {"10", "NOW", "1000"});
  ASSERT_EQ(pulled->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(pulled->elements, 5u) << "d and e";
  put("f", 1000, {"PRIORITY", "2"});
  put("g", 1000);
  ASSERT_NE(call("limit", {"CONCURRENCY", "10", "AGING", "1000", "NOW", "1000"})->type,
            REDIS_REPLY_ERROR);
  EXPECT_EQ(ids(reserve(10, 1000)), (Args{"f", "g"}));
  const std::string pin =
      std::string(1, '\0') +
      "unpacked: a member longer than zset-max-listpack-value keeps this set a skiplist";
  auto score = redis_.call({"ZSCORE", ready, pin});
  ASSERT_EQ(score->type, REDIS_REPLY_STRING) << "the pin is gone";
  EXPECT_EQ(std::string(score->str, score->len), "inf");
  EXPECT_EQ(stat("ready", 1000), 0);
}

// The ready list (version 17): jobs put ready in order are appended to it;
// a job that sorts before its end goes to the ready set; reserve hands out
// the two fronts merged, in the one order of priority, due time and put.
class ReadyListTest : public FunctionsTest {
 protected:
  std::string key(const char* name) { return "redisched:{" + topic_ + "}:" + name; }
  long long listed() { return redis_.call({"LLEN", key("queue")})->integer; }
  long long in_set() { return redis_.call({"ZCOUNT", key("ready"), "(-inf", "(+inf"})->integer; }
  // The ids of list <state> offset count (bodies left out).
  std::vector<std::string> page(int offset, int count, long long now, const char* state = "ready") {
    auto r = call("list", {state, std::to_string(offset), std::to_string(count), "NOBODY", "NOW",
                           std::to_string(now)});
    std::vector<std::string> out;
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY);
    if (r->type != REDIS_REPLY_ARRAY) return out;
    for (size_t i = 1; i < r->elements; ++i) out.emplace_back(r->element[i]->element[1]->str);
    return out;
  }
};

TEST_F(ReadyListTest, JobsInOrderAreListedAndReserveMergesBothFronts) {
  for (const char* id : {"a", "b", "c"}) put(id, 1000);
  put("hi", 1000, {"PRIORITY", "5"});  // before the list's end: the set
  put("d", 1001);
  EXPECT_EQ(listed(), 4);
  EXPECT_EQ(in_set(), 1);
  EXPECT_EQ(stat("ready", 1001), 5);
  EXPECT_EQ(state("b"), "ready");
  EXPECT_EQ(page(0, 10, 1001), (Args{"hi", "a", "b", "c", "d"}));
  EXPECT_EQ(ids(reserve(2, 1001)), (Args{"hi", "a"}));
  EXPECT_EQ(listed(), 3);
  // A released job goes back to the set, by its new due time: after b and
  // c, put earlier; before d? No: d was put at 1001, the release is at 1002.
  auto one = reserve(1, 1002);
  ASSERT_EQ(ids(one), Args{"b"});
  EXPECT_EQ(integer("release", {"b", std::to_string(one.jobs[0].token), "NOW", "1002"}), 1);
  EXPECT_EQ(in_set(), 1);
  EXPECT_EQ(page(0, 10, 1002), (Args{"c", "d", "b"}));
  EXPECT_EQ(ids(reserve(10, 1002)), (Args{"c", "d", "b"}));
  EXPECT_EQ(redis_.call({"EXISTS", key("queue")})->integer, 0) << "an empty list is no key";
  EXPECT_EQ(stat("ready", 1002), 0);
}

TEST_F(ReadyListTest, PutManyAppendsABatchInOrderAndSendsEachJobOutOfOrderToTheSet) {
  auto codes = call("putmany", {"3", "a", "x", "0", "b", "x", "0", "c", "x", "0", "NOW", "1000"});
  ASSERT_EQ(codes->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(listed(), 3);
  // A batch whose second job sorts before its first: each job in turn
  // (library 27), so d follows the list's end and e (priority 3) goes to
  // the set.
  codes = call("putmany", {"2", "d", "x", "0", "e", "x", "2", "PRIORITY", "3", "NOW", "1000"});
  ASSERT_EQ(codes->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(listed(), 4);
  EXPECT_EQ(in_set(), 1);
  EXPECT_EQ(page(0, 10, 1000), (Args{"e", "a", "b", "c", "d"}));
  EXPECT_EQ(ids(reserve(10, 1000)), (Args{"e", "a", "b", "c", "d"}));
}

// Delete, update and debounce find a listed job (in no set) and take its
// entry out; a job put again goes to the list's end.
TEST_F(ReadyListTest, DeleteAndUpdateTakeAJobOutOfTheList) {
  for (const char* id : {"a", "b", "c", "d"}) put(id, 1000);
  EXPECT_EQ(integer("delete", {"b"}), 1);
  EXPECT_EQ(listed(), 3);
  EXPECT_EQ(state("b"), "absent");
  EXPECT_EQ(integer("put", {"a", "new a", "UPSERT", "NOW", "1000"}), 2);
  EXPECT_EQ(listed(), 3);
  EXPECT_EQ(page(0, 10, 1000), (Args{"c", "d", "a"}));
  EXPECT_EQ(integer("put", {"c", "later c", "DEBOUNCE", "DELAY", "50", "NOW", "1000"}), 2);
  EXPECT_EQ(state("c", 1000), "delayed");
  EXPECT_EQ(listed(), 2);
  auto r = reserve(10, 1000);
  EXPECT_EQ(ids(r), (Args{"d", "a"}));
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[1].body, "new a");
  EXPECT_EQ(ids(reserve(10, 1050)), Args{"c"});
}

// A delete scans the list from the end nearer the job (by its due time
// between the ends'): either way the one entry goes.
TEST_F(ReadyListTest, DeleteTakesTheEntryOutFromEitherEnd) {
  for (int i = 0; i < 6; ++i) put("l" + std::to_string(i), 1000 + i);
  EXPECT_EQ(integer("delete", {"l4"}), 1);  // nearer the end
  EXPECT_EQ(integer("delete", {"l1"}), 1);  // nearer the front
  EXPECT_EQ(listed(), 4);
  EXPECT_EQ(page(0, 10, 1010), (Args{"l0", "l2", "l3", "l5"}));
  EXPECT_EQ(integer("delete", {"l5"}), 1);
  EXPECT_EQ(integer("delete", {"l0"}), 1);
  EXPECT_EQ(page(0, 10, 1010), (Args{"l2", "l3"}));
}

// Pages of the two merged, at every offset: list jobs put at even times,
// delayed jobs due at odd times made ready into the set in between.
TEST_F(ReadyListTest, PagesMergeTheListAndTheSetAtEveryOffset) {
  std::vector<std::string> want;
  for (int i = 0; i < 12; ++i) {
    const std::string l = "l" + std::to_string(i), d = "d" + std::to_string(i);
    put(l, 1000 + 2 * i);
    put(d, 1000, {"AT", std::to_string(1001 + 2 * i)});
    want.push_back(l);
    want.push_back(d);
  }
  EXPECT_EQ(listed(), 12);
  EXPECT_EQ(page(0, 100, 2000), want);  // (made the delayed ones ready)
  EXPECT_EQ(in_set(), 12);
  for (int offset = 0; offset <= 24; ++offset) {
    for (int count : {1, 3, 7}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + " count " + std::to_string(count));
      std::vector<std::string> slice(want.begin() + std::min(offset, 24),
                                     want.begin() + std::min(offset + count, 24));
      EXPECT_EQ(page(offset, count, 2000), slice);
    }
  }
  EXPECT_EQ(ids(reserve(5, 2000)), (std::vector<std::string>(want.begin(), want.begin() + 5)));
}

// Priority aging looks at the ready set alone: setting it moves the list in.
TEST_F(ReadyListTest, AgingMovesTheListIntoTheSet) {
  for (const char* id : {"a", "b"}) put(id, 1000);
  put("hi", 1003, {"PRIORITY", "2"});
  EXPECT_EQ(listed(), 2);
  ASSERT_NE(call("limit", {"AGING", "1", "NOW", "1003"})->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(listed(), 0);
  EXPECT_EQ(in_set(), 3);
  put("c", 1000);
  EXPECT_EQ(listed(), 0) << "a topic with a mark starts no list";
  EXPECT_EQ(stat("ready", 1003), 4);
  // At 1003 a, b and c have waited 3 ms, worth 3 levels at AGING 1: past
  // hi, which has priority 2 and has not waited.
  EXPECT_EQ(ids(reserve(10, 1003)), (Args{"a", "b", "c", "hi"}));
}

// The delayed list (version 18): jobs put delayed in order of due time are
// appended to it; one due before its end goes to the delayed set; promotion
// takes the two fronts merged, in the one order of due time and put.
class DelayedListTest : public ReadyListTest {
 protected:
  long long later() { return redis_.call({"LLEN", key("later")})->integer; }
  long long delayed_set() { return redis_.call({"ZCARD", key("delayed")})->integer; }
};

TEST_F(DelayedListTest, JobsInDueOrderAreListedAndPromotionMergesBothFronts) {
  put("a", 1000, {"DELAY", "100"});
  put("b", 1000, {"DELAY", "200"});
  put("c", 1000, {"DELAY", "150"});  // due before the list's end: the set
  auto codes = call("putmany", {"2", "d", "x", "2", "DELAY", "300", "e", "x", "2", "DELAY", "300",
                                "NOW", "1000"});
  ASSERT_EQ(codes->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(later(), 4) << "a, b, d, e";
  EXPECT_EQ(delayed_set(), 1) << "c";
  EXPECT_EQ(state("b", 1000), "delayed");
  EXPECT_EQ(field("b", "due"), "1200");
  EXPECT_EQ(stat("delayed", 1000), 5);
  EXPECT_EQ(stat("next_due", 1000), 1100);
  EXPECT_EQ(page(0, 10, 1000, "delayed"), (Args{"a", "c", "b", "d", "e"}));
  EXPECT_EQ(page(1, 2, 1000, "delayed"), (Args{"c", "b"}));
  auto early = reserve(10, 1099);
  EXPECT_TRUE(early.jobs.empty());
  EXPECT_EQ(early.next, 1100) << "the list's front is the next due time";
  EXPECT_EQ(stat("ready", 1160), 2) << "a and c are due";
  EXPECT_EQ(stat("next_due", 1160), 1200);
  EXPECT_EQ(ids(reserve(10, 1160)), (Args{"a", "c"}));
  EXPECT_EQ(page(0, 10, 1160, "delayed"), (Args{"b", "d", "e"}));
  EXPECT_EQ(ids(reserve(10, 1300)), (Args{"b", "d", "e"}));
  EXPECT_EQ(redis_.call({"EXISTS", key("later")})->integer, 0) << "an empty list is no key";
  EXPECT_EQ(stat("delayed", 1300), 0);
}

// A backlog of due jobs larger than one promotion (1000) in both the list
// and the set: every reserve hands them out in due order, stats and list
// count the due ones as ready, and no job is lost on the way.
TEST_F(DelayedListTest, ABacklogLeavesInDueOrderAcrossPromotions) {
  std::vector<std::string> want(2400);
  for (int batch = 0; batch < 2; ++batch) {
    // Batch 0 (the list): due 2000, 2002, ..., 3998; batch 1, put after
    // it, due 2001, 2003, ...: before the list's end, so the set, but its
    // last job, s999 (due 3999), which follows it (each job in turn).
    Args args = {"1000"};
    for (int i = 0; i < 1000; ++i) {
      const int due = 2000 + 2 * i + batch;
      const std::string id = (batch ? "s" : "l") + std::to_string(i);
      want[2 * i + batch] = id;
      args.insert(args.end(), {id, "x", "2", "AT", std::to_string(due)});
    }
    args.insert(args.end(), {"NOW", "1000"});
    ASSERT_EQ(call("putmany", args)->type, REDIS_REPLY_ARRAY);
  }
  for (int i = 0; i < 400; ++i) {  // and 400 more to the list: due 4000...
    want[2000 + i] = "m" + std::to_string(i);
    put(want[2000 + i], 1000, {"AT", std::to_string(4000 + i)});
  }
  EXPECT_EQ(later(), 1401);
  EXPECT_EQ(delayed_set(), 999);
  EXPECT_EQ(stat("ready", 5000), 2400);
  EXPECT_EQ(stat("ready", 2010), 11) << "due at 2000..2010";
  EXPECT_EQ(stat("delayed", 2010), 2389);
  EXPECT_EQ(page(1500, 3, 5000), (Args{want[1500], want[1501], want[1502]}))
      << "due jobs still in delayed are listed as ready, in due order";
  std::vector<std::string> got;
  for (int n = 0; n < 10 && got.size() < want.size(); ++n) {
    for (auto& id : ids(reserve(700, 5000))) got.push_back(id);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(later() + delayed_set(), 0);
}

// In a backlog, a job made ready earlier that falls due after the first
// job left behind waits for it, whether that one is in the list or the
// set: here l1001 (list, due 3001) is first left, s (set, due 3050) next.
TEST_F(DelayedListTest, ABacklogHoldsBackJobsDueAfterTheFirstLeftInTheList) {
  for (int from = 1; from <= 1100; from += 550) {
    Args args = {"550"};
    for (int i = from; i < from + 550; ++i) {
      args.insert(args.end(), {"l" + std::to_string(i), "x", "2", "AT", std::to_string(2000 + i)});
    }
    args.insert(args.end(), {"NOW", "1000"});
    ASSERT_EQ(call("putmany", args)->type, REDIS_REPLY_ARRAY);
  }
  put("s", 1000, {"AT", "3050"});
  EXPECT_EQ(later(), 1100);
  EXPECT_EQ(delayed_set(), 1);
  put("r", 3020, {"PRIORITY", "1"});  // ready, ahead of every priority 0 job
  auto held = reserve(1, 4000);
  EXPECT_TRUE(held.jobs.empty()) << "r is due after l1001, which may still come first";
  EXPECT_EQ(held.next, 0) << "the backlog: call again at once";
  std::vector<std::string> got;
  for (int n = 0; n < 5 && got.size() < 1102; ++n) {
    for (auto& id : ids(reserve(1000, 4000))) got.push_back(id);
  }
  ASSERT_EQ(got.size(), 1102u);
  EXPECT_EQ(got[0], "r") << "once the backlog is all ready, the priority leads";
  EXPECT_EQ(got[1000], "l1000");
  EXPECT_EQ(got[1050], "l1050");
  EXPECT_EQ(got[1051], "s") << "due with l1050, put after it";
  EXPECT_EQ(got[1101], "l1100");
}

// A generated id that a job already holds makes putmany take a number
// above its block, so its batch is not in put order: due together, the
// first goes to the list, and the second, which sorts before it, to the
// set, and the two are handed out in put order.
TEST_F(DelayedListTest, APutManyOutOfPutOrderListsOnlyWhatFollowsTheEnd) {
  put("1000-2", 1000);  // the id the batch's first "*" would be given
  auto codes = call("putmany", {"2", "*", "x", "2", "DELAY", "100", "*", "x", "2", "DELAY", "100",
                                "NOW", "1000"});
  ASSERT_EQ(codes->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(codes->elements, 2u);
  EXPECT_EQ(std::string(codes->element[0]->str), "1000-4");
  EXPECT_EQ(std::string(codes->element[1]->str), "1000-3");
  EXPECT_EQ(later(), 1);
  EXPECT_EQ(delayed_set(), 1);
  EXPECT_EQ(page(0, 10, 1000, "delayed"), (Args{"1000-3", "1000-4"}));
}

// A job put by putmany with DELAY alone skips option parsing: its record,
// its list or set entry and its reply are byte for byte what the full
// parse makes of the same job (here, the same words with PRIORITY 0
// added). In order (the list), due at once (ready), lowercase, a generated
// id; then a batch due before the list's end (the set).
TEST_F(DelayedListTest, APutManyWithDelayAloneStoresWhatTheFullParseStores) {
  auto state_of_topic = [&](bool parsed) {
    redis_.call({"FLUSHALL"});
    std::vector<std::string> out;
    auto batch = [&](std::vector<std::array<const char*, 3>> jobs) {
      Args args{std::to_string(jobs.size())};
      for (const auto& [id, word, delay] : jobs) {
        for (const char* w : {id, "body", parsed ? "4" : "2", word, delay}) args.emplace_back(w);
        if (parsed) {
          args.emplace_back("PRIORITY");
          args.emplace_back("0");
        }
      }
      for (const char* w : {"NOW", "1000"}) args.emplace_back(w);
      auto codes = call("putmany", args);
      EXPECT_EQ(codes->type, REDIS_REPLY_ARRAY);
      for (size_t i = 0; codes->type == REDIS_REPLY_ARRAY && i < codes->elements; ++i) {
        auto* c = codes->element[i];
        out.push_back(c->type == REDIS_REPLY_STRING ? c->str : std::to_string(c->integer));
      }
    };
    batch({{{"a", "DELAY", "100"}},
           {{"b", "DELAY", "200"}},
           {{"d", "DELAY", "0"}},  // due at once: ready
           {{"e", "delay", "200"}},
           {{"*", "DELAY", "300"}}});
    batch({{{"c", "DELAY", "150"}}});  // before the list's end: the set
    for (const char* id : {"a", "b", "c", "d", "e", "1000-5"}) {
      auto r = redis_.call({"HGET", key("jobs"), id});
      out.push_back(r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "(none)");
    }
    for (const char* list : {"later", "queue"}) {
      auto r = redis_.call({"LRANGE", key(list), "0", "-1"});
      for (size_t i = 0; i < r->elements; ++i)
        out.emplace_back(r->element[i]->str, r->element[i]->len);
      out.emplace_back("|");
    }
    for (const char* set : {"delayed", "ready"}) {
      auto r = redis_.call({"ZRANGE", key(set), "-inf", "+inf", "BYSCORE", "WITHSCORES"});
      for (size_t i = 0; i < r->elements; ++i)
        out.emplace_back(r->element[i]->str, r->element[i]->len);
      out.emplace_back("|");
    }
    return out;
  };
  const auto fast = state_of_topic(false);
  EXPECT_EQ(later(), 4) << "a, b, e and the generated one";
  EXPECT_EQ(delayed_set(), 1) << "c";
  EXPECT_EQ(state("d", 1000), "ready");
  EXPECT_EQ(field("e", "due"), "1200");
  EXPECT_EQ(page(0, 10, 1000, "delayed"), (Args{"a", "c", "b", "e", "1000-5"}));
  const auto parsed = state_of_topic(true);
  EXPECT_EQ(fast, parsed);

  // A bad DELAY names its job, and the batch writes nothing.
  redis_.call({"FLUSHALL"});
  auto bad = call("putmany", {"2", "a", "x", "2", "DELAY", "100", "b", "x", "2", "DELAY", "soon",
                              "NOW", "1000"});
  ASSERT_EQ(bad->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(bad->str), "BADARG job 2: DELAY must be an integer, got 'soon'");
  EXPECT_EQ(redis_.call({"EXISTS", key("jobs")})->integer, 0);
}

// Delete, update and debounce find a job in the delayed list by its
// record's flag and take its entry out; a put that names an update
// (REPLACE, UPSERT, DEBOUNCE) places its delayed job in the set.
TEST_F(DelayedListTest, DeleteUpdateAndDebounceTakeAJobOutOfTheList) {
  for (const char* id : {"a", "b", "c", "d"}) put(id, 1000, {"DELAY", "100"});
  EXPECT_EQ(later(), 4);
  EXPECT_EQ(integer("delete", {"b"}), 1);
  EXPECT_EQ(state("b"), "absent");
  EXPECT_EQ(later(), 3);
  EXPECT_EQ(integer("put", {"c", "later c", "DEBOUNCE", "DELAY", "100", "NOW", "1050"}), 2);
  EXPECT_EQ(later(), 2);
  EXPECT_EQ(delayed_set(), 1) << "a put that names an update goes to the set, where the next "
                                 "finds it without a scan";
  EXPECT_EQ(field("c", "due"), "1150");
  Args batch = {"2", "c", "later c", "3",     "DEBOUNCE", "DELAY", "100",
                "e", "x", "2",       "DELAY", "150",      "NOW",   "1050"};
  EXPECT_EQ(call("putmany", batch)->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(later(), 3) << "e, put plainly, to the list; c again to the set";
  EXPECT_EQ(delayed_set(), 1);
  EXPECT_EQ(integer("delete", {"e"}), 1);
  EXPECT_EQ(page(0, 10, 1050, "delayed"), (Args{"a", "d", "c"}));
  EXPECT_EQ(integer("put", {"a", "now a", "UPSERT", "NOW", "1050"}), 2);
  EXPECT_EQ(state("a", 1050), "ready");
  EXPECT_EQ(later(), 1) << "d";
  EXPECT_EQ(listed(), 1) << "a went to the ready list";
  EXPECT_EQ(ids(reserve(10, 1100)), (Args{"a", "d"}));
  // A job promoted from the list still carries the flag in its record; it
  // is found in the sets first, and a release to delayed clears it.
  auto r = reserve(1, 1150);
  ASSERT_EQ(ids(r), Args{"c"});
  EXPECT_EQ(r.jobs[0].body, "later c");
  EXPECT_EQ(
      integer("release", {"c", std::to_string(r.jobs[0].token), "DELAY", "10", "NOW", "1150"}), 1);
  EXPECT_EQ(state("c", 1150), "delayed");
  EXPECT_EQ(delayed_set(), 1);
  EXPECT_EQ(integer("delete", {"c"}), 1);
  EXPECT_EQ(stat("delayed", 1150), 0);
}

// stats counts the due entries at the list's front at every length, and
// the first one not yet due is next_due.
TEST_F(DelayedListTest, StatsCountTheDueFrontAtEveryLength) {
  for (int i = 1; i <= 40; ++i)
    put("j" + std::to_string(i), 1000, {"AT", std::to_string(1000 + i)});
  EXPECT_EQ(later(), 40);
  for (int i = 0; i <= 41; ++i) {
    SCOPED_TRACE(i);
    const int due = std::min(i, 40);
    EXPECT_EQ(stat("ready", 1000 + i), due);
    EXPECT_EQ(stat("delayed", 1000 + i), 40 - due);
    EXPECT_EQ(stat("next_due", 1000 + i), i < 40 ? 1001 + i : -1);
  }
}

// A concurrency cap counts reservations, not the pin: one slot left is
// one job (counting the pin would leave none).
TEST_F(FunctionsTest, AConcurrencyCapDoesNotCountTheReservedPin) {
  ASSERT_NE(call("limit", {"CONCURRENCY", "3", "NOW", "1000"})->type, REDIS_REPLY_ERROR);
  for (const char* id : {"a", "b", "c", "d"}) put(id, 1000);
  EXPECT_EQ(reserve(2, 1000).jobs.size(), 2u);
  EXPECT_EQ(reserve(5, 1000).jobs.size(), 1u);
  EXPECT_EQ(reserve(5, 1000).jobs.size(), 0u);
}

TEST_F(FunctionsTest, ReserveRecoversLapsedJobsWhenNothingIsReady) {
  put("x", 1000);
  ASSERT_EQ(reserve(1, 1000, {"TTR", "50"}).jobs.size(), 1u);
  auto again = reserve(1, 1050);
  EXPECT_EQ(ids(again), Args{"x"});
  EXPECT_EQ(again.jobs[0].attempt, 2);
}

// When fewer than count are ready, lapsed reservations go back first and
// the jobs are handed out in ready order, the recovered one included: a
// higher priority comes first. The plain path (take_plain: jobs made ready
// by promotion are in the ready set), the ready list's merge (jobs put
// ready) and, with limits (their mark at the front of ready), the popping
// one.
TEST_F(FunctionsTest, ReserveRecoversLapsedJobsBeforeItTakesAndKeepsTheOrder) {
  // Each path puts x and y again after their acks: no retry window.
  call("retrywindow", {"0"});
  for (const std::string path : {"plain", "listed", "limited"}) {
    SCOPED_TRACE(path);
    call("delete", {"x"});
    call("delete", {"y"});
    if (path == "limited") call("limit", {"RATE", "100", "1000", "NOW", "1000"});
    if (path == "plain") {
      put("x", 999, {"PRIORITY", "5", "DELAY", "1"});
      put("y", 999, {"DELAY", "1"});
    } else {
      put("x", 1000, {"PRIORITY", "5"});
      put("y", 1000);
    }
    ASSERT_EQ(ids(reserve(1, 1000, {"TTR", "50"})), Args{"x"});
    auto again = reserve(2, 1050);
    EXPECT_EQ(ids(again), (Args{"x", "y"})) << "x lapsed, went back, and its priority leads";
    ASSERT_EQ(again.jobs.size(), 2u);
    EXPECT_EQ(again.jobs[0].attempt, 2);
    for (const auto& j : again.jobs) {
      EXPECT_EQ(integer("ack", {j.id, std::to_string(j.token), "NOW", "1050"}), 1);
    }
  }
}

TEST_F(FunctionsTest, RequeueSendsJobsPastMaxAttemptsToDead) {
  put("x", 1000, {"ATTEMPTS", "2"});
  reserve(1, 1000, {"TTR", "10"});
  call("requeue", {"NOW", "1010"});
  EXPECT_EQ(state("x"), "ready");
  reserve(1, 1011, {"TTR", "10"});
  auto rq = call("requeue", {"NOW", "1021"});
  EXPECT_EQ(rq->element[1]->integer, 1) << "buried";
  EXPECT_EQ(state("x"), "dead");
  EXPECT_EQ(field("x", "error"), "time-to-run lapsed");
  EXPECT_EQ(stat("lapsed_total"), 2);
}

TEST_F(FunctionsTest, FailRetriesWithExponentialBackoffThenDies) {
  put("x", 1000, {"ATTEMPTS", "3", "BACKOFF", "exponential", "100", "150"});
  auto a = reserve(1, 1000);
  EXPECT_EQ(
      std::string(call("fail", {"x", std::to_string(a.jobs[0].token), "e1", "NOW", "1000"})->str),
      "delayed");
  EXPECT_EQ(field("x", "due"), "1100");
  EXPECT_EQ(field("x", "error"), "e1");
  EXPECT_TRUE(reserve(1, 1099).jobs.empty());
  auto b = reserve(1, 1100);
  ASSERT_EQ(b.jobs.size(), 1u);
  EXPECT_EQ(b.jobs[0].attempt, 2);
  call("fail", {"x", std::to_string(b.jobs[0].token), "e2", "NOW", "1100"});
  EXPECT_EQ(field("x", "due"), "1250") << "200 capped at 150";
  auto c = reserve(1, 1250);
  EXPECT_EQ(
      std::string(call("fail", {"x", std::to_string(c.jobs[0].token), "e3", "NOW", "1250"})->str),
      "dead");
  EXPECT_EQ(field("x", "error"), "e3");
  EXPECT_EQ(field("x", "attempts"), "3");
  EXPECT_EQ(stat("failed_total"), 3);
}

TEST_F(FunctionsTest, FailWithFixedBackoffAndBuryAtOnce) {
  put("x", 1000, {"BACKOFF", "fixed", "300", "0"});
  auto a = reserve(1, 1000);
  call("fail", {"x", std::to_string(a.jobs[0].token), "e", "NOW", "1000"});
  EXPECT_EQ(field("x", "due"), "1300");
  auto b = reserve(1, 1300);
  EXPECT_EQ(std::string(
                call("fail", {"x", std::to_string(b.jobs[0].token), "fatal", "DEAD", "NOW", "1300"})
                    ->str),
            "dead");
}

TEST_F(FunctionsTest, ReleaseWithDelayAndPriorityIsNotAnAttempt) {
  put("x", 1000);
  auto a = reserve(1, 1000);
  EXPECT_EQ(integer("release", {"x", std::to_string(a.jobs[0].token), "DELAY", "500", "PRIORITY",
                                "7", "NOW", "1000"}),
            1);
  EXPECT_EQ(state("x", 1000), "delayed");
  EXPECT_EQ(field("x", "priority"), "7");
  EXPECT_EQ(field("x", "attempts"), "0");
  auto b = reserve(1, 1500);
  ASSERT_EQ(b.jobs.size(), 1u);
  EXPECT_EQ(b.jobs[0].attempt, 1);
}

TEST_F(FunctionsTest, TouchExtendsTheReservation) {
  put("x", 1000);
  auto a = reserve(1, 1000, {"TTR", "100"});
  EXPECT_EQ(integer("touch", {"x", std::to_string(a.jobs[0].token), "TTR", "500", "NOW", "1050"}),
            1550);
  EXPECT_EQ(call("requeue", {"NOW", "1200"})->element[0]->integer, 0);
  EXPECT_EQ(state("x"), "reserved");
  EXPECT_EQ(field("x", "deadline"), "1550");
  EXPECT_EQ(integer("touch", {"nope", "1"}), 0);
}

TEST_F(FunctionsTest, PullIsAtMostOnce) {
  put("x", 1000);
  auto r = call("pull", {"5", "NOW", "1000"});
  ASSERT_EQ(r->elements, 4u);
  EXPECT_EQ(std::string(r->element[3]->element[0]->str), "x");
  EXPECT_EQ(state("x"), "absent");
  EXPECT_EQ(call("pull", {"5", "NOW", "1000"})->elements, 3u) << "never again";
  EXPECT_TRUE(reserve(5, 100000).jobs.empty());
}

TEST_F(FunctionsTest, ReserveDeliversAJobOfTtrZeroAtMostOnceInItsPlace) {
  put("a", 1000);
  put("once", 1000, {"TTR", "0"});
  put("b", 1000);
  EXPECT_EQ(field("once", "ttr"), "0");
  auto r = reserve(3, 1000, {"TTR", "5000"});
  ASSERT_EQ(ids(r), (Args{"a", "once", "b"}));
  EXPECT_EQ(r.jobs[1].token, 0) << "no reservation";
  EXPECT_EQ(r.jobs[1].deadline, 0);
  EXPECT_EQ(r.jobs[1].attempt, 1);
  EXPECT_EQ(r.jobs[0].deadline, 6000);
  EXPECT_EQ(state("once"), "absent") << "removed by the reserve itself";
  EXPECT_EQ(stat("reserved", 1000), 2);
  for (const auto& op : {"ack", "release", "touch"}) EXPECT_EQ(integer(op, {"once", "0"}), 0) << op;
  EXPECT_EQ(integer("fail", {"once", "0", "e"}), 0);
  // Nobody acks: the reserved jobs come back after their time-to-run, it never does.
  EXPECT_EQ(ids(reserve(5, 1000 + 8 * 86400000LL)), (Args{"a", "b"}));
}

TEST_F(FunctionsTest, FailWithTheHandlersAttemptsStoresThemOnTheJob) {
  put("x", 1000, {"ATTEMPTS", "5", "BACKOFF", "fixed", "0", "0"});
  for (int i = 1; i <= 3; ++i) {
    auto r = reserve(1, 1000 + i);
    ASSERT_EQ(r.jobs.size(), 1u);
    EXPECT_EQ(r.jobs[0].max_attempts, i == 1 ? 5 : 3);
    const std::string outcome = call("fail", {"x", std::to_string(r.jobs[0].token), "e", "ATTEMPTS",
                                              "3", "NOW", std::to_string(1000 + i)})
                                    ->str;
    EXPECT_EQ(outcome, i < 3 ? "ready" : "dead") << i;
  }
  EXPECT_EQ(field("x", "max_attempts"), "3") << "the maximum that buried it";
  EXPECT_EQ(field("x", "attempts"), "3");
}

TEST_F(FunctionsTest, GetEndsWithOwnTtr) {
  put("plain", 1000);
  put("own", 1000, {"TTR", "30000"});
  auto r = call("get", {"own"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_GE(r->elements, 2u);
  EXPECT_EQ(std::string(r->element[r->elements - 2]->str), "own_ttr");
  EXPECT_EQ(r->element[r->elements - 1]->integer, 1);
  EXPECT_EQ(field("plain", "own_ttr"), "0");
  EXPECT_EQ(field("plain", "ttr"), field("own", "ttr"));
}

TEST_F(FunctionsTest, PausedTopicHandsOutNothing) {
  put("x", 1000);
  EXPECT_EQ(integer("pause", {}), 1);
  EXPECT_EQ(integer("pause", {}), 0);
  auto r = reserve(1, 1000);
  EXPECT_TRUE(r.jobs.empty());
  EXPECT_EQ(r.paused, 1);
  EXPECT_EQ(call("pull", {"1"})->elements, 3u);
  EXPECT_EQ(stat("paused"), 1);
  put("y", 1000);  // puts still work
  EXPECT_EQ(stat("ready"), 2) << "the pause is not counted as a job";
  auto listed = call("list", {"ready", "0", "10"});
  ASSERT_EQ(listed->elements, 3u);
  EXPECT_EQ(listed->element[0]->integer, 2);
  EXPECT_EQ(std::string(listed->element[1]->element[1]->str), "x");
  EXPECT_TRUE(reserve(5, 1000).jobs.empty()) << "still paused after a reserve of many";
  EXPECT_EQ(integer("resume", {}), 1);
  EXPECT_EQ(integer("resume", {}), 0);
  EXPECT_EQ(ids(reserve(5, 1000)), (Args{"x", "y"}));
}

// redisched_shard: a spread topic holds no jobs; every call meant for its
// jobs says where they are, and ending the spread gives the topic back
// with its counter as it was.
TEST_F(FunctionsTest, ASpreadTopicRefersCallsToItsShards) {
  put("before", 1000);
  EXPECT_NE(error("shard", {"1-0", "1-1"}).find("BADSTATE the topic holds jobs"),
            std::string::npos);
  EXPECT_EQ(integer("delete", {"before"}), 1);
  const auto seq = redis_.call({"HGET", "redisched:{" + topic_ + "}:meta", "seq"});
  EXPECT_EQ(integer("shard", {"1-0", "1-1"}), 2);
  auto listed = call("shards", {});
  ASSERT_EQ(listed->elements, 2u);
  EXPECT_EQ(std::string(listed->element[1]->str), "1-1");
  EXPECT_EQ(stat("shards"), 2);
  EXPECT_EQ(stat("ready"), 0) << "the mark is no job";

  for (const auto& [fn, args] : std::vector<std::pair<std::string, Args>>{
           {"put", {"x", "b"}},
           {"putmany", {"1", "x", "b", "0"}},
           {"put", {"*", "b"}},
           {"reserve", {"1"}},
           {"pull", {"1"}},
           {"get", {"x"}},
           {"delete", {"x"}},
           {"pause", {}},
           {"limit", {"CONCURRENCY", "2"}},
           {"schedule", {"s", "b", "EVERY", "1000", "NEXT", "2000"}}}) {
    EXPECT_EQ(error(fn, args), "SHARDED 1-0 1-1") << fn;
  }
  EXPECT_EQ(error("ack", {"x", "1"}), "SHARDED 1-0 1-1") << "a miss says where jobs are";
  EXPECT_EQ(error("put", {"x", "b", "REPLACE"}), "SHARDED 1-0 1-1");
  EXPECT_EQ(redis_.call({"ZCOUNT", "redisched:{" + topic_ + "}:ready", "-inf", "(+inf"})->integer,
            1)
      << "a refused reserve puts the mark back";
  EXPECT_EQ(redis_.call({"HLEN", "redisched:{" + topic_ + "}:jobs"})->integer, 0);

  // A new list replaces the old; a former shard refers to its topic.
  EXPECT_EQ(integer("shard", {"2-0", "2-1", "2-2"}), 3);
  EXPECT_EQ(error("get", {"x"}), "SHARDED 2-0 2-1 2-2");
  EXPECT_NE(error("shard", {"a", "a"}).find("given twice"), std::string::npos);
  EXPECT_NE(error("shard", {"a b"}).find("shard suffix"), std::string::npos);

  // Ended: the topic takes jobs again, its counter where it was.
  EXPECT_EQ(integer("shard", {}), 0);
  EXPECT_EQ(redis_.call({"HGET", "redisched:{" + topic_ + "}:meta", "seq"})->str,
            std::string(seq->str));
  put("after", 1000);
  EXPECT_EQ(ids(reserve(5, 1000)), (Args{"after"}));
  EXPECT_EQ(stat("shards"), 0);

  EXPECT_EQ(integer("delete", {"after"}), 1);
  EXPECT_EQ(integer("shard", {"*"}), 1);
  EXPECT_EQ(error("get", {"nothing"}), "SHARDED *");
  EXPECT_EQ(stat("shards"), -1) << "a former shard";
  EXPECT_EQ(integer("shard", {}), 0);
  EXPECT_EQ(integer("pause", {}), 1);
  EXPECT_NE(error("shard", {"a"}).find("BADSTATE the topic is paused"), std::string::npos);
}

// redisched_limit: a rate per fixed window and a cap on reservations, for
// every worker together; the mark that finds them is no job.
TEST_F(FunctionsTest, LimitsHoldTheRateAndTheConcurrencyOfATopic) {
  for (int i = 0; i < 10; ++i) put("j" + std::to_string(i), 1000);
  auto limits = [&](Args args) {
    auto r = call("limit", args);
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << (r->str ? r->str : "");
    std::vector<long long> out;
    for (size_t i = 0; i < r->elements; ++i) out.push_back(r->element[i]->integer);
    return out;
  };
  EXPECT_EQ(limits({}), (std::vector<long long>{0, 0, 0, 0})) << "none at first";
  EXPECT_EQ(limits({"RATE", "3", "1000", "NOW", "1000"}), (std::vector<long long>{3, 1000, 0, 0}));
  EXPECT_EQ(stat("ready", 1000), 10) << "the mark is not a job";
  EXPECT_EQ(stat("limit_rate", 1000), 3);

  // Window [1000, 2000): three jobs, in order, then nothing until 2000.
  auto r = reserve(2, 1000);
  EXPECT_EQ(ids(r), (Args{"j0", "j1"}));
  r = reserve(5, 1500);
  EXPECT_EQ(ids(r), (Args{"j2"}));
  EXPECT_EQ(r.next, 2000) << "the rate's next window";
  EXPECT_EQ(stat("limit_used", 1500), 3);
  r = reserve(1, 1999);
  EXPECT_TRUE(r.jobs.empty());
  EXPECT_EQ(r.next, 2000);
  EXPECT_EQ(call("pull", {"1", "NOW", "1999"})->elements, 3u) << "pull counts too";
  auto listed = call("list", {"ready", "0", "1", "NOW", "1999"});
  EXPECT_EQ(listed->element[0]->integer, 7);
  EXPECT_EQ(std::string(listed->element[1]->element[1]->str), "j3") << "list skips the mark";
  // Setting the rate it has keeps the window's count: no window hands out
  // more than the rate, however often the limits are set.
  EXPECT_EQ(limits({"RATE", "3", "1000", "NOW", "2000"}), (std::vector<long long>{3, 1000, 0, 0}));
  r = reserve(5, 2000);
  EXPECT_EQ(ids(r), (Args{"j3", "j4", "j5"}));
  EXPECT_EQ(stat("limit_used", 2000), 3);
  EXPECT_EQ(limits({"RATE", "3", "1000", "CONCURRENCY", "0", "NOW", "2001"}),
            (std::vector<long long>{3, 1000, 0, 0}));
  EXPECT_TRUE(reserve(5, 2001).jobs.empty()) << "the count was kept";
  EXPECT_EQ(stat("limit_used", 2001), 3);
  EXPECT_EQ(limits({"RATE", "2", "1000", "NOW", "2002"}), (std::vector<long long>{2, 1000, 0, 0}));
  EXPECT_EQ(stat("limit_used", 2002), 3) << "a new rate in the same window keeps the count";
  EXPECT_TRUE(reserve(5, 2002).jobs.empty());
  // The mark lost apart from the meta (a restore of one key): setting the
  // limits again puts it back.
  const std::string ready_key = "redisched:{" + topic_ + "}:ready";
  EXPECT_EQ(redis_.call({"ZREM", ready_key, std::string("\0limited", 8)})->integer, 1);
  EXPECT_EQ(limits({"RATE", "2", "1000", "NOW", "2002"}), (std::vector<long long>{2, 1000, 0, 0}));
  EXPECT_TRUE(reserve(5, 2002).jobs.empty()) << "limited again";

  // A cap of four reservations: six are held, so none until two end.
  EXPECT_EQ(limits({"RATE", "0", "1", "CONCURRENCY", "4"}), (std::vector<long long>{0, 0, 4, 0}));
  EXPECT_TRUE(reserve(5, 2000).jobs.empty());
  auto held = r.jobs;
  EXPECT_EQ(integer("ack", {held[0].id, std::to_string(held[0].token), "NOW", "2000"}), 1);
  EXPECT_EQ(integer("ack", {held[1].id, std::to_string(held[1].token), "NOW", "2000"}), 1);
  EXPECT_EQ(integer("ack", {held[2].id, std::to_string(held[2].token), "NOW", "2000"}), 1);
  r = reserve(5, 2000);
  EXPECT_EQ(ids(r), (Args{"j6"})) << "3 of the first 6 still held, 1 slot left of 4";
  EXPECT_GT(r.next, 2000) << "when the first reservation lapses";

  // Under a full cap a pull says when a reservation lapses, too; once it
  // has lapsed (pull does not recover it), not "at once" over and over.
  auto pulled = call("pull", {"1", "NOW", "2000"});
  ASSERT_EQ(pulled->elements, 3u);
  EXPECT_GT(pulled->element[1]->integer, 2000);
  pulled = call("pull", {"1", "NOW", "40000"});
  ASSERT_EQ(pulled->elements, 3u);
  EXPECT_NE(pulled->element[1]->integer, 0);

  // Paused and limited: paused wins; resumed, the limits hold again.
  EXPECT_EQ(integer("pause", {}), 1);
  EXPECT_EQ(reserve(5, 2000).paused, 1);
  EXPECT_EQ(stat("ready", 2000), 3) << "neither mark is a job";
  EXPECT_EQ(integer("resume", {"NOW", "2000"}), 1);
  EXPECT_TRUE(reserve(5, 2000).jobs.empty());

  // No limits: the mark goes, and everything left is handed out.
  EXPECT_EQ(limits({"CONCURRENCY", "0"}), (std::vector<long long>{0, 0, 0, 0}));
  EXPECT_EQ(ids(reserve(5, 2000)), (Args{"j7", "j8", "j9"}));
  EXPECT_EQ(redis_.call({"ZCOUNT", "redisched:{" + topic_ + "}:ready", "-inf", "(+inf"})->integer,
            0)
      << "no job and no mark left (the pin at +inf stays)";

  // A rate with room left: a reserve that finds fewer jobs than it asks for
  // gets the usual next (here the first lapse), not the window's end.
  EXPECT_EQ(limits({"RATE", "10", "1000"}), (std::vector<long long>{10, 1000, 0, 0}));
  put("late", 3000);
  r = reserve(5, 3000);
  EXPECT_EQ(ids(r), (Args{"late"}));
  EXPECT_EQ(r.next, 31000) << "the first reservation's lapse, not 4000";

  EXPECT_NE(error("limit", {"RATE", "5"}).find("RATE"), std::string::npos);
  EXPECT_NE(error("limit", {"RATE", "5", "0"}).find("RATE window"), std::string::npos);
  EXPECT_NE(error("limit", {"CONCURRENCY", "-1"}).find("CONCURRENCY"), std::string::npos);
}

// DEBOUNCE: a waiting job takes the last put's body and due time; a running
// one is left alone.
// AGING: with a steady stream of priority-5 jobs, a priority-0 job still
// runs within 5 levels * 100 ms of its due time; without aging it starves.
TEST_F(FunctionsTest, PriorityAgingBoundsTheWaitOfALowPriorityJob) {
  auto run = [&](bool aging) {
    const std::string saved = topic_;
    topic_ = unique_topic();
    if (aging) {
      auto r = call("limit", {"AGING", "100", "NOW", "1000"});
      EXPECT_EQ(r->type, REDIS_REPLY_ARRAY);
      EXPECT_EQ(r->element[3]->integer, 100);
    }
    put("low", 1000);
    long long ran = -1;
    for (long long t = 1000; t < 2000 && ran < 0; t += 2) {
      // A high-priority job comes every 2 ms, and one job is taken.
      put("h" + std::to_string(t), t, {"PRIORITY", "5"});
      auto r = reserve(1, t + 1);
      if (!r.jobs.empty() && r.jobs[0].id == "low") ran = t + 1;
    }
    topic_ = saved;
    return ran;
  };
  const long long with = run(true);
  EXPECT_GE(with, 1000 + 5 * 100 - 2) << "not before its effective priority passes theirs";
  EXPECT_LE(with, 1000 + 5 * 100 + 4) << "the bound: (5 - 0) levels * 100 ms";
  EXPECT_EQ(run(false), -1) << "without aging the stream starves it";
}

TEST_F(FunctionsTest, DebounceMovesAWaitingJobAndLeavesARunningOne) {
  auto put_d = [&](const std::string& body, long long now) {
    return integer("put", {"ev", body, "DELAY", "100", "DEBOUNCE", "NOW", std::to_string(now)});
  };
  EXPECT_EQ(put_d("first", 1000), 1);
  EXPECT_EQ(put_d("second", 1050), 2);
  EXPECT_EQ(field("ev", "body"), "second");
  EXPECT_EQ(field("ev", "due"), "1150");
  EXPECT_TRUE(reserve(1, 1149).jobs.empty()) << "the first due time was moved";
  auto r = reserve(1, 1150);
  ASSERT_EQ(ids(r), (Args{"ev"}));
  EXPECT_EQ(r.jobs[0].body, "second");
  EXPECT_EQ(put_d("third", 1160), -1) << "running: left alone";
  EXPECT_EQ(state("ev"), "reserved");
  EXPECT_EQ(integer("ack", {"ev", std::to_string(r.jobs[0].token), "NOW", "1170"}), 1);
  EXPECT_EQ(put_d("fourth", 1180), 1) << "gone: a new one";

  // In one putmany: the second finds the first's version waiting.
  auto many = call("putmany", {"2", "m", "a", "3", "DELAY", "5", "DEBOUNCE", "m", "b", "3", "DELAY",
                               "9", "DEBOUNCE", "NOW", "2000"});
  ASSERT_EQ(many->elements, 2u);
  EXPECT_EQ(many->element[0]->integer, 1);
  EXPECT_EQ(many->element[1]->integer, 2);
  EXPECT_EQ(field("m", "due"), "2009");
  EXPECT_EQ(field("m", "body"), "b");

  EXPECT_NE(error("put", {"x", "b", "DEBOUNCE", "UPSERT"}).find("one of REPLACE, UPSERT"),
            std::string::npos);
  EXPECT_NE(error("put", {"*", "b", "DEBOUNCE"}).find("DEBOUNCE"), std::string::npos);
}

TEST_F(FunctionsTest, KickBringsDeadJobsBackWithFreshAttempts) {
  for (const char* id : {"a", "b", "c"}) {
    put(id, 1000, {"ATTEMPTS", "1"});
    auto r = reserve(1, 1000);
    call("fail", {id, std::to_string(r.jobs[0].token), "x", "NOW", "1000"});
  }
  EXPECT_EQ(stat("dead"), 3);
  EXPECT_EQ(integer("kick", {"a", "not-dead"}), 1);
  EXPECT_EQ(state("a"), "ready");
  EXPECT_EQ(field("a", "attempts"), "0");
  EXPECT_EQ(integer("kickall", {"LIMIT", "10"}), 2);
  EXPECT_EQ(stat("dead"), 0);
  EXPECT_EQ(stat("ready"), 3);
}

TEST_F(FunctionsTest, AckWithKeepRetainsTheJobAsDoneThenDropsIt) {
  put("x", 1000);
  auto r = reserve(1, 1000);
  EXPECT_EQ(integer("ack", {"x", std::to_string(r.jobs[0].token), "KEEP", "100", "NOW", "1000"}),
            1);
  EXPECT_EQ(state("x"), "done");
  EXPECT_EQ(field("x", "finished"), "1000");
  EXPECT_EQ(integer("put", {"x", "again", "NOW", "1050"}), -1) << "a kept job still holds its id";
  call("requeue", {"NOW", "1100"});
  EXPECT_EQ(state("x"), "absent");
}

TEST_F(FunctionsTest, KeepAndResultGoWithTheJobAndFinishedJobsAreSignalled) {
  RawRedis sub(shared_redis().port());
  const std::string channel = "redisched:{" + topic_ + "}:done";
  ASSERT_EQ(sub.call({"SSUBSCRIBE", channel})->type, REDIS_REPLY_ARRAY);
  // The next message: the ids it names.
  const auto message = [&] {
    auto m = sub.next();
    EXPECT_EQ(std::string(m->element[0]->str), "smessage");
    return std::string(m->element[2]->str, m->element[2]->len);
  };

  put("k", 1000, {"KEEP", "60000"});
  EXPECT_EQ(field("k", "keep"), "60000");
  auto r = call("reserve", {"1", "NOW", "1000"});
  ASSERT_EQ(r->element[3]->elements, 10u);
  EXPECT_EQ(r->element[3]->element[9]->integer, 60000) << "reserve reports the keep";
  const std::string token = std::to_string(r->element[3]->element[2]->integer);
  EXPECT_NE(error("ack", {"k", token, "KEEP", "5", "RESULT", "12345", "MAXBODY", "4"})
                .find("RESULT is 5 bytes"),
            std::string::npos);
  EXPECT_EQ(state("k"), "reserved") << "refused acks change nothing";
  EXPECT_EQ(integer("ack",
                    {"k", token, "KEEP", "60000", "RESULT", std::string("r\0s", 3), "NOW", "1010"}),
            1);
  EXPECT_EQ(message(), "k");
  EXPECT_EQ(state("k"), "done");
  EXPECT_EQ(field("k", "result"), std::string("r\0s", 3));
  EXPECT_EQ(field("k", "expires"), "61010");

  // Dead, by fail and by a lapse; deleted while waiting; acked many with KEEP.
  put("f", 1000, {"ATTEMPTS", "1", "KEEP", "100"});
  put("l", 1000, {"ATTEMPTS", "1", "TTR", "10", "KEEP", "100"});
  put("d", 1000, {"KEEP", "100"});
  put("m1", 1000);
  put("m2", 1000);
  auto two = reserve(2, 1000);
  ASSERT_EQ(ids(two), (Args{"f", "l"}));
  call("fail", {"f", std::to_string(two.jobs[0].token), "no", "NOW", "1000"});
  EXPECT_EQ(message(), "f");
  call("requeue", {"NOW", "1010"});
  EXPECT_EQ(message(), "l");
  EXPECT_EQ(integer("delete", {"d", "k"}), 2);
  EXPECT_EQ(message(), "d") << "a finished job's deletion is not signalled again";
  auto ms = reserve(2, 1100);
  ASSERT_EQ(ids(ms), (Args{"m1", "m2"}));
  call("ackmany", {"2", "m1", std::to_string(ms.jobs[0].token), "m2",
                   std::to_string(ms.jobs[1].token), "KEEP", "10", "NOW", "1100"});
  EXPECT_EQ(message(), "m1\nm2") << "one message per call";
  // An ack without KEEP publishes nothing: the next message is the put's.
  put("q", 1200);
  auto q = reserve(1, 1200);
  EXPECT_EQ(integer("ack", {"q", std::to_string(q.jobs[0].token), "NOW", "1200"}), 1);
  EXPECT_EQ(integer("delete", {"nothing-here"}), 0);
  put("plain", 1300);
  EXPECT_EQ(integer("delete", {"plain"}), 1);
  EXPECT_EQ(message(), "plain") << "deleted, kept or not: its waiter wakes (version 19)";
  put("z", 1300, {"KEEP", "100", "TTR", "0"});
  put("y", 1300, {"KEEP", "100"});
  EXPECT_EQ(ids(reserve(1, 1300)), (Args{"z"}));
  EXPECT_EQ(message(), "z") << "taken for good: gone for its waiter";
  auto pulled = call("pull", {"1", "NOW", "1300"});
  EXPECT_EQ(message(), "y");
}

// The sweep signal (version 29): one classic channel for every topic, told
// when a reservation lapses before every other the topic holds, and when a
// schedule is put: a sweeper requeues a topic when it should, and learns of
// topics with schedules, without reading every topic.
TEST_F(FunctionsTest, ReservationsThatLapseFirstAndSchedulesAreSignalledForSweepers) {
  RawRedis sub(shared_redis().port());
  ASSERT_EQ(sub.call({"SUBSCRIBE", "redisched:sweep"})->type, REDIS_REPLY_ARRAY);
  const auto message = [&] {
    auto m = sub.next();
    EXPECT_EQ(std::string(m->element[0]->str), "message");
    return std::string(m->element[2]->str, m->element[2]->len);
  };
  const std::string lapse = "lapse " + topic_ + " ";
  put("a", 1000);
  put("b", 1000, {"TTR", "500"});
  put("c", 1000, {"TTR", "60000"});
  put("d", 1000);
  ASSERT_EQ(ids(reserve(1, 1000)), (Args{"a"}));
  EXPECT_EQ(message(), lapse + "31000") << "the first reservation (the default TTR, 30 s)";
  ASSERT_EQ(ids(reserve(1, 1000)), (Args{"b"}));
  EXPECT_EQ(message(), lapse + "1500") << "one that lapses before it";
  auto c = reserve(1, 1000);
  ASSERT_EQ(ids(c), (Args{"c"}));
  // One that lapses after the others says nothing: the next message is the
  // touch's, which moves c's deadline before every other.
  EXPECT_EQ(integer("touch", {"c", std::to_string(c.jobs[0].token), "TTR", "100", "NOW", "1100"}),
            1200);
  EXPECT_EQ(message(), lapse + "1200");
  EXPECT_EQ(integer("schedule", {"tick", "x", "EVERY", "1000", "NEXT", "5000", "NOW", "1100"}), 1);
  EXPECT_EQ(message(), "schedules " + topic_);
  // Once every reservation has ended, the next one is the first again.
  call("requeue", {"NOW", "40000"});
  ASSERT_EQ(reserve(4, 40000).jobs.size(), 4u);
  EXPECT_EQ(message(), lapse + "40500") << "b's TTR, the earliest of the call";
}

// Schedules: each tick's job is put by the first tick call that names the
// schedule's next tick; the others are told (-3), and nothing runs twice.
TEST_F(FunctionsTest, TicksArePutOnceByWhicheverSchedulerIsFirst) {
  RawRedis sub(shared_redis().port());
  ASSERT_EQ(sub.call({"SSUBSCRIBE", "redisched:{" + topic_ + "}:meta"})->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(integer("schedule", {"beat", "hello", "EVERY", "1000", "NEXT", "5000", "PRIORITY", "4",
                                 "KEEP", "100", "NOW", "4000"}),
            1);
  EXPECT_EQ(std::string(sub.next()->element[2]->str), "beat") << "schedulers hear of it";
  EXPECT_EQ(stat("schedules"), 1);
  EXPECT_NE(error("tick", {"beat", "5000", "6000", "RUN", "5000", "NOW", "4999"}).find("to come"),
            std::string::npos)
      << "no tick before its time";
  EXPECT_EQ(integer("tick", {"beat", "5000", "6000", "RUN", "5000", "NOW", "5001"}), 1);
  EXPECT_EQ(integer("tick", {"beat", "5000", "6000", "RUN", "5000", "NOW", "5002"}), -3)
      << "a second scheduler of the same tick";
  EXPECT_EQ(field("beat@5000", "priority"), "4");
  EXPECT_EQ(field("beat@5000", "keep"), "100");
  EXPECT_EQ(field("beat@5000", "body"), "hello");
  // Changed with its next tick back at 5000: the tick put already is not put again.
  EXPECT_EQ(integer("schedule", {"beat", "hello", "EVERY", "1000", "NEXT", "5000", "NOW", "5003"}),
            2);
  EXPECT_EQ(std::string(sub.next()->element[2]->str), "beat");
  EXPECT_EQ(integer("delete", {"beat@5000"}), 1);
  EXPECT_EQ(integer("tick", {"beat", "5000", "7000", "RUN", "5000", "NOW", "6500"}), 2);
  EXPECT_EQ(state("beat@5000"), "absent");
  EXPECT_EQ(integer("pauseschedule", {"beat"}), 1);
  EXPECT_EQ(integer("pauseschedule", {"beat"}), -2);
  EXPECT_EQ(integer("tick", {"beat", "7000", "8000", "RUN", "7000", "NOW", "7000"}), -2);
  EXPECT_EQ(integer("resumeschedule", {"beat", "NEXT", "9000"}), 1);
  EXPECT_EQ(integer("tick", {"beat", "9000", "10000", "NOW", "9500"}), 2) << "skipped: no job";
  EXPECT_EQ(state("beat@9000"), "absent");
  EXPECT_NE(error("tick", {"beat", "10000", "10000"}).find("after expect"), std::string::npos);
  EXPECT_NE(error("schedule", {"x", "b", "EVERY", "5", "CRON", "* * * * *", "UTC", "NEXT", "1"})
                .find("CRON expr zone or EVERY"),
            std::string::npos);
  EXPECT_EQ(integer("unschedule", {"beat"}), 1);
  EXPECT_EQ(integer("unschedule", {"beat"}), 0);
  EXPECT_EQ(stat("schedules"), 0);
  EXPECT_EQ(integer("tick", {"beat", "10000", "11000", "NOW", "10000"}), 0);
}

TEST_F(FunctionsTest, ListAndStatsShowDueJobsAsReady) {
  put("soon", 1000, {"DELAY", "100"});
  EXPECT_EQ(stat("delayed", 1050), 1);
  EXPECT_EQ(stat("ready", 1050), 0);
  EXPECT_EQ(stat("delayed", 1100), 0) << "due: made ready, as reserve would";
  EXPECT_EQ(stat("ready", 1100), 1);
  put("later", 1100, {"DELAY", "100"});
  auto page = call("list", {"ready", "0", "10", "NOW", "1200"});
  ASSERT_EQ(page->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(page->element[0]->integer, 2);
}

TEST_F(FunctionsTest, ListPagesJobsInTheOrderTheyLeave) {
  for (int i = 0; i < 5; ++i)
    put("d" + std::to_string(i), 1000, {"DELAY", std::to_string(500 - i)});
  auto page = call("list", {"delayed", "1", "2", "NOBODY", "NOW", "1000"});
  ASSERT_EQ(page->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(page->element[0]->integer, 5);
  ASSERT_EQ(page->elements, 3u);
  EXPECT_EQ(std::string(page->element[1]->element[1]->str), "d3");
  EXPECT_EQ(std::string(page->element[2]->element[1]->str), "d2");
}

TEST_F(FunctionsTest, BadArgumentsAreRefusedByNameAndChangeNothing) {
  put("keep", 1000);
  const std::vector<std::pair<std::string, Args>> bad = {
      {"put", {"", "b"}},
      {"put", {std::string(257, 'i'), "b"}},
      {"put", {"a\nb", "b"}},
      {"put", {"a"}},
      {"put", {"a", "b", "PRIORITY", "1001"}},
      {"put", {"a", "b", "PRIORITY", "-4294966296"}},  // (version 37: down to -4294966295)
      {"put", {"a", "b", "PRIORITY", "high"}},
      {"put", {"a", "b", "DELAY", "1.5"}},
      {"put", {"a", "b", "DELAY", "1", "AT", "5"}},
      {"put", {"a", "b", "TTR", "-1"}},
      {"put", {"a", "b", "TTR", "604800001"}},
      {"put", {"a", "b", "ATTEMPTS", "0"}},
      {"put", {"a", "b", "BACKOFF", "linear", "1", "2"}},
      {"put", {"a", "b", "BACKOFF", "exponential", "100", "10"}},
      {"put", {"a", "b", "COLOR", "red"}},
      {"put", {"a", "b", "PRIORITY"}},
      {"put", {"a", "b", "REPLACE", "UPSERT"}},
      {"put", {"a", "123456", "MAXBODY", "5"}},
      {"putmany", {"2", "a", "b", "0"}},
      {"putmany", {"2", "a", "b", "0", "c", "d", "2", "PRIORITY", "5000"}},
      {"putmany", {"0"}},
      {"putmany", {"1001"}},
      {"reserve", {"0"}},
      {"reserve", {"1001"}},
      {"reserve", {"x"}},
      {"reserve", {"1", "TTR", "-5"}},
      {"reserve", {"1", "TTR", "0"}},
      {"ack", {"keep"}},
      {"ackmany", {"2", "keep", "1"}},
      {"ackmany", {"1", "keep", "1", "KEEP"}},
      {"ack", {"keep", "notanumber"}},
      {"fail", {"keep", "1"}},
      {"fail", {"keep", "1", "e", "ATTEMPTS", "0"}},
      {"fail", {"keep", "1", "e", "ATTEMPTS", "1001"}},
      {"list", {"sideways", "0", "10"}},
      {"list", {"ready", "0", "0"}},
      {"kick", {}},
      {"delete", {}},
      {"requeue", {"LIMIT", "0"}},
      {"stats", {"extra"}},
  };
  for (const auto& [op, args] : bad) {
    const std::string err = error(op, args);
    EXPECT_EQ(err.rfind("BADARG ", 0), 0u) << op << " -> " << err;
  }
  // The last one names the fault precisely.
  EXPECT_EQ(error("put", {"a", "b", "PRIORITY", "1001"}),
            "BADARG PRIORITY must be from -4294966295 to 1000, got 1001");
  EXPECT_EQ(error("putmany", {"2", "a", "b", "0", "c", "d", "2", "PRIORITY", "5000"}),
            "BADARG job 2: PRIORITY must be from -4294966295 to 1000, got 5000");
  EXPECT_EQ(stat("ready"), 1);
  EXPECT_EQ(state("a"), "absent");
  EXPECT_EQ(state("c"), "absent");
}

TEST_F(FunctionsTest, WrongKeysAreRefused) {
  auto r = redis_.call({"FCALL", "redisched_put", "1", "k", "a", "b"});
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str).rfind("BADKEYS", 0), 0u) << r->str;
  // The library remembers keys it checked (by the first key): a later call
  // with the same first key and another key wrong is still refused.
  put("k", 1000);
  const std::string base = "redisched:{" + topic_ + "}:";
  std::vector<std::string> words = {"FCALL", "redisched_stats", "8"};
  for (const char* name :
       {"jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases"}) {
    words.push_back(base + name);
  }
  words[3 + 2] = base + "other";
  r = redis_.call(words);
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_NE(std::string(r->str).find("BADKEYS key 3 must be"), std::string::npos) << r->str;
}

// The worker registry: its own two keys (a prefix of the test's own here,
// so that no other test's workers show).
class RegistryTest : public FunctionsTest {
 protected:
  void SetUp() override {
    FunctionsTest::SetUp();
    redis_.call({"DEL", alive_, entries_});
  }
  ReplyPtr registry(const std::string& op, const Args& args, bool read_only = false) {
    Args words = {read_only ? "FCALL_RO" : "FCALL", "redisched_" + op, "2", alive_, entries_};
    words.insert(words.end(), args.begin(), args.end());
    return redis_.call(words);
  }
  long long beat(const std::string& id, long long ttl, long long now, Args topics = {},
                 Args running = {}) {
    Args a = {id, std::to_string(ttl), "host-1", "4242", "0.1.0", "500"};
    a.push_back(std::to_string(topics.size() / 2));
    a.insert(a.end(), topics.begin(), topics.end());
    a.push_back(std::to_string(running.size() / 3));
    a.insert(a.end(), running.begin(), running.end());
    a.insert(a.end(), {"NOW", std::to_string(now)});
    auto r = registry("beat", a);
    EXPECT_EQ(r->type, REDIS_REPLY_INTEGER) << (r->str ? r->str : "");
    return r->integer;
  }
  // The ids redisched_workers lists at now.
  std::vector<std::string> alive(long long now) {
    auto r = registry("workers", {"NOW", std::to_string(now)}, true);
    std::vector<std::string> out;
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 1; i < r->elements; ++i) out.emplace_back(r->element[i]->element[0]->str);
    return out;
  }
  long long stored() { return redis_.call({"HLEN", entries_})->integer; }

  const std::string base_ = "rt" + std::to_string(::getpid()) + ":{~workers}:";
  const std::string alive_ = base_ + "alive", entries_ = base_ + "entries";
};

TEST_F(RegistryTest, ABeatRegistersRenewsAndExpires) {
  EXPECT_EQ(beat("w1", 5000, 1000, {"emails", "4", "reports", "1"}, {"emails", "job_42", "900"}),
            1);
  EXPECT_EQ(beat("w1", 5000, 2000, {"emails", "4", "reports", "1"}, {"emails", "job_42", "900"}),
            2);
  auto r = registry("workers", {"NOW", "3000"}, true);
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(r->elements, 2u);
  EXPECT_EQ(r->element[0]->integer, 3000);
  const auto* w = r->element[1];
  ASSERT_EQ(w->elements, 9u);
  EXPECT_STREQ(w->element[0]->str, "w1");
  EXPECT_STREQ(w->element[1]->str, "host-1");
  EXPECT_EQ(w->element[2]->integer, 4242);
  EXPECT_STREQ(w->element[3]->str, "0.1.0");
  EXPECT_EQ(w->element[4]->integer, 500);
  EXPECT_EQ(w->element[5]->integer, 2000) << "its last beat";
  EXPECT_EQ(w->element[6]->integer, 7000) << "the last beat + ttl";
  ASSERT_EQ(w->element[7]->elements, 4u);
  EXPECT_STREQ(w->element[7]->element[2]->str, "reports");
  EXPECT_EQ(w->element[7]->element[3]->integer, 1);
  ASSERT_EQ(w->element[8]->elements, 3u);
  EXPECT_STREQ(w->element[8]->element[1]->str, "job_42");
  EXPECT_EQ(w->element[8]->element[2]->integer, 900);

  // Expired: no longer listed, then deleted by another worker's beat.
  EXPECT_EQ(alive(6999), std::vector<std::string>{"w1"});
  EXPECT_TRUE(alive(7000).empty());
  EXPECT_EQ(stored(), 1);
  EXPECT_EQ(beat("w2", 1000, 8000), 1);
  EXPECT_EQ(stored(), 1) << "w1's entry is deleted";
  EXPECT_EQ(beat("w1", 5000, 8000), 1) << "registered anew";
  EXPECT_EQ(alive(8500), (std::vector<std::string>{"w1", "w2"})) << "in id order";
}

TEST_F(RegistryTest, LeaveDeletesTheEntryAtOnce) {
  beat("w1", 5000, 1000);
  auto r = registry("leave", {"w1", "NOW", "1001"});
  EXPECT_EQ(r->integer, 1);
  EXPECT_TRUE(alive(1001).empty());
  EXPECT_EQ(stored(), 0);
  EXPECT_EQ(registry("leave", {"w1"})->integer, 0);
  // One that expired is not alive: 0, and it is deleted all the same.
  beat("w2", 1000, 1000);
  EXPECT_EQ(registry("leave", {"w2", "NOW", "2000"})->integer, 0);
  EXPECT_EQ(stored(), 0);
}

TEST_F(RegistryTest, AReadOfManyWorkersGoesInParts) {
  // More than Lua unpacks at once (about 8000 values).
  for (int i = 0; i < 8200; ++i) {
    redis_.call({"ZADD", alive_, "100000", "w" + std::to_string(i)});
  }
  for (int i = 0; i < 8200; i += 100) beat("w" + std::to_string(i), 5000, 1000);
  auto r = registry("workers", {"NOW", "2000"}, true);
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << (r->str ? r->str : "");
  EXPECT_EQ(r->elements, 1u + 82u) << "the ones with an entry, of 8200 alive";
}

TEST_F(RegistryTest, BadBeatsAreRefusedByNameAndChangeNothing) {
  beat("w1", 5000, 1000, {"emails", "2"});
  const auto before = redis_.call({"HGET", entries_, "w1"});
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"", "5000", "h", "1", "v", "0", "0", "0"}, "worker id is empty"},
      {{std::string(129, 'w'), "5000", "h", "1", "v", "0", "0", "0"}, "longer than 128 bytes"},
      {{"w\n1", "5000", "h", "1", "v", "0", "0", "0"}, "control character"},
      {{"w1", "999", "h", "1", "v", "0", "0", "0"}, "ttl must be from 1000"},
      {{"w1", "5000", "h", "-1", "v", "0", "0", "0"}, "pid must be from 0"},
      {{"w1", "5000", std::string(256, 'h'), "1", "v", "0", "0", "0"}, "host is longer"},
      {{"w1", "5000", "h", "1", "v", "0", "1", "bad topic", "1", "0"}, "may hold only letters"},
      {{"w1", "5000", "h", "1", "v", "0", "1", "emails", "0", "0"}, "concurrency must be from 1"},
      {{"w1", "5000", "h", "1", "v", "0", "1001"}, "ntopics must be from 0 to 1000"},
      {{"w1", "5000", "h", "1", "v", "0", "0", "1", "emails", "", "5"}, "job id is empty"},
      {{"w1", "5000", "h", "1", "v", "0", "0", "0", "BOGUS", "1"}, "unknown option 'BOGUS'"},
      {{"w1", "5000", "h", "1", "v", "0", "0"}, "nrunning is missing"},
  };
  for (const auto& [args, said] : cases) {
    auto r = registry("beat", args);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << said;
    EXPECT_NE(std::string(r->str).find(said), std::string::npos) << r->str;
  }
  auto r = redis_.call({"FCALL", "redisched_beat", "2", alive_, base_ + "other", "w1", "5000"});
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str).rfind("BADKEYS", 0), 0u) << r->str;
  EXPECT_EQ(std::string(redis_.call({"HGET", entries_, "w1"})->str, before->len),
            std::string(before->str, before->len));
  EXPECT_EQ(alive(1001), std::vector<std::string>{"w1"});
}

TEST_F(FunctionsTest, BinaryBodiesAndIdsSurviveIntact) {
  std::string body("\0\xff\x80 binary \r\n", 13);
  std::string id = "unicodé-✓";
  EXPECT_EQ(integer("put", {id, body, "NOW", "1000"}), 1);
  auto r = reserve(1, 1000);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].id, id);
  EXPECT_EQ(r.jobs[0].body, body);
}

// ---- the topic's history (library version 34)

class HistoryTest : public FunctionsTest {
 protected:
  static constexpr long long kT0 = 1800000000000;  // a minute's start
  static constexpr long long kMinute = 60000, kHour = 60 * kMinute, kDay = 24 * kHour;
  using Row = std::array<long long, 8>;  // at put started done failed dead lapsed wait

  std::vector<Row> rows(Args args) {
    auto r = call("history", std::move(args));
    std::vector<Row> out;
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << (r->str ? r->str : "");
    if (r->type != REDIS_REPLY_ARRAY) return out;
    for (size_t i = 1; i < r->elements; ++i) {
      Row row{};
      for (size_t j = 0; j < 8; ++j) row[j] = r->element[i]->element[j]->integer;
      out.push_back(row);
    }
    return out;
  }
  std::vector<Row> minutes(long long from, long long to) {
    return rows({"minute", std::to_string(from), std::to_string(to)});
  }
  Row total() {
    auto all = rows({"total"});
    EXPECT_EQ(all.size(), 1u);
    return all.empty() ? Row{} : all[0];
  }
  std::string history_key() const { return "redisched:{" + topic_ + "}:history"; }
  long long ack(const Taken& j, long long now) {
    return integer("ack", {j.id, std::to_string(j.token), "NOW", std::to_string(now)});
  }
};

TEST_F(HistoryTest, CountsEachKindInItsMinute) {
  put("a", kT0);
  put("b", kT0 + 1000);
  auto r = reserve(2, kT0 + 5000);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(ack(r.jobs[0], kT0 + 6000), 1);
  EXPECT_EQ(ack(r.jobs[0], kT0 + 6001), 0) << "a refused ack counts nothing";
  auto f = call("fail", {r.jobs[1].id, std::to_string(r.jobs[1].token), "boom", "DEAD", "NOW",
                         std::to_string(kT0 + 7000)});
  ASSERT_EQ(f->type, REDIS_REPLY_STATUS);
  // wait: a waited 5 s, b 4 s
  EXPECT_EQ(minutes(kT0, kT0 + kHour), (std::vector<Row>{{kT0, 2, 2, 1, 1, 1, 0, 9000}}));
  EXPECT_EQ(total(), (Row{0, 2, 2, 1, 1, 1, 0, 9000}));
  EXPECT_EQ(stat("put_total"), 2);
  EXPECT_EQ(stat("started_total"), 2);
  EXPECT_EQ(stat("done_total"), 1);
  EXPECT_EQ(stat("wait_total"), 9000);
}

TEST_F(HistoryTest, CountsLapsesRetriesAndPutsOfEveryKind) {
  put("c", kT0, {"ATTEMPTS", "1"});
  put("d", kT0);
  auto r = reserve(2, kT0, {"TTR", "1000"});
  ASSERT_EQ(r.jobs.size(), 2u);
  auto q = call("requeue", {"NOW", std::to_string(kT0 + 2000)});
  ASSERT_EQ(q->type, REDIS_REPLY_ARRAY);
  // c went dead (its one attempt lapsed), d back to ready; then a failure
  // that retries, and a putmany of two plus one refused.
  auto again = reserve(1, kT0 + 3000);
  ASSERT_EQ(ids(again), Args{"d"});
  auto f = call("fail", {"d", std::to_string(again.jobs[0].token), "try again", "NOW",
                         std::to_string(kT0 + 4000)});
  ASSERT_EQ(f->type, REDIS_REPLY_STATUS);
  auto many = call("putmany", {"3", "e", "x", "0", "f", "x", "0", "c", "x", "0", "NOW",
                               std::to_string(kT0 + 5000)});
  ASSERT_EQ(many->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(many->element[2]->integer, -1);
  // put 2+2, started 3 (waits 0, 0, 1000), failed 1, dead 1 (c), lapsed 2
  EXPECT_EQ(total(), (Row{0, 4, 3, 0, 1, 1, 2, 1000}));
}

TEST_F(HistoryTest, FoldsMinutesIntoHoursAndKeepsTotals) {
  put("a", kT0 + 10);
  put("b", kT0 + kMinute + 10);  // the next minute folds the first
  put("c", kT0 + kMinute + 20);
  put("d", kT0 + kHour + 5 * kMinute);  // the next hour
  EXPECT_EQ(minutes(kT0, kT0 + 2 * kHour),
            (std::vector<Row>{{kT0, 1, 0, 0, 0, 0, 0, 0},
                              {kT0 + kMinute, 2, 0, 0, 0, 0, 0, 0},
                              {kT0 + kHour + 5 * kMinute, 1, 0, 0, 0, 0, 0, 0}}));
  EXPECT_EQ(rows({"hour", std::to_string(kT0), std::to_string(kT0 + kDay)}),
            (std::vector<Row>{{kT0, 3, 0, 0, 0, 0, 0, 0}, {kT0 + kHour, 1, 0, 0, 0, 0, 0, 0}}));
  EXPECT_EQ(total()[1], 4);
  EXPECT_TRUE(minutes(kT0 + 2 * kMinute, kT0 + kHour).empty()) << "idle minutes have no rows";
}

TEST_F(HistoryTest, KeepsMinutesForADayAndHoursForThirtyDays) {
  put("a", kT0);
  put("b", kT0 + kHour);  // folds a's minute
  put("c", kT0 + 2 * kDay);
  put("c2", kT0 + 2 * kDay + kMinute);  // writes c's minute (a call of a later one)
  EXPECT_TRUE(minutes(kT0, kT0 + kDay - kMinute).empty()) << "minutes older than a day are dropped";
  EXPECT_EQ(rows({"hour", std::to_string(kT0), std::to_string(kT0 + kDay)}).size(), 2u)
      << "hours stay";
  put("d", kT0 + 40 * kDay);
  put("d2", kT0 + 40 * kDay + kMinute);
  EXPECT_TRUE(rows({"hour", std::to_string(kT0), std::to_string(kT0 + 30 * kDay)}).empty())
      << "hours older than 30 days are dropped";
  EXPECT_EQ(total()[1], 6) << "the totals keep everything";
  auto fields = redis_.call({"HLEN", history_key()});
  EXPECT_LE(fields->integer, 12) << "live fields, at, all, and the m and h fields of recent times";
}

TEST_F(HistoryTest, ALastDayReadStartsInsideTheOldestHourKept) {
  put("a", kT0 + 45 * kMinute);
  put("b", kT0 + kDay + 10 * kMinute);  // writes a's minute
  put("c", kT0 + kDay + 11 * kMinute);  // writes b's: a new hour, the trim
  const long long now = kT0 + kDay + 11 * kMinute;
  auto last_day = minutes(now - now % kMinute - 1439 * kMinute, now);
  ASSERT_FALSE(last_day.empty());
  EXPECT_EQ(last_day.front()[0], kT0 + 45 * kMinute) << "a's minute, 23 h 26 min ago, is kept";
}

TEST_F(HistoryTest, AnEarlierMinuteIsFoldedAtOnce) {
  put("a", kT0 + 5 * kMinute);
  put("b", kT0 + kMinute);  // a call that names an earlier NOW
  EXPECT_EQ(minutes(kT0, kT0 + kHour),
            (std::vector<Row>{{kT0 + kMinute, 1, 0, 0, 0, 0, 0, 0},
                              {kT0 + 5 * kMinute, 1, 0, 0, 0, 0, 0, 0}}));
  auto fields =
      redis_.call({"HEXISTS", history_key(), "p" + std::to_string((kT0 + kMinute) / kMinute)});
  EXPECT_EQ(fields->integer, 0) << "no live field is left behind for the earlier minute";
}

TEST_F(HistoryTest, ElevenKeysCountNothingAndCannotRead) {
  auto keys = core::topic_keys("redisched", topic_);
  Args eleven = {"FCALL", "redisched_put", "11"};
  eleven.insert(eleven.end(), keys.begin(), keys.begin() + 11);
  eleven.insert(eleven.end(), {"x", "body", "NOW", std::to_string(kT0)});
  EXPECT_EQ(redis_.call(eleven)->integer, 1);
  EXPECT_EQ(redis_.call({"EXISTS", history_key()})->integer, 0);
  eleven[1] = "redisched_history";
  eleven.resize(14);
  eleven.push_back("total");
  auto r = redis_.call(eleven);
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str).rfind("BADKEYS redisched_history needs the topic's 12th key", 0),
            0u)
      << r->str;
}

TEST_F(HistoryTest, CallsWriteTheirCountsAboutOnceASecond) {
  for (int i = 0; i < 50; ++i) put("j" + std::to_string(i), kT0 + 10 * i);
  EXPECT_EQ(redis_.call({"EXISTS", history_key()})->integer, 0)
      << "a second's counts wait in the library's memory";
  EXPECT_EQ(total()[1], 50) << "reads include them";
  put("late", kT0 + 1000);
  auto written = redis_.call({"HGET", history_key(), "p" + std::to_string(kT0 / kMinute)});
  ASSERT_EQ(written->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(written->str), "51") << "a call a second after the first writes them";
  EXPECT_EQ(total()[1], 51);
}

TEST_F(HistoryTest, RefusesBadRanges) {
  EXPECT_EQ(error("history", {"week", "0", "1"}).rfind("BADARG expected minute, hour or total", 0),
            0u);
  EXPECT_EQ(error("history", {"minute", "2000", "1000"}), "BADARG to must not be before from");
  EXPECT_NE(error("history", {"minute", "0", std::to_string(2 * kDay)}).find("more than 1441"),
            std::string::npos);
  EXPECT_NE(error("history", {"hour", "0", std::to_string(40 * kDay)}).find("more than 745"),
            std::string::npos);
  EXPECT_EQ(error("history", {"minute", "x", "1"}).rfind("BADARG from must be an integer", 0), 0u);
  EXPECT_EQ(error("history", {"minute"}), "BADARG from is missing");
}

// A spread topic's calls count in its shards; what it counted before it
// was spread stays its own, read with SPREAD by a caller that reads the
// shards too. Without, SHARDED: a caller that did not know reads the list.
TEST_F(HistoryTest, ASpreadTopicKeepsWhatItCountedBeforeAndSaysItIsSpread) {
  put("a", kT0);
  EXPECT_EQ(integer("delete", {"a"}), 1);
  EXPECT_EQ(integer("shard", {"1-0", "1-1"}), 2);
  EXPECT_EQ(error("history", {"total"}), "SHARDED 1-0 1-1");
  EXPECT_EQ(error("history", {"minute", std::to_string(kT0), std::to_string(kT0)}),
            "SHARDED 1-0 1-1");
  EXPECT_EQ(rows({"total", "SPREAD"}), (std::vector<Row>{{0, 1, 0, 0, 0, 0, 0, 0}}));
  EXPECT_EQ(rows({"minute", std::to_string(kT0), std::to_string(kT0 + kMinute), "SPREAD", "NOW",
                  std::to_string(kT0 + kMinute)}),
            (std::vector<Row>{{kT0, 1, 0, 0, 0, 0, 0, 0}}));
  redis_.call({"HSET", "redisched:{" + topic_ + "}:meta", "shards", "*"});
  EXPECT_EQ(error("history", {"total", "SPREAD"}), "SHARDED *") << "a former shard";
}

TEST_F(HistoryTest, AWrongTypedKeyLeavesTheCallDone) {
  redis_.call({"SET", history_key(), "not a hash"});
  put("a", kT0);
  EXPECT_EQ(state("a"), "ready") << "the put stands; its count is skipped";
  redis_.call({"DEL", history_key()});
}

// ---------------------------------------------------------------- flows

// Jobs that wait for jobs of other topics (version 35), with the topics'
// fifteen keys, and a mover made of the four calls any client would make.
class FlowsTest : public FunctionsTest {
 protected:
  static constexpr long long kT0 = 1800000000000;

  // The topic's keys, all fifteen.
  Args keys(const std::string& topic) {
    Args out;
    for (auto name : {"jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases",
                      "queue", "later", "gone", "history", "blocked", "flow", "outbox"}) {
      out.push_back("redisched:{" + topic + "}:" + name);
    }
    return out;
  }
  ReplyPtr on(const std::string& topic, const std::string& op, const Args& args) {
    Args words = {"FCALL", "redisched_" + op, "15"};
    for (auto& k : keys(topic)) words.push_back(k);
    words.insert(words.end(), args.begin(), args.end());
    return redis_.call(words);
  }
  long long int_on(const std::string& topic, const std::string& op, const Args& args) {
    auto r = on(topic, op, args);
    EXPECT_EQ(r->type, REDIS_REPLY_INTEGER) << op << ": " << (r->str ? r->str : "");
    return r->integer;
  }
  std::string error_on(const std::string& topic, const std::string& op, const Args& args) {
    auto r = on(topic, op, args);
    EXPECT_EQ(r->type, REDIS_REPLY_ERROR) << op << " was accepted";
    return r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
  }

  struct Entry {
    std::string id, fn, topic;
    Args args;
  };
  std::vector<Entry> outbox(const std::string& topic) {
    auto r = on(topic, "outbox", {"1000"});
    std::vector<Entry> out;
    EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << (r->str ? r->str : "");
    for (size_t i = 0; i < r->elements; ++i) {
      auto* e = r->element[i];
      Entry x{e->element[0]->str, e->element[1]->str, e->element[2]->str, {}};
      for (size_t a = 3; a < e->elements; ++a)
        x.args.emplace_back(e->element[a]->str, e->element[a]->len);
      out.push_back(x);
    }
    return out;
  }
  // Carries out every entry of the topics' outboxes, the entries they make
  // too, each call made `times` times (a mover stopped before it deleted
  // the entry, and another); the replies of the calls, in order.
  std::vector<std::string> move(const std::vector<std::string>& topics, int times = 1) {
    std::vector<std::string> replies;
    for (bool any = true; any;) {
      any = false;
      for (const auto& t : topics) {
        for (auto& e : outbox(t)) {
          any = true;
          Args args = e.args;
          args.insert(args.end(), {"NOW", std::to_string(now_)});
          for (int i = 0; i < times; ++i) {
            auto r = on(e.topic, e.fn, args);
            EXPECT_NE(r->type, REDIS_REPLY_ERROR) << e.fn << ": " << (r->str ? r->str : "");
            replies.push_back(e.fn + " " +
                              (r->type == REDIS_REPLY_INTEGER ? std::to_string(r->integer) : "*"));
          }
          EXPECT_EQ(int_on(t, "moved", {e.id}), 1);
        }
      }
    }
    return replies;
  }
  std::string state_of(const std::string& topic, const std::string& id) {
    auto r = on(topic, "get", {id, "NOW", std::to_string(now_)});
    if (r->type == REDIS_REPLY_NIL) return "absent";
    return r->element[3]->str;
  }
  // get's field of the job, "" when absent.
  std::string field_of(const std::string& topic, const std::string& id, const std::string& name) {
    auto r = on(topic, "get", {id, "DEPS", "NOW", std::to_string(now_)});
    if (r->type != REDIS_REPLY_ARRAY) return "";
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) != name) continue;
      auto* v = r->element[i + 1];
      return v->type == REDIS_REPLY_INTEGER ? std::to_string(v->integer)
                                            : std::string(v->str, v->len);
    }
    return "";
  }
  // The deps get DEPS shows: "topic/id policy outcome value" each.
  std::vector<std::string> deps(const std::string& topic, const std::string& id) {
    auto r = on(topic, "get", {id, "DEPS", "NOW", std::to_string(now_)});
    std::vector<std::string> out;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) != "deps") continue;
      auto* list = r->element[i + 1];
      for (size_t d = 0; d < list->elements; ++d) {
        auto* f = list->element[d];
        out.push_back(std::string(f->element[1]->str) + "/" + f->element[3]->str + " " +
                      f->element[5]->str + " " + f->element[7]->str + " " +
                      std::string(f->element[9]->str, f->element[9]->len));
      }
    }
    return out;
  }
  void put_on(const std::string& topic, const std::string& id, Args options = {}) {
    Args args = {id, "body of " + id};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"NOW", std::to_string(now_)});
    EXPECT_EQ(int_on(topic, "put", args), 1) << topic << "/" << id;
  }
  // Reserves the topic's next job and acks it (RESULT result when given)
  // or fails it for good.
  std::string take(const std::string& topic, const std::string& result = "", bool fail = false) {
    auto r = on(topic, "reserve", {"1", "NOW", std::to_string(now_)});
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 4) return "";
    std::string id = r->element[3]->element[0]->str;
    std::string token = std::to_string(r->element[3]->element[2]->integer);
    Args args = {id, token};
    if (fail) {
      args.insert(args.end(), {"it broke", "DEAD", "NOW", std::to_string(now_)});
      EXPECT_NE(on(topic, "fail", args)->type, REDIS_REPLY_ERROR);
    } else {
      if (!result.empty()) args.insert(args.end(), {"RESULT", result});
      args.insert(args.end(), {"NOW", std::to_string(now_)});
      EXPECT_EQ(int_on(topic, "ack", args), 1);
    }
    return id;
  }
  long long stat_of(const std::string& topic, const std::string& name) {
    auto r = on(topic, "stats", {"NOW", std::to_string(now_)});
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      if (std::string(r->element[i]->str) == name) return r->element[i + 1]->integer;
    }
    ADD_FAILURE() << "no stat " << name;
    return -1;
  }

  long long now_ = kT0;
  std::string a_ = unique_topic(), b_ = unique_topic(), c_ = unique_topic();
};

TEST_F(FlowsTest, AJobWaitsForEveryDependencyInOtherTopicsThenRunsWithTheirResults) {
  put_on(a_, "invoice", {"AFTER", "2", b_, "report_1", "fail", c_, "report_2", "fail"});
  EXPECT_EQ(state_of(a_, "invoice"), "blocked");
  EXPECT_EQ(field_of(a_, "invoice", "deps_left"), "2");
  EXPECT_EQ(stat_of(a_, "blocked"), 1);
  EXPECT_EQ(stat_of(a_, "outbox"), 2) << "one depend per dependency topic";
  EXPECT_EQ(on(a_, "reserve", {"1", "NOW", std::to_string(now_)})->elements, 3u)
      << "a blocked job is not handed out";
  EXPECT_EQ(move({a_, b_, c_}), (std::vector<std::string>{"depend *", "depend *"}));
  // One dependency is put after its dependent asked for it, one before.
  put_on(b_, "report_1");
  put_on(c_, "report_2");
  EXPECT_EQ(take(b_, "pdf-1"), "report_1");
  EXPECT_EQ(move({a_, b_, c_}), (std::vector<std::string>{"resolve 1"}));
  EXPECT_EQ(state_of(a_, "invoice"), "blocked");
  EXPECT_EQ(field_of(a_, "invoice", "deps_left"), "1");
  EXPECT_EQ(deps(a_, "invoice"), (std::vector<std::string>{b_ + "/report_1 fail done pdf-1",
                                                           c_ + "/report_2 fail pending "}));
  EXPECT_EQ(take(c_, "pdf-2"), "report_2");
  // Released, it tells its dependencies' topics to forget it.
  EXPECT_EQ(move({a_, b_, c_}), (std::vector<std::string>{"resolve 2", "forget 1", "forget 1"}));
  EXPECT_EQ(redis_.call({"EXISTS", keys(b_)[13], keys(c_)[13]})->integer, 0)
      << "what they told it is forgotten with it";
  EXPECT_EQ(state_of(a_, "invoice"), "ready");
  EXPECT_EQ(stat_of(a_, "blocked"), 0);
  EXPECT_EQ(stat_of(b_, "outbox"), 0);
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[14], keys(b_)[14], keys(c_)[14]})->integer, 0)
      << "an outbox carried out is deleted";
  // Released: the outcomes are the job's own now; its flow fields are gone.
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13]})->integer, 0);
  EXPECT_EQ(deps(a_, "invoice"), (std::vector<std::string>{b_ + "/report_1 fail done pdf-1",
                                                           c_ + "/report_2 fail done pdf-2"}));
  EXPECT_EQ(field_of(a_, "invoice", "deps_left"), "0");
  EXPECT_EQ(take(a_), "invoice");
}

TEST_F(FlowsTest, ReleasedItWaitsForItsOwnDueTime) {
  put_on(b_, "x");
  put_on(a_, "later", {"DELAY", "60000", "AFTER", "1", b_, "x", "fail"});
  move({a_, b_});
  take(b_);
  move({a_, b_});
  EXPECT_EQ(state_of(a_, "later"), "delayed");
  now_ += 60000;
  EXPECT_EQ(state_of(a_, "later"), "ready");
}

TEST_F(FlowsTest, AFailedDependencyKillsFailsOrIsDroppedByItsPolicy) {
  for (auto id : {"x", "y", "z"}) put_on(b_, id);
  put_on(a_, "strict", {"AFTER", "1", b_, "x", "fail"});
  put_on(a_, "lenient", {"AFTER", "2", b_, "y", "ignore", b_, "z", "drop"});
  put_on(c_, "grand", {"AFTER", "1", a_, "strict", "ignore"});
  move({a_, b_, c_});
  for (int i = 0; i < 3; ++i) take(b_, "", true);
  move({a_, b_, c_});
  EXPECT_EQ(state_of(a_, "strict"), "dead");
  EXPECT_EQ(field_of(a_, "strict", "error"), "dependency " + b_ + "/x failed: it broke");
  EXPECT_EQ(deps(a_, "strict"), (std::vector<std::string>{b_ + "/x fail failed it broke"}))
      << "the one that killed it shows why";
  EXPECT_EQ(state_of(a_, "lenient"), "ready");
  EXPECT_EQ(deps(a_, "lenient"), (std::vector<std::string>{b_ + "/y ignore failed it broke",
                                                           b_ + "/z drop dropped it broke"}));
  // A dependent's death is news for its own dependents.
  EXPECT_EQ(state_of(c_, "grand"), "ready");
  EXPECT_EQ(deps(c_, "grand"), (std::vector<std::string>{a_ + "/strict ignore failed dependency " +
                                                         b_ + "/x failed: it broke"}));
}

TEST_F(FlowsTest, EveryCallAMoverMakesTwiceChangesNothingTheSecondTime) {
  put_on(b_, "x");
  put_on(b_, "y");
  put_on(a_, "p", {"AFTER", "2", b_, "x", "fail", b_, "y", "fail"});
  EXPECT_EQ(move({a_, b_}, 2), (std::vector<std::string>{"depend *", "depend *"}));
  EXPECT_EQ(redis_.call({"HGET", keys(b_)[13], "x"})->len,
            redis_.call({"HGET", keys(b_)[13], "y"})->len)
      << "recorded once";
  take(b_);
  EXPECT_EQ(move({a_, b_}, 2), (std::vector<std::string>{"resolve 1", "resolve 0"}));
  EXPECT_EQ(field_of(a_, "p", "deps_left"), "1");
  take(b_);
  // (Each resolve carried again, for a job that no longer waits, tells its
  // dependency's topic to forget it too: for nothing here.)
  EXPECT_EQ(move({a_, b_}, 3),
            (std::vector<std::string>{"resolve 2", "resolve 0", "resolve 0", "forget 2", "forget 0",
                                      "forget 0", "forget 0", "forget 0", "forget 0", "forget 0",
                                      "forget 0", "forget 0"}));
  EXPECT_EQ(take(a_), "p");
  EXPECT_EQ(state_of(a_, "p"), "absent");
}

// A depend carried again after its job finished (the mover stopped before
// it deleted the entry) tells nothing new: what the job told its
// dependents stays until they forget it. (The model test found it: the
// second depend sent done without the result, and a mover may carry it
// first.)
TEST_F(FlowsTest, ADependCarriedAgainAfterItsJobFinishedTellsNothingNew) {
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});
  auto asked = outbox(a_);
  ASSERT_EQ(asked.size(), 1u);
  Args depend = asked[0].args;
  depend.insert(depend.end(), {"NOW", std::to_string(now_)});
  EXPECT_EQ(on(b_, "depend", depend)->element[0]->integer, 1);
  put_on(b_, "x");
  EXPECT_EQ(take(b_, "the pdf"), "x");
  EXPECT_EQ(on(b_, "depend", depend)->element[0]->integer, 2) << "finished: its tombstone";
  EXPECT_EQ(outbox(b_).size(), 1u) << "the one resolve its ack sent, no other";
  EXPECT_EQ(int_on(a_, "moved", {asked[0].id}), 1);
  move({a_, b_});
  EXPECT_EQ(deps(a_, "p"), (std::vector<std::string>{b_ + "/x fail done the pdf"}));
  EXPECT_EQ(redis_.call({"EXISTS", keys(b_)[13]})->integer, 0) << "forgotten once p ran";
}

TEST_F(FlowsTest, NewsForAnEarlierJobOfTheSameIdFindsNothing) {
  put_on(b_, "x");
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});
  move({a_, b_});
  take(b_);
  auto news = outbox(b_);
  ASSERT_EQ(news.size(), 1u);
  EXPECT_EQ(int_on(a_, "delete", {"p"}), 1);
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13]})->integer, 0) << "its flow fields went with it";
  put_on(b_, "x2");
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});  // x: in b's retry window
  Args stale = news[0].args;
  EXPECT_EQ(int_on(a_, news[0].fn, stale), 0) << "another gen";
  EXPECT_EQ(state_of(a_, "p"), "blocked");
  move({a_, b_});
  EXPECT_EQ(state_of(a_, "p"), "ready") << "x finished inside the retry window: done";
}

TEST_F(FlowsTest, DependenciesThatFinishedBeforeSettleAtOnce) {
  put_on(b_, "kept", {"KEEP", "60000"});
  put_on(b_, "buried");
  auto r = on(b_, "reserve", {"1", "NOW", std::to_string(now_)});
  EXPECT_EQ(int_on(b_, "ack",
                   {"kept", std::to_string(r->element[3]->element[2]->integer), "KEEP", "60000",
                    "RESULT", "42", "NOW", std::to_string(now_)}),
            1);
  take(b_, "", true);
  put_on(a_, "p", {"AFTER", "2", b_, "kept", "ignore", b_, "buried", "ignore"});
  move({a_, b_});
  EXPECT_EQ(state_of(a_, "p"), "ready");
  EXPECT_EQ(deps(a_, "p"), (std::vector<std::string>{b_ + "/kept ignore done 42",
                                                     b_ + "/buried ignore failed it broke"}));
}

TEST_F(FlowsTest, DeletingADependencyIsItsFailureAndABlockedJobGoesWhole) {
  put_on(b_, "x");
  put_on(a_, "p", {"AFTER", "1", b_, "x", "drop"});
  put_on(a_, "q", {"AFTER", "1", b_, "missing", "fail"});
  move({a_, b_});
  EXPECT_EQ(int_on(b_, "delete", {"x"}), 1);
  move({a_, b_});
  EXPECT_EQ(deps(a_, "p"), (std::vector<std::string>{b_ + "/x drop dropped deleted"}));
  EXPECT_EQ(state_of(a_, "q"), "blocked") << "waits for a job not put yet";
  EXPECT_EQ(int_on(a_, "delete", {"q"}), 1);
  EXPECT_EQ(stat_of(a_, "blocked"), 0);
  put_on(b_, "missing");
  take(b_);
  EXPECT_EQ(move({a_, b_}), (std::vector<std::string>{"forget 1", "resolve 0", "forget 0"}))
      << "no one to tell (and what it told is forgotten)";
}

TEST_F(FlowsTest, AChainRunsInOrderAndATreeFansIn) {
  put_on(c_, "leaf");
  put_on(b_, "mid", {"AFTER", "1", c_, "leaf", "fail"});
  put_on(a_, "root", {"AFTER", "2", b_, "mid", "fail", c_, "leaf", "fail"});
  move({a_, b_, c_});
  EXPECT_EQ(take(b_), "");
  EXPECT_EQ(take(c_, "l"), "leaf");
  move({a_, b_, c_});
  EXPECT_EQ(state_of(b_, "mid"), "ready");
  EXPECT_EQ(state_of(a_, "root"), "blocked");
  EXPECT_EQ(take(b_, "m"), "mid");
  move({a_, b_, c_});
  EXPECT_EQ(deps(a_, "root"),
            (std::vector<std::string>{b_ + "/mid fail done m", c_ + "/leaf fail done l"}));
}

TEST_F(FlowsTest, UpdatingABlockedJobMakesItOrdinary) {
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});
  EXPECT_EQ(int_on(a_, "put", {"p", "new", "DEBOUNCE", "NOW", std::to_string(now_)}), -1);
  EXPECT_EQ(int_on(a_, "put", {"p", "new", "REPLACE", "NOW", std::to_string(now_)}), 2);
  EXPECT_EQ(state_of(a_, "p"), "ready");
  EXPECT_EQ(stat_of(a_, "blocked"), 0);
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13]})->integer, 0);
}

// The most a job may wait for, in one put (its 30001 words are more than
// Lua unpacks at once), released by settlements in calls of 1000.
TEST_F(FlowsTest, AJobWaitsForTenThousand) {
  Args args = {"p", "b", "AFTER", "10000"};
  for (int i = 0; i < 10000; ++i) args.insert(args.end(), {b_, "c" + std::to_string(i), "fail"});
  args.insert(args.end(), {"NOW", std::to_string(now_)});
  ASSERT_EQ(int_on(a_, "put", args), 1);
  EXPECT_EQ(field_of(a_, "p", "deps_total"), "10000");
  const std::string gen = redis_.call({"HGET", keys(a_)[6], "seq"})->str;
  for (int from = 0; from < 10000; from += 1000) {
    Args settle = {"p", gen, "1000"};
    for (int i = from; i < from + 1000; ++i) {
      settle.insert(settle.end(), {b_, "c" + std::to_string(i), "done", ""});
    }
    EXPECT_EQ(int_on(a_, "resolve", settle), from + 1000 < 10000 ? 1 : 2);
  }
  EXPECT_EQ(state_of(a_, "p"), "ready");
  EXPECT_EQ(deps(a_, "p").size(), 10000u);
  Args over = {"q", "b", "AFTER", "10001"};
  EXPECT_EQ(error_on(a_, "put", over), "BADARG AFTER count must be from 1 to 10000, got 10001");
}

TEST_F(FlowsTest, BadFlowsAreRefusedByNameAndChangeNothing) {
  auto now = std::to_string(now_);
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "1", b_, "x", "fail", "REPLACE"}),
            "BADARG AFTER goes with a new job only, not REPLACE, UPSERT or DEBOUNCE");
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "1", a_, "p", "fail"}),
            "BADARG a job cannot wait for itself");
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "2", b_, "x", "fail", b_, "x", "drop"}),
            "BADARG AFTER names " + b_ + "/x twice");
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "1", b_, "x", "later"}),
            "BADARG AFTER policy must be fail, ignore or drop, got 'later'");
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "0"}),
            "BADARG AFTER count must be from 1 to 10000, got 0");
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "2", b_, "x", "fail"}),
            "BADARG AFTER needs 7 value(s)");
  EXPECT_EQ(error_on(a_, "put", {"p", "b", "AFTER", "1", "a{b}", "x", "fail"}),
            "BADARG AFTER topic 'a{b}' must be 1..128 letters, digits, '_', '-' or '.'");
  EXPECT_EQ(error_on(a_, "resolve", {"p", "1", "1", b_, "x", "maybe", ""}),
            "BADARG outcome must be done or failed, got 'maybe'");
  EXPECT_EQ(error_on(a_, "moved", {"nope"}), "BADARG entry must be a stream id, got 'nope'");
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[0], keys(a_)[12], keys(a_)[13], keys(a_)[14]})->integer,
            0);
}

// A dependent deleted before its depend was carried: the depend records it
// all the same, and what its dependency tells it when it finishes comes
// back as a forget, so the tombstone does not stay.
TEST_F(FlowsTest, ADependentDeletedBeforeItsDependWasCarriedLeavesNothingBehind) {
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});
  auto asked = outbox(a_);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(int_on(a_, "delete", {"p"}), 1);
  move({a_, b_});  // the forget, then the depend (carried late, out of order)
  Args depend = asked[0].args;
  depend.insert(depend.end(), {"NOW", std::to_string(now_)});
  EXPECT_EQ(on(b_, "depend", depend)->element[0]->integer, 1);
  put_on(b_, "x");
  take(b_);
  EXPECT_EQ(move({a_, b_}), (std::vector<std::string>{"resolve 0", "forget 1"}));
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13], keys(b_)[13]})->integer, 0);
}

// ---------------------------------------------------------------- batches

// The batch's fields get shows: "state total/done/failed sealed".
class BatchesTest : public FlowsTest {
 protected:
  ReplyPtr batch(const std::string& topic, const std::string& id, Args more) {
    Args args = {id};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.end(), {"NOW", std::to_string(now_)});
    return on(topic, "batch", args);
  }
  static std::string summary(const ReplyPtr& r) {
    if (r->type != REDIS_REPLY_ARRAY) return r->str ? std::string(r->str, r->len) : "nil";
    std::map<std::string, std::string> f;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      auto* v = r->element[i + 1];
      f[r->element[i]->str] =
          v->type == REDIS_REPLY_INTEGER ? std::to_string(v->integer) : std::string(v->str, v->len);
    }
    return f["state"] + " " + f["batch_total"] + "/" + f["batch_done"] + "/" + f["batch_failed"] +
           (f["batch_sealed"] == "1" ? " sealed" : " open");
  }
  std::string status(const std::string& topic, const std::string& id) {
    return summary(on(topic, "get", {id, "NOW", std::to_string(now_)}));
  }
};

TEST_F(BatchesTest, CallbacksRunOnceItIsSealedAndEveryMemberFinished) {
  EXPECT_EQ(summary(batch(a_, "b1", {"ADD", "2", b_, "x", c_, "y"})), "blocked 2/0/0 open");
  EXPECT_EQ(stat_of(a_, "blocked"), 1);
  // Its callbacks wait for it as for any job: on success (fail), on
  // complete (ignore), in any topic.
  put_on(a_, "on_success", {"AFTER", "1", a_, "b1", "fail"});
  put_on(c_, "on_complete", {"AFTER", "1", a_, "b1", "ignore"});
  put_on(b_, "x");
  put_on(c_, "y");
  move({a_, b_, c_});
  EXPECT_EQ(take(b_), "x");
  EXPECT_EQ(take(c_), "y");
  move({a_, b_, c_});
  EXPECT_EQ(status(a_, "b1"), "blocked 2/2/0 open") << "open: more may come";
  EXPECT_EQ(state_of(a_, "on_success"), "blocked");
  // Reopened? Never closed: one more member, which dies.
  EXPECT_EQ(summary(batch(a_, "b1", {"ADD", "1", b_, "z"})), "blocked 3/2/0 open");
  put_on(b_, "z");
  move({a_, b_, c_});
  take(b_, "", true);
  move({a_, b_, c_});
  EXPECT_EQ(status(a_, "b1"), "blocked 3/2/1 open");
  EXPECT_EQ(field_of(a_, "b1", "error"), b_ + "/z: it broke");
  EXPECT_EQ(summary(batch(a_, "b1", {"SEAL"})), "done 3/2/1 sealed");
  move({a_, b_, c_});
  EXPECT_EQ(state_of(a_, "on_success"), "dead");
  EXPECT_EQ(
      field_of(a_, "on_success", "error"),
      "dependency " + a_ + "/b1 failed: 1 of 3 members failed (the last: " + b_ + "/z: it broke)");
  EXPECT_EQ(state_of(c_, "on_complete"), "ready");
  EXPECT_EQ(deps(c_, "on_complete"),
            (std::vector<std::string>{a_ + "/b1 ignore failed 1 of 3 members failed (the last: " +
                                      b_ + "/z: it broke)"}));
  // Finished, it is kept (a week by default), and takes no more members.
  EXPECT_EQ(status(a_, "b1"), "done 3/2/1 sealed");
  EXPECT_EQ(error_on(a_, "batch", {"b1", "ADD", "1", b_, "w"}),
            "BADARG batch b1 has finished: it takes no more members");
  EXPECT_EQ(stat_of(a_, "blocked"), 0);
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13], keys(b_)[13], keys(c_)[13]})->integer, 0)
      << "no flow bookkeeping is left";
}

TEST_F(BatchesTest, EveryCallMadeTwiceCountsOnceAndAllDoneIsSuccess) {
  put_on(b_, "x");
  EXPECT_EQ(summary(batch(a_, "b2", {"ADD", "3", b_, "x", b_, "y", b_, "x"})), "blocked 2/0/0 open")
      << "a member named twice counts once";
  EXPECT_EQ(summary(batch(a_, "b2", {"ADD", "1", b_, "y"})), "blocked 2/0/0 open")
      << "named again while pending: left as it is";
  put_on(a_, "on_success", {"AFTER", "1", a_, "b2", "fail"});
  move({a_, b_}, 2);
  put_on(b_, "y");
  take(b_, "r");
  take(b_);
  move({a_, b_}, 2);
  EXPECT_EQ(status(a_, "b2"), "blocked 2/2/0 open");
  EXPECT_EQ(summary(batch(a_, "b2", {"SEAL"})), "done 2/2/0 sealed");
  EXPECT_EQ(summary(batch(a_, "b2", {"SEAL"})), "done 2/2/0 sealed") << "sealed once";
  move({a_, b_}, 2);
  EXPECT_EQ(state_of(a_, "on_success"), "ready");
  EXPECT_EQ(deps(a_, "on_success"), (std::vector<std::string>{a_ + "/b2 fail done "}));
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13], keys(b_)[13]})->integer, 0);
  // A callback put after the batch finished is told at once, from its record.
  put_on(c_, "late", {"AFTER", "1", a_, "b2", "fail"});
  move({a_, b_, c_});
  EXPECT_EQ(state_of(c_, "late"), "ready");
}

TEST_F(BatchesTest, AnEmptyBatchSealedIsDoneAndAFailedOneTellsLateCallbacks) {
  EXPECT_EQ(summary(batch(a_, "empty", {"SEAL"})), "done 0/0/0 sealed");
  put_on(b_, "x");
  batch(a_, "bad", {"ADD", "1", b_, "x", "SEAL", "KEEP", "60000"});
  move({a_, b_});
  take(b_, "", true);
  move({a_, b_});
  EXPECT_EQ(status(a_, "bad"), "done 1/0/1 sealed");
  put_on(c_, "late", {"AFTER", "1", a_, "bad", "ignore"});
  move({a_, b_, c_});
  EXPECT_EQ(deps(c_, "late"),
            (std::vector<std::string>{a_ + "/bad ignore failed 1 of 1 members failed (the last: " +
                                      b_ + "/x: it broke)"}));
  now_ += 60001;
  on(a_, "requeue", {"NOW", std::to_string(now_)});  // (it drops what was kept past its time)
  EXPECT_EQ(state_of(a_, "bad"), "absent") << "kept for KEEP";
}

TEST_F(BatchesTest, DeletingAnOpenBatchFailsItsCallbacksAndLeavesNothingBehind) {
  batch(a_, "b3", {"ADD", "1", b_, "x"});
  put_on(a_, "on_complete", {"AFTER", "1", a_, "b3", "ignore"});
  move({a_, b_});
  EXPECT_EQ(int_on(a_, "delete", {"b3"}), 1);
  move({a_, b_});
  EXPECT_EQ(state_of(a_, "on_complete"), "ready");
  EXPECT_EQ(deps(a_, "on_complete"), (std::vector<std::string>{a_ + "/b3 ignore failed deleted"}));
  put_on(b_, "x");
  take(b_);
  move({a_, b_});
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13], keys(b_)[13]})->integer, 0)
      << "its member's field went when the member finished";
}

TEST_F(BatchesTest, BadBatchesAreRefusedByNameAndChangeNothing) {
  put_on(a_, "job");
  EXPECT_EQ(error_on(a_, "batch", {"job", "SEAL"}), "BADARG job is a job, not a batch");
  batch(a_, "b4", {"SEAL"});
  batch(a_, "b5", {"ADD", "1", b_, "x", "SEAL"});
  EXPECT_EQ(error_on(a_, "batch", {"b5", "ADD", "1", b_, "y"}),
            "BADARG batch b5 is sealed: it takes no more members");
  EXPECT_EQ(error_on(a_, "put", {"b5", "body", "REPLACE"}),
            "BADARG b5 is a batch: a put cannot change it");
  EXPECT_EQ(error_on(a_, "batch", {"b6", "ADD", "1", a_, "b6"}),
            "BADARG a batch cannot hold itself");
  EXPECT_EQ(error_on(a_, "batch", {"b6", "ADD", "0"}),
            "BADARG ADD count must be from 1 to 10000, got 0");
  EXPECT_EQ(error_on(a_, "batch", {"b6", "ADD", "1", "a b", "x"}),
            "BADARG ADD topic 'a b' must be 1..128 letters, digits, '_', '-' or '.'");
  EXPECT_EQ(error_on(a_, "batch", {"b6", "KEEP", "0"}),
            "BADARG KEEP must be from 1 to 315576000000, got 0");
  EXPECT_EQ(error_on(a_, "batch", {"*", "SEAL"}),
            "BADARG a batch's id cannot be '*', which asks put for a generated id");
  // No put, of any kind, changes a batch.
  EXPECT_EQ(error_on(a_, "putmany", {"1", "b5", "body", "1", "UPSERT"}),
            "BADARG b5 is a batch: a put cannot change it");
  EXPECT_EQ(error_on(a_, "restore", {"b5", "body", "ready", "1000", "0", "REPLACE"}),
            "BADARG b5 is a batch: a restore cannot change it");
  EXPECT_EQ(state_of(a_, "b6"), "absent");
  EXPECT_EQ(status(a_, "b5"), "blocked 1/0/0 sealed");
}

// A batch deleted while a member was pending, then made again under its id:
// the old member's end counts nothing in the new one (another gen), and its
// field goes.
TEST_F(BatchesTest, AMemberOfADeletedBatchCountsNothingInOneMadeAgainUnderItsId) {
  batch(a_, "b7", {"ADD", "1", b_, "old"});
  move({a_, b_});
  EXPECT_EQ(int_on(a_, "delete", {"b7"}), 1);
  EXPECT_EQ(summary(batch(a_, "b7", {"ADD", "1", b_, "new", "SEAL"})), "blocked 1/0/0 sealed");
  move({a_, b_});
  put_on(b_, "old");
  EXPECT_EQ(take(b_), "old");
  move({a_, b_});
  EXPECT_EQ(status(a_, "b7"), "blocked 1/0/0 sealed") << "the old member counts nothing";
  put_on(b_, "new");
  EXPECT_EQ(take(b_), "new");
  move({a_, b_});
  EXPECT_EQ(status(a_, "b7"), "done 1/1/0 sealed");
  EXPECT_EQ(redis_.call({"EXISTS", keys(a_)[13], keys(b_)[13]})->integer, 0)
      << "no field of either batch is left";
}

// The race a Cluster run met: the dependent put first, its depend still in
// the outbox when the dependency is acked with a result and no KEEP. The ack
// is taken (version 38: the job is kept for the retry window), and the
// depend carried after it brings the dependent the result. So does one
// carried after the first dependent was told and forgot the job.
TEST_F(FlowsTest, AResultAckedBeforeTheDependThatNamesItWasCarriedStillReachesIt) {
  put_on(a_, "invoice", {"AFTER", "1", b_, "x", "fail"});
  put_on(b_, "x");
  EXPECT_EQ(take(b_, "pdf"), "x");
  EXPECT_EQ(state_of(b_, "x"), "done") << "kept for the retry window, for the depend on its way";
  move({a_, b_});
  EXPECT_EQ(state_of(a_, "invoice"), "ready");
  EXPECT_EQ(deps(a_, "invoice"), (std::vector<std::string>{b_ + "/x fail done pdf"}));
  // A job acked with a result while one job waited for it: a second one,
  // named once the first was told and forgot it (no tombstone left), is
  // told by the kept job.
  put_on(b_, "y");
  put_on(a_, "first", {"AFTER", "1", b_, "y", "fail"});
  move({a_, b_});
  EXPECT_EQ(take(b_, "csv"), "y");
  move({b_});  // first is told, is released, and sends its forget
  EXPECT_EQ(state_of(a_, "first"), "ready");
  put_on(a_, "second", {"AFTER", "1", b_, "y", "fail"});
  move({a_, b_});  // the forget, then second's depend
  EXPECT_EQ(redis_.call({"HEXISTS", keys(b_)[13], "y"})->integer, 0) << "no tombstone left";
  EXPECT_EQ(deps(a_, "second"), (std::vector<std::string>{b_ + "/y fail done csv"}));
}

// FORWARD (version 36): a result for the jobs waiting for this one. It is
// kept for the retry window, as without FORWARD; where the window is 0 and
// no job waits, it is dropped, not refused.
TEST_F(FlowsTest, AForwardedResultGoesToTheJobsWaitingOrIsDroppedWithoutAWindow) {
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});
  move({a_, b_});
  put_on(a_, "q", {"AFTER", "1", b_, "y", "fail"});  // (its depend carried only later)
  put_on(b_, "x");
  put_on(b_, "y");
  const auto ack = [&](const std::string& topic) {
    auto r = on(topic, "reserve", {"1", "NOW", std::to_string(now_)});
    EXPECT_EQ(r->elements, 4u);
    if (r->elements != 4) return std::string();
    const std::string id = r->element[3]->element[0]->str;
    EXPECT_EQ(int_on(topic, "ack",
                     {id, std::to_string(r->element[3]->element[2]->integer), "RESULT",
                      "made " + id, "FORWARD", "NOW", std::to_string(now_)}),
              1)
        << id;
    return id;
  };
  EXPECT_EQ(ack(b_), "x");
  EXPECT_EQ(ack(b_), "y");
  EXPECT_EQ(state_of(b_, "x"), "done") << "kept for the retry window, as without FORWARD";
  EXPECT_EQ(state_of(b_, "y"), "done") << "none waited yet: kept for the window, for one to come";
  move({a_, b_});
  EXPECT_EQ(deps(a_, "p"), (std::vector<std::string>{b_ + "/x fail done made x"}));
  EXPECT_EQ(deps(a_, "q"), (std::vector<std::string>{b_ + "/y fail done made y"}));
  // A window of 0: a depend that comes once the job finished finds no trace
  // of it anyway, so nothing can wait for the result.
  on(c_, "retrywindow", {"0"});
  put_on(c_, "z");
  EXPECT_EQ(ack(c_), "z");
  EXPECT_EQ(state_of(c_, "z"), "absent") << "acked, its result dropped";
  EXPECT_EQ(error_on(c_, "ack", {"z", "1", "RESULT", "r"}),
            "BADARG RESULT needs KEEP, a job waiting for this one, or a retry window: a result "
            "is kept with its finished job");
  EXPECT_EQ(error_on(b_, "ack", {"z", "1", "FORWARD"}), "BADARG FORWARD goes with RESULT");
}

// A caller of version 34 passes twelve keys: the library names the flows'
// own, so the jobs waiting for what it acks hear of it.
TEST_F(FlowsTest, ACallerOfTwelveKeysStillTellsTheJobsWaiting) {
  put_on(b_, "x");
  put_on(a_, "p", {"AFTER", "1", b_, "x", "fail"});
  move({a_, b_});
  auto r = on(b_, "reserve", {"1", "NOW", std::to_string(now_)});
  ASSERT_EQ(r->elements, 4u);
  Args twelve = {"FCALL", "redisched_ack", "12"};
  auto all = keys(b_);
  twelve.insert(twelve.end(), all.begin(), all.begin() + 12);
  twelve.insert(twelve.end(), {"x", std::to_string(r->element[3]->element[2]->integer), "NOW",
                               std::to_string(now_)});
  EXPECT_EQ(redis_.call(twelve)->integer, 1);
  move({a_, b_});
  EXPECT_EQ(state_of(a_, "p"), "ready");
}

}  // namespace
}  // namespace redisched::test
