// BullMQ, a peer measured in the same run as the core (redisched_bench
// --peers): bench/peers/bullmq/bench.mjs, run with Node.js against the Redis
// the core benchmark measures.
#pragma once

#include "bench_util.h"

namespace redisched::bench {

struct BullmqFigures {
  double add = 0;       // jobs/s, Queue.add, 50 calls in flight
  double add_bulk = 0;  // jobs/s, Queue.addBulk of 100, 8 calls in flight
  double process = 0;   // jobs/s, a Worker at concurrency 50, no-op processor
};

// Runs the harness (its npm packages installed by scripts/deps.sh --test)
// over jobs jobs, and leaves the Redis at target empty. Throws when Node.js
// or the packages are missing, or the harness fails.
BullmqFigures bullmq_figures(const Target& target, long jobs);

}  // namespace redisched::bench
