#include "cli/output.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "cli/session.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace redisched::cli {

void print_json(const boost::json::value& v) { std::cout << wire::to_text(v) << "\n"; }

std::string printable(std::string_view body) {
  if (wire::valid_utf8(body)) return std::string(body);
  return "base64:" + wire::base64_encode(body);
}

void print_job_text(const Job& j) {
  std::cout << "id:           " << j.id << "\n"
            << "state:        " << to_string(j.state) << "\n"
            << "priority:     " << j.priority << "\n"
            << "created:      " << j.created_ms << "\n"
            << "due:          " << j.due_ms << "\n"
            << "attempts:     " << j.attempts << " of " << j.max_attempts << "\n"
            << "ttr:          " << j.ttr.count() << " ms\n";
  if (j.error) std::cout << "error:        " << *j.error << "\n";
  if (j.keep.count() > 0) std::cout << "keep:         " << j.keep.count() << " ms\n";
  if (j.result) std::cout << "result:       " << printable(*j.result) << "\n";
  if (j.state == JobState::reserved) {
    std::cout << "token:        " << j.token << "\n"
              << "deadline:     " << j.deadline_ms << "\n";
    if (!j.worker.empty()) std::cout << "worker:       " << j.worker << "\n";
  }
  std::cout << "body:         " << printable(j.body) << "\n";
  // The attempts that failed or lapsed, oldest first: one line each.
  if (!j.history.empty()) std::cout << "history:\n";
  for (const Attempt& a : j.history) {
    std::cout << "  attempt " << a.attempt << " " << to_string(a.outcome) << " at " << a.ended_ms
              << " after " << a.ended_ms - a.started_ms << " ms";
    if (!a.worker.empty()) std::cout << " on " << a.worker;
    std::cout << ": " << printable(a.error) << (a.error_cut ? " [cut]" : "") << "\n";
  }
  // What its handlers reported: the latest progress, and the log's lines.
  if (j.progress) {
    std::cout << "progress:     " << printable(j.progress->value) << " (attempt "
              << j.progress->attempt << ", at " << j.progress->at_ms << ")\n";
  }
  if (!j.log.empty()) {
    std::cout << "log:          " << j.log.size() << " of " << j.log_total << " lines\n";
  }
  for (const LogLine& l : j.log) {
    std::cout << "  " << l.at_ms << " attempt " << l.attempt << ": " << printable(l.text)
              << (l.cut ? " [cut]" : "") << "\n";
  }
  if (j.batch) {
    std::cout << "batch:        " << j.batch->total << " members: " << j.batch->done << " done, "
              << j.batch->failed << " failed, " << j.batch->pending() << " pending; "
              << (j.batch->sealed ? "sealed" : "open") << "\n";
  }
  // What it waits, or waited, for: one line each.
  if (j.deps_total > 0) {
    std::cout << "after:        " << j.deps_total - j.deps_left << " of " << j.deps_total
              << " settled\n";
  }
  for (const DependencyState& d : j.deps) {
    std::cout << "  " << d.topic << "/" << printable(d.id) << " (" << to_string(d.on_failure)
              << "): " << to_string(d.outcome);
    if (!d.value.empty()) std::cout << ": " << printable(d.value);
    std::cout << "\n";
  }
}

void print_taken(const ReserveResult& r, const Session& s, bool reserved) {
  if (s.json()) {
    for (const auto& j : r.jobs) {
      print_json(wire::reservation_json(j, reserved));
    }
    return;
  }
  if (r.jobs.empty()) {
    std::cout << (r.paused ? "topic is paused\n" : "no job is ready\n");
    return;
  }
  for (const auto& j : r.jobs) {
    std::cout << j.id;
    if (reserved) std::cout << "\ttoken " << j.token;
    if (j.keep.count() > 0) std::cout << "\tkeep " << j.keep.count();
    std::cout << "\tattempt " << j.attempt << "/" << j.max_attempts << "\t" << printable(j.body)
              << "\n";
  }
}

int report(Outcome o, std::string_view what, std::string_view id, const Session& s) {
  if (s.json()) {
    print_json(boost::json::object{{"id", id}, {"outcome", to_string(o)}});
  } else if (o == Outcome::ok) {
    std::cout << what << " " << id << "\n";
  }
  if (o == Outcome::ok) return 0;
  std::cerr << "redisched: " << id << ": " << to_string(o) << "\n";
  return 1;
}

Progress::Progress(std::string what, std::int64_t total)
    : what_(std::move(what)), total_(total), tty_(::isatty(2) == 1) {}

void Progress::add(std::int64_t n) {
  done_ += n;
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - shown_ < std::chrono::milliseconds(100)) return;
  shown_ = now;
  draw();
}

void Progress::done() {
  if (!tty_) return;
  draw();
  std::cerr << "\n";
}

void Progress::draw() const {
  if (total_ > 0) {
    const int width = 30;
    const auto filled = static_cast<int>(width * std::min<std::int64_t>(done_, total_) / total_);
    std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
              << std::string(static_cast<size_t>(width - filled), ' ') << "] " << done_ << "/"
              << total_ << " " << what_ << std::flush;
  } else {
    std::cerr << "\r" << done_ << " " << what_ << std::flush;
  }
}

}  // namespace redisched::cli
