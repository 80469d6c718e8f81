#include "worker/topic_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "redisched/limits.h"

namespace redisched::worker {
namespace {
constexpr int kReserveMax = static_cast<int>(limits::kBatchMax);  // the library's limit per call
constexpr int kReservesInFlight = 2;
constexpr int kSplitMin = 10;  // smaller batches cost Redis more per job than they save
// Bounds of the wait between the two reserves (half a round trip).
constexpr std::chrono::microseconds kStaggerMin{20};
constexpr std::chrono::microseconds kStaggerMax{2000};
}  // namespace

TopicRunner::TopicRunner(Shared& shared, std::string topic, HandlerOptions options, Handler handler,
                         AsyncHandler async_handler)
    : opts_(options),
      calls_(shared, std::move(topic)),
      pool_(
          calls_, opts_, std::move(handler), std::move(async_handler), [this] { on_finished(); },
          [this] { reports_.arm(); }),
      settler_(calls_, opts_),
      heartbeats_(calls_, pool_, clock_, opts_.overrun == Overrun::heartbeat),
      reports_(calls_, pool_),
      sweeper_(calls_, clock_, [this] { look(); }),
      stagger_timer_(shared.io),
      due_timer_(shared.io),
      retry_timer_(shared.io) {
  calls_.on_retries_done([this] {
    sweeper_.retries_done();
    look();
  });
  // A reserve that went out ahead of acks kept for the next ackmany did not
  // see the slots they free under a concurrency cap (TopicLimits): once
  // those acks are sent, look again behind them.
  settler_.on_acked([this] {
    if (!reserved_ahead_of_acks_ || stopping_) return;
    reserved_ahead_of_acks_ = false;
    look();
  });
}

void TopicRunner::start() { pool_.start(); }

int TopicRunner::free_slots() const { return opts_.concurrency + opts_.prefetch - held_; }

// Reserves for the free handlers. While the topic is busy (the last reserve
// filled up), two reserves are kept in flight, the first for half the free
// slots and the second for what is free when it goes out, so that Redis
// works on one while the answer to the other is handled here; an idle topic
// sends one.
//
// The second of the two goes out half a round trip after the first. Redis
// answers all it read from a connection at once: two reserves that reach it
// together come back together, their acks and next reserves go out
// together, and from then on Redis waits while the jobs are handed to the
// handlers, and the worker waits while Redis works (at concurrency 50,
// Redis was idle a fifth of the time). Apart, each answer is handled here
// while Redis works on the other reserve, and each answer's acks and next
// reserve reach Redis while it is busy, so they stay apart.
void TopicRunner::look() {
  if (stopping_ || free_slots() <= 0) return;  // a handler that frees up looks again
  if (calls_.retrying()) return;               // the last of them looks again
  int free = free_slots() - requested_;
  // A reserve in flight may have run before what woke us: look once more
  // when it is back. The second of two looks when its wait is over.
  if (free <= 0 || reserves_ >= kReservesInFlight || (reserves_ > 0 && !busy_) || staggering_) {
    look_again_ = true;
    return;
  }
  look_again_ = false;
  if (busy_ && reserves_ == 0 && free >= 2 * kSplitMin) {
    fetch(free / 2);
    staggering_ = true;
    stagger_timer_.expires_after(std::clamp<std::chrono::steady_clock::duration>(
        reserve_rtt_ / 2, kStaggerMin, kStaggerMax));
    stagger_timer_.async_wait([this](boost::system::error_code ec) {
      staggering_ = false;
      // Not if the first came back without a backlog and nothing asked since.
      if (!ec && (busy_ || look_again_)) look();
    });
    return;
  }
  fetch(free);
}

void TopicRunner::fetch(int count) {
  count = std::min(count, kReserveMax);
  if (settler_.holding()) reserved_ahead_of_acks_ = true;
  ++reserves_;
  requested_ += count;
  ++calls_.shared().stats.reserve_calls;
  const auto sent = std::chrono::steady_clock::now();
  calls_.once<ReserveResult>(
      [this, count](Callback<ReserveResult> cb) {
        calls_.broker().reserve(calls_.topic(), count, opts_.ttr.value_or(Millis{0}),
                                std::move(cb));
      },
      [this, count, sent](Result<ReserveResult> r) {
        if (r.ok()) reserve_rtt_ = std::chrono::steady_clock::now() - sent;
        --reserves_;
        requested_ -= count;
        on_reserved(std::move(r));
      });
}

void TopicRunner::on_reserved(Result<ReserveResult> r) {
  auto& stats = calls_.shared().stats;
  if (!r.ok()) {
    if (stopping_) return;
    spdlog::warn("redisched worker: reserve on topic {} failed: {}", topic(), r.error().what());
    // Nothing more until the backoff is over: no second reserve either, and
    // the next look sends one (a failure says nothing of a backlog).
    stagger_timer_.cancel();
    busy_ = false;
    retry_timer_.expires_after(retry_backoff_);
    retry_backoff_ = std::min(retry_backoff_ * 2, TopicCalls::kRetryMax);
    retry_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) look();
    });
    return;
  }
  retry_backoff_ = TopicCalls::kRetryMin;
  ReserveResult& res = r.value();
  clock_.observe(res.now_ms);
  const int n = static_cast<int>(res.jobs.size());
  stats.reserved += static_cast<std::uint64_t>(n);
  if (n == 0) ++stats.empty_reserves;
  if (n > 0 && stopping_) {
    // Cancelled while the reserve was on its way: straight back, but for
    // jobs handed out for good (ttr 0), which still run.
    std::vector<Reservation> once;
    for (auto& job : res.jobs) {
      if (job.token == 0) {
        once.push_back(std::move(job));
      } else {
        settler_.release_now(job);
      }
    }
    res.jobs = std::move(once);
  }
  if (!res.jobs.empty()) {
    const int taken = static_cast<int>(res.jobs.size());
    held_ += taken;
    calls_.shared().count_held(taken);
    std::int64_t first_deadline = -1;
    for (const auto& job : res.jobs) {
      if (job.token != 0 && (first_deadline < 0 || job.deadline_ms < first_deadline)) {
        first_deadline = job.deadline_ms;
      }
    }
    pool_.add(std::move(res.jobs), res.now_ms);
    if (first_deadline >= 0) sweeper_.arm(first_deadline);
    heartbeats_.arm();
  }
  if (stopping_) return;
  busy_ = res.next_ms == 0;
  if (busy_) reserved_ahead_of_acks_ = false;  // it filled up: no slot was missed
  if (res.next_ms == 0 || look_again_) {
    look();
  } else if (res.next_ms > 0) {
    arm(res.next_ms);
  }
}

void TopicRunner::arm(std::int64_t due_ms) {
  if (due_at_ >= 0 && due_at_ <= due_ms) return;  // an earlier wake-up is set
  due_at_ = due_ms;
  due_timer_.expires_at(clock_.local_time(due_ms));
  due_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_timer();
  });
}

void TopicRunner::on_timer() {
  due_at_ = -1;
  if (stopping_) return;
  if (free_slots() > 0) {
    look();
  } else {
    sweeper_.sweep();  // every handler busy: only lapsed reservations need a hand
  }
}

void TopicRunner::on_signal(std::int64_t due_ms) {
  ++calls_.shared().stats.wakeups;
  if (stopping_) return;
  // Within a millisecond counts as now: the clock estimate errs early.
  if (!clock_.known() || due_ms <= clock_.redis_now() + 1) {
    look();
  } else {
    arm(due_ms);
  }
}

void TopicRunner::on_finished() {
  auto done = pool_.take_finished();
  if (done.empty()) return;
  const int n = static_cast<int>(done.size());
  for (auto& f : done) settler_.settle(std::move(f));
  settler_.flush();
  held_ -= n;
  calls_.shared().count_held(-n);
  look();
}

void TopicRunner::stop_taking() {
  stopping_ = true;
  stagger_timer_.cancel();
  due_timer_.cancel();
  retry_timer_.cancel();
  sweeper_.stop();
  const auto waiting = pool_.take_waiting();
  for (const auto& job : waiting) settler_.release_now(job);
  const int n = static_cast<int>(waiting.size());
  held_ -= n;
  calls_.shared().count_held(-n);
}

void TopicRunner::abandon_running() { pool_.abandon_running(); }

void TopicRunner::close() {
  stagger_timer_.cancel();
  due_timer_.cancel();
  retry_timer_.cancel();
  sweeper_.stop();
  heartbeats_.cancel();
  reports_.cancel();
}

}  // namespace redisched::worker
