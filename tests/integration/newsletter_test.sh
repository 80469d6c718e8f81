#!/usr/bin/env bash
# examples/newsletter.cpp (koda's README example) against a real Redis: the
# urgent job is sent at once, the delayed one waits five minutes, and SIGINT
# stops the worker cleanly.
source "$(dirname "$0")/../testutil/redis_fixture.sh"
EXAMPLE="$1"

"$EXAMPLE" "redis://127.0.0.1:$PORT" > "$DIR/out" 2>&1 &
PID=$!
for _ in $(seq 1 250); do grep -q "sending newsletter" "$DIR/out" && break; sleep 0.02; done
expect "urgent sent" "urgent: we are live!" "$(grep 'sending newsletter' "$DIR/out" | sed 's/^sending newsletter [^:]*: //')"
K="11 redisched:{newsletter}:jobs redisched:{newsletter}:delayed redisched:{newsletter}:ready redisched:{newsletter}:reserved redisched:{newsletter}:dead redisched:{newsletter}:done redisched:{newsletter}:meta redisched:{newsletter}:leases redisched:{newsletter}:queue redisched:{newsletter}:later redisched:{newsletter}:gone"
# shellcheck disable=SC2086
stats=$(rcli FCALL redisched_stats $K)
expect "delayed waits" "1" "$(echo "$stats" | sed -n 2p)"
later=$(sed -n 's/^submitted .* and //p' "$DIR/out")
# shellcheck disable=SC2086
job=$(rcli FCALL redisched_get $K "$later")
created=$(echo "$job" | sed -n 10p)
due=$(echo "$job" | sed -n 12p)
expect "due in five minutes" "300000" "$((due - created))"
kill -INT "$PID"
status=0
wait "$PID" || status=$?
expect "exit status" "0" "$status"
expect "goodbye" "stopped after 1 jobs" "$(tail -1 "$DIR/out")"
finish
