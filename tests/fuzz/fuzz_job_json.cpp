// libFuzzer: jobs as JSON, both ways in: a request body through the
// server's field readers (a put's job, the original servers' seconds), and
// an export line through the import's reader; and wire/json_text's
// scanner: what it writes back is JSON of the same value.
#include <algorithm>
#include <boost/json/parse.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "redisched/limits.h"
#include "server/fields.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace {
// a == b, but doubles within a few ulps: Boost.JSON 1.81's parser does not
// always round a long mantissa correctly (nor alike at the end of its
// input and inside it), so the same number, or the shortest text of its
// double (std::to_chars, exact), may read back a unit or two away.
bool same(const boost::json::value& a, const boost::json::value& b) {
  if (a.is_double() && b.is_double()) {
    const double x = a.as_double(), y = b.as_double();
    return x == y || std::fabs(x - y) <= 1e-15 * std::max(std::fabs(x), std::fabs(y));
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const auto &p = a.as_array(), &q = b.as_array();
    if (p.size() != q.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (!same(p[i], q[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    const auto &p = a.as_object(), &q = b.as_object();
    if (p.size() != q.size()) return false;
    for (const auto& [k, v] : p) {
      auto it = q.find(k);
      if (it == q.end() || !same(v, it->value())) return false;
    }
    return true;
  }
  return a == b;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace redisched;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto o = server::json_object(text);
    try {
      auto spec = server::job_spec(o);
      (void)spec;
    } catch (const server::HttpError&) {
    }
    for (auto kind : {server::Seconds::whole, server::Seconds::lenient}) {
      try {
        (void)server::seconds_field(o, "delay", kind, limits::kDelayMax);
      } catch (const server::HttpError&) {
      }
    }
    try {
      (void)server::int_field(o, "count", 1, 1000);
    } catch (const server::HttpError&) {
    }
  } catch (const server::HttpError&) {
    // malformed or not an object: refused, as it must be
  }
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (!ec && v.is_object()) {
    try {
      auto job = wire::job_from_json(v.as_object(), text);
      (void)wire::job_text(job);
    } catch (const std::runtime_error&) {
      // a line import refuses (Error is one too)
    }
  }
  // What the scanner writes back reads as the same value (numbers as
  // spelled, so both readings round them alike), and so does to_text's.
  if (auto compact = wire::compact_json(text)) {
    if (ec) __builtin_trap();  // it took what Boost.JSON refuses
    boost::system::error_code ec2;
    auto again = boost::json::parse(*compact, ec2);
    if (ec2 || !same(again, v)) __builtin_trap();
    auto written = boost::json::parse(wire::to_text(v), ec2);
    if (ec2 || !same(written, v)) __builtin_trap();
  }
  if (v.is_object()) {
    for (const auto& [key, value] : v.as_object()) {
      auto member = wire::scan_json(text, key).member;
      if (member && !same(boost::json::parse(*member, ec), value)) __builtin_trap();
    }
  }
  return 0;
}
