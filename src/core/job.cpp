// Names of the public enums, and the error category.
#include "redisched/job.h"

#include <array>

#include "redisched/error.h"

namespace redisched {
namespace {

constexpr std::array<std::string_view, 6> kStateNames = {"delayed", "ready", "reserved",
                                                         "dead",    "done",  "blocked"};
constexpr std::array<std::string_view, 3> kOnFailureNames = {"fail", "ignore", "drop"};
constexpr std::array<std::string_view, 4> kDependencyOutcomeNames = {"pending", "done", "failed",
                                                                     "dropped"};

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "redisched"; }
  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::ok:
        return "ok";
      case Errc::invalid_argument:
        return "invalid argument";
      case Errc::connection:
        return "cannot reach Redis";
      case Errc::auth:
        return "Redis refused the login";
      case Errc::timeout:
        return "Redis did not answer in time";
      case Errc::protocol:
        return "unreadable reply from Redis";
      case Errc::server:
        return "Redis error";
      case Errc::closed:
        return "client closed";
      case Errc::bad_format:
        return "stored job of an unknown format";
      case Errc::conflict:
        return "the topic cannot take the call as it is";
    }
    return "unknown error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

std::string_view to_string(JobState s) noexcept { return kStateNames[static_cast<size_t>(s)]; }

std::optional<JobState> parse_job_state(std::string_view s) noexcept {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == s) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

std::string_view to_string(OnFailure p) noexcept { return kOnFailureNames[static_cast<size_t>(p)]; }

std::optional<OnFailure> parse_on_failure(std::string_view s) noexcept {
  for (size_t i = 0; i < kOnFailureNames.size(); ++i) {
    if (kOnFailureNames[i] == s) return static_cast<OnFailure>(i);
  }
  return std::nullopt;
}

std::string_view to_string(DependencyOutcome o) noexcept {
  return kDependencyOutcomeNames[static_cast<size_t>(o)];
}

std::string_view to_string(AttemptOutcome o) noexcept {
  return o == AttemptOutcome::lapsed ? "lapsed" : "failed";
}

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::ok:
      return "ok";
    case Outcome::not_found:
      return "not found";
    case Outcome::wrong_state:
      return "not reserved";
    case Outcome::stale_token:
      return "stale token";
  }
  return "unknown";
}

}  // namespace redisched
