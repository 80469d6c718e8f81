#!/usr/bin/env bash
# Runs each libFuzzer harness on its corpus: scripts/fuzz.sh [SECONDS] [NAME...]
# (default 15 s each, every harness), as many at once as there are cores.
# Needs build-asan/ (scripts/build.sh asan), where the harnesses are built.
# New inputs go to a scratch directory, not to the committed corpus; a
# crash, leak or timeout leaves its input in build-asan/fuzz-failures/ and
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-15}"
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(url resp job_json http beanstalk)
build=build-asan
failures="$build/fuzz-failures"
# An earlier run's failures are moved aside (their inputs kept): each run
# reports its own.
mkdir -p "$failures/earlier"
find "$failures" -maxdepth 1 -type f -exec mv -t "$failures/earlier" {} +
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

run() {
  local name="$1"
  mkdir -p "$scratch/$name"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz_$name" -max_total_time="$seconds" -max_len=20000 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$failures/$name-" \
    "$scratch/$name" "tests/fuzz/corpus/$name" >"$scratch/$name.log" 2>&1
}

status=0
slots="$(nproc)"
pending=("${names[@]}")
while [ ${#pending[@]} -gt 0 ]; do
  batch=("${pending[@]:0:$slots}")
  pending=("${pending[@]:$slots}")
  pids=()
  for name in "${batch[@]}"; do
    run "$name" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    name="${batch[$i]}"
    # libFuzzer exits non-zero on a crash, a leak or a timeout.
    wait "${pids[$i]}" || status=1
    echo "== fuzz_$name: ${seconds}s"
    grep -E 'ERROR|SUMMARY|Done|stat::number_of_executed_units|stat::peak_rss|crash-|leak-|timeout-' \
      "$scratch/$name.log" || true
  done
done
if [ "$status" -ne 0 ] || compgen -G "$failures/*-*" >/dev/null; then
  echo "a harness found a failure: its input is in $failures/" >&2
  exit 1
fi
