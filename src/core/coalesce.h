// The calls the pipeline may coalesce (redis/batch.h), and how the reply of
// each batched call divides among them: puts as one putmany, acks as one
// ackmany, reserves of one job as one reserve of many.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/codec.h"
#include "redis/batch.h"

namespace redisched::core {

const redis::BatchKind& put_kind();
const redis::BatchKind& ack_kind();
const redis::BatchKind& reserve_kind();

// Whether the library takes a call as given: the ids and ranges it checks
// itself. A call it would refuse goes alone, not coalesced: a batched call
// is refused as a whole, and every caller would get that one's error.
// put_takes assumes check_spec passed.
bool put_takes(std::string_view id, const JobSpec& job);
bool ack_takes(std::string_view id, std::uint64_t token);

// A call of kind on topic's keys (its history key with history). single:
// the call alone; part: its words in the batched call; tail: the words after
// the parts, which every call of one batch shares (the call-wide options).
redis::Batchable batchable(const redis::BatchKind& kind, std::string_view prefix,
                           std::string_view topic, bool history, const Command& single,
                           const Command& part, const Command& tail);

}  // namespace redisched::core
