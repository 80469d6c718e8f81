// What a worker asks of Redis, and nothing more: the seam between the
// worker's scheduling (topic_runner.h) and the Client, so that the
// scheduling is unit-tested with a broker that answers from memory
// (tests/unit/topic_runner_test.cpp).
//
// Callbacks may run on any thread (the Client's: a thread of its runtime);
// the runner takes them back to its control shard.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "redisched/client.h"

namespace redisched::worker {

class Broker {
 public:
  virtual ~Broker() = default;

  virtual void reserve(const std::string& topic, int count, Millis ttr,
                       Callback<ReserveResult> done) = 0;
  virtual void ack_many(const std::string& topic,
                        std::span<const std::pair<std::string, std::uint64_t>> jobs, Millis keep,
                        Callback<std::vector<Outcome>> done) = 0;
  // One ack with a result, or a keep of its own.
  virtual void ack(const std::string& topic, const std::string& id, std::uint64_t token,
                   Millis keep, const std::optional<std::string>& result,
                   Callback<Outcome> done) = 0;
  virtual void release(const std::string& topic, const std::string& id, std::uint64_t token,
                       Millis delay, Callback<Outcome> done) = 0;
  virtual void fail(const std::string& topic, const std::string& id, std::uint64_t token,
                    const std::string& error, bool bury, std::optional<Millis> retry_delay,
                    std::optional<int> max_attempts, Callback<FailResult> done) = 0;
  virtual void touch(const std::string& topic, const std::string& id, std::uint64_t token,
                     Millis ttr, Callback<TouchResult> done) = 0;
  // A handler's own touch, from its thread: waits for the answer.
  virtual TouchResult touch_now(const std::string& topic, const std::string& id,
                                std::uint64_t token, Millis ttr) = 0;
  virtual void requeue(const std::string& topic, int limit, Callback<RequeueResult> done) = 0;
  // A handler's read of its job's dependencies, from its thread: waits.
  virtual std::vector<DependencyState> dependencies_now(const std::string& topic,
                                                        const std::string& id) = 0;
  virtual void report(const std::string& topic, const std::string& id, std::uint64_t token,
                      const JobReport& report, Callback<Outcome> done) = 0;
};

// The broker of a real worker: each call is the Client's, its reserves
// naming the worker (ReserveOptions::worker; empty: none).
std::unique_ptr<Broker> client_broker(Client& client, std::string worker);

}  // namespace redisched::worker
