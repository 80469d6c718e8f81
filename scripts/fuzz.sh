#!/usr/bin/env bash
# Runs each libFuzzer harness on its corpus: scripts/fuzz.sh [SECONDS] [NAME...]
# (default 15 s each, every harness). Needs build-fuzz/ (scripts/build.sh fuzz).
# New inputs go to a scratch directory, not to the committed corpus; a crash
# leaves its input in build-fuzz/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-15}"
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(url resp job_json http)
# An earlier run's failures are moved aside (their inputs kept): each run
# reports its own.
mkdir -p build-fuzz/earlier
find build-fuzz -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \) \
  -exec mv -t build-fuzz/earlier {} +
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for name in "${names[@]}"; do
  mkdir -p "$scratch/$name"
  echo "== fuzz_$name: ${seconds}s"
  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "./fuzz_$name" -max_total_time="$seconds" -max_len=20000 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$scratch/$name" "../tests/fuzz/corpus/$name" 2>&1 |
    grep -E 'ERROR|SUMMARY|Done|stat::number_of_executed_units|stat::peak_rss|crash-|leak-|timeout-' || true)
  # libFuzzer exits non-zero on a crash, a leak or a timeout; grep hid that.
  # (Not `ls a* b*`: one pattern without a match made it fail, and a crash
  # went unreported.)
  if compgen -G 'build-fuzz/crash-*' >/dev/null || compgen -G 'build-fuzz/leak-*' >/dev/null ||
    compgen -G 'build-fuzz/timeout-*' >/dev/null; then
    echo "fuzz_$name found a failure: its input is in build-fuzz/" >&2
    exit 1
  fi
done
