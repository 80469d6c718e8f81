// Encoding of commands into RESP, by hiredis's writer.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace redisched::redis {

// Appends the RESP encoding of the command args to out.
void append_command(std::string& out, std::span<const std::string_view> args);

}  // namespace redisched::redis
