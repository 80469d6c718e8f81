// When schedules tick: cron fields, macros, day-of-month or day-of-week,
// time zones across daylight saving changes, intervals, and the refusals.
#include "core/ticks.h"

#include <date/tz.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "testutil/expect_error.h"

namespace redisched::core {
namespace {

using namespace std::chrono;

// "YYYY-MM-DD hh:mm:ss" in UTC, as Unix ms.
std::int64_t utc(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  EXPECT_EQ(std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &sec), 6) << text;
  const date::sys_days day{date::year{y} / mo / d};
  return duration_cast<milliseconds>(
             (day + hours{h} + minutes{mi} + seconds{sec}).time_since_epoch())
      .count();
}

std::string show(std::int64_t ms) {
  return date::format("%F %T", date::sys_seconds{duration_cast<seconds>(milliseconds{ms})});
}

// The next n ticks after the UTC time given, as UTC text.
std::vector<std::string> ticks(const TickRule& r, const std::string& after, int n) {
  std::vector<std::string> out;
  std::int64_t t = utc(after);
  for (int i = 0; i < n; ++i) {
    t = r.next_after(t);
    out.push_back(t < 0 ? "never" : show(t));
    if (t < 0) break;
  }
  return out;
}

using V = std::vector<std::string>;

TEST(TickRule, FieldsRangesStepsListsAndNames) {
  EXPECT_EQ(ticks(TickRule::cron("*/15 9-10 * * *", "UTC"), "2026-12-01 09:50:00", 4),
            (V{"2026-12-01 10:00:00", "2026-12-01 10:15:00", "2026-12-01 10:30:00",
               "2026-12-01 10:45:00"}));
  EXPECT_EQ(ticks(TickRule::cron("0 8 * * mon-fri", "UTC"), "2026-12-04 09:00:00", 2),
            (V{"2026-12-07 08:00:00", "2026-12-08 08:00:00"}))
      << "Friday after 8: Monday, then Tuesday";
  EXPECT_EQ(ticks(TickRule::cron("30 0 1 jan,JUL *", "UTC"), "2026-12-01 00:00:00", 2),
            (V{"2027-01-01 00:30:00", "2027-07-01 00:30:00"}));
  EXPECT_EQ(ticks(TickRule::cron("0 0 * * 7", "UTC"), "2026-12-01 00:00:00", 1),
            (V{"2026-12-06 00:00:00"}))
      << "7 is Sunday";
  EXPECT_EQ(ticks(TickRule::cron("5/20 * * * *", "UTC"), "2026-12-01 00:00:00", 3),
            (V{"2026-12-01 00:05:00", "2026-12-01 00:25:00", "2026-12-01 00:45:00"}));
  EXPECT_EQ(ticks(TickRule::cron("*/20 * * * * *", "UTC"), "2026-12-01 00:00:00", 3),
            (V{"2026-12-01 00:00:20", "2026-12-01 00:00:40", "2026-12-01 00:01:00"}))
      << "six fields: seconds first";
  EXPECT_EQ(ticks(TickRule::cron("@monthly", "UTC"), "2026-12-01 00:00:00", 2),
            (V{"2027-01-01 00:00:00", "2027-02-01 00:00:00"}));
  EXPECT_EQ(ticks(TickRule::cron("@hourly", "UTC"), "2026-12-01 00:59:59", 1),
            (V{"2026-12-01 01:00:00"}));
}

TEST(TickRule, DayOfMonthOrDayOfWeekAsCronReadsThem) {
  // Both restricted: either. The 13th, and every Friday.
  EXPECT_EQ(ticks(TickRule::cron("0 0 13 * fri", "UTC"), "2026-11-01 00:00:00", 4),
            (V{"2026-11-06 00:00:00", "2026-11-13 00:00:00", "2026-11-20 00:00:00",
               "2026-11-27 00:00:00"}));
  EXPECT_EQ(ticks(TickRule::cron("0 0 13 * *", "UTC"), "2026-11-01 00:00:00", 1),
            (V{"2026-11-13 00:00:00"}));
  // A field starting with '*' (a step too) joins the other with and.
  EXPECT_EQ(ticks(TickRule::cron("0 0 */2 * *", "UTC"), "2026-11-01 00:00:00", 3),
            (V{"2026-11-03 00:00:00", "2026-11-05 00:00:00", "2026-11-07 00:00:00"}))
      << "every other day, not every day";
  EXPECT_EQ(ticks(TickRule::cron("0 9 */2 * mon", "UTC"), "2026-11-01 00:00:00", 2),
            (V{"2026-11-09 09:00:00", "2026-11-23 09:00:00"}))
      << "Mondays on odd days";
  EXPECT_EQ(ticks(TickRule::cron("0 0 * * */2147483647", "UTC"), "2026-11-01 00:00:00", 1),
            ticks(TickRule::cron("0 0 * * 0", "UTC"), "2026-11-01 00:00:00", 1))
      << "a step past the field: its first value only";
  EXPECT_EQ(ticks(TickRule::cron("0 0 29 2 *", "UTC"), "2026-01-01 00:00:00", 1),
            (V{"2028-02-29 00:00:00"}))
      << "the next leap day";
  EXPECT_EQ(ticks(TickRule::cron("0 0 30 2 *", "UTC"), "2026-01-01 00:00:00", 1), (V{"never"}));
}

TEST(TickRule, WallClockTimesAcrossDaylightSavingChanges) {
  // Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (01:00 UTC); 2026-10-25
  // 03:00 CEST -> 02:00 CET (01:00 UTC).
  const auto daily = TickRule::cron("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(ticks(daily, "2026-03-27 12:00:00", 3),
            (V{"2026-03-28 01:30:00", "2026-03-29 01:00:00", "2026-03-30 00:30:00"}))
      << "02:30 is skipped on the 29th: it runs once, at the end of the gap (03:00 CEST)";
  EXPECT_EQ(ticks(daily, "2026-10-23 12:00:00", 3),
            (V{"2026-10-24 00:30:00", "2026-10-25 00:30:00", "2026-10-26 01:30:00"}))
      << "02:30 comes twice on the 25th: it runs once, the first time (CEST)";
  const auto quarter = TickRule::cron("*/30 * * * *", "Europe/Berlin");
  EXPECT_EQ(ticks(quarter, "2026-10-25 00:00:00", 4),
            (V{"2026-10-25 00:30:00", "2026-10-25 02:00:00", "2026-10-25 02:30:00",
               "2026-10-25 03:00:00"}))
      << "the repeated hour's times run once: 02:30 CEST (00:30 UTC), not 02:00 and 02:30 "
         "CET again; then 03:00 CET (02:00 UTC)";
  EXPECT_EQ(ticks(TickRule::cron("0 9 * * *", "America/New_York"), "2026-12-01 00:00:00", 1),
            (V{"2026-12-01 14:00:00"}));
}

TEST(TickRule, IntervalsAndTheLastTickOfAPastSpan) {
  const auto every = TickRule::every(30'000);
  EXPECT_EQ(every.next_after(1'000), 31'000);
  EXPECT_EQ(every.last_at_or_before(1'000, 1'000), 1'000);
  EXPECT_EQ(every.last_at_or_before(1'000, 100'999), 91'000);
  // A minutely cron rule missed for a year: its last tick, found at once.
  const auto minutely = TickRule::cron("* * * * *", "UTC");
  const auto t0 = utc("2025-12-01 00:00:00");
  EXPECT_EQ(show(minutely.last_at_or_before(t0, utc("2026-12-01 10:20:30"))),
            "2026-12-01 10:20:00");
  EXPECT_EQ(show(minutely.last_at_or_before(t0, t0)), "2025-12-01 00:00:00");
  const auto yearly = TickRule::cron("@yearly", "UTC");
  EXPECT_EQ(show(yearly.last_at_or_before(utc("2020-01-01 00:00:00"), utc("2026-12-01 00:00:00"))),
            "2026-01-01 00:00:00");
}

TEST(TickRule, TheTicksALateSchedulerPassesOver) {
  const auto every = TickRule::every(30'000);
  EXPECT_EQ(every.count_before(1'000, 1'000), 0);
  EXPECT_EQ(every.count_before(1'000, 1'001), 1);
  EXPECT_EQ(every.count_before(1'000, 91'000), 3) << "1, 31 and 61 s; not 91 s itself";
  EXPECT_EQ(every.count_before(1'000, 91'001), 4);
  const auto hourly = TickRule::cron("0 * * * *", "UTC");
  const auto t0 = utc("2026-12-01 00:00:00");
  EXPECT_EQ(hourly.count_before(t0, utc("2026-12-01 05:00:00")), 5);
  EXPECT_EQ(hourly.count_before(t0, utc("2026-12-01 05:00:01")), 6);
  const auto secondly = TickRule::cron("* * * * * *", "UTC");
  EXPECT_EQ(secondly.count_before(t0, utc("2026-12-31 00:00:00")), TickRule::kCountMax)
      << "a month of seconds: counted up to the bound";
}

TEST(TickRule, BadRulesAreRefusedByName) {
  EXPECT_REDISCHED_ERROR(TickRule::cron("* * * *", "UTC"), Errc::invalid_argument, "5 fields");
  EXPECT_REDISCHED_ERROR(TickRule::cron("61 * * * *", "UTC"), Errc::invalid_argument,
                         "minutes: 61 is out of 0..59");
  EXPECT_REDISCHED_ERROR(TickRule::cron("0 0 * foo *", "UTC"), Errc::invalid_argument,
                         "month: 'foo'");
  EXPECT_REDISCHED_ERROR(TickRule::cron("*/0 * * * *", "UTC"), Errc::invalid_argument, "step");
  EXPECT_REDISCHED_ERROR(TickRule::cron("5-1 * * * *", "UTC"), Errc::invalid_argument, "backwards");
  EXPECT_REDISCHED_ERROR(TickRule::cron("1,,2 * * * *", "UTC"), Errc::invalid_argument, "empty");
  EXPECT_REDISCHED_ERROR(TickRule::cron("@sometimes", "UTC"), Errc::invalid_argument, "macro");
  EXPECT_REDISCHED_ERROR(TickRule::cron("* * * * *", "Mars/Olympus"), Errc::invalid_argument,
                         "unknown time zone");
  EXPECT_REDISCHED_ERROR(TickRule::every(0), Errc::invalid_argument, "interval");
}

}  // namespace
}  // namespace redisched::core
