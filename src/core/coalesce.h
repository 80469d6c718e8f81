// The calls the pipeline may coalesce (redis/batch.h), and how the reply of
// each batched call divides among them: puts as one putmany, acks as one
// ackmany, reserves of one job as one reserve of many.
#pragma once

#include <string_view>

#include "core/codec.h"
#include "redis/batch.h"

namespace redisched::core {

const redis::BatchKind& put_kind();
const redis::BatchKind& ack_kind();
const redis::BatchKind& reserve_kind();

// A call of kind on topic's keys. single: the call alone; part: its words
// in the batched call; tail: the words after the parts, which every call of
// one batch shares (the call-wide options).
redis::Batchable batchable(const redis::BatchKind& kind, std::string_view prefix,
                           std::string_view topic, const Command& single, const Command& part,
                           const Command& tail);

}  // namespace redisched::core
