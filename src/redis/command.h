// Encoding of commands into RESP (arrays of bulk strings, as hiredis's
// redisFormatCommandArgv writes them: tests/unit/command_test.cpp compares).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace redisched::redis {

// Appends the RESP encoding of the command args to out.
void append_command(std::string& out, std::span<const std::string_view> args);

// The RESP encoding of args as words of a command put together from parts
// (no array header): the header, "*<count of all words>", comes first.
void append_words(std::string& out, std::span<const std::string_view> args);
void append_array_header(std::string& out, std::size_t words);

// The RESP encoding of one command. (Called outside a co_await
// expression: GCC 12 cannot keep an initializer_list in a coroutine frame.)
std::string encode_command(std::initializer_list<std::string_view> args);

}  // namespace redisched::redis
