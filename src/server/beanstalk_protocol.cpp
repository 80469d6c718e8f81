#include "server/beanstalk_protocol.h"

#include <array>
#include <charconv>
#include <limits>
#include <vector>

namespace redisched::server::beanstalk {
namespace {

struct VerbEntry {
  std::string_view prefix;  // as beanstalkd matches it: with its space when it takes arguments
  Verb verb;
  int args;  // the arguments it takes (-1: none, and the line must be the name alone)
};

// In beanstalkd's order of matching (prot.c, which_cmd): the first prefix
// a line starts with names its command, so "reserve-with-timeoutx" is a
// malformed reserve and "stats-tubes" a malformed stats.
constexpr std::array<VerbEntry, kVerbs> kTable = {{
    {"put ", Verb::put, 4},
    {"peek ", Verb::peek, 1},
    {"peek-ready", Verb::peek_ready, -1},
    {"peek-delayed", Verb::peek_delayed, -1},
    {"peek-buried", Verb::peek_buried, -1},
    {"reserve-with-timeout ", Verb::reserve_with_timeout, 1},
    {"reserve-job ", Verb::reserve_job, 1},
    {"reserve", Verb::reserve, -1},
    {"delete ", Verb::remove, 1},
    {"release ", Verb::release, 3},
    {"bury ", Verb::bury, 2},
    {"kick ", Verb::kick, 1},
    {"kick-job ", Verb::kick_job, 1},
    {"touch ", Verb::touch, 1},
    {"stats-job ", Verb::stats_job, 1},
    {"stats-tube ", Verb::stats_tube, 1},
    {"stats", Verb::stats, -1},
    {"use ", Verb::use, 1},
    {"watch ", Verb::watch, 1},
    {"ignore ", Verb::ignore, 1},
    {"list-tubes-watched", Verb::list_tubes_watched, -1},
    {"list-tube-used", Verb::list_tube_used, -1},
    {"list-tubes", Verb::list_tubes, -1},
    {"quit", Verb::quit, -1},
    {"pause-tube ", Verb::pause_tube, 2},
}};

constexpr bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '+' || c == '/' || c == ';' || c == '.' || c == '$' || c == '_' || c == '(' ||
         c == ')';
}

// Digits only (leading zeros allowed), within max.
template <class T>
bool parse_unsigned(std::string_view s, T max, T& out) {
  if (s.empty()) return false;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.front() == '+' || v > max) return false;
  out = static_cast<T>(v);
  return true;
}

bool parse_signed(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// The arguments after the verb's prefix, split on single spaces: an empty
// one (two spaces, or a space at the end) is malformed.
std::optional<std::vector<std::string_view>> split_args(std::string_view rest, int n) {
  std::vector<std::string_view> out;
  out.reserve(static_cast<std::size_t>(n));
  for (;;) {
    const auto sp = rest.find(' ');
    out.push_back(rest.substr(0, sp));
    if (out.back().empty()) return std::nullopt;
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  if (static_cast<int>(out.size()) != n) return std::nullopt;
  return out;
}

}  // namespace

std::string_view verb_name(Verb v) {
  if (v == Verb::remove) return "delete";
  for (const auto& e : kTable) {
    if (e.verb != v) continue;
    auto name = e.prefix;
    if (name.ends_with(' ')) name.remove_suffix(1);
    return name;
  }
  return "?";
}

bool valid_tube_name(std::string_view name) {
  if (name.empty() || name.size() > kNameMax || name.front() == '-') return false;
  for (char c : name) {
    if (!name_char(c)) return false;
  }
  return true;
}

std::variant<Command, std::string_view> parse_line(std::string_view line) {
  const VerbEntry* entry = nullptr;
  for (const auto& e : kTable) {
    if (line.starts_with(e.prefix)) {
      entry = &e;
      break;
    }
  }
  if (!entry) return kUnknownCommand;
  Command c;
  c.verb = entry->verb;
  if (entry->args < 0) {
    // "quit" and anything after it closes, as in beanstalkd.
    if (line.size() != entry->prefix.size() && c.verb != Verb::quit) return kBadFormat;
    return c;
  }
  auto args = split_args(line.substr(entry->prefix.size()), entry->args);
  if (!args) return kBadFormat;
  const auto& a = *args;
  constexpr auto u32 = std::numeric_limits<std::uint32_t>::max();
  constexpr auto u64 = std::numeric_limits<std::uint64_t>::max();
  bool ok = true;
  switch (c.verb) {
    case Verb::put:
      ok = parse_unsigned(a[0], u32, c.pri) && parse_unsigned(a[1], u32, c.delay) &&
           parse_unsigned(a[2], u32, c.ttr) && parse_unsigned(a[3], u64, c.bytes);
      break;
    case Verb::release:
      ok = parse_unsigned(a[0], u64, c.id) && parse_unsigned(a[1], u32, c.pri) &&
           parse_unsigned(a[2], u32, c.delay);
      break;
    case Verb::bury:
      ok = parse_unsigned(a[0], u64, c.id) && parse_unsigned(a[1], u32, c.pri);
      break;
    case Verb::reserve_with_timeout:
      ok = parse_signed(a[0], c.timeout);
      break;
    case Verb::kick:
      ok = parse_unsigned(a[0], u64, c.bound);
      break;
    case Verb::use:
    case Verb::watch:
    case Verb::ignore:
    case Verb::stats_tube:
      c.tube = std::string(a[0]);
      ok = valid_tube_name(c.tube);
      break;
    case Verb::pause_tube:
      c.tube = std::string(a[0]);
      ok = valid_tube_name(c.tube) && parse_unsigned(a[1], u32, c.delay);
      break;
    default:  // the commands on one job: its id
      ok = parse_unsigned(a[0], u64, c.id);
      break;
  }
  if (!ok) return kBadFormat;
  return c;
}

std::optional<Framer::Event> Framer::next() {
  for (;;) {
    const std::string_view rest = std::string_view(in_).substr(pos_);
    switch (state_) {
      case State::line: {
        const auto end = rest.substr(0, kLineMax).find("\r\n");
        if (end == std::string_view::npos) {
          if (rest.size() < kLineMax) {
            compact();
            return std::nullopt;
          }
          // Too long: its first kLineMax bytes dropped, the rest skipped
          // to the next CRLF.
          pos_ += kLineMax;
          state_ = State::skip_line;
          return Event{kBadFormat};
        }
        pos_ += end + 2;
        auto parsed = parse_line(rest.substr(0, end));
        if (auto* refusal = std::get_if<std::string_view>(&parsed)) return Event{*refusal};
        auto& c = std::get<Command>(parsed);
        if (c.verb != Verb::put) return Event{std::move(c)};
        if (c.bytes > max_job_size_) {
          skip_ = c.bytes + 2;
          state_ = State::skip_body;
          return Event{kJobTooBig};
        }
        put_ = std::move(c);
        state_ = State::body;
        continue;
      }
      case State::skip_line: {
        const auto end = rest.find("\r\n");
        if (end == std::string_view::npos) {
          // Keep a trailing CR: its LF may come next.
          pos_ += rest.size() - (rest.ends_with('\r') ? 1 : 0);
          compact();
          return std::nullopt;
        }
        pos_ += end + 2;
        state_ = State::line;
        continue;
      }
      case State::body: {
        const auto need = put_.bytes + 2;
        if (rest.size() < need) {
          compact();
          return std::nullopt;
        }
        const auto body = rest.substr(0, put_.bytes);
        const bool crlf = rest.substr(put_.bytes, 2) == "\r\n";
        pos_ += need;
        state_ = State::line;
        if (!crlf) return Event{kExpectedCrlf};
        put_.body.assign(body);
        return Event{std::move(put_)};
      }
      case State::skip_body: {
        const auto n = std::min<std::uint64_t>(skip_, rest.size());
        pos_ += n;
        skip_ -= n;
        if (skip_ > 0) {
          compact();
          return std::nullopt;
        }
        state_ = State::line;
        continue;
      }
    }
  }
}

// Drops the consumed bytes once they are most of the buffer (amortized).
void Framer::compact() {
  if (pos_ == in_.size()) {
    in_.clear();
    pos_ = 0;
  } else if (pos_ > 4096 && pos_ * 2 > in_.size()) {
    in_.erase(0, pos_);
    pos_ = 0;
  }
}

}  // namespace redisched::server::beanstalk
