#!/usr/bin/env bash
# Quick start: installs, builds, starts a redis-server of our own on a unix
# socket with its data under ./redisched-data, and walks one job through
# put, reserve and ack with the CLI. (redisched serve will take this over.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh release
data="$PWD/redisched-data"
mkdir -p "$data"
sock="$data/redis.sock"
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$data" \
  --appendonly yes --appendfsync everysec --save '' --logfile "$data/redis.log" --daemonize no &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null; wait $redis_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.02; done
r() { build/redisched --redis "unix://$sock" "$@"; }
set -x
r put emails welcome_42 'Hello, 42!' --priority 5 --upsert
r put emails reminder_42 'Did you see?' --delay 3600000 --upsert
r stats emails
line=$(r --json reserve emails)
echo "$line"
token=$(echo "$line" | sed 's/.*"token":\([0-9]*\).*/\1/')
r ack emails welcome_42 "$token"
r stats emails
