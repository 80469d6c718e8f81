#include "worker/reports.h"

#include <spdlog/spdlog.h>

#include <memory>

namespace redisched::worker {

void Reports::arm() {
  if (armed_) return;
  armed_ = true;
  timer_.expires_after(kInterval);
  timer_.async_wait([this](boost::system::error_code ec) {
    armed_ = false;
    if (!ec) send();
  });
}

void Reports::send() {
  for (auto& p : pool_.take_reports()) {
    auto sent = std::make_shared<HandlerPool::PendingReport>(std::move(p));
    calls_.once<Outcome>(
        [this, sent](Callback<Outcome> cb) {
          calls_.broker().report(calls_.topic(), sent->id, sent->token, sent->report,
                                 std::move(cb));
        },
        [this, sent](Result<Outcome> r) {
          std::optional<JobReport> unsent;
          if (!r.ok()) {
            // Redis unreachable: the report goes with the next. Refused (a
            // progress that is no JSON): said here, and its lines go with
            // the next without it.
            if (transient(r.error())) {
              unsent = std::move(sent->report);
            } else {
              spdlog::warn("redisched worker: a report of job {} on topic {} was refused: {}",
                           sent->id, calls_.topic(), r.error().what());
              if (sent->report.progress && !sent->report.lines.empty()) {
                sent->report.progress.reset();
                unsent = std::move(sent->report);
              }
            }
          }
          if (pool_.reported(sent->key, std::move(unsent))) arm();
        });
  }
}

}  // namespace redisched::worker
