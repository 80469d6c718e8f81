// What the project's own code may do with a Client that its users may not
// (client.h keeps these private): run one over a link it made itself, and
// make a scheduler's tick. Private to the project, like detail::ErrorAccess.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "redisched/client.h"

namespace redisched {

namespace redis {
class Link;  // redis/connection.h
}

// What redisched_tick answered (docs/redis-api.md, "Recurring jobs").
enum class TickOutcome {
  put,    // the schedule moved on and its tick's job was put
  moved,  // moved on without a job (the tick skipped, or its id taken)
  no_schedule,
  paused,
  superseded,  // its next tick was no longer the one expected: another
               // scheduler was first, or the schedule was set anew
};

namespace detail {

struct ClientAccess {
  // A Client over link instead of connections of its own (tests and
  // fuzzers answer from memory). options.redis_url is not used.
  static std::unique_ptr<Client> over_link(ClientOptions options,
                                           std::unique_ptr<redis::Link> link);

  // One scheduler step (redisched_tick): when the schedule's next tick is
  // still expect, it becomes next, and with run the job of tick run is put.
  static void tick(Client& client, std::string_view topic, std::string_view name,
                   std::int64_t expect, std::int64_t next, std::optional<std::int64_t> run,
                   Callback<TickOutcome> done);

  // An ack whose result is for the jobs waiting for the job (FORWARD):
  // kept with it for keep, and at least the retry window; dropped, not
  // refused, where that is 0, keep is 0 and none waits. A Worker's set_result, which
  // cannot tell whether any job waits.
  static void ack_forwarding(Client& client, std::string_view topic, std::string_view id,
                             std::uint64_t token, Millis keep, std::string result,
                             Callback<Outcome> done);

  // fail with bury, giving the job a new priority (beanstalkd's bury; the
  // library's fail PRIORITY, version 37).
  static void bury(Client& client, std::string_view topic, std::string_view id, std::uint64_t token,
                   std::string_view error, std::int64_t priority, Callback<FailResult> done);

  // The beanstalkd face's job ids (docs/redis-api.md, "beanstalkd ids"):
  // integers unique across every process sharing the Redis, taken a block
  // of kIdBlock at a time. take_id_block answers a new block's number b
  // (ids b * kIdBlock .. b * kIdBlock + kIdBlock - 1, from block 1), named
  // for topic before it is answered; id_block_topic answers the topic a
  // block was taken for (empty: none).
  static constexpr std::uint64_t kIdBlock = 4096;
  static void take_id_block(Client& client, std::string_view topic, Callback<std::uint64_t> done);
  static void id_block_topic(Client& client, std::uint64_t block, Callback<std::string> done);

  // Whether e is a write's "done on the primary, but only M of N replicas
  // had it" (ClientOptions::replicas): its change was made, and a failover
  // before the replicas catch up may undo it. A refusal is never one.
  static bool short_of_replicas(const Error& e);
};

}  // namespace detail
}  // namespace redisched
