#include "testutil/fake_link.h"

#include "redis/pipeline.h"
#include "redis/resp_reader.h"
#include "redisched/error.h"
#include "testutil/replies.h"

namespace redisched::test {

using redis::Reply;

void FakeLink::send(std::string_view, std::string command, redis::ReplyHandler done) {
  post_(
      [this, command = std::move(command), done = std::move(done)] { answer_now(command, done); });
}

void FakeLink::send_replicated(std::string_view, std::string command, int replicas,
                               std::chrono::milliseconds timeout, redis::ReplyHandler done) {
  post_([this, command = std::move(command), replicas, timeout, done = std::move(done)] {
    answer_replicated_now(command, replicas, timeout, done);
  });
}

void FakeLink::answer_now(const std::string& command, const redis::ReplyHandler& done) {
  if (closed_) return done(make_error_code(Errc::closed), Reply{});
  redis::RespReader reader;
  reader.feed(command.data(), command.size());
  auto parsed = reader.next();
  std::vector<std::string> words;
  if (parsed) {
    for (auto& e : parsed->elements) words.push_back(std::move(e.str));
  }
  done({}, answer_(words));
}

void FakeLink::answer_replicated_now(const std::string& command, int replicas,
                                     std::chrono::milliseconds timeout, redis::ReplyHandler done) {
  // The real pipeline's batching: the command, then WAIT behind it.
  redis::Pipeline pipeline;
  pipeline.enqueue_replicated(command, replicas, timeout, std::move(done));
  if (closed_) return pipeline.fail_all(Errc::closed, "closed");
  std::string out;
  pipeline.take_output(out);
  redis::RespReader reader;
  reader.feed(out.data(), out.size());
  while (auto parsed = reader.next()) {
    std::vector<std::string> words;
    for (auto& e : parsed->elements) words.push_back(std::move(e.str));
    pipeline.deliver(answer_(words));
  }
}

namespace {

using test::array;
using test::integer;
using test::text;

Reply job_fields(const std::string& id, const std::string& state) {
  std::vector<Reply> f;
  auto add = [&](const char* name, Reply v) {
    f.push_back(text(name));
    f.push_back(std::move(v));
  };
  add("id", text(id));
  add("state", text(state));
  add("body", text("body"));
  add("priority", integer(0));
  add("created", integer(1000));
  add("due", integer(1000));
  add("attempts", integer(0));
  add("max_attempts", integer(5));
  add("ttr", integer(30000));
  add("backoff", text("exponential"));
  add("backoff_base", integer(1000));
  add("backoff_cap", integer(600000));
  if (state == "reserved") {
    add("token", integer(7));
    add("reserved_at", integer(1000));
    add("deadline", integer(31000));
  }
  return array(std::move(f));
}

}  // namespace

Reply canned_reply(const std::vector<std::string>& words, unsigned choice) {
  if (words.empty()) return text("ERR empty command", Reply::Type::error);
  const std::string& cmd = words[0];
  if (cmd == "PING") return text("PONG", Reply::Type::status);
  if (cmd == "SCAN") return array({text("0"), array({text("redisched:{t}:meta")})});
  if (cmd == "TIME") return array({text("1000"), text("0")});
  if (cmd != "FCALL" && cmd != "FCALL_RO") return text("OK", Reply::Type::status);
  if (choice % 11 == 10) return text("BADARG refused by the fake", Reply::Type::error);
  const std::string op = words.size() > 1 ? words[1].substr(std::string("redisched_").size()) : "";
  const std::string id = words.size() > 11 ? words[11] : "j";
  if (op == "version") return integer(8);
  if (op == "put") {
    if (words.size() > 11 && words[11] == "*") return text("1000-1");
    static const std::int64_t codes[] = {1, 2, -1, 0};
    return integer(codes[choice % 4]);
  }
  if (op == "get") return choice % 2 ? job_fields(id, "reserved") : Reply{};
  if (op == "delete" || op == "pause" || op == "resume" || op == "kick" || op == "kickall" ||
      op == "restore") {
    return integer(choice % 2);
  }
  if (op == "ack" || op == "release") {
    static const std::int64_t codes[] = {1, 0, -2, -3};
    return integer(codes[choice % 4]);
  }
  if (op == "touch") return choice % 2 ? integer(31000) : integer(-3);
  if (op == "fail") return choice % 2 ? text("delayed", Reply::Type::status) : integer(-3);
  if (op == "reserve" || op == "pull") {
    std::vector<Reply> out = {integer(1000), integer(choice % 2 ? 0 : -1), integer(0)};
    if (choice % 2) {
      if (op == "reserve") {
        out.push_back(array({text("j"), text("body"), integer(7), integer(1), integer(5),
                             integer(0), integer(1000), integer(1000), integer(31000)}));
      } else {
        out.push_back(array({text("j"), text("body"), integer(1), integer(5), integer(0),
                             integer(1000), integer(1000)}));
      }
    }
    return array(std::move(out));
  }
  if (op == "stats") {
    std::vector<Reply> f;
    for (const char* name : {"delayed", "ready", "reserved", "dead", "done", "paused", "next_due",
                             "failed_total", "dead_total", "lapsed_total"}) {
      f.push_back(text(name));
      f.push_back(integer(0));
    }
    return array(std::move(f));
  }
  if (op == "list") return array({integer(1), job_fields("j", "ready")});
  if (op == "requeue") return array({integer(0), integer(0), integer(-1)});
  return integer(1);
}

}  // namespace redisched::test
