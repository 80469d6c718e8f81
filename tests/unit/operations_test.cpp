// docs/redis-api.md's table of the C++ Client's calls ("The C++ Client's
// calls") against the one table it quotes, core/operations.h: each row, in
// order, says what its operation declares (calls, function, route, whether
// it writes a job, whether it coalesces), and every operation has a row.
#include "core/operations.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace redisched::core::op {
namespace {

std::string route_name(Route r) {
  switch (r) {
    case Route::topic:
      return "topic";
    case Route::job:
      return "job";
    case Route::jobs:
      return "jobs";
    case Route::every_shard:
      return "every shard";
    case Route::take:
      return "take";
    case Route::pages:
      return "pages";
    case Route::registry:
      return "registry";
    case Route::slot:
      return "slot";
  }
  return "?";
}

// An operation as the docs' row would say it.
template <class Op>
std::vector<std::string> row_of() {
  std::string calls;
  std::string_view rest = Op::calls;
  while (!rest.empty()) {
    const auto space = rest.find(' ');
    if (!calls.empty()) calls += ", ";
    calls += "`" + std::string(rest.substr(0, space)) + "`";
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  }
  if (calls.empty()) calls = "(the Scheduler)";
  return {calls, "`redisched_" + std::string(Op::function) + "`", route_name(Op::route),
          Op::job_write ? "yes" : "no", Op::coalesces ? "yes" : "no"};
}

std::vector<std::vector<std::string>> declared() {
  return std::apply([](auto... op) { return std::vector{row_of<decltype(op)>()...}; }, All{});
}

std::vector<std::vector<std::string>> documented() {
  std::ifstream in(REDISCHED_DOCS_DIR "/redis-api.md");
  EXPECT_TRUE(in) << "cannot read docs/redis-api.md";
  std::string line;
  bool inside = false;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    if (line == "| C++ call | function | route | writes a job | coalesces |") {
      inside = true;
      continue;
    }
    if (!inside || line.starts_with("|---")) continue;
    if (!line.starts_with('|')) break;
    std::vector<std::string> cells;
    std::size_t at = 1;
    for (auto bar = line.find('|', at); bar != std::string::npos; bar = line.find('|', at)) {
      cells.push_back(
          std::regex_replace(line.substr(at, bar - at), std::regex(R"(^\s+|\s+$)"), ""));
      at = bar + 1;
    }
    rows.push_back(cells);
  }
  return rows;
}

TEST(OperationsTable, TheDocsQuoteEveryOperationAsDeclared) {
  const auto want = declared();
  const auto got = documented();
  ASSERT_EQ(got.size(), want.size()) << "rows in docs/redis-api.md, operations in op::All";
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "row " << i + 1;
}

}  // namespace
}  // namespace redisched::core::op
