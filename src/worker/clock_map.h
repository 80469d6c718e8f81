// Translates the Redis server's clock (ms, which every process agrees on)
// into this host's steady clock, so a local timer can be aimed at a due time.
//
// Each reply that carries Redis's "now" bounds the offset from below (Redis
// read its clock before we got the reply, and floors it to the ms); the
// largest recent bound is the best estimate, late by at most the round trip.
// It decays slowly so that a drifting clock is followed.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace redisched::worker {

// This host's wall clock (ms since the epoch), for what an operator reads
// beside other hosts' times (a worker's start, a job's, in the registry).
inline std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ClockMap {
 public:
  using Steady = std::chrono::steady_clock;

  // A reply received at `at` said Redis's clock read now_ms.
  void observe(std::int64_t now_ms, Steady::time_point at = Steady::now()) {
    const double local = ms_since_epoch(at);
    const double bound = static_cast<double>(now_ms) - local;
    if (!known_) {
      offset_ = bound;
      known_ = true;
    } else {
      offset_ = std::max(bound, offset_ - kDecayPerMs * (local - last_));
    }
    last_ = local;
  }

  bool known() const { return known_; }

  // Redis's clock now, as best known (ms).
  std::int64_t redis_now(Steady::time_point at = Steady::now()) const {
    return static_cast<std::int64_t>(ms_since_epoch(at) + offset_);
  }

  // When the steady clock reaches Redis time ms.
  Steady::time_point local_time(std::int64_t redis_ms) const {
    const double local = static_cast<double>(redis_ms) - offset_;
    return Steady::time_point(std::chrono::duration_cast<Steady::duration>(
        std::chrono::duration<double, std::milli>(local)));
  }

 private:
  static double ms_since_epoch(Steady::time_point t) {
    return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
  }
  static constexpr double kDecayPerMs = 1e-4;  // 0.1 ms per second

  bool known_ = false;
  double offset_ = 0;  // Redis ms minus steady ms
  double last_ = 0;
};

}  // namespace redisched::worker
