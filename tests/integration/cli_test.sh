#!/usr/bin/env bash
# build/redisched end to end against a real redis-server.
source "$(dirname "$0")/../testutil/redis_fixture.sh"
BIN="$1"
# The suite's second target: a cluster's seed (tests/tools/with_cluster).
URL=${REDISCHED_TEST_REDIS:-redis://127.0.0.1:$PORT}
r() { "$BIN" --redis "$URL" "$@"; }

expect "version" "redisched " "$("$BIN" --version | grep -o '^redisched ')"
expect "put" "created mail-1" "$(r put mail mail-1 'hello world' --priority 3)"
expect "put exists exits non-zero" "1" "$(r put mail mail-1 x >/dev/null 2>&1; echo $?)"
expect "put exists says why" "redisched: job mail-1 exists (use --replace or --upsert)" \
  "$(r put mail mail-1 x 2>&1 >/dev/null)"
expect "get json" '"state":"ready"' "$(r --json get mail mail-1 | grep -o '"state":"ready"')"
expect "stdin body" "created mail-2" "$(printf 'from stdin' | r put mail mail-2 - --delay 60000)"
expect "stats" "mail	1	1	0	0	0	no" "$(r stats mail | tail -1)"
line=$(r --json reserve mail)
token=$(echo "$line" | sed 's/.*"token":\([0-9]*\).*/\1/')
expect "reserve json" "mail-1" "$(echo "$line" | sed 's/.*"id":"\([^"]*\)".*/\1/')"
expect "ack" "acked mail-1" "$(r ack mail mail-1 "$token")"
expect "ack again fails" "redisched: mail-1: not found" "$(r ack mail mail-1 "$token" 2>&1)"
expect "generated id" "created " "$(r put mail '*' 'no id' | grep -o '^created ')"
expect "topics" "mail" "$(r topics)"
expect "list" "mail-2" "$(r list mail delayed | head -1 | cut -f1)"
expect "delete" "deleted mail-2" "$(r delete mail mail-2)"
expect "bad topic" "redisched: topic 'no way' may hold only letters, digits, '_', '-' and '.'" \
  "$(r put 'no way' a b 2>&1)"
expect "bad priority exit" "1" "$(r put mail a b --priority 9999 >/dev/null 2>&1; echo $?)"
# Numbers that would wrap on the way to their field are refused, not stored.
# Durability: a Redis without replicas cannot confirm a write; it is done all the same.
expect "put waits for replicas" "redisched: done on the primary, but only 0 of 1 replicas had it within 100 ms (a failover may lose it)" \
  "$(r --replica-timeout 100 put mail durable b --replicas 1 2>&1)"
expect "every write waits for replicas" "1" "$(r --replicas 1 --replica-timeout 100 put mail durable2 b >/dev/null 2>&1; echo $?)"
expect "the write is there" "ready" "$(r get mail durable2 | grep -o ready)"
expect "replicas out of range" "1" "$(r put mail durable3 b --replicas 17 >/dev/null 2>&1; echo $?)"
expect "attempts that would wrap" "1" "$(r put mail wrap b --attempts 4294967301 >/dev/null 2>&1; echo $?)"
expect "nothing stored" "redisched: no job wrap in mail" "$(r get mail wrap 2>&1)"
# Global options go on either side of the subcommand.
expect "global option after the subcommand" "mail" "$("$BIN" topics --redis "$URL")"

# export and import: every state, schedule, attempts and errors come back.
r put bk broken 'x' --attempts 1 > /dev/null
expect "reserve refuses an empty worker" "redisched: --worker is empty" \
  "$(r reserve bk --worker '' 2>&1 >/dev/null)"
line=$(r --json reserve bk --count 1 --worker cli-1)
expect "get names the worker" "worker:       cli-1" "$(r get bk broken | grep '^worker:')"
tok=$(echo "$line" | sed 's/.*"token":\([0-9]*\).*/\1/')
expect "report" "reported broken" "$(r report bk broken "$tok" --progress '{"percent":40}' --log one --log two)"
expect "report needs something" "redisched: a report holds log lines, a progress or both" \
  "$(r report bk broken "$tok" 2>&1)"
expect "report refuses a bad progress" "1" "$(r report bk broken "$tok" --progress nope >/dev/null 2>&1; echo $?)"
expect "get shows the progress" 'progress:     {"percent":40} (attempt 1' "$(r get bk broken | grep -o '^progress: .*(attempt 1')"
expect "... and the log" "attempt 1: two" "$(r get bk broken | grep -A2 '^log:' | tail -1 | grep -o 'attempt 1: two')"
r put bk later 'see you' --delay 600000 --priority 7 --attempts 3 > /dev/null
r put bk now "$(printf 'bin\001ary')" > /dev/null
r fail bk broken "$(echo "$line" | sed 's/.*"token":\([0-9]*\).*/\1/')" 'it broke' > /dev/null
expect "get shows the history" "  attempt 1 failed at" "$(r get bk broken | grep -A1 '^history:' | tail -1 | grep -o '^  attempt 1 failed at')"
expect "... on the worker, with the error" "on cli-1: it broke" "$(r get bk broken | grep -o 'on cli-1: it broke')"
r export bk -o "$DIR/bk.jsonl"
expect "export keeps the history" '"history":[{"attempt":1,"outcome":"failed"' \
  "$(grep -o '"history":\[{"attempt":1,"outcome":"failed"' "$DIR/bk.jsonl")"
expect "export keeps the log" '"log":[{"at":' "$(grep -o '"log":\[{"at":' "$DIR/bk.jsonl")"
expect "export lines" "3" "$(wc -l < "$DIR/bk.jsonl" | tr -d ' ')"
expect "export quiet when piped" "" "$(r export bk 2>&1 >/dev/null)"
expect "import" "restored 3, skipped 0 (existing ids, or finished jobs)" "$(r import bk2 "$DIR/bk.jsonl")"
r export bk2 -o "$DIR/bk2.jsonl"
expect "round trip" "$(cat "$DIR/bk.jsonl")" "$(cat "$DIR/bk2.jsonl")"
expect "import again skips" "restored 0, skipped 3 (existing ids, or finished jobs)" "$(r import bk2 < "$DIR/bk.jsonl")"
expect "import bad line" "redisched: line 1: the job has no \"state\" (nothing was imported)" \
  "$(echo '{"id":"x"}' | r import bk3 2>&1)"
expect "import bad history" "redisched: line 1: \"history[0].outcome\" must be failed or lapsed (nothing was imported)" \
  "$(echo '{"id":"x","state":"ready","body":"b","priority":0,"created":1,"due":1,"attempts":1,"max_attempts":5,"ttr":30000,"history":[{"attempt":1,"outcome":"exploded","started":1,"ended":2,"error":"e"}]}' | r import bk3 2>&1)"
# A bad line anywhere stops the import before the first job goes in.
{ head -2 "$DIR/bk.jsonl"; echo '{"id":"y","state":"ready","body":"b","priority":4294967301}'; } > "$DIR/bad.jsonl"
expect "import bad last line" "1" "$(r import bk4 "$DIR/bad.jsonl" >/dev/null 2>&1; echo $?)"
expect "import wrote nothing" "" "$(r topics | grep -x bk4)"
# promote and purge (library version 32).
r put pp later1 x --delay 600000 > /dev/null
r put pp later2 x --delay 600000 > /dev/null
expect "promote one" "promoted 1" "$(r promote pp later1)"
expect "promote --all" "promoted 1" "$(r promote pp --all)"
expect "promote needs ids or --all" "redisched: give ids or --all" "$(r promote pp 2>&1)"
expect "purge none old enough" "deleted 0" "$(r purge pp --older-than 3600000)"
# A pause for a time (library version 38) ends by itself: a long one, then
# one of 1 ms in its place (however slow the machine, it has ended).
expect "pause --for" "pp paused" "$(r pause pp --for 600000)"
expect "paused for a time" "yes" "$(r stats pp | tail -1 | cut -f7)"
expect "pause --for 1" "pp paused" "$(r pause pp --for 1)"
sleep 0.05
expect "the pause ended" "no" "$(r stats pp | tail -1 | cut -f7)"
expect "pause --for -1 refused" "1" "$(r pause pp --for -1 > /dev/null 2>&1; echo $?)"
# One job by its id (library version 38), ahead of the rest.
r put rj first x --priority 9 > /dev/null
r put rj second y > /dev/null
expect "reserve --id" "second" "$(r reserve rj --id second | cut -f1)"
expect "reserve --id held" "redisched: second: reserved, waiting for other jobs, or finished: not to be had" "$(r reserve rj --id second 2>&1)"
expect "reserve --id none" "redisched: none: not found" "$(r reserve rj --id none 2>&1)"
expect "reserve --id and --count" "1" "$(r reserve rj --id first --count 2 > /dev/null 2>&1; echo $?)"
# reschedule: a waiting job's priority and due time, in place.
expect "reschedule" "rescheduled later1" "$(r reschedule pp later1 --priority 7 --delay 600000)"
expect "rescheduled priority" "7" "$(r --json get pp later1 | sed 's/.*"priority":\([0-9]*\).*/\1/')"
expect "reschedule needs a change" "1" "$(r reschedule pp later1 >/dev/null 2>&1; echo $?)"
expect "reschedule --delay and --at" "1" "$(r reschedule pp later1 --delay 1 --at 1 >/dev/null 2>&1; echo $?)"
expect "reschedule no job" "redisched: nope: not found" "$(r reschedule pp nope --priority 1 2>&1)"
# find: the ids that start with a prefix, one a line.
expect "find by prefix" "later1 later2" "$(r find pp later | sort | tr '\n' ' ' | sed 's/ $//')"
expect "find --limit" "1" "$(r find pp later --limit 1 | wc -l)"
# history (library version 34): what the calls did, per minute, and in total.
r put hist h1 a >/dev/null
r put hist h2 b >/dev/null
r put hist h2 b >/dev/null 2>&1 || true  # (refused: not counted)
line=$(r --json reserve hist)
r ack hist "$(echo "$line" | sed 's/.*"id":"\([^"]*\)".*/\1/')" \
  "$(echo "$line" | sed 's/.*"token":\([0-9]*\).*/\1/')" >/dev/null
expect "history header" "minute (UTC)	put	started	done	failed	dead	lapsed	mean wait ms" \
  "$(r history hist | head -1)"
expect "history total" "total	2	1	1	0	0	0" "$(r history hist | tail -1 | cut -f1-7)"
expect "history minutes" "2" "$(r history hist | sed '1d;$d' | awk -F'\t' '{s += $2} END {print s}')"
expect "history --range 30d" "hour (UTC)" "$(r history hist --range 30d | head -1 | cut -f1)"
expect "history --json" '"put":2' "$(r --json history hist | tail -1 | grep -o '"put":2')"
expect "history bad range" "1" "$(r history hist --range 1w >/dev/null 2>&1; echo $?)"
expect "find none exits 1" "1" "$(r find pp nothing-like-it; echo $?)"
expect "find --json" '"later1"' "$(r --json find pp later1)"
# Results: a job put with --keep, acked with a result, waited for.
r put res report-1 'count rows' --keep 60000 >/dev/null
line=$(r --json reserve res)
expect "reserve shows the keep" '"keep":60000' "$(echo "$line" | grep -o '"keep":60000')"
token=$(echo "$line" | sed 's/.*"token":\([0-9]*\).*/\1/')
( sleep 0.3; r ack res report-1 "$token" --keep 60000 --result '42 rows' >/dev/null ) &
acker=$!
expect "wait shows the result" "result:       42 rows" "$(r wait res report-1 --timeout 10000 | grep '^result')"
wait "$acker"
expect "wait on a finished job" "0" "$(r wait res report-1 >/dev/null; echo $?)"
expect "result needs keep" "1" "$(r ack res x 1 --result r >/dev/null 2>&1; echo $?)"
r put res slow 'x' --delay 60000 >/dev/null
expect "wait times out" "4" "$(r wait res slow --timeout 100 >/dev/null 2>&1; echo $?)"
expect "wait on no job" "1" "$(r wait res nothing --timeout 100 >/dev/null 2>&1; echo $?)"
r put res doomed 'x' --attempts 1 >/dev/null
token=$(r --json reserve res | sed 's/.*"token":\([0-9]*\).*/\1/')
r fail res doomed "$token" 'no luck' >/dev/null
expect "wait on a dead job" "3" "$(r wait res doomed >/dev/null 2>&1; echo $?)"

# Flows: a job put --after others waits, blocked, until they settle; move
# carries the outboxes out (no serve here), and get shows the outcomes.
expect "put --after" "created invoice" \
  "$(r put fl_inv invoice 'send' --after fl_rep/usage --after 'fl_rep/taxes:ignore')"
expect "blocked" "state:        blocked" "$(r get fl_inv invoice | grep '^state')"
expect "move the put's outbox" "moved 1, failed 0" "$(r move fl_inv)"
r put fl_rep usage 'u' >/dev/null
r put fl_rep taxes 't' --attempts 1 >/dev/null
token=$(r --json reserve fl_rep | sed 's/.*"token":\([0-9]*\).*/\1/')
expect "a dependency's result without --keep" "acked usage" "$(r ack fl_rep usage "$token" --result usage.pdf)"
token=$(r --json reserve fl_rep | sed 's/.*"token":\([0-9]*\).*/\1/')
r fail fl_rep taxes "$token" 'no rates' >/dev/null
expect "move the dependencies' outbox" "moved 2, failed 0" "$(r move fl_rep)"
expect "released" "state:        ready" "$(r get fl_inv invoice | grep '^state')"
expect "the outcomes" "  fl_rep/usage (fail): done: usage.pdf|  fl_rep/taxes (ignore): failed: no rates" \
  "$(r get fl_inv invoice | grep '^  fl_rep' | paste -sd'|')"
expect "a bad --after" "1" "$(r put fl_inv p2 'x' --after nothing >/dev/null 2>&1; echo $?)"

# Batches: made with a member, another put --batch, a callback waits for
# it; sealed once both are done, the callback is released.
expect "batch --add" "batch:        1 members: 0 done, 0 failed, 1 pending; open" \
  "$(r batch fl_b nightly --add fl_m/m1 | grep '^batch')"
r put fl_m m1 'one' >/dev/null
expect "put --batch" "created m2" "$(r put fl_m m2 'two' --batch fl_b/nightly)"
expect "a callback" "created notify" "$(r put fl_cb notify 'all done' --after fl_b/nightly:fail)"
r move fl_b >/dev/null
r move fl_cb >/dev/null
for i in 1 2; do
  token=$(r --json reserve fl_m | sed 's/.*"token":\([0-9]*\).*/\1/')
  r ack fl_m "m$i" "$token" >/dev/null
done
r move fl_m >/dev/null
expect "both counted, open" "batch:        2 members: 2 done, 0 failed, 0 pending; open" \
  "$(r batch fl_b nightly | grep '^batch')"
expect "sealed: done" "state:        done" "$(r batch fl_b nightly --seal | grep '^state')"
r move fl_b >/dev/null
expect "the callback released" "state:        ready" "$(r get fl_cb notify | grep '^state')"
expect "no more members" "1" "$(r batch fl_b nightly --add fl_m/m3 >/dev/null 2>&1; echo $?)"
expect "a bad --add" "1" "$(r batch fl_b other --add nothing >/dev/null 2>&1; echo $?)"
expect "batch --json" '"pending":0' "$(r --json batch fl_b nightly | grep -o '"pending":0')"

# Recurring jobs: set, list, pause, resume, delete; bad rules refused.
expect "schedule set" "nightly	cron 30 2 * * * (Europe/Berlin)" \
  "$(r schedule set sch nightly 'report' --cron '30 2 * * *' --tz Europe/Berlin --keep 60000 | cut -f1,2)"
expect "schedule list" "nightly" "$(r schedule list sch | cut -f1)"
expect "schedule json" '"catch_up":"skip"' "$(r --json schedule list sch | grep -o '"catch_up":"skip"')"
expect "schedule pause" "paused nightly" "$(r schedule pause sch nightly)"
expect "schedule paused" "paused" "$(r schedule list sch | cut -f5)"
expect "schedule resume" "resumed nightly" "$(r schedule resume sch nightly)"
expect "schedule resume again" "unchanged nightly" "$(r schedule resume sch nightly)"
expect "schedule pause none" "redisched: no schedule none in sch" "$(r schedule pause sch none 2>&1)"
expect "schedule bad cron" "redisched: cron hours: 24 is out of 0..23" \
  "$(r schedule set sch x b --cron '0 24 * * *' 2>&1)"
expect "schedule bad zone exit" "1" "$(r schedule set sch x b --cron '@daily' --tz Nowhere >/dev/null 2>&1; echo $?)"
expect "schedule needs a rule" "1" "$(r schedule set sch x b >/dev/null 2>&1; echo $?)"
r schedule set sch pulse beat --every 100 >/dev/null
sleep 0.5
expect "nothing runs it here" "0 of 0 ready" "$(r list sch ready)"
expect "schedule delete" "deleted pulse" "$(r schedule delete sch pulse)"
expect "schedule delete again" "1" "$(r schedule delete sch pulse >/dev/null 2>&1; echo $?)"

# Debounce: a waiting job takes the last put; a running one is left alone.
expect "debounce creates" "created ev-1" "$(r put deb ev-1 first --delay 60000 --debounce)"
expect "debounce updates" "updated ev-1" "$(r put deb ev-1 second --delay 60000 --debounce)"
expect "debounce body" '"body":"second"' "$(r --json get deb ev-1 | grep -o '"body":"second"')"
r put deb ev-2 now --debounce >/dev/null
r reserve deb >/dev/null
expect "debounce leaves a running job" "redisched: job ev-2 is not waiting (reserved, dead or done): left as it is" \
  "$(r put deb ev-2 again --debounce 2>&1)"
expect "debounce with upsert refused" "1" "$(r put deb ev-3 x --debounce --upsert >/dev/null 2>&1; echo $?)"
# Limits: shown, the named ones changed (the others stay), honoured, cleared.
expect "retry window" "rw	retry window 60000 ms	0 ids held" "$(r retry-window rw)"
r put rw once x > /dev/null
r --json reserve rw | grep -o '"token":[0-9]*' | cut -d: -f2 | xargs -I{} "$BIN" --redis "$URL" ack rw once {} > /dev/null
expect "a retried put" "exists" "$(r put rw once x 2>&1 | grep -o exists)"
expect "retry window off" '{"topic":"rw","retry_window_ms":0,"remembered":0}' "$(r --json retry-window rw 0)"
expect "retry window refused" "1" "$(r retry-window rw 86400001 > /dev/null 2>&1; echo $?)"
# Migration: a topic written by this version has nothing to rewrite, and
# a small one is read whole by each call (and left unmarked: no write).
r put mig a x > /dev/null
r put mig b y --delay 60000 > /dev/null
expect "migrate" "mig	0	2	1" "$(r migrate mig | tail -1)"
expect "migrate again" '{"topic":"mig","rewritten":0,"read":2,"calls":1}' "$(r --json migrate mig)"
expect "migrate limit refused" "1" "$(r migrate mig --limit 0 > /dev/null 2>&1; echo $?)"
expect "limit none" "lim	rate none	concurrency none	aging none" "$(r limit lim)"
# A rate's window starts at a multiple of its length (UTC), so "used" is
# read back from a window of a day: a minute's could roll over between
# the reserve and the stats below (it did, once, in CI).
expect "limit rate" "lim	rate 2 per 86400000 ms	concurrency none	aging none" "$(r limit lim --rate 2 --window 86400000)"
expect "limit keeps the rate" "lim	rate 2 per 86400000 ms	concurrency 5	aging none" "$(r limit lim --concurrency 5)"
for i in 1 2 3; do r put lim "l$i" x >/dev/null; done
expect "limited reserve" "2" "$(r --json reserve lim --count 3 | grep -c '"id"')"
expect "limit used" '"limit_used":2' "$(r --json stats lim | grep -o '"limit_used":[0-9]*')"
expect "limit json" '{"rate":0,"window_ms":0,"concurrency":0,"aging_ms":0}' "$(r --json limit lim --clear)"
expect "limit default window" "lim2	rate 5 per 1000 ms	concurrency none	aging none" "$(r limit lim2 --rate 5)"
expect "limit aging" "lim2	rate 5 per 1000 ms	concurrency none	aging 250 ms a level" "$(r limit lim2 --aging 250)"
expect "limit refused" "1" "$(r limit lim --rate -1 >/dev/null 2>&1; echo $?)"
# One topic over shards: spread while empty, used as one topic, shown as one.
expect "shards none" "hot	not spread (its own keys)" "$(r shards hot)"
expect "shards set" "hot	3 shards:" "$(r shards hot 3 | grep -o '^hot	3 shards:')"
for i in 1 2 3 4 5 6; do r put hot "h$i" x >/dev/null; done
expect "shards get" "ready" "$(r --json get hot h4 | grep -o '"state":"ready"' | cut -d'"' -f4)"
expect "shards stats" "hot	0	6	0	0	0	no" "$(r stats hot | tail -1)"
expect "shards json" '"count":3' "$(r --json shards hot | grep -o '"count":3')"
expect "shards listed once" "1" "$(r topics | grep -c '^hot')"
expect "shards refused while holding jobs" "1" "$(r shards hot 2 >/dev/null 2>&1; echo $?)"
expect "shards count checked" "1" "$(r shards hot 0 >/dev/null 2>&1; echo $?)"
expect "bench" "3" "$(r --json bench --jobs 1000 | grep -o '_[a-z]*":[0-9]' | wc -l | tr -d ' ')"
expect "bench leaves no job" "redisched-bench	0	0	0	0	0	no" "$(r stats redisched-bench | tail -1)"
expect "no redis" "1" "$("$BIN" --redis redis://127.0.0.1:1 stats mail >/dev/null 2>&1; echo $?)"
finish
