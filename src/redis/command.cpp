#include "redis/command.h"

#include <charconv>
#include <string>

namespace redisched::redis {

namespace {

// One bulk string, "$<length>\r\n<bytes>\r\n". Written here rather than by
// hiredis's redisFormatCommandArgv: that one formats each length with
// sprintf and the command into a malloc'd buffer of its own, which a
// profile of serve's puts showed among its costs (bench/README.md).
void append_bulk(std::string& out, std::string_view word) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, word.size()).ptr;
  out += '$';
  out.append(digits, end);
  out += "\r\n";
  out += word;
  out += "\r\n";
}

// Room in out for args encoded, made once: a put's command would otherwise
// grow its string six times over. (16: "$", the length's digits up to 11,
// and two CRLFs; a longer length only grows the string once more.)
void reserve_for(std::string& out, std::span<const std::string_view> args, std::size_t extra) {
  std::size_t size = out.size() + extra;
  for (auto word : args) size += word.size() + 16;
  out.reserve(size);
}

}  // namespace

void append_command(std::string& out, std::span<const std::string_view> args) {
  reserve_for(out, args, 16);
  append_array_header(out, args.size());
  for (auto word : args) append_bulk(out, word);
}

void append_words(std::string& out, std::span<const std::string_view> args) {
  reserve_for(out, args, 0);
  for (auto word : args) append_bulk(out, word);
}

void append_array_header(std::string& out, std::size_t words) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, words).ptr;
  out += '*';
  out.append(digits, end);
  out += "\r\n";
}

std::string encode_command(std::initializer_list<std::string_view> args) {
  std::string cmd;
  append_command(cmd, std::span<const std::string_view>(args.begin(), args.size()));
  return cmd;
}

}  // namespace redisched::redis
