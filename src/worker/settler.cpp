#include "worker/settler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "redisched/limits.h"

namespace redisched::worker {

Millis retry_delay(const Backoff& b, int attempt) {
  if (b.kind == BackoffKind::fixed) return b.base;
  const double d = static_cast<double>(b.base.count()) * std::pow(2.0, std::max(attempt - 1, 0));
  return d >= static_cast<double>(b.cap.count()) ? b.cap : Millis{static_cast<std::int64_t>(d)};
}

void Settler::settle(Finished f) {
  if (f.dropped) return;
  auto& stats = calls_.shared().stats;
  const Reservation& job = f.job;
  if (job.token == 0) {  // handed out for good (ttr 0): nothing to settle
    ++stats.acked;
    return;
  }
  // What the handler reported last goes first, unless an ack without keep
  // is about to remove the job and its report with it.
  const bool kept =
      f.verdict != Verdict::ack || std::max(opts_.keep_finished, job.keep).count() > 0;
  if (!f.report.empty() && kept) {
    auto then = std::make_shared<Finished>(std::move(f));
    auto report = std::make_shared<JobReport>(std::exchange(then->report, {}));
    calls_.retried<Outcome>(
        [this, then, report](Callback<Outcome> cb) {
          calls_.broker().report(calls_.topic(), then->job.id, then->job.token, *report,
                                 std::move(cb));
        },
        [this, then](Result<Outcome> r) {
          if (!r.ok()) {
            spdlog::warn("redisched worker: the last report of job {} on topic {} failed: {}",
                         then->job.id, calls_.topic(), r.error().what());
          }
          settle(std::move(*then));
          flush();
        });
    return;
  }
  switch (f.verdict) {
    case Verdict::ack: {
      // The handler's keep, or the job's own when longer (its producer may
      // wait for it). The usual ack goes in the next ackmany; one with a
      // result (kept with a keep, and given to the jobs waiting for this
      // one), or a keep of its own, goes alone.
      const Millis keep = std::max(opts_.keep_finished, job.keep);
      if (!f.result && keep == opts_.keep_finished) {
        acks_.emplace_back(job.id, job.token);
        return;
      }
      calls_.retried<Outcome>(
          [this, job, keep, result = std::move(f.result)](Callback<Outcome> cb) {
            calls_.broker().ack(calls_.topic(), job.id, job.token, keep, result, std::move(cb));
          },
          [this, job, &stats](Result<Outcome> r) {
            if (!r.ok() && r.error().code() == Errc::invalid_argument) {
              // A result over the size limit: the job fails, saying why.
              Finished refused{.job = job, .verdict = Verdict::fail};
              refused.error = std::string("the result was refused: ") + r.error().what();
              return settle(std::move(refused));
            }
            if (r.ok() && r.value() == Outcome::ok) {
              ++stats.acked;
            } else {
              if (!r.ok()) {
                spdlog::warn("redisched worker: an ack on topic {} failed: {}", calls_.topic(),
                             r.error().what());
              }
              ++stats.stale;
            }
            if (on_acked_) on_acked_();
          });
      return;
    }
    case Verdict::release:
      calls_.retried<Outcome>(
          [this, job, delay = f.delay](Callback<Outcome> cb) {
            calls_.broker().release(calls_.topic(), job.id, job.token, delay, std::move(cb));
          },
          [&stats](Result<Outcome> r) {
            if (r.ok() && r.value() == Outcome::ok) {
              ++stats.released;
            } else {
              ++stats.stale;
            }
          });
      return;
    case Verdict::fail:
    case Verdict::bury: {
      // The handler's max_attempts goes with the call: it becomes the job's
      // own, and the library decides between retry and dead by it.
      const bool bury = f.verdict == Verdict::bury;
      std::optional<Millis> delay;
      if (opts_.backoff) delay = retry_delay(*opts_.backoff, job.attempt);
      constexpr auto kErrorMax = static_cast<size_t>(limits::kErrorMax);
      if (f.error.size() > kErrorMax) f.error.resize(kErrorMax);
      calls_.retried<FailResult>(
          [this, job, bury, delay, error = std::move(f.error)](Callback<FailResult> cb) {
            calls_.broker().fail(calls_.topic(), job.id, job.token, error, bury, delay,
                                 opts_.max_attempts, std::move(cb));
          },
          [&stats](Result<FailResult> r) {
            if (r.ok() && r.value().outcome == Outcome::ok) {
              ++stats.failed;
            } else {
              ++stats.stale;
            }
          });
      return;
    }
  }
}

void Settler::flush() {
  if (acking_ || acks_.empty()) return;
  acking_ = true;
  auto batch = std::make_shared<std::vector<std::pair<std::string, std::uint64_t>>>();
  batch->swap(acks_);
  calls_.retried<std::vector<Outcome>>(
      [this, batch](Callback<std::vector<Outcome>> cb) {
        calls_.broker().ack_many(calls_.topic(), *batch, opts_.keep_finished, std::move(cb));
      },
      [this, batch](Result<std::vector<Outcome>> r) {
        acking_ = false;
        auto& stats = calls_.shared().stats;
        if (r.ok()) {
          for (Outcome o : r.value()) {
            if (o == Outcome::ok) {
              ++stats.acked;
            } else {
              ++stats.stale;
            }
          }
        } else {
          spdlog::warn("redisched worker: {} acks on topic {} failed: {}", batch->size(),
                       calls_.topic(), r.error().what());
        }
        flush();
        if (on_acked_) on_acked_();
      });
}

void Settler::release_now(const Reservation& job) {
  calls_.retried<Outcome>(
      [this, job](Callback<Outcome> cb) {
        calls_.broker().release(calls_.topic(), job.id, job.token, Millis{0}, std::move(cb));
      },
      [this](Result<Outcome> r) {
        if (r.ok() && r.value() == Outcome::ok) ++calls_.shared().stats.released;
      });
}

}  // namespace redisched::worker
