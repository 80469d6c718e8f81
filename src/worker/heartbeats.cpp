#include "worker/heartbeats.h"

#include <algorithm>

namespace redisched::worker {
namespace {
constexpr Millis kTickMin{20};
constexpr Millis kTickMax{10000};
}  // namespace

void Heartbeats::arm() {
  if (!enabled_ || armed_) return;
  const auto ttr = pool_.shortest_ttr();
  if (!ttr) return;
  armed_ = true;
  timer_.expires_after(std::clamp(*ttr / 3, kTickMin, kTickMax));
  timer_.async_wait([this](boost::system::error_code ec) {
    armed_ = false;
    if (!ec) beat();
  });
}

void Heartbeats::beat() {
  for (const auto& job : pool_.due_for_touch(clock_.redis_now())) {
    calls_.retried<TouchResult>(
        [this, job](Callback<TouchResult> cb) {
          calls_.broker().touch(calls_.topic(), job.id, job.token, Millis{0}, std::move(cb));
        },
        [this, id = job.id, token = job.token](Result<TouchResult> r) {
          std::optional<std::int64_t> deadline;
          if (r.ok() && r.value().outcome == Outcome::ok) deadline = r.value().deadline_ms;
          pool_.touched(id, token, deadline);
        });
  }
  arm();
}

}  // namespace redisched::worker
