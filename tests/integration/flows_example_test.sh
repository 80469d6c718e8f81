#!/usr/bin/env bash
# docs/flows.md's worked example: the code the page shows is
# examples/invoice_flow.cpp, word for word, and it runs against a real
# Redis: the invoice waits, then runs once, with the three reports' results.
source "$(dirname "$0")/../testutil/redis_fixture.sh"
EXAMPLE="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

shown=$(awk '/^```cpp$/{on=1; next} /^```$/{on=0} on' "$ROOT/docs/flows.md")
expect "the page shows the example" "$(cat "$ROOT/examples/invoice_flow.cpp")" "$shown"

timeout 60 "$EXAMPLE" "redis://127.0.0.1:$PORT" > "$DIR/out" 2>&1
expect "exit status" "0" "$?"
expect "blocked at first" "invoice_42 is blocked" "$(sed -n 1p "$DIR/out")"
expect "sent once, with the results" \
  "sending the invoice of customer 42 with usage.pdf credits.pdf taxes.pdf" "$(sed -n 2p "$DIR/out")"
expect "nothing else" "2" "$(wc -l < "$DIR/out")"
finish
