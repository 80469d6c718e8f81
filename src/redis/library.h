// The Functions library this build carries (generated from lua/redisched.lua).
#pragma once

#include <string_view>

namespace redisched::redis {

extern const std::string_view kLibraryCode;
extern const int kLibraryVersion;

}  // namespace redisched::redis
