#!/usr/bin/env bash
# Configures and builds one configuration: scripts/build.sh [release|asan|fuzz].
#   release: build/       optimised, warnings as errors
#   asan:    build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer, no benchmarks
#   fuzz:    build-fuzz/  clang, the libFuzzer harnesses only (tests/fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-release}" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DREDISCHED_SANITIZE=ON -DREDISCHED_BUILD_BENCH=OFF) ;;
  fuzz) dir=build-fuzz; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDISCHED_FUZZ=ON
          -DCMAKE_CXX_COMPILER=clang++-14 -DREDISCHED_BUILD_TESTS=OFF -DREDISCHED_BUILD_BENCH=OFF
          -DREDISCHED_BUILD_EXAMPLES=OFF) ;;
  *) echo "usage: scripts/build.sh [release|asan|fuzz]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja -DREDISCHED_WERROR=ON "${flags[@]}" >/dev/null
cmake --build "$dir"
