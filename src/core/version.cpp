#include "redisched/version.h"

#include "redis/library.h"

namespace redisched {

std::string_view version() noexcept { return REDISCHED_VERSION; }

int functions_library_version() noexcept { return redis::kLibraryVersion; }

}  // namespace redisched
