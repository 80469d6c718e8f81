# Script mode: writes OUTPUT, a C++ file defining the Lua source as a string.
file(READ "${SOURCE}" code)
string(FIND "${code}" ")redisched_lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${SOURCE} contains the raw-string delimiter")
endif()
string(REGEX MATCH "local LIBRARY_VERSION = ([0-9]+)" _ "${code}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "${SOURCE} does not declare LIBRARY_VERSION")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${SOURCE}; do not edit.
#include \"redis/library.h\"
namespace redisched::redis {
const std::string_view kLibraryCode = R\"redisched_lua(${code})redisched_lua\";
const int kLibraryVersion = ${CMAKE_MATCH_1};
}  // namespace redisched::redis
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
