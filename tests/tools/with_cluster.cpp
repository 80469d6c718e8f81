// Runs a command beside a throwaway Redis Cluster of 3 primaries, for the
// suites written outside C++ (the CLI's shell test, the dashboard's browser
// test) to run against the second target as the C++ suites do:
//   with_cluster <command> [args...]
// The command finds the cluster's seed URL in REDISCHED_TEST_REDIS; the
// cluster stops when it exits, and its exit status is the command's.
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "embedded/redis_cluster.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: with_cluster <command> [args...]\n");
    return 2;
  }
  try {
    const auto nodes = redisched::embedded::start_cluster(3, 0);
    const std::string url = "redis://127.0.0.1:" + std::to_string(nodes.front()->port());
    ::setenv("REDISCHED_TEST_REDIS", url.c_str(), 1);
    pid_t pid = 0;
    if (::posix_spawnp(&pid, argv[1], nullptr, nullptr, argv + 1, environ) != 0) {
      std::perror(argv[1]);
      return 127;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) {
        std::perror("waitpid");
        return 1;
      }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "with_cluster: %s\n", e.what());
    return 1;
  }
}
