// koda's README example, ported: a newsletter queue with an urgent job
// (priority 100) and one delayed by five minutes, handled by ten workers
// until Ctrl-C (or SIGTERM), which drains the jobs in flight.
//   build/example_newsletter [redis-url]
#include <redisched/compat/koda.h>

#include <chrono>
#include <iostream>
#include <mutex>

int main(int argc, char** argv) try {
  redisched::WorkerOptions options;
  options.client.redis_url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  redisched::compat::Koda koda(options);

  const std::string urgent = koda.submit("newsletter", 100, "urgent: we are live!");
  const std::string later =
      koda.submit_delayed("newsletter", std::chrono::minutes(5), "five minutes later");
  std::cout << "submitted " << urgent << " and " << later << std::endl;

  std::mutex out;
  koda.register_handler("newsletter", 10, [&](redisched::JobContext& job) {
    std::lock_guard lock(out);
    std::cout << "sending newsletter " << job.id() << ": " << job.body() << std::endl;
  });
  koda.work_forever();
  std::cout << "stopped after " << koda.worker().stats().acked << " jobs" << std::endl;
  return 0;
} catch (const redisched::Error& e) {
  std::cerr << "example_newsletter: " << e.what() << "\n";
  return 1;
}
