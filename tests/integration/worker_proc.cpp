// A worker process for the multi-process tests: handles one topic, writes
// each handled job id to a file (one write per id, O_APPEND, so a SIGKILL
// loses nothing written), and on SIGTERM drains and writes its counters.
//   worker_proc REDIS_URL TOPIC CONCURRENCY HANDLER_MICROS OUT_FILE
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "redisched/worker.h"

int main(int argc, char** argv) try {
  if (argc != 6) {
    std::cerr << "usage: worker_proc REDIS_URL TOPIC CONCURRENCY HANDLER_MICROS OUT_FILE\n";
    return 2;
  }
  const std::string out = argv[5];
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + out);
  const auto work = std::chrono::microseconds(std::atoll(argv[4]));

  redisched::WorkerOptions options;
  options.client.redis_url = argv[1];
  options.client.connections = 2;
  redisched::Worker worker(options);
  worker.handle(argv[2], {.concurrency = std::atoi(argv[3])}, [&](redisched::JobContext& job) {
    if (work.count() > 0) std::this_thread::sleep_for(work);
    const std::string line = std::string(job.id()) + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw std::runtime_error("cannot write the handled id");
    }
  });
  worker.run_until_signal();
  ::close(fd);
  std::ofstream(out + ".acked") << worker.stats().acked << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "worker_proc: " << e.what() << "\n";
  return 1;
}
