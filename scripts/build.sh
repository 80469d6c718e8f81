#!/usr/bin/env bash
# Configures and builds one configuration: scripts/build.sh [release|asan].
#   release: build/       gcc, optimised, warnings as errors
#   asan:    build-asan/  clang, AddressSanitizer + UndefinedBehaviorSanitizer,
#                         no benchmarks; the libFuzzer harnesses (tests/fuzz)
# Debug information is line tables (-g1): enough for every backtrace,
# sanitizer report and profile, at 60 % of -g's compile time (tests/README.md).
# The clang build links with lld; gcc's, with GNU ld: lld 14 linked gcc's
# unity batches of the server into a serve that aborted in the unwinder
# on its first refused JSON body (src/CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-release}" in
  release) dir=build; cxx=g++
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
      -DCMAKE_EXE_LINKER_FLAGS= -DCMAKE_SHARED_LINKER_FLAGS=) ;;
  asan) dir=build-asan; cxx=clang++-14
    flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1" -DREDISCHED_SANITIZE=ON
      -DREDISCHED_FUZZ=ON -DREDISCHED_BUILD_BENCH=OFF
      -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld) ;;
  *) echo "usage: scripts/build.sh [release|asan]" >&2; exit 2 ;;
esac
# A build directory configured with another compiler (an older layout of
# this script) starts over: CMake cannot change the compiler of a cache.
if [ -f "$dir/CMakeCache.txt" ] &&
  ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=.*$cxx\$" "$dir/CMakeCache.txt"; then
  rm -rf "$dir"
fi
cmake -S . -B "$dir" -G Ninja -DREDISCHED_WERROR=ON "-DCMAKE_CXX_COMPILER=$cxx" \
  "${flags[@]}" >/dev/null
cmake --build "$dir"
