// The CLI's subcommands, one group per file: each turns its parsed
// arguments into Client calls and prints the result, as text for people or
// JSON lines for scripts. A subcommand's callback sets `selected` to what it
// will do; main runs it with the Session once the whole line is parsed.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/session.h"

namespace redisched::cli {

void add_job_commands(CLI::App& app, Action& selected);  // put get delete
void add_reservation_commands(CLI::App& app,
                              Action& selected);  // reserve pull ack release fail touch
void add_topic_commands(CLI::App& app,
                        Action& selected);  // stats topics list kick pause resume requeue
void add_transfer_commands(CLI::App& app, Action& selected);  // export import
void add_schedule_commands(CLI::App& app, Action& selected);  // schedule set|list|pause|resume|delete
void add_serve_command(CLI::App& app, Action& selected);      // serve
void add_bench_command(CLI::App& app, Action& selected);      // bench

}  // namespace redisched::cli
