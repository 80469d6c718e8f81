// The RESP encoder (redis/command.h) against hiredis's own writer,
// redisFormatCommandArgv, which it replaced: the same bytes for every kind
// of word (empty, binary, CR LF inside, long) and count.
#include "redis/command.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace redisched::redis {
namespace {

std::string by_hiredis(const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& w : words) {
    argv.push_back(w.data());
    lens.push_back(w.size());
  }
  char* formatted = nullptr;
  const int n =
      redisFormatCommandArgv(&formatted, static_cast<int>(words.size()), argv.data(), lens.data());
  std::string out(formatted, static_cast<size_t>(n));
  std::free(formatted);  // NOLINT(cppcoreguidelines-no-malloc): hiredis's malloc
  return out;
}

std::string by_us(const std::vector<std::string>& words) {
  std::vector<std::string_view> views(words.begin(), words.end());
  std::string out = "kept";  // appended to, never replaced
  append_command(out, views);
  return out.substr(4);
}

TEST(CommandEncoding, IsHiredisByteForByte) {
  std::string binary;
  for (int c = 0; c < 256; ++c) binary += static_cast<char>(c);
  const std::vector<std::vector<std::string>> commands = {
      {"PING"},
      {"FCALL", "redisched_put", "11", "k1", "", "body with spaces", "NOW", "1700000000000"},
      {"SET", "a\r\nb", std::string("nul\0inside", 10)},
      {"SET", "x", binary},
      {"SET", "big", std::string(1 << 20, 'z')},
      std::vector<std::string>(1000, "w"),
  };
  for (const auto& words : commands) {
    EXPECT_EQ(by_us(words), by_hiredis(words)) << words.front() << ", " << words.size() << " words";
  }
}

TEST(CommandEncoding, WordsAfterAHeaderMakeTheSameCommand) {
  const std::vector<std::string_view> first = {"FCALL", "redisched_putmany"};
  const std::vector<std::string_view> rest = {"2", "a", "", "0", "b", "y", "0"};
  std::string parts;
  append_array_header(parts, first.size() + rest.size());
  append_words(parts, first);
  append_words(parts, rest);
  EXPECT_EQ(parts, by_hiredis({"FCALL", "redisched_putmany", "2", "a", "", "0", "b", "y", "0"}));
  EXPECT_EQ(encode_command({"WAIT", "1", "1000"}), by_hiredis({"WAIT", "1", "1000"}));
}

}  // namespace
}  // namespace redisched::redis
