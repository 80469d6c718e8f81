#!/usr/bin/env bash
# The whole test suite, from a fresh machine: scripts/test.sh [--quick]
#   (no flag)  installs the dependencies, builds both configurations and runs
#              every test in each: optimised with warnings as errors (gcc),
#              then under AddressSanitizer and UndefinedBehaviorSanitizer
#              (clang); then the fuzzers. What CI and the README run.
#   --quick    the developers' loop: the release build and its tests but the
#              soak-style ones (label soak).
# Tests run side by side (ctest -j, REDISCHED_TEST_JOBS, 4 unless set);
# those that measure time run alone (tests/README.md). Each configuration's
# tests run against redis-servers the tests start.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
case "${1:-}" in
  "") ;;
  --quick) quick=true ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
jobs="${REDISCHED_TEST_JOBS:-4}"

# Each step's wall time, printed at the end (tests/README.md keeps them).
times=()
step_start=$SECONDS
step() {
  local now=$SECONDS
  [ -n "${step_name:-}" ] && times+=("$(printf '%-16s %4d s' "$step_name" $((now - step_start)))")
  step_name="$1"
  step_start=$now
  # The start of each step, so that a log cut short by a failure still
  # shows where the time went.
  [ -n "$1" ] && echo "== $1 (at ${now} s)"
  return 0
}

run_tests() {
  local dir="$1"
  shift
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure --timeout 900 -j "$jobs" "$@")
}

step "dependencies"
scripts/deps.sh --test
step "release: build"
scripts/build.sh release
step "release: test"
if $quick; then
  run_tests build -LE soak
else
  run_tests build
  step "asan: build"
  scripts/build.sh asan
  step "asan: test"
  run_tests build-asan
  # The libFuzzer harnesses, built in build-asan: each a short while on its
  # corpus (a long run's figures: tests/fuzz/README.md).
  step "fuzz"
  scripts/fuzz.sh 15
fi
step ""
echo "== times"
printf '%s\n' "${times[@]}"
printf '%-16s %4d s\n' "total" "$SECONDS"
echo "== all tests passed"
