// A broker for the worker's unit tests: a topic in memory, no Redis.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/broker.h"
#include "worker/calls.h"

namespace redisched::worker::test {

namespace asio = boost::asio;

// A topic in memory: ready jobs handed out in order; every call recorded;
// answers posted, as the Client's come later on its own thread. fail_next
// makes the next call of a kind fail with that error code.
class FakeBroker : public Broker {
 public:
  explicit FakeBroker(asio::io_context& io) : io_(io) {}

  struct Call {
    std::string what;
    int count = 0;                 // reserve: asked for; ack_many: how many
    std::vector<std::string> ids;  // ack_many, fail, release
    std::optional<int> max_attempts;
    std::string error;
    std::optional<Millis> delay;  // fail, release
  };
  std::vector<Call> calls;
  std::deque<std::string> ready;
  std::int64_t now_ms = 1'000'000;
  std::int64_t next_due_ms = -1;  // what reserve says when nothing is ready
  std::optional<Errc> fail_next_ack;
  std::optional<Errc> fail_next_fail;
  bool hold_reports = false;  // a report's answer waits in held_reports
  std::vector<Callback<Outcome>> held_reports;
  int requeued = 0;                 // what the next requeue puts back
  std::int64_t next_deadline = -1;  // and the deadline it reports

  int count(const std::string& what) const {
    int n = 0;
    for (const auto& c : calls) n += c.what == what ? 1 : 0;
    return n;
  }

  void reserve(const std::string&, int count, Millis ttr, Callback<ReserveResult> done) override {
    ReserveResult r;
    r.now_ms = now_ms;
    while (static_cast<int>(r.jobs.size()) < count && !ready.empty()) {
      Reservation j;
      j.id = ready.front();
      ready.pop_front();
      j.token = ++tokens_;
      j.deadline_ms = now_ms + (ttr.count() > 0 ? ttr.count() : 30000);
      r.jobs.push_back(j);
    }
    r.next_ms = ready.empty() ? next_due_ms : 0;
    record("reserve", count);
    answer(std::move(done), Result<ReserveResult>(std::move(r)));
  }
  void ack_many(const std::string&, std::span<const std::pair<std::string, std::uint64_t>> jobs,
                Millis, Callback<std::vector<Outcome>> done) override {
    Call& c = record("ack_many", static_cast<int>(jobs.size()));
    for (const auto& [id, token] : jobs) c.ids.push_back(id);
    if (fail_next_ack) {
      const Errc code = *std::exchange(fail_next_ack, std::nullopt);
      return answer(std::move(done), Result<std::vector<Outcome>>(Error(code, "down")));
    }
    answer(std::move(done),
           Result<std::vector<Outcome>>(std::vector<Outcome>(jobs.size(), Outcome::ok)));
  }
  void ack(const std::string&, const std::string& id, std::uint64_t, Millis,
           const std::optional<std::string>&, Callback<Outcome> done) override {
    record("ack", 1, id);
    answer(std::move(done), Result<Outcome>(Outcome::ok));
  }
  void release(const std::string&, const std::string& id, std::uint64_t, Millis delay,
               Callback<Outcome> done) override {
    record("release", 1, id).delay = delay;
    answer(std::move(done), Result<Outcome>(Outcome::ok));
  }
  void fail(const std::string&, const std::string& id, std::uint64_t, const std::string& error,
            bool, std::optional<Millis> delay, std::optional<int> max_attempts,
            Callback<FailResult> done) override {
    Call& c = record("fail", 1, id);
    c.max_attempts = max_attempts;
    c.error = error;
    c.delay = delay;
    if (fail_next_fail) {
      const Errc code = *std::exchange(fail_next_fail, std::nullopt);
      return answer(std::move(done), Result<FailResult>(Error(code, "down")));
    }
    answer(std::move(done), Result<FailResult>(FailResult{}));
  }
  void touch(const std::string&, const std::string&, std::uint64_t, Millis,
             Callback<TouchResult> done) override {
    record("touch", 1);
    answer(std::move(done), Result<TouchResult>(TouchResult{Outcome::ok, now_ms + 30000}));
  }
  TouchResult touch_now(const std::string&, const std::string&, std::uint64_t, Millis) override {
    return {Outcome::ok, now_ms + 30000};
  }
  std::vector<DependencyState> dependencies_now(const std::string&, const std::string&) override {
    return {};
  }
  void requeue(const std::string&, int, Callback<RequeueResult> done) override {
    record("requeue", 0);
    RequeueResult r;
    r.requeued = std::exchange(requeued, 0);
    r.next_deadline_ms = std::exchange(next_deadline, -1);
    answer(std::move(done), Result<RequeueResult>(r));
  }
  // count: the report's lines; error: its progress.
  void report(const std::string&, const std::string& id, std::uint64_t, const JobReport& report,
              Callback<Outcome> done) override {
    record("report", static_cast<int>(report.lines.size()), id).error =
        report.progress.value_or("");
    if (hold_reports) return held_reports.push_back(std::move(done));
    answer(std::move(done), Result<Outcome>(Outcome::ok));
  }

 private:
  Call& record(std::string what, int count, std::string id = {}) {
    Call& c = calls.emplace_back();
    c.what = std::move(what);
    c.count = count;
    if (!id.empty()) c.ids.push_back(std::move(id));
    return c;
  }
  template <class T>
  void answer(Callback<T> done, Result<T> r) {
    asio::post(io_, [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
  }
  asio::io_context& io_;
  std::uint64_t tokens_ = 0;
};

// A control shard this test runs itself, over a FakeBroker.
class ControlShardTest : public ::testing::Test {
 protected:
  // Runs the control shard until pred holds (or limit passed).
  template <class Pred>
  bool run_until(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(1)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      io_.run_one_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  void run_for(std::chrono::milliseconds d) {
    io_.restart();
    io_.run_for(d);
  }
  void poll() {
    io_.restart();
    io_.poll();
  }

  asio::io_context io_;
  FakeBroker broker_{io_};
  Shared shared_{io_, broker_};
};

}  // namespace redisched::worker::test
