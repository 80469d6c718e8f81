#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the dependencies,
# builds, and runs every test twice: optimised with warnings as errors, then
# under AddressSanitizer and UndefinedBehaviorSanitizer.
# Each configuration's tests run against redis-servers the tests start.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
for config in release asan; do
  echo "== $config: build"
  scripts/build.sh "$config"
  dir=build; [ "$config" = asan ] && dir=build-asan
  echo "== $config: test"
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure --timeout 900)
done
echo "== all tests passed"
