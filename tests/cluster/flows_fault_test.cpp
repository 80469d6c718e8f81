// Flows across slots under faults (issue 36), on a real Redis Cluster of 3
// primaries with a replica each: parents in one topic wait for children in
// topics of the other primaries (one of them spread over all three), while
// a producer puts and a worker runs them. Only movers in separate
// processes (`redisched move`) hand the flows over, and each is SIGKILLed
// at one of a move's steps (REDISCHED_TEST_KILL_MOVER, src/core/flows.cpp),
// every step in turn; meanwhile the parents' slot moves to another primary,
// which then fails over to its replica. Every parent runs once, after each
// child it waits for ran, with their results; no job is lost.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster.h"
#include "redisched/client.h"
#include "redisched/worker.h"
#include "testutil/redis_cluster.h"
#include "testutil/wait.h"

extern char** environ;

namespace redisched {
namespace {

using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)
using test::wait_until;

constexpr const char* kSteps[] = {"read", "call", "calls", "moved"};

// Movers, one process at a time per thread, round the topics: each is
// told to kill itself at a step (in turn) the 1st, 2nd or 3rd time it gets
// there; one in five runs clean. Counts the kills by step.
class KilledMovers {
 public:
  KilledMovers(std::string url, std::vector<std::string> topics)
      : url_(std::move(url)), topics_(std::move(topics)) {
    for (int t = 0; t < 2; ++t) threads_.emplace_back([this, t] { loop(t); });
  }
  ~KilledMovers() { stop(); }
  void stop() {
    stopped_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::map<std::string, int> kills() {
    const std::lock_guard lock(mutex_);
    return kills_;
  }
  int spawned() const { return spawned_; }

 private:
  void loop(int offset) {
    for (int i = offset; !stopped_; i += 2) {
      const auto& topic = topics_[static_cast<std::size_t>(i) % topics_.size()];
      const int round = i / static_cast<int>(topics_.size());
      std::string point;
      if (round % 5 != 4) {
        point = std::string(kSteps[round % 4]) + ":" + std::to_string(1 + (round / 4) % 3);
      }
      if (run_one(topic, point)) {
        const std::lock_guard lock(mutex_);
        ++kills_[point.substr(0, point.find(':'))];
      }
    }
  }

  // Whether the mover died by SIGKILL.
  bool run_one(const std::string& topic, const std::string& point) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    if (!point.empty()) env.push_back("REDISCHED_TEST_KILL_MOVER=" + point);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = {REDISCHED_BINARY, "--redis", url_, "move", topic};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // (Its output, "moved n, failed m", or a refusal during a failover: not ours to read.)
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &quiet, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&quiet);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << rc;
      stopped_ = true;
      return false;
    }
    ++spawned_;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

  const std::string url_;
  const std::vector<std::string> topics_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> spawned_{0};
  std::mutex mutex_;
  std::map<std::string, int> kills_;
  std::vector<std::thread> threads_;
};

// Puts that fail while a primary fails over are tried again, as a producer
// must (created, or exists when the failed try had run).
template <class Put>
void put_until_stored(Put put) {
  for (int tries = 0;; ++tries) {
    try {
      put();
      return;
    } catch (const Error& e) {
      if ((e.code() != Errc::connection && e.code() != Errc::timeout) || tries == 100) throw;
      std::this_thread::sleep_for(50ms);
    }
  }
}

TEST(FlowsFault, EveryParentRunsOnceAfterItsChildrenThroughKilledMoversAReshardAndAFailover) {
  test::RedisCluster cluster(3, 1);
  ClientOptions options;
  options.redis_url = cluster.url();
  Client admin(options);

  // The parents' topic on one primary; a child topic on each other one, and
  // one spread over all three.
  const std::string parents = "invoices";
  const int parents_primary = cluster.owner_port(redis::hash_slot(parents));
  std::vector<std::string> kids;
  std::set<int> taken = {parents_primary};
  for (int n = 0; kids.size() < 2; ++n) {
    const std::string t = "reports_" + std::to_string(n);
    if (taken.insert(cluster.owner_port(redis::hash_slot(t))).second) kids.push_back(t);
  }
  kids.push_back("renders");
  ASSERT_EQ(admin.set_shards("renders", 3).size(), 3u);

  // Children's handlers give results; the parents' read them. Their
  // worker moves nothing (move_interval 0): the killed movers alone do.
  constexpr int kParents = 1000;
  std::mutex mu;
  std::map<std::string, int> kid_runs, parent_runs;
  std::vector<std::string> wrong;
  WorkerOptions wo{.client = options};
  wo.move_interval = Millis{0};
  Worker worker(wo);
  for (const auto& t : kids) {
    worker.handle(t, {.concurrency = 4, .keep_finished = 10min}, [&, t](JobContext& job) {
      job.set_result("r:" + job.job().id);
      const std::lock_guard lock(mu);
      ++kid_runs[t + "/" + job.job().id];
    });
  }
  worker.handle(parents, {.concurrency = 4}, [&](JobContext& job) {
    const auto deps = job.dependencies();
    const std::lock_guard lock(mu);
    const std::string& id = job.job().id;
    ++parent_runs[id];
    if (deps.size() != kids.size())
      wrong.push_back(id + ": " + std::to_string(deps.size()) + " deps");
    for (const auto& d : deps) {
      if (d.outcome != DependencyOutcome::done || d.value != "r:" + d.id) {
        wrong.push_back(id + ": " + d.topic + "/" + d.id + " " + std::string(to_string(d.outcome)) +
                        " " + d.value);
      }
      if (!kid_runs.contains(d.topic + "/" + d.id)) {
        wrong.push_back(id + " ran before " + d.topic + "/" + d.id);
      }
    }
  });
  [[maybe_unused]] auto cancel = worker.run();

  std::vector<std::string> topics = kids;
  topics.push_back(parents);
  KilledMovers movers(cluster.url(), topics);

  // Half the parents are put before their children, half after.
  std::atomic<int> put{0};
  std::thread producer([&] {
    Client client(options);
    try {
      for (int i = 0; i < kParents; ++i) {
        const std::string n = std::to_string(i);
        JobSpec parent{.id = "invoice_" + n, .body = n};
        for (const auto& t : kids) parent.after.push_back({t, "report_" + n});
        auto put_kids = [&] {
          for (const auto& t : kids) {
            put_until_stored([&] { client.put(t, JobSpec{.id = "report_" + n, .body = n}); });
          }
        };
        if (i % 2 == 1) put_kids();
        put_until_stored([&] { client.put(parents, parent); });
        if (i % 2 == 0) put_kids();
        ++put;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "producer: " << e.what();
    }
  });
  // Once a quarter is in: the parents' slot moves, a few keys at a time,
  // to another primary, which then fails over to its replica.
  const auto slot = redis::hash_slot(parents);
  int to = 0;
  for (int p : cluster.primary_ports()) {
    if (p != parents_primary) to = p;
  }
  // (How many parents had been put, and had run, as each began: the
  // faults must come while flows are under way.)
  auto ran = [&] {
    const std::lock_guard lock(mu);
    return parent_runs.size();
  };
  std::size_t ran_at_move = 0, ran_at_failover = 0;
  int put_at_move = 0, put_at_failover = 0;
  if (wait_until([&] { return put > kParents / 4; }, 60s)) {
    ran_at_move = ran();
    put_at_move = put;
    cluster.move_slot(slot, to, 5, 10);
    EXPECT_EQ(cluster.owner_port(slot), to);
    ran_at_failover = ran();
    put_at_failover = put;
    const int promoted = cluster.fail_over(to);
    EXPECT_EQ(cluster.owner_port(slot), promoted);
  }
  producer.join();
  const bool all_ran = wait_until(
      [&] {
        const std::lock_guard lock(mu);
        return parent_runs.size() == static_cast<std::size_t>(kParents);
      },
      120s);
  movers.stop();
  // What the last killed movers left: carried out by a mover that is not,
  // pass after pass until one finds nothing: an entry whose call failed in
  // the failover's aftermath stays for the next pass, and carrying one
  // topic's entries may add entries to a topic passed already (one pass
  // alone left an entry in each child topic once, in an ASan run).
  for (int pass = 0; pass < 50; ++pass) {
    int moved = 0, failed = 0;
    for (const auto& t : topics) {
      const auto r = admin.move_outbox(t);
      moved += r.moved;
      failed += r.failed;
    }
    if (moved == 0 && failed == 0) break;
    if (failed > 0) std::this_thread::sleep_for(200ms);
  }
  worker.cancel(5s);

  const std::lock_guard lock(mu);
  EXPECT_TRUE(all_ran) << parent_runs.size() << " of " << kParents << " parents ran";
  EXPECT_EQ(kid_runs.size(), kids.size() * kParents) << "children lost";
  for (const auto& [id, n] : parent_runs) EXPECT_EQ(n, 1) << id << " ran " << n << " times";
  for (const auto& [id, n] : kid_runs) EXPECT_EQ(n, 1) << id << " ran " << n << " times";
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong, the first: " << wrong.front();
  const auto kills = movers.kills();
  EXPECT_LT(ran_at_failover, static_cast<std::size_t>(kParents)) << "the faults came too late";
  for (const char* step : kSteps) {
    EXPECT_GT(kills.contains(step) ? kills.at(step) : 0, 0) << "no mover killed at " << step;
  }
  std::printf(
      "flows under faults: %d parents, %zu children; the slot moved with %d put, %zu run; "
      "failed over with %d put, %zu run; %d movers, killed at",
      kParents, kid_runs.size(), put_at_move, ran_at_move, put_at_failover, ran_at_failover,
      movers.spawned());
  for (const auto& [step, n] : kills) std::printf(" %s %d", step.c_str(), n);
  std::printf("\n");
  for (const auto& t : topics) {
    const auto st = admin.stats(t);
    EXPECT_EQ(st.blocked + st.ready + st.delayed + st.reserved + st.dead, 0) << t;
    EXPECT_EQ(st.outbox, 0) << t << "'s outbox";
  }
}

}  // namespace
}  // namespace redisched
