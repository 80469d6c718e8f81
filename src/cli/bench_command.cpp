// bench: put and reserve+ack against this Redis, on a scratch topic.
#include <boost/json/object.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <iomanip>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "redisched/client.h"

namespace redisched::cli {
namespace {

namespace json = boost::json;

// redisched bench: put (single calls, 256 in flight; batches of 100) and
// reserve+ack (batches of 100) on the topic redisched-bench, which ends
// empty (its counters remain, so it stays listed).
int run_bench(Client& client, std::int64_t jobs, bool as_json) {
  const std::string topic = "redisched-bench";
  auto spec = [](std::int64_t i) {
    JobSpec s;
    s.id = "b" + std::to_string(i);
    s.body = std::string(100, static_cast<char>('a' + i % 26));
    return s;
  };
  auto timed = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  Progress progress("jobs", jobs * 3);
  // put, single calls, a window of 256 in flight
  const double put_single = timed([&] {
    std::deque<std::future<PutOutcome>> window;
    for (std::int64_t i = 0; i < jobs; ++i) {
      window.push_back(client.put_async(topic, spec(i)));
      if (window.size() >= 256) {
        window.front().get();
        window.pop_front();
        progress.add(1);
      }
    }
    for (auto& f : window) f.get(), progress.add(1);
  });
  const double put_batched = timed([&] {
    std::vector<JobSpec> batch;
    for (std::int64_t i = jobs; i < 2 * jobs; ++i) {
      batch.push_back(spec(i));
      if (batch.size() == 100 || i == 2 * jobs - 1) {
        client.put_many(topic, batch);
        progress.add(static_cast<std::int64_t>(batch.size()));
        batch.clear();
      }
    }
  });
  std::int64_t taken = 0;
  const double reserve_ack = timed([&] {
    while (taken < 2 * jobs) {
      auto r = client.reserve(topic, 100, Millis{60000});
      if (r.jobs.empty()) break;
      std::vector<std::pair<std::string, std::uint64_t>> held;
      for (auto& j : r.jobs) held.emplace_back(j.id, j.token);
      client.ack_many(topic, held);
      taken += static_cast<std::int64_t>(held.size());
      progress.add(static_cast<std::int64_t>(held.size()) / 2);
    }
  });
  progress.done();
  const double n = static_cast<double>(jobs);
  const double rows[] = {n / put_single, n / put_batched, static_cast<double>(taken) / reserve_ack};
  if (as_json) {
    print_json(json::object{
        {"put_single", rows[0]}, {"put_batched", rows[1]}, {"reserve_ack_batched", rows[2]}});
  } else {
    std::cout << "figure (100-byte bodies)              jobs/s\n";
    std::cout << "put, single calls (256 in flight) " << std::setw(10) << static_cast<long>(rows[0])
              << "\n";
    std::cout << "put, batches of 100               " << std::setw(10) << static_cast<long>(rows[1])
              << "\n";
    std::cout << "reserve+ack, batches of 100       " << std::setw(10) << static_cast<long>(rows[2])
              << "\n";
  }
  return taken == 2 * jobs ? 0 : 1;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& selected) {
  auto jobs = std::make_shared<std::int64_t>(100000);
  auto* bench = app.add_subcommand(
      "bench",
      "measure put and reserve+ack against this Redis, on a scratch topic, and print a table");
  bench->add_option("--jobs", *jobs, "jobs per figure")
      ->check(CLI::Range(1000, 10000000))
      ->capture_default_str();
  bench->callback([jobs, &selected] {
    selected = [jobs](Session& s) { return run_bench(s.client(), *jobs, s.json()); };
  });
}

}  // namespace redisched::cli
