# Warnings (and, in the sanitizer configuration, sanitizers) for every target
# of the project, as one INTERFACE target to link.
add_library(redisched_options INTERFACE)
target_compile_options(redisched_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow
  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual)
if(REDISCHED_WERROR)
  target_compile_options(redisched_options INTERFACE -Werror)
endif()
if(REDISCHED_SANITIZE)
  target_compile_options(redisched_options INTERFACE -fsanitize=address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # clang 14 cannot emit UBSan's function check in coroutines ("Cannot
    # represent a difference across sections").
    target_compile_options(redisched_options INTERFACE -fno-sanitize=function)
  endif()
  target_link_options(redisched_options INTERFACE -fsanitize=address,undefined)
endif()
