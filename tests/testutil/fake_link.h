// A Link that answers from memory: each command's words go to answer(),
// and its Reply comes back through post (a Client's answers never run on
// the caller's stack: debug builds check it). A Client over it runs every
// call without a socket or a Redis (unit tests, fuzzers).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "redis/connection.h"

namespace redisched::test {

class FakeLink : public redis::Link {
 public:
  using Answer = std::function<redis::Reply(const std::vector<std::string>& words)>;
  // Runs f later, on the thread the answers come on (e.g. a shard's).
  using Post = std::function<void(std::function<void()> f)>;
  FakeLink(Answer answer, Post post) : answer_(std::move(answer)), post_(std::move(post)) {}

  void send(std::string_view route_key, std::string command, redis::ReplyHandler done) override;
  // The command, then WAIT (answered as the fake has it).
  void send_replicated(std::string_view route_key, std::string command, int replicas,
                       std::chrono::milliseconds timeout, redis::ReplyHandler done) override;
  void primaries(std::function<void(std::error_code, std::vector<std::size_t>)> done) override {
    post_([done = std::move(done)] { done({}, {0}); });
  }
  void send_to_node(std::size_t, std::string command, redis::ReplyHandler done) override {
    send("", std::move(command), std::move(done));
  }
  // Subscriptions are taken and never speak (a fake Redis publishes nothing).
  std::uint64_t subscribe(const std::string&, redis::MessageHandler, redis::ReadyHandler) override {
    return ++subscriptions_;
  }
  void unsubscribe(std::uint64_t) override {}
  void close() override { closed_ = true; }

 private:
  void answer_now(const std::string& command, const redis::ReplyHandler& done);
  void answer_replicated_now(const std::string& command, int replicas,
                             std::chrono::milliseconds timeout, redis::ReplyHandler done);

  Answer answer_;
  Post post_;
  bool closed_ = false;
  std::uint64_t subscriptions_ = 0;
};

// Replies every function of the library could give (the shapes of
// docs/redis-api.md), chosen by op: what a fake Redis holding no job
// answers, with choice picking among the other outcomes (created, exists,
// not found, stale token, a reserved job, an error reply...).
redis::Reply canned_reply(const std::vector<std::string>& words, unsigned choice);

}  // namespace redisched::test
