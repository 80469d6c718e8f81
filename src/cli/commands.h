// The CLI's subcommands: each turns its parsed arguments into Client calls
// and prints the result, as text for people or JSON lines for scripts.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace redisched::cli {

struct GlobalOptions {
  std::string redis_url;  // empty: the embedded default in data_dir
  std::string data_dir = "redisched-data";
  std::string prefix = "redisched";
  bool json = false;
};

// Adds every subcommand to app; the chosen one is run by run_selected.
void add_commands(CLI::App& app, GlobalOptions& global);
// Runs the subcommand that was parsed; returns the exit status.
int run_selected(const GlobalOptions& global);

}  // namespace redisched::cli
