#!/usr/bin/env bash
# The Functions library driven through redis-cli alone, without any C++, as
# docs/redis-api.md tells a user of any language to do.
source "$(dirname "$0")/../testutil/redis_fixture.sh"
LIB="$1"

expect "load" "redisched" "$(rcli -x FUNCTION LOAD REPLACE < "$LIB")"
K="11 redisched:{mail}:jobs redisched:{mail}:delayed redisched:{mail}:ready redisched:{mail}:reserved redisched:{mail}:dead redisched:{mail}:done redisched:{mail}:meta redisched:{mail}:leases redisched:{mail}:queue redisched:{mail}:later redisched:{mail}:gone"
# shellcheck disable=SC2086
fcall() { local op=$1; shift; rcli FCALL "redisched_$op" $K "$@"; }

expect "put" "1" "$(fcall put need_some_help_email_42 'hello' DELAY 100000)"
expect "put again" "-1" "$(fcall put need_some_help_email_42 'hello')"
expect "state" "delayed" "$(fcall get need_some_help_email_42 | sed -n 4p)"
expect "delete" "1" "$(fcall delete need_some_help_email_42)"
expect "delete again" "0" "$(fcall delete need_some_help_email_42)"

expect "put ready" "1" "$(fcall put job1 'payload' PRIORITY 5)"
reply=$(fcall reserve 1 TTR 30000)
id=$(echo "$reply" | sed -n 4p)
body=$(echo "$reply" | sed -n 5p)
token=$(echo "$reply" | sed -n 6p)
expect "reserved id" "job1" "$id"
expect "reserved body" "payload" "$body"
expect "ack" "1" "$(fcall ack job1 "$token")"
expect "gone" "" "$(fcall get job1)"
expect "bad argument" "BADARG PRIORITY must be from -4294966295 to 1000, got 5000" \
  "$(fcall put x y PRIORITY 5000 2>&1)"
expect "stats" "0" "$(fcall stats | sed -n 4p)"
expect "version" "$(sed -n 's/^local LIBRARY_VERSION = \([0-9]*\).*/\1/p' "$LIB")" \
  "$(rcli FCALL redisched_version 0)"

# The wake-up signal: a put publishes the job's due time on the topic's ready
# channel, as any Redis client can see with SSUBSCRIBE.
rcli SSUBSCRIBE 'redisched:{mail}:ready' > "$DIR/signals" &
SUB=$!
for _ in $(seq 1 100); do grep -q ssubscribe "$DIR/signals" 2>/dev/null && break; sleep 0.02; done
fcall put signalled 'x' NOW 1000 > /dev/null
fcall put later 'x' AT 5000 NOW 1000 > /dev/null
for _ in $(seq 1 100); do [ "$(grep -c smessage "$DIR/signals")" -ge 2 ] && break; sleep 0.02; done
kill "$SUB"; wait "$SUB" 2>/dev/null || true
expect "signals" "smessage redisched:{mail}:ready 1000 smessage redisched:{mail}:ready 5000" \
  "$(grep -A2 smessage "$DIR/signals" | grep -v '^--' | tr '\n' ' ' | sed 's/ $//')"
finish
