#include "core/ticks.h"

#include <date/tz.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <cctype>
#include <charconv>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "redisched/error.h"
#include "redisched/limits.h"

namespace redisched::core {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using LocalSeconds = date::local_time<seconds>;

[[noreturn]] void refuse(const std::string& message) {
  throw Error(Errc::invalid_argument, message);
}

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames = {"sun", "mon", "tue", "wed",
                                                       "thu", "fri", "sat"};

struct FieldSpec {
  std::string_view name;
  int lo, hi;
  bool months = false, weekdays = false;
};

// One value of a field: a number, or a month's or a weekday's name.
int value(std::string_view v, const FieldSpec& f) {
  std::string lower(v);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (f.months || f.weekdays) {
    const std::span<const std::string_view> names =
        f.months ? std::span<const std::string_view>(kMonthNames)
                 : std::span<const std::string_view>(kDayNames);
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (lower == names[i]) return static_cast<int>(i) + (f.months ? 1 : 0);
    }
  }
  int n = -1;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty()) {
    refuse("cron " + std::string(f.name) + ": '" + std::string(v) + "' is not a number" +
           (f.months     ? " or a month's name"
            : f.weekdays ? " or a weekday's name"
                         : ""));
  }
  if (n < f.lo || n > f.hi) {
    refuse("cron " + std::string(f.name) + ": " + std::to_string(n) + " is out of " +
           std::to_string(f.lo) + ".." + std::to_string(f.hi));
  }
  return n;
}

// A field's values as bits (weekday 7 is Sunday, 0).
std::bitset<64> field(std::string_view text, const FieldSpec& f) {
  std::bitset<64> bits;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    std::string_view item = text.substr(at, comma - at);
    if (item.empty())
      refuse("cron " + std::string(f.name) + ": an empty item in '" + std::string(text) + "'");
    int step = 1;
    if (const auto slash = item.find('/'); slash != std::string_view::npos) {
      const std::string_view s = item.substr(slash + 1);
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
      if (ec != std::errc() || end != s.data() + s.size() || s.empty() || step < 1) {
        refuse("cron " + std::string(f.name) + ": step '" + std::string(s) +
               "' must be a number from 1");
      }
      item = item.substr(0, slash);
    }
    int lo = f.lo, hi = f.hi;
    if (item != "*") {
      const auto dash = item.find('-');
      lo = value(item.substr(0, dash), f);
      if (dash != std::string_view::npos) {
        hi = value(item.substr(dash + 1), f);
        if (hi < lo) {
          refuse("cron " + std::string(f.name) + ": range '" + std::string(item) +
                 "' runs backwards");
        }
      } else if (step == 1) {
        hi = lo;  // a single value; "a/n" runs from a to the field's end
      }
    }
    for (int v = lo; v <= hi; v += step) {
      bits.set(static_cast<std::size_t>(f.weekdays && v == 7 ? 0 : v));
      if (hi - v < step) break;  // (a step past the field's end: no overflow)
    }
    if (comma == text.size()) return bits;
    at = comma + 1;
  }
}

}  // namespace

struct TickRule::Cron {
  std::bitset<64> second, minute, hour, day, month, weekday;
  bool any_day = false, any_weekday = false;  // the field starts with '*' (as cron reads it)
  const date::time_zone* zone = nullptr;

  bool day_matches(const date::year_month_day& ymd) const {
    const bool by_day = day.test(static_cast<unsigned>(ymd.day()));
    const bool by_weekday = weekday.test(date::weekday(date::local_days(ymd)).c_encoding());
    // As cron: either field starting with '*' (also "*/2"): both must
    // match; both restricted: either.
    if (any_day || any_weekday) return by_day && by_weekday;
    return by_day || by_weekday;
  }

  // The first wall-clock time at or after t that matches, if any before 2248.
  std::optional<LocalSeconds> next_local(LocalSeconds t) const {
    constexpr int kLastYear = 2248;
    for (;;) {
      const auto day_start = date::floor<days>(t);
      const date::year_month_day ymd{day_start};
      if (static_cast<int>(ymd.year()) > kLastYear) return std::nullopt;
      if (!month.test(static_cast<unsigned>(ymd.month()))) {
        const auto first = date::year_month_day{ymd.year() / ymd.month() / 1} + date::months{1};
        t = LocalSeconds{date::local_days{first}};
        continue;
      }
      if (!day_matches(ymd)) {
        t = LocalSeconds{day_start + days{1}};
        continue;
      }
      const date::hh_mm_ss<seconds> tod{t - day_start};
      const auto h = static_cast<int>(tod.hours().count());
      const auto m = static_cast<int>(tod.minutes().count());
      const auto s = static_cast<int>(tod.seconds().count());
      if (!hour.test(static_cast<std::size_t>(h))) {
        t = day_start + hours{h + 1};
        continue;
      }
      if (!minute.test(static_cast<std::size_t>(m))) {
        t = day_start + hours{h} + minutes{m + 1};
        continue;
      }
      if (!second.test(static_cast<std::size_t>(s))) {
        t += seconds{1};
        continue;
      }
      return t;
    }
  }

  // A wall-clock time as an instant: a skipped one is the end of its gap,
  // a repeated one its first instant.
  std::int64_t instant(LocalSeconds l) const {
    const auto info = zone->get_info(l);
    date::sys_seconds at;
    if (info.result == date::local_info::nonexistent) {
      at = info.first.end;
    } else {
      at = date::sys_seconds{l.time_since_epoch() - info.first.offset};
    }
    return std::chrono::duration_cast<milliseconds>(at.time_since_epoch()).count();
  }
};

TickRule TickRule::cron(std::string_view expr, std::string_view zone) {
  const std::vector<std::pair<std::string_view, std::string_view>> macros = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"}};
  std::string text(expr);
  if (!text.empty() && text[0] == '@') {
    const auto it =
        std::find_if(macros.begin(), macros.end(), [&](const auto& m) { return m.first == text; });
    if (it == macros.end()) refuse("cron: unknown macro '" + text + "'");
    text = it->second;
  }
  std::vector<std::string_view> fields;
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto start = rest.find_first_not_of(" \t");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const auto end = std::min(rest.find_first_of(" \t"), rest.size());
    fields.push_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  if (fields.size() != 5 && fields.size() != 6) {
    refuse(
        "cron expression must have 5 fields (minute hour day month weekday) or 6 (seconds "
        "first), got " +
        std::to_string(fields.size()));
  }
  auto c = std::make_shared<Cron>();
  std::size_t i = 0;
  if (fields.size() == 6) {
    c->second = field(fields[i++], {"seconds", 0, 59});
  } else {
    c->second.set(0);
  }
  c->minute = field(fields[i++], {"minutes", 0, 59});
  c->hour = field(fields[i++], {"hours", 0, 23});
  c->any_day = fields[i][0] == '*';
  c->day = field(fields[i++], {"day of month", 1, 31});
  c->month = field(fields[i++], {"month", 1, 12, true});
  c->any_weekday = fields[i][0] == '*';
  c->weekday = field(fields[i++], {"day of week", 0, 7, false, true});
  try {
    c->zone = date::locate_zone(std::string(zone));
  } catch (const std::exception&) {
    refuse("unknown time zone '" + std::string(zone) + "' (an IANA name, such as Europe/Berlin)");
  }
  TickRule r;
  r.cron_ = std::move(c);
  return r;
}

TickRule TickRule::every(std::int64_t ms) {
  if (ms < 1 || ms > limits::kDelayMax) {
    refuse("an interval must be from 1 ms to " + std::to_string(limits::kDelayMax) + " ms");
  }
  TickRule r;
  r.every_ = ms;
  return r;
}

std::int64_t TickRule::next_after(std::int64_t ms) const {
  if (!cron_) return ms + every_;
  // The first whole second after ms, on the zone's wall clock.
  auto from = date::floor<seconds>(date::sys_time<milliseconds>{milliseconds{ms}}) + seconds{1};
  auto local = cron_->zone->to_local(from);
  for (;;) {
    const auto found = cron_->next_local(local);
    if (!found) return -1;
    const std::int64_t at = cron_->instant(*found);
    // A time the zone repeats or skips may land at or before ms: go on.
    if (at > ms) return at;
    local = *found + seconds{1};
  }
}

std::int64_t TickRule::last_at_or_before(std::int64_t tick, std::int64_t ms) const {
  if (!cron_) return tick + (ms - tick) / every_ * every_;
  // The smallest window back from ms that holds a tick, then forward
  // through it: little work however long ago tick was.
  constexpr std::int64_t kMinute = 60'000;
  for (const std::int64_t window : {kMinute, 60 * kMinute, 1440 * kMinute, 32 * 1440 * kMinute,
                                    367 * 1440 * kMinute, 5 * 367 * 1440 * kMinute}) {
    if (ms - window <= tick) break;
    std::int64_t t = next_after(ms - window - 1);
    if (t < 0 || t > ms) continue;
    for (std::int64_t n = next_after(t); n >= 0 && n <= ms; n = next_after(t)) t = n;
    return t;
  }
  std::int64_t t = tick;
  for (std::int64_t n = next_after(t); n >= 0 && n <= ms; n = next_after(t)) t = n;
  return t;
}

std::int64_t TickRule::count_before(std::int64_t tick, std::int64_t end) const {
  if (end <= tick) return 0;
  if (!cron_) return (end - tick + every_ - 1) / every_;
  std::int64_t n = 0;
  for (std::int64_t t = tick; t >= 0 && t < end && n < kCountMax; t = next_after(t)) ++n;
  return n;
}

TickRule tick_rule(const ScheduleSpec& spec) {
  if (spec.every && !spec.cron.empty()) refuse("give cron or every, not both");
  if (spec.every) return TickRule::every(spec.every->count());
  if (spec.cron.empty()) refuse("give a cron expression or an interval (every)");
  return TickRule::cron(spec.cron, spec.time_zone);
}

}  // namespace redisched::core

namespace redisched {

std::vector<std::int64_t> next_ticks(const Schedule& schedule, int n) {
  const auto rule = core::tick_rule(schedule.spec);
  std::vector<std::int64_t> out;
  for (std::int64_t t = schedule.next_ms; t >= 0 && static_cast<int>(out.size()) < n;
       t = rule.next_after(t)) {
    out.push_back(t);
  }
  return out;
}

}  // namespace redisched
