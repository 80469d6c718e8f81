// Which redisched this is: its release, and the version of the Functions
// library (lua/redisched.lua) it carries and loads into Redis.
#pragma once

#include <string_view>

namespace redisched {

// "0.1.0": the release, as `redisched --version`, /healthz and /metrics say.
std::string_view version() noexcept;
// The Functions library built in. (Client::library_version() asks Redis
// which one it holds.)
int functions_library_version() noexcept;

}  // namespace redisched
