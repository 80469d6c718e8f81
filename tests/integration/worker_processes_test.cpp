// Several worker processes on one topic: every job acknowledged exactly once,
// a process killed with SIGKILL loses none of the jobs it held, and a
// schedule run by all of them puts each tick once.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redisched/client.h"
#include "testutil/redis_server.h"
#include "testutil/wait.h"

extern char** environ;

namespace redisched {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kJobs = 100000;
constexpr int kProcesses = 4;

class WorkerProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions o;
    o.redis_url = test::target_url();
    client_ = std::make_unique<Client>(o);
    // A directory of its own: the same suite may run at once against
    // another target (ctest -j), with the same topic names.
    std::string dir = (fs::temp_directory_path() / "redisched-procs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (pid_t pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    fs::remove_all(dir_);
  }

  std::string out_file(int i) const { return (dir_ / ("worker" + std::to_string(i))).string(); }

  void spawn_workers(int concurrency, int handler_micros) {
    for (int i = 0; i < kProcesses; ++i) {
      std::vector<std::string> args = {
          REDISCHED_WORKER_PROC,          test::target_url(), topic_, std::to_string(concurrency),
          std::to_string(handler_micros), out_file(i)};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t pid = -1;
      ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
      pids_.push_back(pid);
    }
  }

  void put_all(Millis ttr) {
    std::vector<JobSpec> batch;
    for (int i = 0; i < kJobs; ++i) {
      JobSpec s;
      s.id = "job_" + std::to_string(i);
      s.body = "x";
      s.ttr = ttr;
      batch.push_back(std::move(s));
      if (batch.size() == 1000) {
        client_->put_many(topic_, batch);
        batch.clear();
      }
    }
  }

  bool topic_empty() {
    auto s = client_->stats(topic_);
    return s.delayed + s.ready + s.reserved + s.dead == 0;
  }

  // SIGTERM to the live workers; each drains and writes its ack count.
  std::int64_t stop_workers() {
    std::int64_t acked = 0;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (pids_[i] <= 0) continue;
      ::kill(pids_[i], SIGTERM);
      int status = 0;
      ::waitpid(pids_[i], &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker " << i;
      pids_[i] = -1;
      std::ifstream in(out_file(static_cast<int>(i)) + ".acked");
      std::int64_t n = -1;
      in >> n;
      EXPECT_GE(n, 0) << "worker " << i << " wrote no ack count";
      acked += n;
    }
    return acked;
  }

  // How many times each id was handled, per worker file.
  std::map<std::string, int> handled(int worker) const {
    std::map<std::string, int> out;
    std::ifstream in(out_file(worker));
    for (std::string id; std::getline(in, id);) ++out[id];
    return out;
  }

  // The pids of the worker registry's entries that handle the topic.
  std::set<std::int64_t> registered() const {
    std::set<std::int64_t> out;
    for (const auto& w : client_->workers()) {
      for (const auto& t : w.topics) {
        if (t.topic == topic_) out.insert(w.pid);
      }
    }
    return out;
  }

  std::unique_ptr<Client> client_;
  std::string topic_ = test::unique_topic();
  fs::path dir_;
  std::vector<pid_t> pids_;
};

TEST_F(WorkerProcesses, FourProcessesAckEveryJobExactlyOnce) {
  spawn_workers(10, 0);
  put_all(Millis{30000});
  ASSERT_TRUE(test::wait_until([&] { return topic_empty(); }, 300s));
  EXPECT_EQ(stop_workers(), kJobs);
  std::map<std::string, int> all;
  for (int i = 0; i < kProcesses; ++i) {
    for (const auto& [id, n] : handled(i)) all[id] += n;
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kJobs));
  int twice = 0;
  for (const auto& [id, n] : all) twice += n > 1 ? 1 : 0;
  EXPECT_EQ(twice, 0);
  EXPECT_EQ(client_->stats(topic_).lapsed_total, 0);
}

// Measures time (tests/CMakeLists.txt runs *Timing suites alone): a
// scheduler that wakes late skips the ticks it missed (CatchUp::skip), so
// a machine busy with other tests makes gaps that are not a race's.
class WorkerProcessesTiming : public WorkerProcesses {};

// Four processes, each a Worker running the topic's schedule: each tick of
// a 100 ms schedule is put once, from the first to the last, no gap.
TEST_F(WorkerProcessesTiming, FourProcessesRunningOneScheduleEachPutEveryTickOnce) {
  ScheduleSpec spec;
  spec.every = 100ms;
  spec.body = "tick";
  client_->set_schedule(topic_, "pulse", spec);
  spawn_workers(2, 0);
  std::this_thread::sleep_for(3s);
  ASSERT_EQ(client_->pause_schedule(topic_, "pulse"), Outcome::ok);
  ASSERT_TRUE(test::wait_until([&] { return topic_empty(); }, 10s));
  const auto acked = stop_workers();
  std::vector<std::int64_t> ticks;
  for (int i = 0; i < kProcesses; ++i) {
    for (const auto& [id, n] : handled(i)) {
      for (int k = 0; k < n; ++k) ticks.push_back(std::stoll(id.substr(id.find('@') + 1)));
    }
  }
  std::sort(ticks.begin(), ticks.end());
  EXPECT_EQ(acked, static_cast<std::int64_t>(ticks.size()));
  ASSERT_GE(ticks.size(), 20u) << "about 30 ticks in 3 s (the first after the processes start)";
  EXPECT_EQ(std::adjacent_find(ticks.begin(), ticks.end()), ticks.end()) << "a tick put twice";
  for (std::size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_EQ(ticks[i] - ticks[i - 1], 100) << "a gap after tick " << i;
  }
  EXPECT_EQ(client_->schedules(topic_).schedules[0].last_tick_ms, ticks.back());
  client_->remove_schedule(topic_, "pulse");
}

TEST_F(WorkerProcesses, JobsOfAKilledProcessAreProcessedByTheOthersAfterTheirTtr) {
  spawn_workers(10, 200);
  put_all(Millis{1000});
  // Kill one worker mid-run, holding jobs.
  ASSERT_TRUE(test::wait_until([&] { return client_->stats(topic_).ready < kJobs * 3 / 4; }, 120s));
  // Each process keeps its entry in the worker registry.
  const std::set<std::int64_t> all(pids_.begin(), pids_.end());
  EXPECT_TRUE(test::wait_until([&] { return registered() == all; }, 10s));
  const pid_t killed_pid = pids_[0];
  ::kill(pids_[0], SIGKILL);
  ::waitpid(pids_[0], nullptr, 0);
  pids_[0] = -1;
  ASSERT_TRUE(test::wait_until([&] { return topic_empty(); }, 300s));
  // The killed one's entry lapses within its ttl (three beats of 5 s),
  // counted from the kill; the others stay.
  auto survivors_registered = all;
  survivors_registered.erase(killed_pid);
  EXPECT_TRUE(test::wait_until([&] { return registered() == survivors_registered; }, 20s))
      << registered().size() << " registered";
  stop_workers();
  EXPECT_TRUE(registered().empty()) << "a worker that stops leaves the registry at once";
  const auto killed = handled(0);
  std::map<std::string, int> survivors;
  for (int i = 1; i < kProcesses; ++i) {
    for (const auto& [id, n] : handled(i)) survivors[id] += n;
  }
  // Every job was handled; only jobs the killed process held came twice.
  int missing = 0, twice_by_survivors = 0;
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "job_" + std::to_string(i);
    if (!survivors.contains(id) && !killed.contains(id)) ++missing;
    if (survivors.contains(id) && survivors.at(id) > 1) ++twice_by_survivors;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(twice_by_survivors, 0);
  const auto s = client_->stats(topic_);
  EXPECT_GE(s.lapsed_total, 1);  // the killed process's reservations came back
  EXPECT_EQ(s.dead, 0);
}

}  // namespace
}  // namespace redisched
