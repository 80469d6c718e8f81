#!/usr/bin/env bash
# Configures and builds one configuration: scripts/build.sh [release|asan].
#   release: build/       optimised, warnings as errors
#   asan:    build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer, no benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-release}" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DREDISCHED_SANITIZE=ON -DREDISCHED_BUILD_BENCH=OFF) ;;
  *) echo "usage: scripts/build.sh [release|asan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja -DREDISCHED_WERROR=ON "${flags[@]}" >/dev/null
cmake --build "$dir"
