#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the dependencies,
# builds, and runs every test twice: optimised with warnings as errors, then
# under AddressSanitizer and UndefinedBehaviorSanitizer; then the fuzzers.
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
# The libFuzzer harnesses: built with clang, each run a short while on its
# corpus (a long run's figures: tests/fuzz/README.md).
echo "== fuzz: build"
scripts/build.sh fuzz
echo "== fuzz: run"
scripts/fuzz.sh 15
echo "== all tests passed"
