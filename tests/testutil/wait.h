// Waiting in tests for something another thread or process brings about.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

namespace redisched::test {

// True once pred() holds; false if it still does not after timeout.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Threads of a process now (the entries of /proc/<pid>/task; this
// process's by default).
inline int thread_count(const std::string& pid = "self") {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + pid + "/task")) {
    ++n;
  }
  return n;
}

}  // namespace redisched::test
