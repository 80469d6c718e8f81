// Reading what a request brings: its JSON body and fields, each checked for
// type and range before any arithmetic, and the job of a put. Everything
// here is pure (no I/O), so the fuzzers and unit tests call it directly.
// Every refusal throws HttpError with a message that says what is wrong.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "redisched/error.h"
#include "redisched/job.h"
#include "server/http.h"

namespace redisched::server {

// A request refused: the HTTP status, the error code and the message.
struct HttpError {
  http::status status;
  std::string code;
  std::string message;
};

// 400 invalid_argument.
[[noreturn]] void bad_request(std::string message);

// A Client error as the HTTP refusal it is: the status of each Errc
// (docs/http-api.md, "Errors", quotes them).
HttpError http_error(const Error& e);

// The body as a JSON object (an empty body is {}); 400 for anything else.
boost::json::object json_object(std::string_view body);

// 400 for a field not in allowed.
void only_fields(const boost::json::object& o, std::initializer_list<std::string_view> allowed);

// An integer field in [lo, hi]; nullopt when absent or null. A JSON number
// with a fraction, or out of range, is refused (never rounded or wrapped).
std::optional<std::int64_t> int_field(const boost::json::object& o, std::string_view name,
                                      std::int64_t lo, std::int64_t hi);
std::optional<std::string> string_field(const boost::json::object& o, std::string_view name);
std::optional<bool> bool_field(const boost::json::object& o, std::string_view name);

// The job of PUT/POST .../jobs: body or body_base64, schedule, options.
JobSpec job_spec(const boost::json::object& o);
// The change of POST .../batches/{id}: add ([{topic, id}...]), seal, keep_ms.
BatchChange batch_change(const boost::json::object& o);
// A schedule of PUT .../schedules/{name}: cron and time_zone or every_ms,
// catch_up, paused, and the tick job's fields as job_spec reads them.
ScheduleSpec schedule_spec(const boost::json::object& o);

// A number of seconds as one of the original servers took it, in
// milliseconds; negative values clamp to 0, as both did. nullopt when
// absent or null; values over max_ms are refused.
enum class Seconds {
  // The Redis delay queue (Go, int64 fields): whole numbers only.
  whole,
  // The original redisched (Node, "delay * 1000"): numbers with fractions,
  // or strings holding one ("2", "1.5"), as its browser form sent them.
  lenient,
};
std::optional<std::int64_t> seconds_field(const boost::json::object& o, std::string_view name,
                                          Seconds kind, std::int64_t max_ms);

}  // namespace redisched::server
