#include "redis/command.h"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace redisched::redis {

void append_command(std::string& out, std::span<const std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* formatted = nullptr;
  const int n =
      redisFormatCommandArgv(&formatted, static_cast<int>(args.size()), argv.data(), lens.data());
  if (n < 0 || formatted == nullptr) throw std::bad_alloc();
  out.append(formatted, static_cast<size_t>(n));
  std::free(formatted);  // NOLINT(cppcoreguidelines-no-malloc): hiredis allocates with malloc
}

void append_words(std::string& out, std::span<const std::string_view> args) {
  if (args.empty()) return;
  std::string whole;
  append_command(whole, args);
  out.append(whole, whole.find('\n') + 1);  // past "*<n>\r\n"
}

void append_array_header(std::string& out, std::size_t words) {
  out += '*';
  out += std::to_string(words);
  out += "\r\n";
}

std::string encode_command(std::initializer_list<std::string_view> args) {
  std::string cmd;
  append_command(cmd, std::span<const std::string_view>(args.begin(), args.size()));
  return cmd;
}

}  // namespace redisched::redis
