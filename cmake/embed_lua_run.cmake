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
set(version "${CMAKE_MATCH_1}")
# The code in pieces of whole lines, each under 32 KiB: a string literal over
# 64 KiB is beyond what compilers must support (clang: -Woverlength-strings).
string(LENGTH "${code}" left)
set(pieces "")
set(rest "${code}")
while(left GREATER 0)
  string(SUBSTRING "${rest}" 0 30000 piece)
  string(LENGTH "${piece}" taken)
  if(taken LESS left)
    string(FIND "${piece}" "\n" cut REVERSE)
    if(cut LESS 0)
      message(FATAL_ERROR "${SOURCE} has a line over 30000 bytes")
    endif()
    math(EXPR taken "${cut} + 1")
    string(SUBSTRING "${rest}" 0 ${taken} piece)
  endif()
  string(APPEND pieces "    R\"redisched_lua(${piece})redisched_lua\",\n")
  string(SUBSTRING "${rest}" ${taken} -1 rest)
  math(EXPR left "${left} - ${taken}")
endwhile()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${SOURCE}; do not edit.
#include <string>

#include \"redis/library.h\"
namespace redisched::redis {
namespace {
const char* const kPieces[] = {
${pieces}};
std::string joined() {
  std::string code;
  for (const char* piece : kPieces) code += piece;
  return code;
}
const std::string kJoined = joined();
}  // namespace
const std::string_view kLibraryCode = kJoined;
const int kLibraryVersion = ${version};
}  // namespace redisched::redis
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)

# LIMITS: a header with the library's integer constants (limits and
# defaults), so that C++ checks the same numbers the library does.
# "local SOME_NAME = 86400000 * 7" becomes kSomeName = 604800000.
if(LIMITS)
  string(REGEX MATCHALL "\nlocal [A-Z][A-Z0-9_]* = -?[0-9]+( [*] [0-9]+)*" decls "${code}")
  set(body "")
  foreach(decl IN LISTS decls)
    string(REGEX MATCH "local ([A-Z][A-Z0-9_]*) = (.*)" _ "${decl}")
    set(name "${CMAKE_MATCH_1}")
    math(EXPR value "${CMAKE_MATCH_2}")
    string(TOLOWER "${name}" lower)
    string(REPLACE "_" ";" words "${lower}")
    set(camel "k")
    foreach(w IN LISTS words)
      string(SUBSTRING "${w}" 0 1 first)
      string(TOUPPER "${first}" first)
      string(SUBSTRING "${w}" 1 -1 rest)
      string(APPEND camel "${first}${rest}")
    endforeach()
    string(APPEND body "inline constexpr std::int64_t ${camel} = ${value};  // ${name}\n")
  endforeach()
  file(WRITE "${LIMITS}.tmp" "// Generated from lua/redisched.lua; do not edit. The Functions library's
// limits and defaults: one source for every check of the C++ side, and for
// applications that check before they call (ids up to kIdMax bytes,
// priorities 0..kPrioMax, batches of up to kBatchMax, ...).
#pragma once
#include <cstdint>
namespace redisched::limits {
${body}}  // namespace redisched::limits
")
  file(COPY_FILE "${LIMITS}.tmp" "${LIMITS}" ONLY_IF_DIFFERENT)
endif()
