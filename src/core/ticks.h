// When a schedule's ticks fall (docs/redis-api.md, "Recurring jobs"): a cron
// expression in a time zone, or a fixed interval. Pure computation on Unix
// milliseconds; the time zones are Debian's tz database (tzdata), read
// through Howard Hinnant's date library (the C++20 <chrono> time zones
// before GCC has them).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "redisched/job.h"

namespace redisched::core {

class TickRule {
 public:
  // A cron expression: 5 fields (minute hour day-of-month month
  // day-of-week) or 6 (seconds first), each `*`, a value, a range `a-b`, a
  // step `*/n` or `a-b/n`, or a comma list of those; months and weekdays
  // also by name (jan..dec, sun..sat; 0 and 7 are Sunday); `@yearly`,
  // `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`.
  // Day-of-month and day-of-week both restricted: either matches (as cron).
  // The times are the zone's wall clock: a time the zone skips (a spring
  // forward) runs once, at the end of the gap; a time it repeats (a fall
  // back) runs once, the first time. Throws Error(invalid_argument) naming
  // the fault, or an unknown zone.
  static TickRule cron(std::string_view expr, std::string_view zone);
  // Every ms milliseconds (1 ms .. ten years), counted from a first tick.
  static TickRule every(std::int64_t ms);

  // The first tick strictly after ms (a cron rule), or ms + the interval
  // (ms a tick, or the time a schedule starts); -1 when there is none
  // before the year 2248 (a cron rule that never matches, say Feb 30).
  std::int64_t next_after(std::int64_t ms) const;
  // The last tick at or before ms, given a tick known to be at or before it
  // (a schedule's next tick, past due): in ms of work however long ago.
  std::int64_t last_at_or_before(std::int64_t tick, std::int64_t ms) const;
  // How many ticks lie in [tick, end), tick a tick: those a late scheduler
  // passes over. Exact for an interval; a cron rule's are counted one by
  // one, up to kCountMax.
  static constexpr std::int64_t kCountMax = 100'000;
  std::int64_t count_before(std::int64_t tick, std::int64_t end) const;

 private:
  struct Cron;
  std::shared_ptr<const Cron> cron_;
  std::int64_t every_ = 0;
};

// A schedule's rule: its cron expression in its zone, or its interval (one
// of them, checked). Throws Error(invalid_argument).
TickRule tick_rule(const ScheduleSpec& spec);

}  // namespace redisched::core
