// How the CLI prints: text for people, one JSON object per line for scripts
// (--json), and a progress bar on a terminal.
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "redisched/job.h"

namespace redisched::cli {

class Session;

void print_json(const boost::json::value& v);
// A body as text: itself when it is UTF-8, else "base64:...".
std::string printable(std::string_view body);
void print_job_text(const Job& j);
// Jobs a reserve (reserved) or a pull handed out.
void print_taken(const ReserveResult& r, const Session& s, bool reserved);
// 0 when the outcome is ok; else prints why and returns 1.
int report(Outcome o, std::string_view what, std::string_view id, const Session& s);

// A progress bar on stderr when it is a terminal; quiet when piped.
class Progress {
 public:
  Progress(std::string what, std::int64_t total);
  void add(std::int64_t n);
  void done();

 private:
  void draw() const;
  std::string what_;
  std::int64_t total_;
  bool tty_;
  std::int64_t done_ = 0;
  std::chrono::steady_clock::time_point shown_{};
};

}  // namespace redisched::cli
