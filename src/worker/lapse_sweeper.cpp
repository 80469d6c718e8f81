#include "worker/lapse_sweeper.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "redisched/limits.h"

namespace redisched::worker {

void LapseSweeper::arm(std::int64_t deadline_ms) {
  if (stopped_ || (at_ >= 0 && at_ <= deadline_ms)) return;
  at_ = deadline_ms;
  timer_.expires_at(clock_.local_time(deadline_ms + 1));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    at_ = -1;
    sweep();
  });
}

void LapseSweeper::sweep() {
  if (stopped_) return;
  // Not while acks and fails wait to be sent again: a requeue first would
  // hand their jobs out again. The last of them to go sweeps.
  if (calls_.retrying()) {
    put_off_ = true;
    return;
  }
  // One try: a sweep that fails is tried again later, never before the
  // settling calls that wait for Redis too.
  calls_.once<RequeueResult>(
      [this](Callback<RequeueResult> cb) {
        calls_.broker().requeue(calls_.topic(), static_cast<int>(limits::kBatchMax), std::move(cb));
      },
      [this](Result<RequeueResult> r) {
        if (!r.ok()) {
          spdlog::warn("redisched worker: requeue on topic {} failed: {}", calls_.topic(),
                       r.error().what());
          arm(clock_.redis_now() + TopicCalls::kRetryMax.count());
          return;
        }
        if (r.value().requeued > 0 && !stopped_) requeued_();
        if (r.value().next_deadline_ms > 0) arm(r.value().next_deadline_ms);
      });
}

void LapseSweeper::retries_done() {
  if (std::exchange(put_off_, false)) sweep();
}

void LapseSweeper::stop() {
  stopped_ = true;
  timer_.cancel();
}

}  // namespace redisched::worker
