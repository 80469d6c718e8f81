#!/usr/bin/env bash
# Installs the Debian packages redisched needs: scripts/deps.sh [--test]
#   (no flag)  what building and running `redisched serve` needs (the quick start)
#   --test     also what the whole test suite needs: chromium and playwright-core
#              for the dashboard, clang for the fuzzers, Python for the model
#              test, promtool for /metrics
# Idempotent: apt-get skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  build-essential cmake ninja-build ccache pkg-config
  # the sanitizer build's linker (scripts/build.sh asan): links in a fraction of ld's time
  lld
  libboost1.81-dev libboost-url1.81-dev libboost-json1.81-dev
  libhiredis-dev libssl-dev
  libcli11-dev libspdlog-dev libfmt-dev
  # recurring jobs: cron times in a time zone (Debian's tz database)
  libhowardhinnant-date-dev tzdata
  # the dashboard's history charts, built into serve
  libjs-dygraphs
  libgtest-dev libgmock-dev libbenchmark-dev
  redis-server redis-tools openssl
  # the man page, written from --help, for the Debian package
  help2man
)
with_tests=false
case "${1:-}" in
  "") ;;
  --test) with_tests=true ;;
  *) echo "usage: scripts/deps.sh [--test]" >&2; exit 2 ;;
esac
if $with_tests; then
  packages+=(
    chromium nodejs npm
    # the sanitizer build and its libFuzzer harnesses (clang with its
    # sanitizer runtimes; llvm-symbolizer names the lines of a report)
    clang-14 libclang-rt-14-dev llvm-14
    # the model-based test of the Functions library (run with /usr/bin/python3)
    python3-redis python3-hypothesis
    # docs/openapi.yaml checked against the server
    python3-yaml python3-jsonschema
    # promtool, which checks /metrics in the server tests
    prometheus
    # systemd-analyze, which checks the package's unit file
    systemd
    # a peer measured in the same run as the core (redisched_bench --peers),
    # and the reference the beanstalkd conformance test runs against
    beanstalkd
    # Redis Sentinel for the failover tests (tests/sentinel/)
    redis-sentinel
  )
fi
missing=()
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
# A machine may have Node.js from elsewhere than Debian.
if command -v node >/dev/null && command -v npm >/dev/null; then
  for i in "${!missing[@]}"; do
    case "${missing[$i]}" in nodejs | npm) unset 'missing[i]' ;; esac
  done
  missing=("${missing[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if $with_tests; then
  # playwright-core drives Debian's chromium in the dashboard tests; the
  # Node.js client's test uses ioredis; beanstalkd's clients jackd and
  # fivebeans run against serve --beanstalk; BullMQ is a peer measured by
  # redisched_bench --peers.
  (cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
  (cd clients/node && npm ci --no-audit --no-fund --loglevel=error)
  (cd tests/beanstalk && npm ci --no-audit --no-fund --loglevel=error)
  (cd bench/peers/bullmq && npm ci --no-audit --no-fund --loglevel=error)
fi
