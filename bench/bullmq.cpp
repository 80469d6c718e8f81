#include "bullmq.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace redisched::bench {

BullmqFigures bullmq_figures(const Target& target, long jobs) {
  const std::filesystem::path dir = REDISCHED_BULLMQ_DIR;
  if (!std::filesystem::exists(dir / "node_modules" / "bullmq")) {
    throw std::runtime_error(fmt::format(
        "BullMQ's packages are not installed in {} (scripts/deps.sh --test installs them)",
        dir.string()));
  }
  const std::string cmd = fmt::format("node '{}' --redis {}:{} --jobs {}",
                                      (dir / "bench.mjs").string(), target.host, target.port, jobs);
  std::unique_ptr<FILE, int (*)(FILE*)> out(popen(cmd.c_str(), "r"), pclose);
  if (!out) throw std::runtime_error("cannot start: " + cmd);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, out.get()) != nullptr) text += buf;
  const int status = pclose(out.release());
  if (status != 0) {
    throw std::runtime_error(fmt::format("{} failed (status {}): {}", cmd, status, text));
  }
  BullmqFigures f;
  const std::pair<const char*, double*> figures[] = {
      {"add", &f.add}, {"addBulk", &f.add_bulk}, {"process", &f.process}};
  std::istringstream lines(text);
  std::string name;
  double value = 0;
  std::size_t seen = 0;
  while (lines >> name >> value) {
    for (const auto& [label, into] : figures) {
      if (name == label) {
        if (*into == 0) ++seen;  // each figure once: a name printed twice counts once
        *into = value;
      }
    }
  }
  if (seen != std::size(figures)) {
    throw std::runtime_error(fmt::format("{} did not print its three figures: {}", cmd, text));
  }
  return f;
}

}  // namespace redisched::bench
