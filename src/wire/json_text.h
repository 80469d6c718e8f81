// JSON text as our faces read and write it, where Boost.JSON's value alone
// would change what a user sent: it writes 0.1 as 1E-1 and an infinite
// double as Infinity (not JSON), and rounds an integer past 2^64. A job's
// progress is the user's own JSON, stored as sent, so its numbers are
// carried as they are spelled.
#pragma once

#include <boost/json/fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace redisched::wire {

// What one read of a JSON text finds that its parsed value does not say.
struct JsonScan {
  std::string duplicate;      // a key given twice in one object (the first seen)
  bool out_of_range = false;  // a number past a double's range (1E400)
  // The named member of the top-level object (scan_json's member), as
  // compact JSON with its numbers spelled as in the text; nullopt when
  // absent or not asked for.
  std::optional<std::string> member;
};
// text must be JSON that boost::json::parse accepts (it is not checked
// again here).
JsonScan scan_json(std::string_view text, std::string_view member = {});

// text as compact JSON, its numbers spelled as in text; nullopt when it is
// not JSON (as boost::json::parse reads it) or holds a number past a
// double's range.
std::optional<std::string> compact_json(std::string_view text);

// v as compact JSON: as boost::json::serialize, but a double is written in
// its shortest form that reads back the same (0.1, 1e+30; 5.0, not 5, so
// that it reads back as a double), and a non-finite one (which no JSON
// text holds) as null.
std::string to_text(const boost::json::value& v);

// o as to_text writes it, with a last member name whose value is raw, a
// JSON text in the compact form scan_json gives: spliced in, so that its
// numbers stay as they are spelled. (A job's progress: wire::job_text.)
std::string to_text_with(const boost::json::object& o, std::string_view name, std::string_view raw);

}  // namespace redisched::wire
