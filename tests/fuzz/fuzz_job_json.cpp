// libFuzzer: jobs as JSON, both ways in: a request body through the
// server's field readers (a put's job, the original servers' seconds), and
// an export line through the import's reader.
#include <boost/json/parse.hpp>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "redisched/limits.h"
#include "server/fields.h"
#include "wire/job_json.h"

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
      auto job = wire::job_from_json(v.as_object());
      (void)wire::job_json(job);
    } catch (const std::runtime_error&) {
      // a line import refuses (Error is one too)
    }
  }
  return 0;
}
