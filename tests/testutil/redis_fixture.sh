# Sourced by the shell tests: starts a throwaway redis-server on a free port in
# a temp dir and stops it on exit. Sets PORT, DIR, and rcli (redis-cli on it).
set -euo pipefail
DIR=$(mktemp -d /tmp/redisched-shtest-XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
  || shuf -i 20000-60000 -n 1)
"${REDIS_SERVER:-redis-server}" --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --save '' \
  --appendonly no --logfile "$DIR/redis.log" --daemonize no &
REDIS_PID=$!
cleanup() { kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
rcli() { redis-cli -p "$PORT" "$@"; }
for _ in $(seq 1 200); do rcli PING >/dev/null 2>&1 && break; sleep 0.02; done
rcli PING >/dev/null || { echo "redis-server did not start"; cat "$DIR/redis.log"; exit 1; }

failures=0
checks=0
# expect NAME EXPECTED ACTUAL
expect() {
  checks=$((checks + 1))
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1"; echo "  expected: $2"; echo "  actual:   $3"; failures=$((failures + 1))
  fi
}
finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}
