#!lua name=redisched
--[[
redisched: a delayed/priority job queue as one Redis Functions library.

Load it as it is:   redis-cli FUNCTION LOAD REPLACE "$(cat lua/redisched.lua)"
Call it:            FCALL redisched_<op> 15 <the topic's fifteen keys> <arguments...>

Every function takes the same keys of one topic T, in this order
(P is a prefix, "redisched" by default; {T} is the Redis Cluster hash tag):
  KEYS[1]  P:{T}:jobs      hash  id -> packed job record (body and metadata)
  KEYS[2]  P:{T}:delayed   zset  M -> due time (ms)
  KEYS[3]  P:{T}:ready     zset  M -> (1000 - priority) * 2^43 + due time (ms);
                                 while paused also NUL "paused" -> -inf, while
                                 limited (redisched_limit) NUL "limited" -> -inf;
                                 with its first job also its pin (PIN.member) -> +inf
  KEYS[4]  P:{T}:reserved  zset  id NUL token -> reservation deadline (ms);
                                 from the first reservation also its pin
                                 (PIN.member) -> +inf
  KEYS[5]  P:{T}:dead      zset  id -> time it died (ms)
  KEYS[6]  P:{T}:done      zset  id -> time its retention ends (ms) (ack KEEP)
  KEYS[7]  P:{T}:meta      hash  seq (counter), totals, limits
  KEYS[8]  P:{T}:leases    hash  id -> "token:reserved_at:ttr" of its reservation
  KEYS[9]  P:{T}:queue     list  the ready list (version 17): jobs put ready,
                                 in put order, beside the ready set
  KEYS[10] P:{T}:later     list  the delayed list (version 18): jobs put
                                 delayed, in put order, beside the delayed set
  KEYS[11] P:{T}:gone      zset  id -> the end of its retry window (ms)
                                 (version 20): jobs finished without a trace
  KEYS[12] P:{T}:history   hash  the topic's counts per minute, per hour and
                                 in total (version 34; "The topic's history"
                                 below): optional, a call that names it is
                                 counted there (about once a second, from
                                 the library's memory), one that passes 11
                                 keys is not
  KEYS[13] P:{T}:blocked   zset  id -> when it was put (ms): jobs waiting for
                                 others (version 35, "Flows" below)
  KEYS[14] P:{T}:flow      hash  the flows' state: what blocked jobs wait for,
                                 and who waits for this topic's jobs
  KEYS[15] P:{T}:outbox    stream  calls for a mover to make on other topics
                                 (optional, the last three: a caller that
                                 passes 8, 11 or 12 keys has them named from
                                 the first, in the same slot)
where M, a job's member in delayed and ready, is its put sequence (7 bytes,
big-endian), its priority (2 bytes) and its id: jobs due in the same
millisecond sort by put order, and due jobs move to ready without reading
their records. The names are checked (BADKEYS): the same P:{T} before each
suffix, with a non-empty hash tag. A caller written for version 22 or older
passes the first eight keys, and the library names the next three from
them (same slot; docs/redis-api.md, "Keyspace"); the history is never
named for a caller, only counted when the caller names it. The ready and delayed
lists ("The ready list", "The delayed list" below) hold the jobs puts make
in order; the retry window ("The retry window" below) keeps the ids of jobs
finished without a trace (acked without KEEP, or taken for good) for a
while, so that a put retried after an unsure answer does not make the job
again.

A job is in exactly one of delayed, ready, reserved, dead, done, blocked: its state
is the set (or list) that holds it (docs/lifecycle.md draws the transitions), except
that a delayed job whose due time has come counts as ready for every read
(get, list, stats) until a reserve, pull or list moves it.

Order among ready jobs: higher priority first, then earlier due time, then
put order, at any rate of puts. Due delayed jobs move to ready in calls of
reserve, pull and list, at most PROMOTE_BATCH per call; while more are due (a
backlog), reserve and pull hand out no job that fell due after the earliest
job still waiting in delayed (docs/redis-api.md, "Order").

Wake-up signal: a call that makes a job ready, or schedules one, publishes
the time it is due (ms, decimal) with SPUBLISH on a channel named like the
ready key, P:{T}:ready (same slot), once per call. Idle workers listen there
and aim a timer at the earliest due time instead of polling (promotion of
due delayed jobs publishes nothing: waiting workers already know that time).

Finished signal: a call that finishes jobs someone may wait for publishes
their ids, separated by newlines, with SPUBLISH on P:{T}:done, once per
call: an ack with KEEP; any job going dead or deleted before it finished
(version 19: kept or not); and jobs put with KEEP taken for good (TTR 0,
pull). A producer waiting for a job listens there, then reads the job with
get (docs/redis-api.md, "Waiting for a job"). Acks without KEEP, the hot
path, publish nothing.

Sweep signal (version 29): a reserve or touch that gives the topic a
reservation lapsing before every other it holds publishes "lapse <T>
<deadline ms>", and a schedule put publishes "schedules <T>", with PUBLISH
(every node of a cluster hears it) on P:sweep, once per call (a failed
publish, say an ACL without the channel, leaves the call done). A sweeper
(serve) listens there and requeues a topic when its reservations may
lapse, instead of calling every topic in turn (docs/redis-api.md, "Sweep
signal").

Time is the Redis server's clock in milliseconds, from 0 to MS_MAX (2^43 - 1,
in the year 2248). Every function that reads the clock accepts "NOW <ms>" for
tests that need to control time (but kick, whose arguments are all ids).

Replies use stable codes (docs/redis-api.md). Per-job outcomes are integers:
   1 ok / created      2 updated (put REPLACE/UPSERT)
   0 no such job      -1 id exists (put)
  -2 wrong state      -3 stale token (the reservation is no longer yours)
Invalid arguments are error replies whose first word is a code:
  BADARG <what is wrong>   BADKEYS <what is wrong>   BADFORMAT <what is wrong>
  BADSTATE <what is wrong> (the topic cannot take the call: its counter is used up)
  OLDFORMAT <what to do>   (the topic holds version 8 data: redisched_migrate first)
Every function reads and decides before its first write, and nothing after
that write can fail: an error reply, and any "no" outcome (-1, 0, -2, -3, a
putmany or ackmany whose every job was refused), leaves the keyspace as it was.
The model test checks the order itself (tests/model, the write-order
checker). A record of a newer format than this version reads refuses
(BADFORMAT, nothing changed) every call that would read it: reserve and
pull check, before they write, every record they could hand out or
requeue, and list the page it is about to show (docs/redis-api.md,
"Conventions"). A record or member of library version 8 (stored format 1)
refuses the same calls the same way (OLDFORMAT) until redisched_migrate
has rewritten the topic (version 25; the clients migrate and call again).
]]

--[[ How to read this file. Sections (search for their dashed lines):
  arguments  checks of keys and arguments (check_keys, options, int_arg);
             clock(), the only read of the server's time
  records    the record module, the only code that knows a record's bytes
             (record.pack/unpack/head/readable); a job's member in the
             delayed and ready sets (member, member_id) and its ready score;
             the topic's counter (seq_room, take_seq); known: records read
             and checked before a call's first write
  moves      what the calls share: the signals (wake, finished), the retry
             window (gone), reservations (lease_*, reservations: the
             reserved set's reads), the history (history.count, after a
             call's last write; history.read), and the storage module: waiting and
             place, the only code that knows how waiting jobs are kept
             (the delayed and ready sets and lists, their pins and
             marks): place (the one path by which jobs come to wait:
             decided in order, written at once), promotion of due jobs,
             lanes (counts, pages, where a job waits), and the takes of
             reserve and pull (front, take, candidates, pop); then
             locate and take_out (where a job is, and out of there),
             requeue_members, job_fields (get's array)
  put        put, restore, putmany
  read       get, list, stats (read only, but list's promotion)
  take       reserve and pull: limits (limit_room, started), take (which
             decides before it writes), next_time
  settle     ack, ackmany, release, fail, touch
  manage     delete, requeue, kick, kickall, limit, retrywindow, pause,
             resume
  migrate    redisched_migrate: older stored formats rewritten, in parts
  shards     shard, shards (a topic spread over topics T~suffix)
  schedules  recurring jobs: schedule ... tick
  register   api() (signals published once a call succeeds) and the list
             of functions
Each redisched_<name> function has a header block, a long comment that
starts "redisched_<name>:", of its arguments (ARGV: positional ones in
lower case, option words in upper case) and reply, which
docs/redis-api.md repeats (regressions_test.py, class Headers, checks the
option words against what the code accepts, and the docs against both).
Locals: the main chunk holds 176 of the 200 locals Lua
allows a function at its top level, and 179 at its peak (the worker
registry's do-block, whose locals are active too; regressions_test.py
counts them). A group of helpers goes in a table (record, known, gone,
history, reservations, waiting, place), its constants and private helpers
in a do-block; the bodies of the functions that only register names, in
fcall. ]]

local LIBRARY_VERSION = 38 -- bump on any change of behaviour or stored format

local PRIO_MAX = 1000
-- The lowest priority (version 37): 1000 - (2^32 - 1), so that each of
-- beanstalkd's 2^32 priorities (0 first) is one of ours (pri = 1000 -
-- priority). The ready score's band, PRIO_MAX - priority, is then at most
-- 2^32 - 1: exact in a score (below 2^75), with the due time inside a
-- band rounded to 2^22 ms for the lowest bands (docs/redis-api.md).
local PRIO_MIN = -4294966295
local TIME_SPAN = 8796093022208  -- 2^43: every time is below it
local MS_MAX = 8796093022207     -- 2^43 - 1 (2248-09-26): the latest time a call may name
local SEQ_MAX = 9007199254740991 -- 2^53 - 1: the counter's last value (exact in Lua)
-- 2^53: a double holds every integer below it, not every one from it on
-- (a score there is rounded; '%d' overflows from 2^63). (An expression:
-- cmake/embed_lua_run.cmake makes a plain number public in limits.h.)
local EXACT_LIMIT = SEQ_MAX + 1
local ID_MAX = 256             -- bytes
local BODY_MAX_DEFAULT = 1048576
local BODY_MAX_LIMIT = 536870912
local ERROR_MAX = 8192
-- The attempt history's bounds (version 30): its entries, and the bytes of
-- an entry's error (the job's last error is kept whole, as error).
local HISTORY_MAX = 10
local HISTORY_ERROR_MAX = 1024
-- A job's progress and log (version 31): its progress value's bytes; the
-- log lines it keeps (the latest), a line's bytes (a longer one is cut),
-- and the bytes of all its lines (the oldest go first).
local PROGRESS_MAX = 1024
local LOG_LINES_MAX = 100
local LOG_LINE_MAX = 1024
local LOG_BYTES_MAX = 32768
local DELAY_MAX = 315576000000   -- ten years
local TTR_MAX = 86400000 * 7     -- a week
local ATTEMPTS_MAX = 1000
local BATCH_MAX = 1000           -- jobs in one call
local DEPS_MAX = 10000           -- jobs one job waits for (put's AFTER, version 35)
local LIMIT_MAX = 10000          -- LIMIT of requeue and kickall
local OFFSET_MAX = 1099511627776 -- 2^40: list's offset
-- Housekeeping bounds (the model test lowers them in a copy to reach them).
local PROMOTE_BATCH = 1000       -- due jobs moved to ready in one call
local REQUEUE_INLINE = 100       -- lapsed reservations reserve recovers itself
local TRIM_BATCH = 100           -- retained jobs dropped in one call

-- Defaults for what a job does not say.
local DEFAULT_TTR = 30000
local DEFAULT_ATTEMPTS = 5
local DEFAULT_BACKOFF = { 2, 1000, 600000 } -- exponential, 1 s base, 10 min cap

local OK, UPDATED, MISSING, EXISTS, WRONG_STATE, STALE = 1, 2, 0, -1, -2, -3
-- A paused topic's ready set holds this member (7 bytes: no job's member is
-- that short) with the lowest score, so the read of the set's front that
-- every take makes finds the pause without a call of its own (marks:
-- waiting.is_mark and the rest).
local PAUSED_MARK = '\0paused'
-- A limited topic's (redisched_limit) ready set holds this one, also with
-- the lowest score and before the pause mark ('\0l' < '\0p'), so a topic
-- without limits pays nothing for them.
local LIMIT_MARK = '\0limited'
-- A spread topic's (redisched_shard) ready set holds this one: it has no
-- jobs of its own, and a reserve that finds the mark says where they are.
local SHARD_MARK = '\0sharded'
local SHARDS_MAX = 256
local SHARD_SUFFIX_MAX = 64
local RATE_MAX = 1000000         -- jobs per window
local WINDOW_MAX = 86400000      -- a day
local CONCURRENCY_MAX = 1000000
local AGING_MAX = 86400000       -- ms of waiting a level of priority is worth, at most
-- The worker registry's bounds (redisched_beat, redisched_workers).
local WORKER_ID_MAX = 128
local WORKER_LIST_MAX = 1000     -- topics, and running jobs, one entry lists
local BEAT_TTL_MIN = 1000
local BEAT_TTL_MAX = 3600000
local WORKERS_READ_MAX = 10000   -- entries one read returns
local BACKOFF_KINDS = { fixed = 1, exponential = 2 }
local BACKOFF_NAMES = { 'fixed', 'exponential' }
local KEY_NAMES = { 'jobs', 'delayed', 'ready', 'reserved', 'dead', 'done', 'meta', 'leases',
                    'queue', 'later', 'gone', 'history', 'blocked', 'flow', 'outbox' }

-- The leases hash holds one more field, never an id (ids hold no control
-- characters), whose value is longer than Redis packs into a listpack
-- (hash-max-listpack-value, 64 bytes by default). Redis keeps a hash of up
-- to 512 short fields as a listpack, scanned from its start for every field
-- set or deleted: at a few hundred reservations that was a good part of
-- reserve's and ack's time. With this field the hash is a hash table.
--
-- The reserved set likewise holds one more member, never a reservation (a
-- reservation's member starts with its id), longer than Redis packs into a
-- listpack (zset-max-listpack-value, 64 bytes), at +inf: after every
-- deadline, so no lapse scan reaches it. Redis keeps a sorted set of up to
-- 128 short members as a listpack, and every ZADD and ZREM scans it and
-- parses its scores: with the few dozen reservations of a busy worker that
-- was a fifth of Redis's time. Counts of reservations leave it out
-- (reservations). The ready set holds the same member at +inf, after every
-- job (a topic whose workers keep up holds a few dozen ready jobs, and
-- each put walked them all); no job's member is it (its bytes 8 and 9,
-- read as a member's priority, make 25956). Counts, pages and takes of
-- ready step around it (the storage module's unpinned).
-- (One table: the main chunk is at Lua's limit of 200 locals.)
-- Flows: jobs that wait for other jobs (the flows section, below).
local flows = {}

local PIN = {
  lease = '\0unpacked',
  lease_value = 'a value longer than hash-max-listpack-value keeps this hash a hash table',
  -- the reserved and ready sets' member
  member = '\0unpacked: a member longer than zset-max-listpack-value keeps this set a skiplist',
}

-- (bit and struct are only reachable inside calls, not while loading.)
local function band(a, b) return bit.band(a, b) end

-- An integer as decimal digits ('..' would write 1e+14 from 14 digits on);
-- from 2^53 on (the ready scores of priorities below -23 reach 2^75, where
-- '%d' would overflow) with 17 significant digits, exact for a double.
local function fmt(n)
  if n >= EXACT_LIMIT or n <= -EXACT_LIMIT then return string.format('%.17g', n) end
  return string.format('%d', n)
end

-- fmt that formats each number once, for the scores a batch repeats: a
-- number handed to redis.call is formatted with 17 digits per argument,
-- a good part of a batch's time inside Redis.
local function fmt_once()
  local texts = {}
  return function(n)
    local t = texts[n]
    if not t then t = fmt(n); texts[n] = t end
    return t
  end
end

---------------------------------------------------------------- arguments

local function bad(msg)
  error({ bad = 'BADARG ' .. msg })
end

local function show(v)
  if v == nil then return 'nothing' end
  if #v > 40 then v = v:sub(1, 40) .. '...' end
  return "'" .. v .. "'"
end

local function int_arg(v, name, lo, hi)
  if v == nil then bad(name .. ' is missing') end
  if #v > 18 or not v:match('^%-?%d+$') then
    bad(name .. ' must be an integer, got ' .. show(v))
  end
  local n = tonumber(v)
  if n < lo or n > hi then
    bad(name .. ' must be from ' .. fmt(lo) .. ' to ' .. fmt(hi) .. ', got ' .. v)
  end
  return n
end

local function id_arg(v, checked)
  if v == nil or v == '' then bad('job id is empty') end
  if #v > ID_MAX then bad('job id is longer than ' .. ID_MAX .. ' bytes') end
  if not checked and v:find('%c') then bad('job id contains a control character') end
  return v
end

-- The eleven keys, checked by name: "<base>:<name>" for each name, in
-- order, with one base that holds a non-empty hash tag (so they share one
-- slot). A caller written for version 22 or older passes the first
-- eight: the last three are then named from the base (same slot, but no
-- key of the call, which a proxy that routes or checks by KEYS cannot see).
-- The flows' three (13..15, version 35) likewise, for callers that pass 8,
-- 11 or 12.
-- String compares only, no Redis calls; before anything is read or written.
-- Keys checked before, by their first key: a call with the same keys
-- skips the string work (Lua interns strings, so comparing them is a
-- pointer compare). Emptied when it holds many topics.
local checked, n_checked = {}, 0

local function check_keys(keys)
  local n = #keys
  local seen = checked[keys[1]]
  if seen and n == seen.n and keys[2] == seen.delayed and keys[3] == seen.ready
      and keys[4] == seen.reserved and keys[5] == seen.dead and keys[6] == seen.done
      and keys[7] == seen.meta and keys[8] == seen.leases
      and (n == 8 or (keys[9] == seen.queue and keys[10] == seen.later and keys[11] == seen.gone))
      and keys[12] == seen.history
      and (n < 13 or keys[13] == seen.blocked and keys[14] == seen.flow and keys[15] == seen.outbox) then
    return seen
  end
  if n ~= 15 and n ~= 12 and n ~= 11 and n ~= 8 then
    error({ bad = 'BADKEYS expected the topic\'s 11 keys (' .. table.concat(KEY_NAMES, ' ', 1, 11) ..
                  '), maybe its 12th (history), or 15 (then also ' .. table.concat(KEY_NAMES, ' ', 13, 15) ..
                  '), got ' .. n })
  end
  local base = keys[1]:sub(1, -6)
  local open = base:find('{', 1, true)
  local close = open and base:find('}', open + 1, true)
  if keys[1]:sub(-5) ~= ':jobs' or not close or close == open + 1 then
    error({ bad = 'BADKEYS key 1 must be <prefix>:{<topic>}:jobs, got ' .. show(keys[1]) })
  end
  for i = 2, n do
    if keys[i] ~= base .. ':' .. KEY_NAMES[i] then
      error({ bad = 'BADKEYS key ' .. i .. ' must be ' .. show(base .. ':' .. KEY_NAMES[i]) ..
                    ', got ' .. show(keys[i]) })
    end
  end
  local k = { n = n, jobs = keys[1], delayed = keys[2], ready = keys[3], reserved = keys[4],
              dead = keys[5], done = keys[6], meta = keys[7], leases = keys[8],
              queue = keys[9] or base .. ':queue', later = keys[10] or base .. ':later',
              gone = keys[11] or base .. ':gone', history = keys[12],
              blocked = keys[13] or base .. ':blocked', flow = keys[14] or base .. ':flow',
              outbox = keys[15] or base .. ':outbox', base = base,
              tag = base:sub(open + 1, close - 1), sweep = base:sub(1, open - 1) .. 'sweep' }
  if n_checked >= 1000 then checked, n_checked = {}, 0 end
  checked[keys[1]], n_checked = k, n_checked + 1
  return k
end

-- Reads "WORD value" options from args[from..]; spec (and more, if given)
-- map WORD to the number of values it takes (0 for a flag). Returns a table
-- of WORD -> value(s).
local NO_OPTIONS = {}

local function options(args, from, to, spec, more)
  if from > to then return NO_OPTIONS end
  local o = {}
  local i = from
  while i <= to do
    local word = args[i]:upper()
    local n = spec[word]
    if n == nil and more then n = more[word] end
    if n == nil then bad('unknown option ' .. show(args[i])) end
    if o[word] ~= nil then bad(word .. ' given twice') end
    if n < 0 then -- a count, then that many groups of -n values (put's AFTER)
      local c = int_arg(args[i + 1], word .. ' count', 1, DEPS_MAX)
      n = 1 - n * c
    end
    if i + n > to then bad(word .. ' needs ' .. n .. ' value(s)') end
    if n == 0 then o[word] = true
    elseif n == 1 then o[word] = args[i + 1]
    elseif n <= 8 then o[word] = { unpack(args, i + 1, i + n) }
    else -- (AFTER's 30001: more than Lua unpacks at once)
      local v = {}
      for x = 1, n do v[x] = args[i + x] end
      o[word] = v
    end
    i = i + n + 1
  end
  return o
end

-- The option words each function takes (built once, not per call).
local NO_WORDS = {}
local OPT_FOR_NOW = { FOR = 1, NOW = 1 }
local OPT_FAIL = { DEAD = 0, DELAY = 1, ATTEMPTS = 1, PRIORITY = 1, NOW = 1 }
local OPT_DELAY_PRIORITY_NOW = { DELAY = 1, PRIORITY = 1, NOW = 1 }
local OPT_LIMIT_NOW = { LIMIT = 1, NOW = 1 }
local OPT_NOBODY_NOW = { NOBODY = 0, NOW = 1 }
local OPT_NOW = { NOW = 1 }
local OPT_TTR_NOW = { TTR = 1, NOW = 1 }
local OPT_RESERVE = { TTR = 1, WORKER = 1, NOW = 1 }
local OPT_KEEP_NOW = { KEEP = 1, NOW = 1 }
local OPT_ACK = { KEEP = 1, RESULT = 1, FORWARD = 0, MAXBODY = 1, NOW = 1 }
-- put's per-job words (a single put also takes putmany's call-wide ones).
local PUT_OPTIONS = { DELAY = 1, AT = 1, PRIORITY = 1, TTR = 1, ATTEMPTS = 1, BACKOFF = 3,
                      KEEP = 1, REPLACE = 0, UPSERT = 0, DEBOUNCE = 0 }

-- MAXBODY, or the default limit of a body.
local function body_limit(o)
  return o.MAXBODY and int_arg(o.MAXBODY, 'MAXBODY', 0, BODY_MAX_LIMIT) or BODY_MAX_DEFAULT
end

-- LIMIT of requeue and kickall.
local function limit_arg(o)
  return o.LIMIT and int_arg(o.LIMIT, 'LIMIT', 1, LIMIT_MAX) or 1000
end

-- The job ids that are all of delete's and kick's arguments.
local function ids_arg(args)
  if #args == 0 then bad('job id is missing') end
  if #args > BATCH_MAX then bad('at most ' .. BATCH_MAX .. ' ids in one call') end
  for _, id in ipairs(args) do id_arg(id) end
  return args
end

-- NOW, checked (also by calls that read the clock only on some paths).
local function now_arg(o)
  return o.NOW and int_arg(o.NOW, 'NOW', 0, MS_MAX)
end

local function clock(o)
  if o.NOW then return int_arg(o.NOW, 'NOW', 0, MS_MAX) end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now > MS_MAX then error({ bad = 'BADSTATE the server clock is past ' .. fmt(MS_MAX) .. ' ms' }) end
  return now
end

-- now + ms, but no later than MS_MAX (a due time always fits the ready score).
local function after(now, ms)
  local t = now + ms
  if t > MS_MAX then return MS_MAX end
  return t
end

---------------------------------------------------------------- records

--[[ The record module: the only code that knows a job record's bytes
(docs/redis-api.md, "Stored format"). A record unpacks to a job, a table
whose fields are named as get reports them: priority, created, seq (its put
sequence), due, attempts (made; nil: none), place (the sequence of its
latest return to delayed or ready, its next token; nil when that is seq),
ttr (its own; nil: none), max_attempts (nil: the default), backoff ({kind,
base, cap}; nil: the default), finished, keep, error, result, later (true:
last placed in the delayed list, which says where locate looks for it),
history (version 30: the last attempts that ended without success, oldest
first, each {attempt, outcome ('failed' or 'lapsed'), started, ended,
worker (nil: not named), error, cut (true: error holds its first
HISTORY_ERROR_MAX bytes)}; nil: none), progress (version 31: {attempt, at,
value}, the latest a handler reported; nil: none), log (version 31:
{total (lines ever logged), lines = {{at, attempt, text, cut}...}, oldest
first}; nil: none), deps (version 35: the jobs it waits for, in the order
put named them, each {topic, id, policy ('fail', 'ignore' or 'drop'),
outcome ('pending', 'done', 'failed' or 'dropped'), value (the result of
one done, the error of one failed or dropped; '' while pending)}: filled in
once, when the job is released; nil: none, flows below), batch (version
36: a batch's counts, {sealed, total, done, failed}: batches below; nil:
a job), body.
  record.attempt(j, outcome, started, ended, worker)
                          counts an attempt that ended without success
                          (j.error already says why): attempts + 1, and an
                          entry at the end of j's history, the oldest
                          dropped past HISTORY_MAX
  record.log_line(line, i)  a log line checked, cut to LOG_LINE_MAX bytes
  record.log(j, lines, attempt, now)
                          appends lines (log_line's) to j's log, the
                          oldest dropped past LOG_LINES_MAX lines or
                          LOG_BYTES_MAX bytes
  record.utf8(s)          whether s is UTF-8 (log lines, progress)
  record.progress_arg(v)  checks a progress value (progress, restore)
  record.log_arg(s)       restore's LOG, checked, as a log
  record.pack(j)          the record of a job (always format 2)
  record.plain(created, seq, due, later, body)
                          pack's common cases (every option at its
                          default), without a table per job
  record.unpack(rec)      the job; raises BADFORMAT for a record of a newer
                          format, OLDFORMAT for one of format 1 (library
                          version 8: redisched_migrate rewrites it)
  record.head(rec)        created, seq and where the body starts, for a
                          record of the commonest case (nothing stored
                          but those and the body); nil for any other
  record.readable(rec)    whether unpack reads it: every call checks the
                          records it will unpack before its first write
  record.refuse_older()   raises OLDFORMAT (a version 8 member met)
  For redisched_migrate alone:
  record.older(rec)       whether it is of format 1
  record.unpack_older(rec)  the job of a format 1 record (its seq known
                          mod 4096 only)
  record.legacy_before(a, b)  the order of two format 1 jobs due together
(A do-block: its locals are not the main chunk's, which Lua limits to 200.)]]
local record = {}
do
  -- Format 2: a flags byte (128 set), an optional second flags byte,
  -- created (6 bytes), the put sequence (7 bytes), the optional fields the
  -- flags name (in the order unpack reads them), then the body.
  local V2 = 128
  local F_PRIO, F_DUE, F_ATTEMPTS, F_ERROR, F_EXT, F_PLACE, F_UNKNOWN = 1, 2, 4, 8, 16, 32, 64
  local X_TTR, X_MAX, X_BACKOFF, X_FINISHED, X_KEEP, X_RESULT, X_LATER, X_MORE =
    1, 2, 4, 8, 16, 32, 64, 128
  -- The third flags byte (version 30), present when the second has X_MORE.
  -- Y_WIDE (version 37): the priority is below 0, stored as WIDE and then
  -- 8 bytes (signed); the flag only makes version 36 refuse the record.
  local Y_HISTORY, Y_PROGRESS, Y_LOG, Y_DEPS, Y_BATCH, Y_WIDE, Y_UNKNOWN = 1, 2, 4, 8, 16, 32, 192
  -- A stored priority below 0 (records and members): these 2 bytes, then 8.
  local WIDE = 65535
  record.WIDE = WIDE
  -- A dependency's failure policy and outcome (version 35, flows).
  local POLICY_CODES, POLICY_NAMES = { fail = 1, ignore = 2, drop = 3 }, { 'fail', 'ignore', 'drop' }
  local DEP_CODES = { pending = 0, done = 1, failed = 2, dropped = 3 }
  local DEP_NAMES = { [0] = 'pending', 'done', 'failed', 'dropped' }
  local OUTCOMES = { 'failed', 'lapsed' }
  local OUTCOME_CODES = { failed = 1, lapsed = 2 }
  local CUT = 128 -- an entry's outcome byte: its error was cut
  -- Format 1 (library version 8 and before), read by redisched_migrate
  -- alone, which rewrites it in format 2. Flags 1 priority, 2 due,
  -- 8 attempts, 16 error, 32 second byte (as format 2's); the stamp created
  -- * 4096 + put sequence mod 4096 in 7 bytes (its top 32 and low 24 bits);
  -- ttr, backoff base and cap in 4 bytes.
  local V1 = { PRIO = 1, DUE = 2, ATTEMPTS = 8, ERROR = 16, EXT = 32, UNKNOWN = 196, X_UNKNOWN = 240 }
  local TICKS = 4096
  local NEWER = 'BADFORMAT a stored job has a format this library version does not read'
  local OLDER = 'OLDFORMAT the topic holds jobs of library version 8\'s format: migrate it '
                .. 'first (redisched_migrate; docs/redis-api.md, "Migrations")'

  function record.readable(rec)
    local flags = rec:byte(1)
    if flags == V2 then return true end
    if band(flags, V2) == 0 or band(flags, F_UNKNOWN) ~= 0 then return false end
    return band(flags, F_EXT) == 0 or band(rec:byte(2), X_MORE) == 0 or band(rec:byte(3), Y_UNKNOWN) == 0
  end

  function record.older(rec) return band(rec:byte(1), V2) == 0 end

  function record.refuse_older() error({ bad = OLDER }) end

  function record.unpack_older(rec)
    local flags = rec:byte(1)
    if band(flags, V1.UNKNOWN) ~= 0 or band(flags, V1.EXT) ~= 0 and band(rec:byte(2), V1.X_UNKNOWN) ~= 0 then
      error({ bad = NEWER })
    end
    local pos = 2
    local ext = 0
    if band(flags, V1.EXT) ~= 0 then ext, pos = struct.unpack('>B', rec, pos) end
    local hi, lo
    hi, lo, pos = struct.unpack('>I4I3', rec, pos)
    local j = { priority = 0, created = hi * TICKS + math.floor(lo / TICKS), seq = lo % TICKS }
    if band(flags, V1.PRIO) ~= 0 then j.priority, pos = struct.unpack('>I2', rec, pos) end
    if band(flags, V1.DUE) ~= 0 then j.due, pos = struct.unpack('>I6', rec, pos) end
    if band(flags, V1.ATTEMPTS) ~= 0 then j.attempts, pos = struct.unpack('>I2', rec, pos) end
    if band(ext, X_TTR) ~= 0 then j.ttr, pos = struct.unpack('>I4', rec, pos) end
    if band(ext, X_MAX) ~= 0 then j.max_attempts, pos = struct.unpack('>I2', rec, pos) end
    if band(ext, X_BACKOFF) ~= 0 then
      local kind, base, cap
      kind, base, cap, pos = struct.unpack('>BI4I4', rec, pos)
      j.backoff = { kind, base, cap }
    end
    if band(ext, X_FINISHED) ~= 0 then j.finished, pos = struct.unpack('>I6', rec, pos) end
    if band(flags, V1.ERROR) ~= 0 then j.error, pos = struct.unpack('>I2c0', rec, pos) end
    j.due = j.due or j.created
    j.body = rec:sub(pos)
    return j
  end

  function record.unpack(rec)
    local flags = rec:byte(1)
    if flags == V2 then -- the common case: nothing but created and seq
      local created, seq, at = struct.unpack('>I6I7', rec, 2)
      return { priority = 0, created = created, seq = seq, due = created, body = rec:sub(at) }
    end
    if not record.readable(rec) then error({ bad = band(flags, V2) == 0 and OLDER or NEWER }) end
    local ext, more, pos = 0, 0, 2
    if band(flags, F_EXT) ~= 0 then ext, pos = struct.unpack('>B', rec, pos) end
    if band(ext, X_MORE) ~= 0 then more, pos = struct.unpack('>B', rec, pos) end
    local j = { priority = 0 }
    j.created, j.seq, pos = struct.unpack('>I6I7', rec, pos)
    if band(flags, F_PRIO) ~= 0 then
      j.priority, pos = struct.unpack('>I2', rec, pos)
      if j.priority == WIDE then j.priority, pos = struct.unpack('>i8', rec, pos) end
    end
    if band(flags, F_DUE) ~= 0 then j.due, pos = struct.unpack('>I6', rec, pos) end
    if band(flags, F_ATTEMPTS) ~= 0 then j.attempts, pos = struct.unpack('>I2', rec, pos) end
    if band(flags, F_PLACE) ~= 0 then j.place, pos = struct.unpack('>I7', rec, pos) end
    if band(ext, X_TTR) ~= 0 then j.ttr, pos = struct.unpack('>I4', rec, pos) end
    if band(ext, X_MAX) ~= 0 then j.max_attempts, pos = struct.unpack('>I2', rec, pos) end
    if band(ext, X_BACKOFF) ~= 0 then
      local kind, base, cap
      kind, base, cap, pos = struct.unpack('>BI6I6', rec, pos)
      j.backoff = { kind, base, cap }
    end
    if band(ext, X_FINISHED) ~= 0 then j.finished, pos = struct.unpack('>I6', rec, pos) end
    if band(ext, X_KEEP) ~= 0 then j.keep, pos = struct.unpack('>I6', rec, pos) end
    -- (c0: a string of the length read just before it, which is not returned.)
    if band(flags, F_ERROR) ~= 0 then j.error, pos = struct.unpack('>I2c0', rec, pos) end
    if band(ext, X_RESULT) ~= 0 then j.result, pos = struct.unpack('>I4c0', rec, pos) end
    if band(more, Y_HISTORY) ~= 0 then j.history, pos = record.read_history(rec, pos) end
    if band(more, Y_PROGRESS) ~= 0 then
      local p = {}
      p.attempt, p.at, p.value, pos = struct.unpack('>I2I6I2c0', rec, pos)
      j.progress = p
    end
    if band(more, Y_LOG) ~= 0 then j.log, pos = record.read_log(rec, pos) end
    if band(more, Y_DEPS) ~= 0 then
      local n
      n, pos = struct.unpack('>I2', rec, pos)
      local deps = {}
      for i = 1, n do
        local d, policy, outcome = {}, nil, nil
        policy, outcome, d.topic, d.id, d.value, pos = struct.unpack('>BBBc0I2c0I4c0', rec, pos)
        d.policy, d.outcome = POLICY_NAMES[policy], DEP_NAMES[outcome]
        deps[i] = d
      end
      j.deps = deps
    end
    if band(more, Y_BATCH) ~= 0 then
      local b, sealed = {}, nil
      sealed, b.total, b.done, b.failed, pos = struct.unpack('>BI4I4I4', rec, pos)
      b.sealed = sealed == 1
      j.batch = b
    end
    if band(ext, X_LATER) ~= 0 then j.later = true end
    j.due = j.due or j.created
    j.body = rec:sub(pos)
    return j
  end

  -- What unpack reads from a record of head's case besides created, seq,
  -- due (= created) and body: nothing but defaults. (Read only.)
  record.PLAIN = { priority = 0 }

  function record.head(rec)
    if rec:byte(1) ~= V2 then return nil end
    return struct.unpack('>I6I7', rec, 2)
  end

  function record.plain(created, seq, due, later, body)
    if later then
      return struct.pack('>BBI6I7I6', V2 + F_DUE + F_EXT, X_LATER, created, seq, due) .. body
    end
    if due == created then return struct.pack('>BI6I7', V2, created, seq) .. body end
    return struct.pack('>BI6I7I6', V2 + F_DUE, created, seq, due) .. body
  end

  function record.pack(j)
    local store_due = j.due ~= j.created
    local place = j.place ~= j.seq and j.place
    if j.priority == 0 and not j.attempts and not place and not j.ttr and not j.max_attempts
        and not j.backoff and not j.finished and not j.error and not j.keep and not j.result
        and not j.history and not j.progress and not j.log and not j.deps and not j.batch
        and (store_due or not j.later) then
      return record.plain(j.created, j.seq, j.due, j.later, j.body) -- the common cases, kept fast
    end
    local flags, ext, opt = V2, 0, {}
    local wide = j.priority < 0
    if wide then
      flags = flags + F_PRIO; opt[#opt + 1] = struct.pack('>I2i8', WIDE, j.priority)
    elseif j.priority ~= 0 then
      flags = flags + F_PRIO; opt[#opt + 1] = struct.pack('>I2', j.priority)
    end
    if store_due then flags = flags + F_DUE; opt[#opt + 1] = struct.pack('>I6', j.due) end
    if j.attempts and j.attempts > 0 then
      flags = flags + F_ATTEMPTS; opt[#opt + 1] = struct.pack('>I2', j.attempts)
    end
    if place then flags = flags + F_PLACE; opt[#opt + 1] = struct.pack('>I7', place) end
    if j.ttr then ext = ext + X_TTR; opt[#opt + 1] = struct.pack('>I4', j.ttr) end
    if j.max_attempts then ext = ext + X_MAX; opt[#opt + 1] = struct.pack('>I2', j.max_attempts) end
    if j.backoff then
      ext = ext + X_BACKOFF
      opt[#opt + 1] = struct.pack('>BI6I6', j.backoff[1], j.backoff[2], j.backoff[3])
    end
    if j.finished then ext = ext + X_FINISHED; opt[#opt + 1] = struct.pack('>I6', j.finished) end
    if j.keep then ext = ext + X_KEEP; opt[#opt + 1] = struct.pack('>I6', j.keep) end
    if j.error then flags = flags + F_ERROR; opt[#opt + 1] = struct.pack('>I2', #j.error) .. j.error end
    if j.result then ext = ext + X_RESULT; opt[#opt + 1] = struct.pack('>I4', #j.result) .. j.result end
    local more = 0
    if j.history then
      more = more + Y_HISTORY
      local h = j.history
      opt[#opt + 1] = struct.pack('>B', #h)
      for _, e in ipairs(h) do
        local code = OUTCOME_CODES[e.outcome] + (e.cut and CUT or 0)
        local w = e.worker or ''
        opt[#opt + 1] = struct.pack('>I2BI6I6B', e.attempt, code, e.started, e.ended, #w) .. w
                        .. struct.pack('>I2', #e.error) .. e.error
      end
    end
    local p = j.progress
    if p then
      more = more + Y_PROGRESS
      opt[#opt + 1] = struct.pack('>I2I6I2', p.attempt, p.at, #p.value) .. p.value
    end
    if j.log then
      more = more + Y_LOG
      local lines = j.log.lines
      opt[#opt + 1] = struct.pack('>I4I2', j.log.total, #lines)
      for _, l in ipairs(lines) do
        opt[#opt + 1] = struct.pack('>I6I2BI2', l.at, l.attempt, l.cut and 1 or 0, #l.text) .. l.text
      end
    end
    if j.deps then
      more = more + Y_DEPS
      local deps = j.deps
      opt[#opt + 1] = struct.pack('>I2', #deps)
      for _, d in ipairs(deps) do
        opt[#opt + 1] = struct.pack('>BBB', POLICY_CODES[d.policy], DEP_CODES[d.outcome], #d.topic) .. d.topic
                        .. struct.pack('>I2', #d.id) .. d.id .. struct.pack('>I4', #d.value) .. d.value
      end
    end
    if wide then more = more + Y_WIDE end
    local b = j.batch
    if b then
      more = more + Y_BATCH
      opt[#opt + 1] = struct.pack('>BI4I4I4', b.sealed and 1 or 0, b.total, b.done, b.failed)
    end
    if more ~= 0 then ext = ext + X_MORE end
    if j.later then ext = ext + X_LATER end
    local head
    if more ~= 0 then head = struct.pack('>BBBI6I7', flags + F_EXT, ext, more, j.created, j.seq)
    elseif ext ~= 0 then head = struct.pack('>BBI6I7', flags + F_EXT, ext, j.created, j.seq)
    else head = struct.pack('>BI6I7', flags, j.created, j.seq) end
    return head .. table.concat(opt) .. j.body
  end

  -- The history at pos of s (a record, or restore's HISTORY), and the
  -- position after it.
  function record.read_history(s, pos)
    local n
    n, pos = struct.unpack('>B', s, pos)
    local h = {}
    for i = 1, n do
      local e, code = {}, nil
      e.attempt, code, e.started, e.ended, e.worker, e.error, pos =
        struct.unpack('>I2BI6I6Bc0I2c0', s, pos)
      e.outcome, e.cut = OUTCOMES[band(code, CUT - 1)], band(code, CUT) ~= 0
      if e.worker == '' then e.worker = nil end
      h[i] = e
    end
    return h, pos
  end

  -- restore's HISTORY: a history laid out as a record holds it, checked
  -- whole before it is read (every length inside s, every field in range).
  function record.history_arg(s)
    local function no(why) bad('HISTORY ' .. why) end
    local n = s:byte(1)
    if not n or n < 1 or n > HISTORY_MAX then no('must hold 1..' .. HISTORY_MAX .. ' entries') end
    local pos = 2
    for i = 1, n do
      if #s < pos + 15 then no('entry ' .. i .. ' is cut short') end
      local attempt, code, started, ended, wn = struct.unpack('>I2BI6I6B', s, pos)
      if attempt < 1 or attempt > ATTEMPTS_MAX then no('entry ' .. i .. ': attempt must be 1..' .. ATTEMPTS_MAX) end
      if not OUTCOMES[band(code, CUT - 1)] then no('entry ' .. i .. ': unknown outcome ' .. code) end
      if started > ended or ended > MS_MAX then no('entry ' .. i .. ': times out of order or range') end
      local worker = s:sub(pos + 16, pos + 15 + wn)
      if wn > WORKER_ID_MAX or worker:find('%c') then no('entry ' .. i .. ': bad worker ' .. show(worker)) end
      pos = pos + 16 + wn
      if #s < pos + 1 then no('entry ' .. i .. ' is cut short') end
      local en = struct.unpack('>I2', s, pos)
      if en > HISTORY_ERROR_MAX then no('entry ' .. i .. ': error over ' .. HISTORY_ERROR_MAX .. ' bytes') end
      pos = pos + 2 + en
      if #s < pos - 1 then no('entry ' .. i .. ' is cut short') end
    end
    if pos ~= #s + 1 then no('has ' .. (#s + 1 - pos) .. ' bytes after its last entry') end
    return (record.read_history(s, 1))
  end

  -- The log at pos of s (a record, or restore's LOG), and the position
  -- after it.
  function record.read_log(s, pos)
    local total, n
    total, n, pos = struct.unpack('>I4I2', s, pos)
    local lines = {}
    for i = 1, n do
      local l, cut = {}, nil
      l.at, l.attempt, cut, l.text, pos = struct.unpack('>I6I2BI2c0', s, pos)
      l.cut = cut == 1
      lines[i] = l
    end
    return { total = total, lines = lines }, pos
  end

  -- Well-formed UTF-8 (no overlong forms, surrogates, or code points past
  -- U+10FFFF): each well-formed sequence becomes one ASCII byte (gsub runs
  -- in C, where a loop over the bytes in Lua took milliseconds for a report
  -- of 100 lines), and no byte above 127 may be left. (ASCII: no sequence
  -- can be joined from the bytes around one replaced.)
  local UTF8_FORMS = {
    '[\194-\223][\128-\191]',
    '\224[\160-\191][\128-\191]', '[\225-\236\238\239][\128-\191][\128-\191]',
    '\237[\128-\159][\128-\191]',
    '\240[\144-\191][\128-\191][\128-\191]', '[\241-\243][\128-\191][\128-\191][\128-\191]',
    '\244[\128-\143][\128-\191][\128-\191]',
  }
  function record.utf8(s)
    if not s:find('[\128-\255]') then return true end
    for _, form in ipairs(UTF8_FORMS) do s = s:gsub(form, '.') end
    return not s:find('[\128-\255]')
  end

  function record.progress_arg(v)
    if #v == 0 or #v > PROGRESS_MAX then bad('PROGRESS must be 1..' .. PROGRESS_MAX .. ' bytes') end
    if not record.utf8(v) or not pcall(cjson.decode, v) then
      bad('PROGRESS must be a JSON value (a number, or a small object), got ' .. show(v))
    end
  end

  -- restore's LOG: a log laid out as a record holds it, checked whole
  -- before it is read.
  function record.log_arg(s)
    local function no(why) bad('LOG ' .. why) end
    if #s < 6 then no('is cut short') end
    local total, n = struct.unpack('>I4I2', s, 1)
    if n < 1 or n > LOG_LINES_MAX or n > total then
      no('must hold 1..' .. LOG_LINES_MAX .. ' lines, and no more than its total')
    end
    local pos, bytes = 7, 0
    for i = 1, n do
      if #s < pos + 10 then no('line ' .. i .. ' is cut short') end
      local at, attempt, cut, len = struct.unpack('>I6I2BI2', s, pos)
      if at > MS_MAX or attempt < 1 or attempt > ATTEMPTS_MAX or cut > 1 then
        no('line ' .. i .. ': a field out of range')
      end
      if len > LOG_LINE_MAX then no('line ' .. i .. ': over ' .. LOG_LINE_MAX .. ' bytes') end
      pos = pos + 11
      if #s < pos + len - 1 then no('line ' .. i .. ' is cut short') end
      if not record.utf8(s:sub(pos, pos + len - 1)) then no('line ' .. i .. ' is not UTF-8') end
      pos, bytes = pos + len, bytes + len
    end
    if bytes > LOG_BYTES_MAX then no('holds over ' .. LOG_BYTES_MAX .. ' bytes of lines') end
    if pos ~= #s + 1 then no('has ' .. (#s + 1 - pos) .. ' bytes after its last line') end
    return (record.read_log(s, 1))
  end

  -- The first n bytes of s (#s > n), less a UTF-8 character they would cut
  -- in two (a text stays text; bytes that are no UTF-8 are cut at n).
  local function utf8_prefix(s, n)
    local i = n
    while i > n - 3 and band(s:byte(i), 192) == 128 do i = i - 1 end -- (back to a lead byte)
    local lead = s:byte(i)
    local len = lead >= 240 and 4 or lead >= 224 and 3 or lead >= 192 and 2 or 1
    if len > 1 and i + len - 1 > n then return s:sub(1, i - 1) end
    return s:sub(1, n)
  end

  function record.attempt(j, outcome, started, ended, worker)
    local n = (j.attempts or 0) + 1
    j.attempts = n
    local err, cut = j.error, false
    if #err > HISTORY_ERROR_MAX then err, cut = utf8_prefix(err, HISTORY_ERROR_MAX), true end
    local h = j.history or {}
    if #h >= HISTORY_MAX then table.remove(h, 1) end
    -- (an attempt's number fits its 2 bytes: attempts stop at ATTEMPTS_MAX,
    -- and kick starts them again from 0. started is no later than ended: a
    -- failover to a node whose clock is behind the reserve's could make it.)
    h[#h + 1] = { attempt = n, outcome = outcome, started = math.min(started or ended, ended),
                  ended = ended, worker = worker, error = err, cut = cut }
    j.history = h
  end

  -- A log line as the log keeps it: its text (cut to LOG_LINE_MAX bytes
  -- first, so a long line costs no more to check) and whether it was cut;
  -- raises for a line that is not UTF-8.
  function record.log_line(line, i)
    local cut = #line > LOG_LINE_MAX
    if cut then line = utf8_prefix(line, LOG_LINE_MAX) end
    if not record.utf8(line) then bad('log line ' .. i .. ' is not UTF-8') end
    return { text = line, cut = cut }
  end

  function record.log(j, lines, attempt, now)
    local log = j.log or { total = 0, lines = {} }
    local kept, bytes = log.lines, 0
    for _, l in ipairs(kept) do bytes = bytes + #l.text end
    for _, l in ipairs(lines) do
      kept[#kept + 1] = { at = now, attempt = attempt, text = l.text, cut = l.cut }
      bytes = bytes + #l.text
    end
    log.total = math.min(log.total + #lines, 4294967295)
    local drop = 0
    while #kept - drop > LOG_LINES_MAX or bytes > LOG_BYTES_MAX do
      drop = drop + 1
      bytes = bytes - #kept[drop].text
    end
    if drop > 0 then log.lines = { unpack(kept, drop + 1) } end
    j.log = log
  end

  -- Version 8 ordered jobs due together by created, then put sequence mod
  -- 4096 (a sequence 2048 or more ahead having wrapped).
  function record.legacy_before(a, b)
    if a.created ~= b.created then return a.created < b.created end
    return a.seq ~= b.seq and (b.seq - a.seq) % TICKS < TICKS / 2
  end
end

-- A job's member in delayed and ready: put sequence, priority, id. The
-- priority takes 2 bytes when it is 0..PRIO_MAX (every version); below 0
-- (version 37) the 2 bytes are WIDE and 8 bytes follow, signed.
local function member(j, id)
  if j.priority >= 0 then return struct.pack('>I7I2', j.seq, j.priority) .. id end
  return struct.pack('>I7I2i8', j.seq, record.WIDE, j.priority) .. id
end

-- The priority's bytes in a member from byte at (as a key: equal
-- priorities, equal bytes), and the position after them.
function record.member_prio_bytes(m, at)
  if m:byte(at) == 255 and m:byte(at + 1) == 255 then return m:sub(at, at + 9), at + 10 end
  return m:sub(at, at + 1), at + 2
end

-- The id in a member of delayed or ready. A member starts with a control
-- character, as no id does; one that does not is version 8's, the id
-- alone: refused (OLDFORMAT) until the topic is migrated.
local function member_id(m)
  if m:byte(1) >= 32 then record.refuse_older() end
  local _, after = record.member_prio_bytes(m, 8)
  return m:sub(after)
end

-- Numbers go to redis.call as they are: Redis converts them with 17 digits,
-- exact below 2^53.
local function ready_score(prio, due)
  return (PRIO_MAX - prio) * TIME_SPAN + due
end

-- Takes n numbers from the topic's counter; returns the first. Put order,
-- generated ids and tokens come from it; it never wraps: a call that would
-- pass SEQ_MAX is refused (its increment undone, so nothing changes).
-- Raises SHARDED when the topic is spread over shards (redisched_shard):
-- "SHARDED <suffix> ..." (its shards are the topics T~<suffix>), or
-- "SHARDED *" for a former shard (ask the topic it belonged to).
local function sharded(k)
  local s = redis.call('HGET', k.meta, 'shards')
  if s then error({ bad = 'SHARDED ' .. s }) end
end

-- The topic's counter, read: refused when it cannot give n more numbers
-- (a call that takes numbers after its first write asks here before it).
local function seq_room(k, n)
  local cur = tonumber(redis.call('HGET', k.meta, 'seq') or 0)
  if cur + n > SEQ_MAX then
    sharded(k) -- a spread topic parks its counter there: its jobs go to its shards
    error({ bad = 'BADSTATE the topic\'s counter is used up (' .. fmt(SEQ_MAX) .. ')' })
  end
  return cur
end

-- The topic's next n put sequences (the first returned), refused before
-- anything is written when the counter cannot give them.
local function take_seq(k, n)
  local cur = seq_room(k, n)
  redis.call('HINCRBY', k.meta, 'seq', n)
  return cur + 1
end

-- A job that moves back to delayed or ready takes a new place (its next
-- token).
local function renew(j, seq)
  j.place = seq
end

local function max_attempts(j) return j.max_attempts or DEFAULT_ATTEMPTS end

local function backoff_delay(j)
  local b = j.backoff or DEFAULT_BACKOFF
  if b[1] == BACKOFF_KINDS.fixed then return b[2] end
  local d = b[2] * 2 ^ math.max((j.attempts or 1) - 1, 0)
  if d > b[3] then d = b[3] end
  return d
end

-- Records read and checked before a call's first write: {ids = ids, recs
-- = their records, in order (false: none)}. Raises BADFORMAT when this
-- version does not read one of them for its newer format, OLDFORMAT for
-- version 8's. (An id may come twice.)
local known = {}

function known.read(k, ids)
  local recs = #ids > 0 and redis.call('HMGET', k.jobs, unpack(ids)) or {}
  for i = 1, #ids do
    local rec = recs[i]
    if rec and not record.readable(rec) then
      if record.older(rec) then record.refuse_older() end
      error({ bad = 'BADFORMAT the stored job ' .. show(ids[i]) .. ' has a format this library version does not read' })
    end
  end
  return { ids = ids, recs = recs }
end

-- id -> record of what was read, made on first need; the call updates it
-- as it rewrites records (nil: not read, or rewritten since).
function known.map(kn)
  local map = kn.map
  if not map then
    map = {}
    for i, id in ipairs(kn.ids) do map[id] = kn.recs[i] end
    kn.map = map
  end
  return map
end

-- The records of ids, in order: those read (kn), as read when ids are
-- the ids read in their order (the common case: no table by id is made),
-- else by id; the rest (rewritten by the call, by this version, so
-- readable) read now.
function known.records(k, kn, ids)
  if not kn.map then -- the common case: all in the order read
    local i = 1
    while ids[i] and kn.ids[i] == ids[i] do i = i + 1 end
    if not ids[i] then return kn.recs end
  end
  local map = known.map(kn)
  local recs, missing = {}, nil
  for i, id in ipairs(ids) do
    local rec = map[id]
    recs[i] = rec
    if rec == nil then
      missing = missing or {}
      missing[#missing + 1] = i
    end
  end
  if missing then
    local mids = {}
    for n, i in ipairs(missing) do mids[n] = ids[i] end
    local got = redis.call('HMGET', k.jobs, unpack(mids))
    for n, i in ipairs(missing) do recs[i] = got[n] end
  end
  return recs
end

---------------------------------------------------------------- moves

-- The earliest due time this call made ready or scheduled; api() publishes
-- it once the call succeeds. (Calls run one at a time: api() resets it.)
local wake_at = nil
local function wake(at)
  if not wake_at or at < wake_at then wake_at = at end
end

-- The sweep signal (version 29): {channel, message} when this call gave
-- the topic a reservation that lapses before every other it holds, or a
-- schedule; api() publishes it (PUBLISH, not SPUBLISH: a sweeper cannot
-- know every topic's channel, so it listens on one for all, P:sweep).
local sweep_notice = nil

-- The jobs this call finished (acked with KEEP or RESULT, dead, or deleted): api()
-- publishes their ids, one message per call, on P:{T}:done for waiters.
local finished_ids = {}
local function finished(id)
  finished_ids[#finished_ids + 1] = id
end

--[[ The retry window (version 20). A producer whose put got no answer (a
timeout, a failover) retries it; by then the job may have run and been
acked, its record gone, and the retry would make it again. So the ids of
jobs finished without a record (acked without KEEP, or taken for good by
pull or a TTR 0 reserve) stay in P:{T}:gone until their window ends, and a
put in create mode (no REPLACE, UPSERT or DEBOUNCE) of such an id answers -1,
as if the job were still there. The window is the topic's retry_window
(meta, ms; redisched_retrywindow sets it), RETRY_WINDOW_DEFAULT if unset, 0
for none. A job acked with KEEP is refused for its KEEP instead (its record
stays). Each finishing call drops the ids whose window has ended.]]
local RETRY_WINDOW_DEFAULT = 60000
local gone = {}

function gone.window(k)
  local w = redis.call('HGET', k.meta, 'retry_window')
  if w then return tonumber(w) end
  return RETRY_WINDOW_DEFAULT
end

-- What remember needs, read before the call's first write (reading the
-- clock may fail): the window, and the time when there is one.
function gone.prepare(k, o)
  local w = gone.window(k)
  return w, w > 0 and clock(o) or nil
end

-- Remembers ids finished at now, for window w (gone.prepare's).
function gone.remember(k, ids, w, now)
  if w == 0 then return end
  local zadd, until_ = {}, fmt(now + w)
  for i, id in ipairs(ids) do zadd[2 * i - 1], zadd[2 * i] = until_, id end
  redis.call('ZREMRANGEBYSCORE', k.gone, '-inf', now)
  redis.call('ZADD', k.gone, unpack(zadd))
end

-- Whether a create of id is refused now by its window.
function gone.holds(k, id, now)
  local s = redis.call('ZSCORE', k.gone, id)
  return s and tonumber(s) > now
end

--[[ The topic's history (version 34), in the optional twelfth key P:{T}:history
(a hash): per minute for a day, per hour for 30 days, and in total since it
began, how many jobs were put, started, done, failed, died and lapsed, and
the wait of the jobs started (ms from due to start, summed). Only a call
that names the key counts: one that passes 11 or 8 keys counts nothing.
Its fields:
  <kind><minute>  the live minute's counts, one HINCRBY per kind a call
                  counts (kind: a letter of KINDS; minute: ms / 60000)
  at              the live minute
  m<hour>         the minutes of an hour: 60 slots of SLOT (hour: ms / 3600000)
  h<day>          the hours of a day: 24 slots of SLOT (day: ms / 86400000)
  all             the totals, one slot of ALL
A call adds its counts to its topic's entry in the library's memory,
written about once a second (pending, flush, below). The first write of a
later minute (its HINCRBY answers its own increment: a new field) folds the
live minute into m, h and all; the first of a later hour also drops the m
fields older than a day and the h fields older than 30 days. The counts
are a record of what the calls did, not of the jobs: a write that fails
(the key holds another type) is skipped, and the call stands. ]]
local history = {}
do
  local KINDS = { 'p', 's', 'd', 'f', 'x', 'l', 'w' } -- put started done failed dead lapsed wait
  local SLOT = '<I4I4I4I4I4I4d'   -- a minute's or an hour's counts, and the wait (ms)
  local OPT_HISTORY = { SPREAD = 0, NOW = 1 }  -- (redisched_history's)
  local SLOT_SIZE = 32
  local ALL = '<ddddddd'
  local MINUTES_KEPT, DAYS_KEPT = 24 * 60, 30

  -- counts {n, ...} (in KINDS order) added to slot i (0-based) of a packed
  -- field v of slots slots (missing or short: zeros).
  local function add_slot(v, slots, i, counts)
    v = v or ''
    if #v < slots * SLOT_SIZE then v = v .. string.rep('\0', slots * SLOT_SIZE - #v) end
    local at = i * SLOT_SIZE
    local c = { struct.unpack(SLOT, v, at + 1) }
    for j = 1, 7 do c[j] = c[j] + counts[j] end
    return v:sub(1, at) .. struct.pack(SLOT, unpack(c, 1, 7)) .. v:sub(at + SLOT_SIZE + 1)
  end

  function history.live(key, minute)
    local f = {}
    for j, kind in ipairs(KINDS) do f[j] = kind .. fmt(minute) end
    local v = redis.call('HMGET', key, unpack(f))
    local c = {}
    for j = 1, 7 do c[j] = tonumber(v[j] or 0) end
    return c, f
  end

  -- Folds the live fields of minute into m, h and all, and deletes them.
  local function fold(key, minute)
    local c, f = history.live(key, minute)
    local hour, day = math.floor(minute / 60), math.floor(minute / 1440)
    local mf, hf = 'm' .. fmt(hour), 'h' .. fmt(day)
    local v = redis.call('HMGET', key, mf, hf, 'all')
    local all = v[3] and { struct.unpack(ALL, v[3]) } or { 0, 0, 0, 0, 0, 0, 0 }
    for j = 1, 7 do all[j] = all[j] + c[j] end
    redis.call('HSET', key, mf, add_slot(v[1], 60, minute % 60, c),
               hf, add_slot(v[2], 24, hour % 24, c), 'all', struct.pack(ALL, unpack(all, 1, 7)))
    redis.call('HDEL', key, unpack(f))
  end

  -- Drops the m fields older than a day and the h older than 30 days:
  -- it keeps 25 m and 31 h, since a read of the last 1441 minutes or 745
  -- hours starts inside the oldest.
  local function trim(key, minute)
    local hour, day = math.floor(minute / 60), math.floor(minute / 1440)
    local old = {}
    for _, f in ipairs(redis.call('HKEYS', key)) do
      local kind, n = f:sub(1, 1), tonumber(f:sub(2))
      if n and ((kind == 'm' and n < hour - MINUTES_KEPT / 60)
                or (kind == 'h' and n < day - DAYS_KEPT)) then
        old[#old + 1] = f
      end
    end
    if #old > 0 then redis.call('HDEL', key, unpack(old)) end
  end

  -- A new minute's first count (of this kind) came: fold the live minute
  -- if it is older; fold this one at once if it is the older (a call that
  -- names an earlier NOW).
  local function roll(key, minute)
    local at = tonumber(redis.call('HGET', key, 'at'))
    if at == minute then return end
    if not at or at < minute then
      if at then fold(key, at) end
      redis.call('HSET', key, 'at', minute)
      if not at or math.floor(at / 60) < math.floor(minute / 60) then trim(key, minute) end
    else
      fold(key, minute)
    end
  end

  -- Counts not written yet, by history key: {minute, since, n...} (n in
  -- KINDS order). A call adds its counts to its topic's entry, and writes
  -- them (flush) when the entry holds another minute's, or its first
  -- count is a second old: a busy topic's calls write their history about
  -- once a second, not each call (a call's own cost is a few table
  -- updates). Reads add the entry. It lives in the library's Lua state,
  -- which neither persistence nor replication keeps: a restart or
  -- failover of Redis, or a FUNCTION LOAD, loses it (the counts of a
  -- topic's last second before it went idle, at most).
  local pending = {}
  local SLOT_OF = { p = 1, s = 2, d = 3, f = 4, x = 5, l = 6, w = 7 }
  local FLUSH_MS = 1000

  local function flush(key, e)
    local m, new = fmt(e.minute), false
    for j, kind in ipairs(KINDS) do
      local n = e[j]
      if n > 0 then
        local ok, v = pcall(redis.call, 'HINCRBY', key, kind .. m, n)
        if ok and v == n then new = true end
      end
    end
    if new then pcall(roll, key, e.minute) end
  end

  -- Adds n of kind (a letter of KINDS; 'w': ms of wait) to now's minute,
  -- and n2 of kind2, n3 of kind3 when given. After the call's last write;
  -- no write of it can fail the call (one that fails, say the key holds
  -- another type, is skipped).
  function history.count(k, now, kind, n, kind2, n2, kind3, n3)
    local key = k.history
    if not key then return end
    local minute = math.floor(now / 60000)
    local e = pending[key]
    if e and e.minute ~= minute then
      flush(key, e)
      e = nil
    end
    if not e then
      e = { 0, 0, 0, 0, 0, 0, 0, minute = minute, since = now }
      pending[key] = e
    end
    local j = SLOT_OF[kind]
    e[j] = e[j] + n
    if kind2 then j = SLOT_OF[kind2]; e[j] = e[j] + n2 end
    if kind3 then j = SLOT_OF[kind3]; e[j] = e[j] + n3 end
    if now - e.since >= FLUSH_MS or now < e.since then
      flush(key, e)
      pending[key] = nil
    end
  end

  -- What is not folded yet: {{minute, counts}...}, the live minute's
  -- fields and the counts not written (pending), in KINDS order.
  local function unfolded(key)
    local out = {}
    local at = tonumber(redis.call('HGET', key, 'at'))
    if at then out[1] = { at, history.live(key, at) } end
    local e = pending[key]
    if e then out[#out + 1] = { e.minute, e } end
    return out
  end

  -- Every count since the history began: all and what is not folded
  -- (unfolded's, or read here).
  function history.totals(key, live)
    local all = redis.call('HGET', key, 'all')
    local row = all and { struct.unpack(ALL, all) } or { 0, 0, 0, 0, 0, 0, 0 }
    for _, u in ipairs(live or unfolded(key)) do
      for j = 1, 7 do row[j] = row[j] + u[2][j] end
    end
    return row
  end

  -- Counts reserve's or pull's jobs out[4..] (due: the index of a job's
  -- due time) as started, their wait, and done of them taken for good.
  function history.started(k, out, due, done)
    local now, wait = out[1], 0
    for i = 4, #out do
      local w = now - out[i][due]
      if w > 0 then wait = wait + w end
    end
    history.count(k, now, 's', #out - 3, 'w', wait, 'd', done)
  end

  -- The rows of a read: {t, put, started, done, failed, dead, lapsed, wait}
  -- for each of n units (of size minutes, from unit first) that counted
  -- anything: slots of the packed fields (packed[g], per slots each), plus
  -- what is not folded (unfolded's) in its unit.
  local function rows(out, first, n, size, packed, per, live)
    local last = first + n - 1
    -- (group by group: one without a packed field or an unfolded unit
    -- counted nothing, and is skipped whole)
    for g = math.floor(first / per), math.floor(last / per) do
      local f = packed[g]
      local lo, hi = math.max(first, g * per), math.min(last, g * per + per - 1)
      local here = {}
      for _, l in ipairs(live) do
        local u = math.floor(l[1] / size)
        if u >= lo and u <= hi then here[#here + 1] = { u, l[2] } end
      end
      if f or #here > 0 then
        for u = lo, hi do
          local row = { 0, 0, 0, 0, 0, 0, 0 }
          if f and #f >= ((u % per) + 1) * SLOT_SIZE then
            row = { struct.unpack(SLOT, f, (u % per) * SLOT_SIZE + 1) }
          end
          for _, l in ipairs(here) do
            if l[1] == u then
              for j = 1, 7 do row[j] = row[j] + l[2][j] end
            end
          end
          local any = false
          for j = 1, 7 do if row[j] ~= 0 then any = true end end
          if any then out[#out + 1] = { u * size * 60000, unpack(row, 1, 7) } end
        end
      end
    end
  end

--[[ redisched_history: the topic's history (read-only; version 34). Needs
the twelfth key, P:{T}:history.
ARGV: minute from to | hour from to | total   [SPREAD] [NOW ms]
  from, to: times (ms), both included: the minutes (at most 1441) or the
  hours (at most 745) that hold them and lie between.
  A spread topic's calls count in its shards' histories; it keeps what it
  counted before it was spread. Without SPREAD it answers SHARDED, as its
  job calls do, so that a caller that did not know reads its shards; with
  SPREAD (a caller that reads the shards too), its own. A former shard
  answers "SHARDED *" either way.
Output: {now, row...}: row {t, put, started, done, failed, dead, lapsed,
  wait} for each minute or hour from t (ms) that counted anything, in time
  order (wait: ms from due to start, summed over the jobs started); total:
  one row, t 0, of every count since the history began.
]]
  function history.read(keys, args)
    local k = check_keys(keys)
    local key = k.history
    if not key then
      error({ bad = 'BADKEYS redisched_history needs the topic\'s 12th key (' ..
                    k.base .. ':history), got ' .. k.n .. ' keys' })
    end
    local what = (args[1] or ''):lower()
    if what ~= 'minute' and what ~= 'hour' and what ~= 'total' then
      bad('expected minute, hour or total, got ' .. show(args[1]))
    end
    local last = what == 'total' and 1 or 3
    local from, to
    if what ~= 'total' then
      from, to = int_arg(args[2], 'from', 0, MS_MAX), int_arg(args[3], 'to', 0, MS_MAX)
      if to < from then bad('to must not be before from') end
    end
    local size = what == 'minute' and 1 or 60
    local per = what == 'minute' and 60 or 24
    local first, final
    if from then
      first, final = math.floor(from / 60000 / size), math.floor(to / 60000 / size)
      local max = what == 'minute' and MINUTES_KEPT or DAYS_KEPT * 24 + 24
      if final - first >= max + 1 then
        bad(what .. 's from ' .. fmt(from) .. ' to ' .. fmt(to) .. ' are more than ' .. (max + 1))
      end
    end
    local o = options(args, last + 1, #args, OPT_HISTORY)
    local spread = redis.call('HGET', k.meta, 'shards')
    if spread and (spread == '*' or not o.SPREAD) then error({ bad = 'SHARDED ' .. spread }) end
    local now = clock(o)
    local live = unfolded(key)
    local out = { now }
    if what == 'total' then
      out[2] = { 0, unpack(history.totals(key, live), 1, 7) }
      return out
    end
    local names, packed = {}, {}
    for g = math.floor(first / per), math.floor(final / per) do
      names[#names + 1] = (what == 'minute' and 'm' or 'h') .. fmt(g)
    end
    local v = redis.call('HMGET', key, unpack(names))
    for i, name in ipairs(names) do packed[tonumber(name:sub(2))] = v[i] end
    rows(out, first, final - first + 1, size, packed, per, live)
    return out
  end
end

-- Reservations. The reserved set's member is id NUL token (ids hold no
-- control characters), so ack, release, fail and touch find and check a
-- reservation in one step; the leases hash says by id which one is current.
local function lease_member(id, token)
  if type(token) == 'number' then token = fmt(token) end -- (or its text already)
  return id .. '\0' .. token
end

local function reserved_id(m)
  return m:sub(1, m:find('\0', 1, true) - 1)
end

-- "token:reserved_at:ttr[:worker]" -> token, reserved_at, ttr (numbers;
-- leases written by version 8 may hold a time as "1e+14"), worker (the
-- reserve's WORKER, version 30; nil: none named).
local function parse_lease(v)
  local token, at, ttr, worker = v:match('^([^:]+):([^:]+):([^:]+):?(.*)$')
  return tonumber(token), tonumber(at), tonumber(ttr), worker ~= '' and worker or nil
end

-- A lease is "token:reserved_at:ttr[:worker]": the token's text
-- (lease_member's), then this tail, which reserve makes once per call and
-- time-to-run.
local function lease_tail(now, ttr, worker)
  if worker then return ':' .. fmt(now) .. ':' .. fmt(ttr) .. ':' .. worker end
  return ':' .. fmt(now) .. ':' .. fmt(ttr)
end

-- Why id is not reserved under a given token: stale (reserved under
-- another), wrong state (not reserved), or missing.
local function not_held(k, id)
  if redis.call('HEXISTS', k.leases, id) == 1 then return STALE end
  if redis.call('HEXISTS', k.jobs, id) == 1 then return WRONG_STATE end
  sharded(k) -- (no such job: maybe the topic is spread)
  return MISSING
end

local function end_lease(k, id, lm)
  redis.call('ZREM', k.reserved, lm)
  redis.call('HDEL', k.leases, id)
end

-- Reads of the reserved set that leave its pin (at +inf) out.
local reservations = {}

-- How many reservations the topic holds.
function reservations.count(k)
  return redis.call('ZCOUNT', k.reserved, '-inf', '(+inf')
end

-- The earliest deadline, or -1 when none.
function reservations.earliest(k)
  local first = redis.call('ZRANGE', k.reserved, 0, 0, 'WITHSCORES')
  local t = first[2] and tonumber(first[2])
  if not t or t == math.huge then return -1 end
  return t
end

-- A reservation lapsing at deadline is about to go in: when it lapses
-- before every one the topic holds, the sweep signal says so.
function reservations.announce(k, deadline)
  local e = reservations.earliest(k)
  if e < 0 or deadline < e then
    sweep_notice = { k.sweep, 'lapse ' .. k.tag .. ' ' .. fmt(deadline) }
  end
end

-- The earliest deadline after now, or -1.
function reservations.first_after(k, now)
  local first = redis.call('ZRANGEBYSCORE', k.reserved, '(' .. fmt(now), '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  return first[2] and tonumber(first[2]) or -1
end

--[[ The waiting jobs: the storage module. Each lane, ready and delayed, is
a sorted set beside a list (the ready list, version 17, and the delayed
list, version 18: both below), merged in one order; the ready set also
holds marks (at -inf, first) and a pin (at +inf, last), which no count,
page or take includes. The calls ask here, never of those keys:
  place.begin, add, job, write, one   the push: jobs come to wait in delayed
                          or ready (Placement, below)
  waiting.lane(k, name)   a lane read now ('ready' or 'delayed'): its jobs
                          in the set and in the list, its marks
  waiting.size(lane)      how many jobs it holds
  waiting.due(k, now), waiting.next_due(k, now, due_in_list)   due delayed
                          jobs: how many, and the next due time after now
  waiting.page(lane, offset, count[, plan])   jobs by rank, in order
  waiting.in_set, in_list, remove   where a job waits, and out of there
  waiting.is_mark, mark, unmark, marked, marks   the marks: pause, limits,
                          a spread topic
  waiting.promotion(k, now), waiting.promote(k, plan)   due delayed jobs to
                          make ready: read, then made
  waiting.front(k, now, count)   what a take (reserve, pull) finds, read
                          only; waiting.take(k, f) makes its common case
  waiting.candidates(k, f, count, age), waiting.pop(k, f, n, age)   the
                          other cases: whose records to read, then the pop
  waiting.flush(k)        the ready list moved into the set (aging)
(A do-block: its helpers, unpinned, ready_list, delayed_list and their
locals, are its own.)]]
local waiting, place = {}, {}
do
  -- Reads of the ready set that leave its pin (at +inf) out.
  local unpinned = {}

  -- How many jobs the ready set holds (but its marks, at -inf, and its pin).
  function unpinned.ready_count(k)
    return redis.call('ZCOUNT', k.ready, '(-inf', '(+inf')
  end

  -- ZRANGE of ready (or delayed, which holds no pin) by rank, less the pin
  -- (which can only come last).
  function unpinned.range(set, from, to, withscores)
    local got = withscores and redis.call('ZRANGE', set, from, to, 'WITHSCORES')
      or redis.call('ZRANGE', set, from, to)
    local step = withscores and 2 or 1
    if got[#got - step + 1] == PIN.member then
      for _ = 1, step do got[#got] = nil end
    end
    return got
  end

  local ready_list, delayed_list = {}, {}

  -- The ready list (version 17), P:{T}:queue: jobs put ready in the order
  -- they will be handed out, each appended only when it sorts after the
  -- list's last entry, so the list is always in order; every other ready job
  -- is in the ready set, and reserve takes from the fronts of both, merged.
  -- A list entry costs about 100 bytes less than a sorted set's (no skiplist
  -- node, no dict entry) and an RPUSH less than a ZADD. An entry is the due
  -- time (6 bytes) and then the job's member; a job is in the list when its
  -- record is in no set and holds no lease (locate). Delete and update take
  -- the entry out with LREM (a scan from the nearer end).

  function ready_list.entry(j, id)
    return struct.pack('>I6', j.due) .. member(j, id)
  end

  -- An entry's order: its ready score, then its put sequence.
  function ready_list.key(e)
    local due, seq, prio, at = struct.unpack('>I6I7I2', e)
    if prio == record.WIDE then prio = struct.unpack('>i8', e, at) end
    return ready_score(prio, due), seq
  end

  -- Whether (score s, sequence q) sorts after (s2, q2).
  function ready_list.after(s, q, s2, q2)
    return s > s2 or (s == s2 and q > q2)
  end

  -- The least ready score a job put now may have to go to the list's end:
  -- its last entry's (a new job's put sequence is above every entry's);
  -- -inf on an empty list when the ready set holds no job and no mark (a
  -- topic with marks or jobs out of order starts no list); nil when none
  -- may. A put reads it before its first write: in Redis Cluster a key the
  -- call does not name can be elsewhere while its slot migrates, and a
  -- failed read must leave nothing written.
  function ready_list.append_floor(k)
    local tail = redis.call('LINDEX', k.queue, -1)
    if tail then return ready_list.key(tail) end
    if redis.call('ZCOUNT', k.ready, '-inf', '(+inf') == 0 then return -math.huge, -1 end
    return nil
  end

  -- The order of a ready set member and its score (a version 8 member, the
  -- id alone, is refused: OLDFORMAT).
  function ready_list.zkey(m, score)
    if m:byte(1) >= 32 then record.refuse_older() end
    return tonumber(score), (struct.unpack('>I7', m))
  end

  -- Up to n jobs from the front of a sorted set (zs: {member, score, ...},
  -- in order) and its list's entries (in order; key: ready_list.key for the ready
  -- list, delayed_list.key for the delayed one), merged: {member, score, ...} and
  -- how many came from each.
  function ready_list.merge(zs, entries, n, key)
    local out, a, b = {}, 0, 0
    local es, eq -- the order of entries[b + 1], decoded once
    while a + b < n do
      local zm, e = zs[2 * a + 1], entries[b + 1]
      if not zm and not e then break end
      if e and not es then es, eq = key(e) end
      local from_list = not zm
      if zm and e then
        local s, q = ready_list.zkey(zm, zs[2 * a + 2])
        from_list = ready_list.after(s, q, es, eq)
      end
      if from_list then
        b = b + 1
        out[#out + 1], out[#out + 2] = e:sub(7), es
        es = nil
      else
        a = a + 1
        out[#out + 1], out[#out + 2] = zm, zs[2 * a]
      end
    end
    return out, a, b
  end

  -- Pops up to n ready jobs from the fronts of the ready set (its jobs from
  -- rank zfrom, after skip marks) and the list: {member, score, ...}. front:
  -- the list's first entries (n or more) when the caller read them already.
  function ready_list.pop(k, n, zfrom, front)
    local entries = front or redis.call('LRANGE', k.queue, 0, n - 1)
    for i = #entries, n + 1, -1 do entries[i] = nil end
    local zs = unpinned.range(k.ready, zfrom, zfrom + n - 1, true)
    local out, a, b = ready_list.merge(zs, entries, n, ready_list.key)
    if a > 0 then redis.call('ZREMRANGEBYRANK', k.ready, zfrom, zfrom + a - 1) end
    if b > 0 then redis.call('LTRIM', k.queue, b, -1) end
    return out
  end

  -- The jobs at ranks offset .. offset + count - 1 of a sorted set (nset
  -- jobs after skip marks) and its list (nlist entries) merged: {member,
  -- score, ...}. lane: {set = key, list = key, key = ready_list.key or delayed_list.key}.
  -- The split of the first offset between the two is found by bisection,
  -- two reads a step.
  function ready_list.page(lane, skip, nset, nlist, offset, count)
    if nlist == 0 then return unpinned.range(lane.set, skip + offset, skip + offset + count - 1, true) end
    local lo, hi = math.max(0, offset - nset), math.min(offset, nlist)
    -- The least i such that the list's entry i does not come before the
    -- set's job offset - i - 1: then the first offset are i entries and
    -- offset - i jobs.
    while lo < hi do
      local i = math.floor((lo + hi) / 2)
      local e = redis.call('LINDEX', lane.list, i)
      local z = redis.call('ZRANGE', lane.set, skip + offset - i - 1, skip + offset - i - 1, 'WITHSCORES')
      local s, q = lane.key(e)
      local s2, q2 = ready_list.zkey(z[1], z[2])
      if ready_list.after(s, q, s2, q2) then hi = i else lo = i + 1 end
    end
    local entries = redis.call('LRANGE', lane.list, lo, lo + count - 1)
    local zs = offset - lo < nset
      and unpinned.range(lane.set, skip + offset - lo, skip + offset - lo + count - 1, true) or {}
    return (ready_list.merge(zs, entries, count, lane.key))
  end

  -- List entries (ready_list.entry) in ready order.
  function ready_list.sorted(es)
    local keyed = {}
    for i, e in ipairs(es) do
      local s, q = ready_list.key(e)
      keyed[i] = { e = e, s = s, q = q }
    end
    table.sort(keyed, function(x, y) return ready_list.after(y.s, y.q, x.s, x.q) end)
    local out = {}
    for i, x in ipairs(keyed) do out[i] = x.e end
    return out
  end

  -- ready_list.page of the ready jobs as they will be once moved (entries, in
  -- ready order: a promotion's, list reads before it writes) join them. The
  -- split of the first offset between the two is found by bisection, as in
  -- ready_list.page.
  function ready_list.page_with(lane, skip, nset, nlist, moved, offset, count)
    if #moved == 0 then return ready_list.page(lane, skip, nset, nlist, offset, count) end
    local n = nset + nlist
    local lo, hi = math.max(0, offset - n), math.min(offset, #moved)
    -- The least i such that moved[i + 1] does not come before the lane's job
    -- offset - i - 1: then the first offset are i moved jobs and offset - i
    -- of the lane's.
    while lo < hi do
      local i = math.floor((lo + hi) / 2)
      local z = ready_list.page(lane, skip, nset, nlist, offset - i - 1, 1)
      local s, q = ready_list.key(moved[i + 1])
      local s2, q2 = ready_list.zkey(z[1], z[2])
      if ready_list.after(s, q, s2, q2) then hi = i else lo = i + 1 end
    end
    local zs = offset - lo < n and ready_list.page(lane, skip, nset, nlist, offset - lo, count) or {}
    local rest = {}
    for i = lo + 1, math.min(lo + count, #moved) do rest[#rest + 1] = moved[i] end
    return (ready_list.merge(zs, rest, count, ready_list.key))
  end

  -- Moves the whole list into the ready set (for priority aging, which looks
  -- at the ready set alone), a thousand entries at a time.
  function waiting.flush(k)
    while true do
      local entries = redis.call('LRANGE', k.queue, 0, 999)
      if #entries == 0 then return end
      local zadd = { '+inf', PIN.member }
      for _, e in ipairs(entries) do
        zadd[#zadd + 1], zadd[#zadd + 2] = fmt((ready_list.key(e))), e:sub(7)
      end
      redis.call('ZADD', k.ready, unpack(zadd))
      redis.call('LTRIM', k.queue, #entries, -1)
    end
  end

  -- The delayed list (version 18), P:{T}:later: jobs put delayed, in order
  -- of due time and then put sequence, each appended only when it is due no
  -- earlier than the list's last entry (with one delay for all, every put);
  -- every other delayed job is in the delayed set, and promotion takes from
  -- the fronts of both, merged. Its entries are the ready list's
  -- (ready_list.entry). A job is in it when its record says so (later, set by
  -- place.job) and it is in no set and holds no lease (locate): a record is not
  -- rewritten when promotion moves its job to ready, so the flag outlives
  -- the entry, but then the job is in a set, which locate asks first.

  -- An entry's order: its due time, then its put sequence.
  function delayed_list.key(e)
    local due, seq = struct.unpack('>I6I7', e)
    return due, seq
  end

  -- The least due time a job put now must have to go to the list's end: its
  -- last entry's (a new job's put sequence is above every entry's); -inf on
  -- an empty list. A put reads it before its first write (ready_list.append_floor says
  -- why).
  function delayed_list.append_floor(k)
    local tail = redis.call('LINDEX', k.later, -1)
    if tail then return delayed_list.key(tail) end
    return -math.huge, -1
  end

  -- The entries at the front of the list that are due by now, at most n,
  -- read in growing steps: a list whose front is not due costs one entry.
  function delayed_list.due_front(k, now, n)
    local want = 1
    while true do
      local es = redis.call('LRANGE', k.later, 0, want - 1)
      local i = 0
      while i < #es and i < n and delayed_list.key(es[i + 1]) <= now do i = i + 1 end
      if i < #es or #es < want or want >= n then
        for j = #es, i + 1, -1 do es[j] = nil end
        return es
      end
      want = math.min(want * 16, n)
    end
  end

  -- How many entries at the front of the list are due by now: found by
  -- doubling, then bisection (reads near the front are cheap).
  function delayed_list.count_due(k, now)
    local function due_at(i)
      local e = redis.call('LINDEX', k.later, i)
      return e and delayed_list.key(e) <= now
    end
    if not due_at(0) then return 0 end
    local lo, hi = 1, 1 -- entries before lo are due; hi is the next to try
    while due_at(hi) do lo, hi = hi + 1, 2 * hi + 1 end
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if due_at(mid) then lo = mid + 1 else hi = mid end
    end
    return lo
  end

  -- Due delayed jobs to make ready: up to PROMOTE_BATCH, in order of due time
  -- and then put order, from the fronts of the delayed set and the delayed
  -- list merged. Read only (promote writes it): nil when none is due, else
  --   n            how many move
  --   a, b         how many of them leave the set and the list
  --   moved        their ready list entries (ready_list.entry: due, member), in
  --                the order they left (their members carry what the ready
  --                score needs, so no record is read)
  --   backlog      when more are due, the first one left: {due, seq}
  -- Refuses (OLDFORMAT) a version 8 member among them (the id alone: the
  -- topic is to be migrated first).
  function waiting.promotion(k, now)
    local zs = redis.call('ZRANGEBYSCORE', k.delayed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, PROMOTE_BATCH + 1)
    local entries = delayed_list.due_front(k, now, PROMOTE_BATCH + 1)
    if #zs == 0 and #entries == 0 then return nil end
    for i = 1, #zs, 2 do
      if zs[i]:byte(1) >= 32 then record.refuse_older() end
    end
    local due, a, b = zs, math.min(#zs / 2, PROMOTE_BATCH), 0
    if #entries > 0 then due, a, b = ready_list.merge(zs, entries, PROMOTE_BATCH, delayed_list.key) end
    local plan = { n = a + b, a = a, b = b, zs = zs, moved = {} }
    local zm, e = zs[2 * a + 1], entries[b + 1]
    if zm or e then
      local d, q
      if zm then d, q = ready_list.zkey(zm, zs[2 * a + 2]) end
      if e then
        local d2, q2 = delayed_list.key(e)
        if not d or ready_list.after(d, q, d2, q2) then d, q = d2, q2 end
      end
      plan.backlog = { due = d, seq = q }
    end
    for i = 1, plan.n do
      plan.moved[i] = struct.pack('>I6', tonumber(due[2 * i])) .. due[2 * i - 1]
    end
    return plan
  end

  -- Moves a promotion's jobs to ready (its only writes); plan: waiting.promotion's
  -- (nil: nothing to do).
  function waiting.promote(k, plan)
    if not plan then return end
    if #plan.moved > 0 then
      local zadd = { '+inf', PIN.member }
      for _, e in ipairs(plan.moved) do zadd[#zadd + 1], zadd[#zadd + 2] = fmt((ready_list.key(e))), e:sub(7) end
      redis.call('ZADD', k.ready, unpack(zadd))
    end
    if plan.a > 0 then
      local zrem = {}
      for i = 1, plan.a do zrem[i] = plan.zs[2 * i - 1] end
      redis.call('ZREM', k.delayed, unpack(zrem))
    end
    if plan.b > 0 then redis.call('LTRIM', k.later, plan.b, -1) end
  end

  -- Placement: the one path by which jobs come to wait in delayed or ready
  -- (put, putmany, restore, and every return from reserved or dead). A call
  -- begins a placement before its first write (place.begin reads the ends of
  -- the lists its jobs may join), decides each job in its order (place.add,
  -- place.job), and writes them all at once (place.write): one HSET of their
  -- records, and per lane at most one ZADD of its set and one RPUSH of its
  -- list (each in parts of 1000 values).
  -- A job joins the end of its lane's list when the call may list it and it
  -- sorts after the list's end (which it then is), else its lane's set. Puts
  -- list ready jobs, and delayed ones put without an update mode (a delayed
  -- job that REPLACE, UPSERT or DEBOUNCE may update next is found in the set
  -- at once, not by a scan of the list); jobs coming back go to the sets. A
  -- delayed job's record says whether it is listed (later); a ready one's
  -- need not (locate asks the ready set first).

  -- The placement (one at a time: the calls that place jobs begin one, add,
  -- write, and begin none inside another). Its arrays are kept from call to
  -- call and emptied as they are written: a put allocates no table for it
  -- (three tables a call cost a single put 0.65 us of 12).
  --   hset              id, record, ...
  --   dset, rset        score, member, ... of the delayed and ready sets
  --   dlist, rlist      entries of the delayed and ready lists
  --   rs, rq / ds, dq   the ready / delayed list's end (score or due time,
  --                     put sequence), nil when its jobs go to the set
  place.plan = { hset = {}, dset = {}, dlist = {}, rset = {}, rlist = {} }

  -- Begins a placement; ready, delayed: whether the call's jobs may join the
  -- end of the ready list, of the delayed list (their ends read here).
  function place.begin(k, now, ready, delayed)
    local pl = place.plan
    -- (Left over only when a call raised between its adds and the end of its
    -- write, a Redis error reply to one of the write's commands: never
    -- written to another topic's keys.)
    if pl.hset[1] or pl.dset[1] or pl.dlist[1] or pl.rset[1] or pl.rlist[1] then place.clear(pl) end
    pl.k, pl.now, pl.rs, pl.rq, pl.ds, pl.dq = k, now, nil, nil, nil, nil
    if ready then pl.rs, pl.rq = ready_list.append_floor(k) end
    if delayed then pl.ds, pl.dq = delayed_list.append_floor(k) end
    return pl
  end

  -- Empties the placement's arrays.
  function place.clear(pl)
    for _, t in ipairs({ pl.hset, pl.dset, pl.dlist, pl.rset, pl.rlist }) do
      for i = #t, 1, -1 do t[i] = nil end
    end
  end

  -- Adds a job: decides where it waits and adds its record, with member m
  -- (member()), to be written by place.write. j: the job (a table: its
  -- later flag set here, then packed), or nil for a job put now with every
  -- option at its default and this body (record.plain: putmany's usual
  -- case, without a table per job). A ready job goes
  -- to the end of the ready list when it sorts after it, else to the ready
  -- set; a delayed one to the end of the delayed list when list_delayed and
  -- it sorts after it (due time, then put sequence), else to the delayed set.
  -- Returns 'ready' or 'delayed'.
  function place.add(pl, id, j, m, due, prio, seq, list_delayed, body)
    -- (The end's order compared inline, as ready_list.after does: a call a
    -- job less on every put.)
    local delayed, listed, s = due > pl.now, false, nil
    if delayed then
      local d = pl.ds
      if list_delayed and d and (due > d or due == d and seq > pl.dq) then
        pl.ds, pl.dq, listed = due, seq, true
      end
      wake(due)
    else
      s = ready_score(prio, due)
      local r = pl.rs
      if r and (s > r or s == r and seq > pl.rq) then pl.rs, pl.rq, listed = s, seq, true end
      wake(pl.now)
    end
    local rec
    if j then
      j.later = delayed and listed or nil
      rec = record.pack(j)
    else
      rec = record.plain(pl.now, seq, due, delayed and listed or nil, body)
    end
    local t = pl.hset
    t[#t + 1], t[#t + 2] = id, rec
    if listed then
      t = delayed and pl.dlist or pl.rlist
      t[#t + 1] = struct.pack('>I6', due) .. m
    else
      t = delayed and pl.dset or pl.rset
      t[#t + 1], t[#t + 2] = delayed and due or s, m
    end
    return delayed and 'delayed' or 'ready'
  end

  -- Adds job j (a table): place.add of it.
  function place.job(pl, id, j, list_delayed)
    return place.add(pl, id, j, member(j, id), j.due, j.priority, j.seq, list_delayed)
  end

  -- redis.call(cmd, key, [the ready pin,] t...) in parts of 1000 values at
  -- most (Lua unpacks about 8000 at most: a requeue may place 10000 jobs
  -- after its first write); empties t. scored: t holds score, member pairs,
  -- each score sent as text formatted once (a batch repeats them; fmt_once
  -- says why).
  function place.each(cmd, key, t, pinned, scored)
    local n = #t
    if scored and n > 2 then
      local score = fmt_once()
      for i = 1, n, 2 do t[i] = score(t[i]) end
    elseif scored and t[1] >= EXACT_LIMIT then
      t[1] = fmt(t[1]) -- (Redis would write a score from 2^63 on as -2^63)
    end
    for i = 1, n, 1000 do
      local j = i + 999
      if j > n then j = n end
      if pinned then redis.call(cmd, key, '+inf', PIN.member, unpack(t, i, j))
      else redis.call(cmd, key, unpack(t, i, j)) end
    end
    for i = n, 1, -1 do t[i] = nil end
  end

  -- Writes the placement's jobs.
  function place.write(pl)
    local k = pl.k
    if not pl.hset[1] then return end
    place.each('HSET', k.jobs, pl.hset)
    if pl.dset[1] then place.each('ZADD', k.delayed, pl.dset, false, true) end
    if pl.dlist[1] then place.each('RPUSH', k.later, pl.dlist) end
    if pl.rset[1] then place.each('ZADD', k.ready, pl.rset, true, true) end
    if pl.rlist[1] then place.each('RPUSH', k.queue, pl.rlist) end
  end

  -- Stores job j (id) back in delayed or ready by its due time, in the
  -- sets: place.job alone. Returns 'ready' or 'delayed'.
  function place.one(k, id, j, now)
    local pl = place.begin(k, now)
    local to = place.job(pl, id, j)
    place.write(pl)
    return to
  end


  -- Marks: words at the head of the ready set (at -inf, before every job)
  -- that hold reserve and pull back: PAUSED_MARK (pause), LIMIT_MARK
  -- (limits), SHARD_MARK (a topic spread over shards).
  function waiting.is_mark(m)
    return m == LIMIT_MARK or m == PAUSED_MARK or m == SHARD_MARK
  end

  -- Sets a mark; whether it was not set.
  function waiting.mark(k, mark)
    return redis.call('ZADD', k.ready, 'NX', '-inf', mark) == 1
  end

  -- Clears a mark; whether it was set.
  function waiting.unmark(k, mark)
    return redis.call('ZREM', k.ready, mark) == 1
  end

  -- Whether a mark is set.
  function waiting.marked(k, mark)
    return redis.call('ZSCORE', k.ready, mark) ~= false
  end

  -- A timed pause (pause FOR, version 38): when it ends (ms), nil for a
  -- pause without end. Its mark stays until a reserve or pull after the
  -- end takes it away (end_pause, behind their other writes) or resume
  -- does: until then every read takes the topic as not paused.
  function waiting.pause_end(k)
    local v = redis.call('HGET', k.meta, 'pause_until')
    return v and tonumber(v)
  end

  -- Ends a pause: its mark and its end; whether the mark was set.
  function waiting.end_pause(k)
    if not waiting.unmark(k, PAUSED_MARK) then return false end
    redis.call('HDEL', k.meta, 'pause_until')
    return true
  end

  -- Whether the topic is paused now (its mark set, and no end passed), and
  -- when the pause ends (-1: no end).
  function waiting.paused_at(k, marked, now)
    if not marked then return false, -1 end
    local e = waiting.pause_end(k)
    if e and e <= now then return false, -1 end
    return true, e or -1
  end

  -- The marks at the head of the ready set: how many, whether the topic is
  -- paused, and whether it is spread.
  function waiting.marks(k)
    local m = redis.call('ZRANGEBYSCORE', k.ready, '-inf', '-inf')
    local p, s = false, false
    for _, v in ipairs(m) do
      p = p or v == PAUSED_MARK
      s = s or v == SHARD_MARK
    end
    return #m, p, s
  end

  -- A lane, read now: {set, list (keys), key (an entry's order), skip (marks
  -- before the set's first job), nset, nlist (jobs in each), paused (the
  -- ready lane's)}. name: 'ready' or 'delayed'.
  function waiting.lane(k, name)
    if name == 'ready' then
      local skip, is_paused = waiting.marks(k)
      return { set = k.ready, list = k.queue, key = ready_list.key, skip = skip, paused = is_paused,
               nset = unpinned.ready_count(k), nlist = redis.call('LLEN', k.queue) }
    end
    return { set = k.delayed, list = k.later, key = delayed_list.key, skip = 0,
             nset = redis.call('ZCARD', k.delayed), nlist = redis.call('LLEN', k.later) }
  end

  -- How many jobs the lane holds.
  function waiting.size(lane)
    return lane.nset + lane.nlist
  end

  -- How many delayed jobs are due by now, and how many of them are in the
  -- delayed list (its first ones).
  function waiting.due(k, now)
    local in_list = delayed_list.count_due(k, now)
    return redis.call('ZCOUNT', k.delayed, '-inf', now) + in_list, in_list
  end

  -- The earliest due time after now of a delayed job, or -1. due_in_list:
  -- waiting.due's second answer. (now -1 and due_in_list 0: the earliest of
  -- all.)
  function waiting.next_due(k, now, due_in_list)
    local first = redis.call('ZRANGEBYSCORE', k.delayed, '(' .. fmt(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    local t = first[2] and tonumber(first[2]) or -1
    local e = redis.call('LINDEX', k.later, due_in_list)
    if e then
      local d = delayed_list.key(e)
      if t < 0 or d < t then t = d end
    end
    return t
  end

  -- The lane's jobs at ranks offset .. offset + count - 1 in its order:
  -- {member, score, ...}. plan: a promotion (waiting.promotion) whose jobs
  -- join the ready lane first (list pages before it writes).
  function waiting.page(lane, offset, count, plan)
    if plan then
      return ready_list.page_with(lane, lane.skip, lane.nset, lane.nlist, ready_list.sorted(plan.moved),
                                  offset, count)
    end
    return ready_list.page(lane, lane.skip, lane.nset, lane.nlist, offset, count)
  end

  -- Where job j (id) waits when a lane's set holds it, read only: {state,
  -- key, member, score}; else nil.
  function waiting.in_set(k, id, j)
    local m = member(j, id)
    local score = redis.call('ZSCORE', k.ready, m)
    if score then return { 'ready', k.ready, m, tonumber(score) } end
    score = redis.call('ZSCORE', k.delayed, m)
    if score then return { 'delayed', k.delayed, m, tonumber(score) } end
  end

  -- Where job j (id) waits when it is in no set and holds no lease: in the
  -- delayed list when its record says so (later), else in the ready list
  -- (its member there the list's entry); {'unknown'} when that list does
  -- not exist. (EXISTS: a read of the list before the caller's first write,
  -- as ready_list.append_floor says why.)
  function waiting.in_list(k, id, j)
    local list = j.later and k.later or k.queue
    if redis.call('EXISTS', list) == 0 then return { 'unknown' } end
    if j.later then return { 'delayed', list, ready_list.entry(j, id), j.due } end
    return { 'ready', list, ready_list.entry(j, id), ready_score(j.priority, j.due) }
  end

  -- Takes a job out of its lane (where: waiting.in_set's or in_list's).
  function waiting.remove(k, where)
    if where[2] ~= k.queue and where[2] ~= k.later then
      redis.call('ZREM', where[2], where[3])
      return
    end
    -- LREM scans from one end: the one nearer the entry by its score (or
    -- due time) between the ends' (a job cancelled or debounced soon after
    -- its put is near the end of a long list).
    local list = where[2]
    local key = list == k.queue and ready_list.key or delayed_list.key
    local first, last = redis.call('LINDEX', list, 0), redis.call('LINDEX', list, -1)
    local from = 1
    if first and last then
      local s0, s1 = key(first), key(last)
      if (where[4] - s0) * 2 > s1 - s0 then from = -1 end
    end
    redis.call('LREM', list, from, where[3])
  end

  -- Takes: what reserve and pull find at the front of the ready lane, and
  -- take from it. A take reads before it writes: waiting.front reads the
  -- fronts (and the promotion to make first); in its common case the caller
  -- reads those jobs' records, decides, and calls waiting.take; otherwise it
  -- reads the records of waiting.candidates, then calls waiting.pop.

  -- Members as taken jobs, {member, false, ...}: a take by rank reads no
  -- scores.
  local function as_popped(members)
    local popped = {}
    for i, m in ipairs(members) do popped[2 * i - 1], popped[2 * i] = m, false end
    return popped
  end

  -- Whether members holds one of version 8 (the id alone): the take then
  -- reads the records of its candidates, and member_id refuses (OLDFORMAT).
  local function unmigrated(members)
    for _, m in ipairs(members) do
      if m:byte(1) >= 32 then return true end
    end
    return false
  end

  -- The front of ready once a promotion is made, when ready holds no job and
  -- the promoted share a priority: the plan's first count, in its order. nil
  -- otherwise.
  local function promoted_front(plan, count)
    local prio = record.member_prio_bytes(plan.moved[1], 14)
    local out = {}
    for i, e in ipairs(plan.moved) do
      if record.member_prio_bytes(e, 14) ~= prio then return nil end
      if i <= count then out[i] = e:sub(7) end
    end
    return out
  end

  -- Priority aging (redisched_limit AGING): up to n ready jobs, highest
  -- effective priority first: priority + (now - due) / age, so that each
  -- level of priority counts as age ms of waiting (ties: the usual order).
  -- One priority's jobs sit in the ready set in due order, so the first n of
  -- each priority present are all that can win: two calls per priority.
  -- (Aging keeps no ready list: waiting.flush.)
  local function aged(k, n, age)
    local cands, from = {}, '(-inf' -- the marks hold -inf
    while true do
      local first = redis.call('ZRANGEBYSCORE', k.ready, from, '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      if #first == 0 then break end
      local band = math.floor(tonumber(first[2]) / TIME_SPAN)
      local top = (band + 1) * TIME_SPAN
      local got = redis.call('ZRANGEBYSCORE', k.ready, first[2], '(' .. fmt(top), 'WITHSCORES', 'LIMIT', 0, n)
      for i = 1, #got, 2 do
        local score = tonumber(got[i + 1])
        cands[#cands + 1] = { m = got[i], s = got[i + 1], score = score,
                              key = (PRIO_MAX - band) * age - score % TIME_SPAN }
      end
      from = fmt(top)
    end
    table.sort(cands, function(a, b)
      if a.key ~= b.key then return a.key > b.key end
      if a.score ~= b.score then return a.score < b.score end
      return a.m < b.m
    end)
    local out = {}
    for i = 1, math.min(n, #cands) do out[2 * i - 1], out[2 * i] = cands[i].m, cands[i].s end
    return out
  end

  -- In a backlog (backlog: the first job still delayed, {due, seq}), the
  -- popped jobs that fell due after it go back to the ready set: the rest.
  local function hold_back(k, backlog, popped)
    local keep, held = {}, {}
    for i = 1, #popped, 2 do
      local m, score = popped[i], tonumber(popped[i + 1])
      local due = score % TIME_SPAN
      -- (The score of a priority below -23 holds its due time rounded to
      -- the double's precision: its record's is exact.)
      if score >= EXACT_LIMIT then due = record.unpack(redis.call('HGET', k.jobs, member_id(m))).due end
      local late = due > backlog.due or
        (due == backlog.due and struct.unpack('>I7', m) > backlog.seq)
      if late then
        held[#held + 1], held[#held + 2] = popped[i + 1], m -- (ZADD's order)
      else
        keep[#keep + 1], keep[#keep + 2] = m, popped[i + 1]
      end
    end
    if #held > 0 then redis.call('ZADD', k.ready, unpack(held)) end
    return keep
  end

  -- What a take of up to count jobs finds at the front of the ready lane,
  -- read only: f = {
  --   plan, backlog  the promotion it makes first (waiting.promotion) and the
  --                  backlog behind it, or nil
  --   nmarks, paused, sharded   the marks (waiting.marks)
  --   seen           how many jobs the fronts hold, up to count from each
  --                  of the set, the list and the promotion (0 under marks,
  --                  which may hold them back)
  --   taken          true in the common case: no mark, no backlog, no
  --                  version 8 member, and either a ready list and no
  --                  promotion, or no ready list and no promotion or one
  --                  whose jobs share a priority with none of the set's
  --                  beside them; then popped
  --                  ({member, score or false, ...}: the first count jobs
  --                  once the promotion is made), n (how many), and a, b
  --                  (how many of them leave the set and the list), for
  --                  waiting.take
  --   set_front, list_front (false: no ready list)   what candidates and pop
  --                  start from }
  function waiting.front(k, now, count)
    local listed = redis.call('LLEN', k.queue) > 0
    local plan = waiting.promotion(k, now)
    -- (with the ready list, the set's front with its scores, to merge them)
    local set_front = unpinned.range(k.ready, 0, count - 1, listed)
    -- (every field made at once: one allocation, no rehash as fields are
    -- added)
    local f = { plan = plan, backlog = plan and plan.backlog, set_front = set_front,
                list_front = listed and redis.call('LRANGE', k.queue, 0, count - 1), nmarks = 0,
                paused = false, sharded = false, seen = 0, taken = false, popped = false, n = 0, a = 0,
                b = 0 }
    if waiting.is_mark(set_front[1]) then
      f.nmarks, f.paused, f.sharded = waiting.marks(k)
      return f
    end
    local nset = listed and #set_front / 2 or #set_front
    f.seen = nset + (listed and #f.list_front or 0) + (plan and plan.n or 0)
    if f.backlog then return f end
    if not listed then
      local members = set_front
      if plan then members = nset == 0 and promoted_front(plan, count) or nil end
      if members and not unmigrated(members) then
        f.taken, f.popped, f.n, f.a, f.b = true, as_popped(members), #members, #members, 0
      end
    elseif not plan then
      local popped, a, b = ready_list.merge(set_front, f.list_front, count, ready_list.key)
      f.taken, f.popped, f.n, f.a, f.b = true, popped, a + b, a, b
    end
    return f
  end

  -- Takes what waiting.front found in its common case (f.taken): the
  -- promotion made, then f.a jobs from the ready set's front and f.b from
  -- the list's. (ZPOPMIN formats every score it returns: 1.0 us per job,
  -- against 0.55 for the ZRANGE that read them and this ZREMRANGEBYRANK.)
  function waiting.take(k, f)
    waiting.promote(k, f.plan)
    if f.a > 0 then redis.call('ZREMRANGEBYRANK', k.ready, 0, f.a - 1) end
    if f.b > 0 then redis.call('LTRIM', k.queue, f.b, -1) end
  end

  -- The ids of every job a take of up to count may hand out once the
  -- promotion is made (f: waiting.front's), read only: the ready set's
  -- first count after its marks (with age, the first count by aged
  -- order), the list's first count, and each priority's first count among
  -- the promoted (ready order is priority, then due time, then put order).
  function waiting.candidates(k, f, count, age)
    local ids, jobs, step = {}, f.set_front, f.list_front and 2 or 1
    if f.nmarks > 0 then
      if age then jobs, step = aged(k, count, age), 2
      else jobs, step = unpinned.range(k.ready, f.nmarks, f.nmarks + count - 1), 1 end
    end
    for i = 1, #jobs, step do ids[#ids + 1] = member_id(jobs[i]) end
    if f.list_front then
      for _, e in ipairs(f.list_front) do ids[#ids + 1] = member_id(e:sub(7)) end
    end
    if f.plan then
      local per = {}
      for _, e in ipairs(f.plan.moved) do
        local prio = record.member_prio_bytes(e, 14)
        per[prio] = (per[prio] or 0) + 1
        if per[prio] <= count then ids[#ids + 1] = member_id(e:sub(7)) end
      end
    end
    return ids
  end

  -- Pops up to n jobs once the promotion is made (f: waiting.front's), in
  -- order: from the fronts of the ready set (after its marks; with age, by
  -- aged order) and the list, merged; in a backlog, those that fell due
  -- after the first job still delayed stay (hold_back). {member, score or
  -- false, ...}.
  function waiting.pop(k, f, n, age)
    local popped = {}
    if n == 0 then return popped end
    if f.list_front then
      -- (f.list_front is still the list's front: promotions and requeues go
      -- to the set)
      popped = ready_list.pop(k, n, f.nmarks, f.list_front)
    elseif age then
      popped = aged(k, n, age)
      if #popped > 0 then
        local members = {}
        for i = 1, #popped, 2 do members[#members + 1] = popped[i] end
        redis.call('ZREM', k.ready, unpack(members))
      end
    else
      -- By rank (no scores read unless a backlog needs them).
      local scored = f.backlog ~= nil
      local got = unpinned.range(k.ready, f.nmarks, f.nmarks + n - 1, scored)
      local m = scored and #got / 2 or #got
      if m > 0 then redis.call('ZREMRANGEBYRANK', k.ready, f.nmarks, f.nmarks + m - 1) end
      popped = scored and got or as_popped(got)
    end
    if f.backlog and #popped > 0 then popped = hold_back(k, f.backlog, popped) end
    return popped
  end
end

-- Where job j (id) is, read only: {state, key, member, score[, token,
-- reserved_at, worker]} ({..., j} when blocked); {'unknown'} when nowhere.
local function locate(k, id, j)
  local where = waiting.in_set(k, id, j)
  if where then return where end
  local score = redis.call('ZSCORE', k.dead, id)
  if score then return { 'dead', k.dead, id, tonumber(score) } end
  score = redis.call('ZSCORE', k.done, id)
  if score then return { 'done', k.done, id, tonumber(score) } end
  local lease = redis.call('HGET', k.leases, id)
  if lease then
    local token, at, _, worker = parse_lease(lease)
    local lm = lease_member(id, token)
    return { 'reserved', k.reserved, lm, tonumber(redis.call('ZSCORE', k.reserved, lm)), token, at, worker }
  end
  score = flows.blocked(k, id, j)
  if score then return { 'blocked', k.blocked, id, score, j } end
  return waiting.in_list(k, id, j)
end

-- Takes a located job out of where it is (and ends its reservation).
local function take_out(k, id, where)
  local state = where[1]
  if state == 'unknown' then return end
  if state == 'ready' or state == 'delayed' then
    waiting.remove(k, where)
  elseif state == 'blocked' then
    flows.unblock(k, id, where[5])
  else
    redis.call('ZREM', where[2], where[3])
  end
  if state == 'reserved' then redis.call('HDEL', k.leases, id) end
end

-- Lapsed reservations (members of reserved, in the order given) back to
-- ready, an attempt each, or to dead when their attempts are used up.
-- kn: their records when the caller read and checked them (known.read),
-- which this forgets as it rewrites them. Returns how many went back and
-- how many died.
local function requeue_members(k, members, now, kn)
  local ids = {}
  for i, m in ipairs(members) do ids[i] = reserved_id(m) end
  local recs
  if kn then
    local map = known.map(kn)
    recs = {}
    for i, id in ipairs(ids) do recs[i] = map[id]; map[id] = nil end
  else
    recs = redis.call('HMGET', k.jobs, unpack(ids))
  end
  -- (read before they go: when each attempt started, and by whom)
  local leases = redis.call('HMGET', k.leases, unpack(ids))
  local jobs, back = {}, 0
  for i = 1, #members do
    if recs[i] then
      local j = record.unpack(recs[i])
      local started, worker, _
      if leases[i] then _, started, _, worker = parse_lease(leases[i]) end
      j.error = 'time-to-run lapsed'
      record.attempt(j, 'lapsed', started, now, worker)
      j.dead = j.attempts >= max_attempts(j)
      if not j.dead then back = back + 1 end
      jobs[i] = j
    end
  end
  -- (numbers for the jobs going back)
  local seq = back > 0 and take_seq(k, back)
  redis.call('ZREM', k.reserved, unpack(members))
  redis.call('HDEL', k.leases, unpack(ids))
  local buried, dead, dead_ids, pl = 0, {}, {}, place.begin(k, now)
  for i, id in ipairs(ids) do
    local j = jobs[i]
    if j and j.dead then
      j.dead = nil
      redis.call('HSET', k.jobs, id, record.pack(j))
      dead[#dead + 1], dead[#dead + 2] = now, id
      buried = buried + 1
      dead_ids[buried] = id
      finished(id) -- dead, kept or not: its waiter has its outcome
    elseif j then
      renew(j, seq)
      seq = seq + 1
      j.due = now
      place.job(pl, id, j)
    end
  end
  place.write(pl)
  if buried > 0 then
    redis.call('ZADD', k.dead, unpack(dead))
    redis.call('HINCRBY', k.meta, 'dead_total', buried)
    flows.notify(k, dead_ids, 'failed', 'time-to-run lapsed')
  end
  if back + buried > 0 then redis.call('HINCRBY', k.meta, 'lapsed_total', back + buried) end
  history.count(k, now, 'l', back + buried, 'x', buried)
  return back, buried
end

-- Drops up to TRIM_BATCH retained finished jobs whose window has ended.
local function trim_done(k, now)
  local ids = redis.call('ZRANGEBYSCORE', k.done, '-inf', now, 'LIMIT', 0, TRIM_BATCH)
  if #ids > 0 then
    redis.call('HDEL', k.jobs, unpack(ids))
    redis.call('ZREM', k.done, unpack(ids))
  end
end

-- The job as a flat field/value array (a map for RESP3 clients).
local function job_fields(id, j, state, score)
  if state == 'delayed' then j.due = score end
  local b = j.backoff or DEFAULT_BACKOFF
  local f = {
    'id', id, 'state', state, 'body', j.body, 'priority', j.priority,
    'created', j.created, 'due', j.due, 'attempts', j.attempts or 0,
    'max_attempts', max_attempts(j), 'ttr', j.ttr or DEFAULT_TTR,
    'backoff', BACKOFF_NAMES[b[1]], 'backoff_base', b[2], 'backoff_cap', b[3],
  }
  if j.error then f[#f + 1] = 'error'; f[#f + 1] = j.error end
  if state == 'reserved' then
    f[#f + 1] = 'token'; f[#f + 1] = j.token
    f[#f + 1] = 'reserved_at'; f[#f + 1] = j.reserved_at
    f[#f + 1] = 'deadline'; f[#f + 1] = score
    if j.worker then f[#f + 1] = 'worker'; f[#f + 1] = j.worker end
  elseif state == 'dead' then
    f[#f + 1] = 'died'; f[#f + 1] = score
  elseif state == 'done' then
    f[#f + 1] = 'finished'; f[#f + 1] = j.finished
    f[#f + 1] = 'expires'; f[#f + 1] = score
  end
  -- Last, so that readers of version 9's arrays keep working: whether ttr is
  -- the job's own (put with TTR) or the default (reserve's TTR applies).
  f[#f + 1] = 'own_ttr'; f[#f + 1] = j.ttr and 1 or 0
  -- Version 12: the retention put asked for, and an acked job's result.
  if j.keep then f[#f + 1] = 'keep'; f[#f + 1] = j.keep end
  if j.result then f[#f + 1] = 'result'; f[#f + 1] = j.result end
  -- Version 30: the attempts that ended without success, oldest first, each
  -- a field/value array as the job's own.
  if j.history then
    local h = {}
    for i, e in ipairs(j.history) do
      local ef = { 'attempt', e.attempt, 'outcome', e.outcome, 'started', e.started, 'ended', e.ended }
      if e.worker then ef[#ef + 1] = 'worker'; ef[#ef + 1] = e.worker end
      ef[#ef + 1] = 'error'; ef[#ef + 1] = e.error
      if e.cut then ef[#ef + 1] = 'error_cut'; ef[#ef + 1] = 1 end
      h[i] = ef
    end
    f[#f + 1] = 'history'; f[#f + 1] = h
  end
  -- Version 31: the latest progress a handler reported (a JSON value), with
  -- its attempt and time; the log, oldest line first, and its total.
  local p = j.progress
  if p then
    f[#f + 1] = 'progress'; f[#f + 1] = p.value
    f[#f + 1] = 'progress_attempt'; f[#f + 1] = p.attempt
    f[#f + 1] = 'progress_at'; f[#f + 1] = p.at
  end
  if j.log then
    local lines = {}
    for i, l in ipairs(j.log.lines) do
      lines[i] = { 'at', l.at, 'attempt', l.attempt, 'line', l.text }
      if l.cut then lines[i][7] = 'cut'; lines[i][8] = 1 end
    end
    f[#f + 1] = 'log'; f[#f + 1] = lines
    f[#f + 1] = 'log_total'; f[#f + 1] = j.log.total
  end
  return f
end

---------------------------------------------------------------- flows

--[[ Flows (version 35): jobs that wait for other jobs, in any topic, and
so in any slot of a Redis Cluster. No call touches two topics, so a
dependency and the job waiting for it (its dependent) meet through the
outbox, P:{T}:outbox (a stream): a call that must tell another topic
something adds an entry there, a mover (any client: redisched_outbox,
then the call each entry names, then redisched_moved) makes that call on
the other topic and only then deletes the entry. Every such call is
idempotent, so an entry made twice (a mover stopped between the call and
the delete) changes nothing the second time: exactly once in effect.
  A job put with AFTER is blocked: its record in jobs, its id in
  P:{T}:blocked (score: when it was put), and in P:{T}:flow (a hash) the
  field NUL1 id -> how many of its dependencies are still pending, and per
  dependency the field NUL2 id NUL gen NUL topic NUL dep-id -> its state:
  'f', 'i' or 'r' while pending (its policy: fail, ignore, drop), then 'D'
  result (done), 'X' error (failed, ignored) or 'R' error (failed, dropped).
  gen is the job's put sequence, so that news for an earlier job of the
  same id finds nothing. The put adds one entry per dependency topic
  (in parts of BATCH_MAX ids): depend there.
  depend (on the dependency's topic) records the dependent under the
  dependency's id, in its topic's flow hash (field id -> the dependents,
  packed), or, when the dependency has finished already (done, dead, or in
  the retry window), adds an entry: resolve, with its outcome.
  A job leaving for good (acked, taken for good, dead, deleted) with
  dependents adds an entry per dependent: resolve on its topic, with the
  outcome (done with its result, or failed with its error). One acked
  with a result is kept done with it for the retry window at least
  (version 38: ack), for a depend still on its way.
  resolve (on the dependent's topic) sets each pending dependency's state
  (once), and when the last is settled releases the job: its deps, with
  their outcomes, go into its record, and it waits in delayed or ready by
  its own due time. A failure of a dependency whose policy is fail kills
  the dependent at once (dead, with the failure as its error); ignore
  settles it as failed; drop settles it as dropped.
  A job that finished keeps a tombstone in its flow field (what it told,
  and whom) until each dependent, no longer blocked (released, dead,
  deleted, updated), has sent forget: so a depend carried again tells
  nothing new, and one that names the job for the first time is told the
  same.
A dependency that never comes (never put, or finished before depend and
out of the retry window) keeps its dependent blocked: get's deps show it
pending, and redisched_get of the dependency finds nothing. ]]
do
  local LEFT, DEP, SEP = '\1', '\2', '\0'
  local PENDING = { f = 'fail', i = 'ignore', r = 'drop' }
  local POLICY_LETTERS = { fail = 'f', ignore = 'i', drop = 'r' }
  local SETTLED = { D = 'done', X = 'failed', R = 'dropped' }
  local OUTCOMES = { done = true, failed = true }
  -- (put's call-wide words, as putmany's, and AFTER)
  flows.PUT_MORE = { MAXBODY = 1, NOW = 1, CONFIRM = 0, AFTER = -3 }
  flows.GET_OPTIONS = { NOBODY = 0, DEPS = 0, NOW = 1 }

  -- The topic as its users name it: a shard's (T~suffix) is T's.
  function flows.topic(k)
    local t = k.user_topic
    if not t then
      t = k.tag:match('^[^~]*')
      k.user_topic = t
    end
    return t
  end

  local function topic_arg(v, what)
    if v == nil or v == '' then bad(what .. ' is empty') end
    if #v > 128 or v:find('[^%w_%-%.]') then
      bad(what .. ' ' .. show(v) .. " must be 1..128 letters, digits, '_', '-' or '.'")
    end
    return v
  end

  local dep_states -- (below: the states of a job's dependencies)
  local function left_field(id) return LEFT .. id end
  local function dep_field(id, gen, topic, dep)
    return DEP .. id .. SEP .. gen .. SEP .. topic .. SEP .. dep
  end

  -- put's AFTER: {count, topic, id, policy, ...} checked; the deps of job
  -- id of topic own (a job cannot wait for itself, or for one job twice).
  function flows.parse(after, own, id)
    local deps, seen = {}, {}
    for i = 2, #after, 3 do
      local topic = topic_arg(after[i], 'AFTER topic')
      local dep = id_arg(after[i + 1])
      local policy = after[i + 2]:lower()
      if not POLICY_LETTERS[policy] then
        bad('AFTER policy must be fail, ignore or drop, got ' .. show(after[i + 2]))
      end
      local key = topic .. SEP .. dep
      if seen[key] then bad('AFTER names ' .. topic .. '/' .. dep .. ' twice') end
      if topic == own and dep == id then bad('a job cannot wait for itself') end
      seen[key] = true
      deps[#deps + 1] = { topic = topic, id = dep, policy = policy, outcome = 'pending', value = '' }
    end
    return deps
  end

  -- Adds an entry to the outbox: call fn on topic with args. The first of
  -- a call into an empty outbox has api() publish "outbox <T>" on the
  -- sweep channel, and (version 36) "outbox" on the outbox's own channel
  -- (SPUBLISH P:{T}:outbox: delivered by this node, where the sweep
  -- channel's message crosses a cluster's bus), for movers.
  function flows.send(k, fn, topic, args)
    if not flows.notice and redis.call('XLEN', k.outbox) == 0 then
      flows.notice = { k.sweep, 'outbox ' .. k.tag, k.outbox }
    end
    -- (One field, the call as a MessagePack array: a field per word cost
    -- the ack that adds it, and the mover's read, a good part of their time.)
    local call = { fn, topic }
    for i, a in ipairs(args) do call[i + 2] = a end
    redis.call('XADD', k.outbox, '*', 'c', cmsgpack.pack(call))
  end

  -- Sends resolve entries for job id (gen) of topic: the settlements in
  -- a[from..] (topic id outcome value each), in parts of SETTLE_PART (a
  -- stream entry's values are unpacked once: Lua unpacks about 8000).
  local SETTLE_PART = 250
  function flows.send_settled(k, topic, id, gen, a, from)
    for at = from, #a, 4 * SETTLE_PART do
      local part = { id, gen, 0 }
      for x = at, math.min(at + 4 * SETTLE_PART - 1, #a) do part[#part + 1] = a[x] end
      part[3] = fmt((#part - 3) / 4)
      flows.send(k, 'resolve', topic, part)
    end
  end

  -- Stores job j (id, its deps all pending) blocked, and asks each
  -- dependency's topic to record it (depend).
  function flows.block(k, id, j)
    local gen = fmt(j.seq)
    redis.call('HSET', k.jobs, id, record.pack(j))
    redis.call('ZADD', k.blocked, j.created, id)
    local fields = { left_field(id), #j.deps }
    for _, d in ipairs(j.deps) do
      fields[#fields + 1], fields[#fields + 2] = dep_field(id, gen, d.topic, d.id), POLICY_LETTERS[d.policy]
    end
    for i = 1, #fields, 1000 do redis.call('HSET', k.flow, unpack(fields, i, math.min(i + 999, #fields))) end
    flows.ask(k, 'depend', id, gen, j.deps)
  end

  -- Sends fn (depend or forget) for job id (gen) to each topic of deps,
  -- one entry per topic and BATCH_MAX of its ids.
  function flows.ask(k, fn, id, gen, deps)
    local own, by_topic, order = flows.topic(k), {}, {}
    for _, d in ipairs(deps) do
      local ids = by_topic[d.topic]
      if not ids then
        ids = {}
        by_topic[d.topic], order[#order + 1] = ids, d.topic
      end
      ids[#ids + 1] = d.id
    end
    for _, topic in ipairs(order) do
      local ids = by_topic[topic]
      for i = 1, #ids, BATCH_MAX do
        local part = { own, id, gen, 0 }
        for x = i, math.min(i + BATCH_MAX - 1, #ids) do part[#part + 1] = ids[x] end
        part[4] = fmt(#part - 4)
        flows.send(k, fn, topic, part)
      end
    end
  end

  -- Takes blocked job j (id) out of the flow: its place in blocked, its
  -- count and its dependencies' states; and tells its dependencies' topics
  -- to forget it (they may keep what they told it until then: flows.notify).
  function flows.unblock(k, id, j)
    redis.call('ZREM', k.blocked, id)
    local gen, fields = fmt(j.seq), { left_field(id) }
    for _, d in ipairs(j.deps) do fields[#fields + 1] = dep_field(id, gen, d.topic, d.id) end
    for i = 1, #fields, 1000 do redis.call('HDEL', k.flow, unpack(fields, i, math.min(i + 999, #fields))) end
    flows.ask(k, 'forget', id, gen, j.deps)
  end

  -- The states of blocked job id's (gen's) dependencies deps, in order
  -- (false: none), read in parts of 1000.
  function dep_states(k, id, gen, deps)
    local names, states = {}, {}
    for i, d in ipairs(deps) do names[i] = dep_field(id, gen, d.topic, d.id) end
    for i = 1, #names, 1000 do
      local got = redis.call('HMGET', k.flow, unpack(names, i, math.min(i + 999, #names)))
      for x, v in ipairs(got) do states[i + x - 1] = v end
    end
    return states
  end

  -- Whether job j (id) is blocked, and since when (read only).
  function flows.blocked(k, id, j)
    if not j.deps then return nil end
    local s = redis.call('ZSCORE', k.blocked, id)
    return s and tonumber(s)
  end

  -- The dependents of ids, packed (HGET/HMGET of flow: false for none).
  local function dependents_of(k, ids)
    if #ids == 1 then return { redis.call('HGET', k.flow, ids[1]) } end
    if redis.call('EXISTS', k.flow) == 0 then return {} end
    local out = {}
    for i = 1, #ids, 1000 do
      local got = redis.call('HMGET', k.flow, unpack(ids, i, math.min(i + 999, #ids)))
      for x, v in ipairs(got) do out[i + x - 1] = v end
    end
    return out
  end

  -- A job's field in flow: its dependents, packed entries (dependent()),
  -- while it has not finished; once it has, a tombstone: NUL, its outcome
  -- ('d' done, 'f' failed), its value, then the dependents it told. A
  -- depend carried again (a mover stopped before it deleted the entry)
  -- finds the dependent told, and sends nothing; one that names the job
  -- for the first time is told what the tombstone says. Each dependent
  -- forgets it (forget) once it is no longer blocked; the last one
  -- deletes the field.
  local TOMB = '\0'
  local TOMB_OUTCOMES, TOMB_LETTERS = { d = 'done', f = 'failed' }, { done = 'd', failed = 'f' }
  function flows.dependent(ptopic, pid, gen)
    return struct.pack('>Bc0I2c0I7', #ptopic, ptopic, #pid, pid, gen)
  end
  local function tomb(outcome, value, told)
    return TOMB .. TOMB_LETTERS[outcome] .. struct.pack('>I4', #value) .. value .. told
  end
  -- outcome, value, the dependents told (packed) of a tombstone.
  local function read_tomb(v)
    local value, at = struct.unpack('>I4c0', v, 3)
    return TOMB_OUTCOMES[v:sub(2, 2)], value, v:sub(at)
  end

  -- Whether entry is one of packed's (entries of a fixed alignment: a
  -- plain find could match across two).
  local function holds(packed, entry)
    local pos = 1
    while pos <= #packed do
      local tl = packed:byte(pos)
      local il = struct.unpack('>I2', packed, pos + 1 + tl)
      local len = 1 + tl + 2 + il + 7
      if packed:sub(pos, pos + len - 1) == entry then return true end
      pos = pos + len
    end
    return false
  end
  -- packed without entry.
  local function without(packed, entry)
    local out, pos = {}, 1
    while pos <= #packed do
      local tl = packed:byte(pos)
      local il = struct.unpack('>I2', packed, pos + 1 + tl)
      local len = 1 + tl + 2 + il + 7
      local e = packed:sub(pos, pos + len - 1)
      if e ~= entry then out[#out + 1] = e end
      pos = pos + len
    end
    return table.concat(out)
  end

  local function each_dependent(packed, fn)
    local pos = 1
    while pos <= #packed do
      local topic, id, gen
      topic, id, gen, pos = struct.unpack('>Bc0I2c0I7', packed, pos)
      fn(topic, id, gen)
    end
  end

  -- Jobs ids of this topic left for good with outcome ('done' or 'failed';
  -- values: their results or errors, a table by position or one text for
  -- all): each of their dependents is sent a resolve, one entry per
  -- dependent. Writes only; after the call's decisions.
  function flows.notify(k, ids, outcome, values)
    local packed = dependents_of(k, ids)
    local groups, order, tombs, own = {}, {}, {}, flows.topic(k)
    for i = 1, #ids do
      local p = packed[i]
      -- (a tombstone: it told them when it finished, a kicked job's second end)
      if p and p:sub(1, 1) ~= TOMB then
        local v = type(values) == 'table' and (values[i] or '') or values or ''
        tombs[#tombs + 1], tombs[#tombs + 2] = ids[i], tomb(outcome, v, p)
        each_dependent(p, function(topic, id, gen)
          local key = topic .. SEP .. id .. SEP .. gen
          local g = groups[key]
          if not g then
            g = { topic, { id, fmt(gen), 0 } }
            groups[key], order[#order + 1] = g, key
          end
          local a = g[2]
          a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = own, ids[i], outcome, v
        end)
      end
    end
    if #tombs == 0 then return end
    for i = 1, #tombs, 1000 do redis.call('HSET', k.flow, unpack(tombs, i, math.min(i + 999, #tombs))) end
    for _, key in ipairs(order) do
      local g = groups[key]
      local a = g[2]
      flows.send_settled(k, g[1], a[1], a[2], a, 4)
    end
  end

  -- get's and list's fields of a job with deps: deps_total, deps_left;
  -- with full (get's DEPS), deps: each {topic, id, policy, outcome, value}
  -- as it now is.
  function flows.fields(k, id, j, state, f, full)
    local deps = j.deps
    local blocked = state == 'blocked'
    local states
    if blocked and full then
      states = dep_states(k, id, fmt(j.seq), deps)
    end
    local left = blocked and tonumber(redis.call('HGET', k.flow, left_field(id)) or 0) or 0
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'deps_total', #deps, 'deps_left', left
    if not full then return end
    local out = {}
    for i, d in ipairs(deps) do
      local outcome, value = d.outcome, d.value
      local s = states and states[i]
      if s and not PENDING[s] then outcome, value = SETTLED[s:sub(1, 1)], s:sub(2) end
      out[i] = { 'topic', d.topic, 'id', d.id, 'policy', d.policy, 'outcome', outcome, 'value', value }
    end
    f[#f + 1], f[#f + 2] = 'deps', out
  end

--[[ Batches (version 36): a batch is a record in jobs, of its own id, with
counts (record's batch) and no body, blocked (P:{T}:blocked) until it is
sealed and each of its members has finished. In P:{T}:flow, its field
NUL1 id counts what it waits for: its members not finished, and 1 while it
is open; each member not finished has the field NUL2 id NUL gen NUL topic
NUL member-id -> 'b'. Members are recorded on their topics by depend, as a
flow's dependencies are, and tell the batch they finished by resolve; the
batch counts one done or failed, deletes the member's field and at once
tells its topic to forget it (a resolve carried again finds no field: it
counts nothing, and tells the member's topic to forget the batch again).
A deleted batch leaves its members' fields, which go as they finish; one
made again under its id has another gen, so they count nothing there.
Finished, the batch is done, kept for its keep, and
tells the jobs that wait for it (flows.notify): done when every member was
done, else failed. ]]
  local BATCHED = 'b'
  local BATCH_KEEP = 604800000 -- a week

  -- How finished batch j ended, as the jobs waiting for it are told.
  local function batch_outcome(j)
    local b = j.batch
    if b.failed == 0 then return 'done', '' end
    local why = fmt(b.failed) .. ' of ' .. fmt(b.total) .. ' members failed (the last: ' .. (j.error or '') .. ')'
    return 'failed', why:sub(1, ERROR_MAX)
  end

  -- get's fields of a batch: sealed (0 or 1), total, done, failed.
  function flows.batch_fields(j, f)
    local b = j.batch
    f[#f + 1], f[#f + 2] = 'batch_sealed', b.sealed and 1 or 0
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'batch_total', b.total, 'batch_done', b.done
    f[#f + 1], f[#f + 2] = 'batch_failed', b.failed
  end

  -- Tells the topics of settled ({topic, id, ...} each) that job or batch
  -- pid (gen) no longer waits for them (forget).
  local function let_go(k, pid, gen, settled)
    local deps = {}
    for i, st in ipairs(settled) do deps[i] = { topic = st[1], id = st[2] } end
    flows.ask(k, 'forget', pid, gen, deps)
  end

  -- Writes batch j (id) with what it waits for changed by change; finishes
  -- it when that comes to 0. 1: it still waits; 2: finished.
  local function batch_store(k, id, j, change, now)
    if redis.call('HINCRBY', k.flow, left_field(id), change) > 0 then
      redis.call('HSET', k.jobs, id, record.pack(j))
      return 1
    end
    redis.call('HDEL', k.flow, left_field(id))
    redis.call('ZREM', k.blocked, id)
    j.finished = now
    redis.call('HSET', k.jobs, id, record.pack(j))
    redis.call('ZADD', k.done, after(now, j.keep), id)
    finished(id)
    local outcome, value = batch_outcome(j)
    flows.notify(k, { id }, outcome, value)
    trim_done(k, now)
    return 2
  end

  -- resolve's part for batch pid: its members in settled ({topic, id,
  -- outcome, value} each; fields and states theirs) that it waits for.
  local function settle_batch(k, pid, gen, fields, states, settled, now)
    local rec = redis.call('HGET', k.jobs, pid)
    local j = rec and record.unpack(rec)
    if not (j and j.batch and fmt(j.seq) == gen) then
      -- An earlier batch of this id, deleted (its members' fields go as
      -- they finish): nothing to count, and nothing left of it.
      local del, let = {}, {}
      for i, s in ipairs(states) do
        if s == BATCHED then del[#del + 1], let[#let + 1] = fields[i], settled[i] end
      end
      redis.call('HDEL', k.flow, unpack(del))
      let_go(k, pid, gen, let)
      return 0
    end
    local b, del, seen, let = j.batch, {}, {}, {}
    for i, s in ipairs(states) do
      if s == BATCHED and not seen[fields[i]] then
        seen[fields[i]] = true
        del[#del + 1], let[#let + 1] = fields[i], settled[i]
        local st = settled[i]
        if st[3] == 'done' then
          b.done = b.done + 1
        else
          b.failed = b.failed + 1
          j.error = (st[1] .. '/' .. st[2] .. ': ' .. st[4]):sub(1, ERROR_MAX)
        end
      end
    end
    if #del == 0 then return 0 end
    redis.call('HDEL', k.flow, unpack(del))
    let_go(k, pid, gen, let)
    return batch_store(k, pid, j, -#del, now) == 2 and 2 or 1
  end

--[[ redisched_depend: job pid of topic ptopic (put sequence gen) waits for
jobs of this topic (version 35; a mover calls it, from the dependent's
outbox).
ARGV: ptopic pid gen count id... [NOW ms]        (count: 1..1000)
  Each id still to finish (waiting, reserved, blocked, or not put yet)
  records the dependent, once however often this is called; each already
  finished sends the dependent its outcome at once (a resolve in this
  topic's outbox): what it told its dependents when it finished, when it
  had some (once per dependent, however often this is called), else what
  its trace says (done and kept: its result; dead: its error; in the
  retry window: done, no value).
Output: per id, in order: 1 recorded (now or before), 2 finished already
  (its outcome sent).
]]
  -- depend's and forget's arguments: ptopic pid gen count id... [NOW ms];
  -- the dependent's entry (flows.dependent), the ids, their flow fields,
  -- and the options.
  local function dependent_args(k, args)
    local ptopic = topic_arg(args[1], 'dependent topic')
    local pid = id_arg(args[2])
    local gen = int_arg(args[3], 'gen', 1, SEQ_MAX)
    local count = int_arg(args[4], 'count', 1, BATCH_MAX)
    if #args < 4 + count then bad('expected ' .. count .. ' ids') end
    local ids = {}
    for i = 1, count do ids[i] = id_arg(args[4 + i]) end
    local o = options(args, 5 + count, #args, OPT_NOW)
    now_arg(o)
    return ptopic, pid, gen, ids, dependents_of(k, ids), flows.dependent(ptopic, pid, gen), o
  end

  function flows.depend(keys, args)
    local k = check_keys(keys)
    local ptopic, pid, gen, ids, cur, entry, o = dependent_args(k, args)
    local now = clock(o)
    local recs = redis.call('HMGET', k.jobs, unpack(ids))
    local done, failed, set, codes = {}, {}, {}, {}
    local done_values, failed_values, missing = {}, {}, false
    for i, id in ipairs(ids) do
      local c, rec = cur[i], recs[i]
      codes[i] = 2
      if c and c:sub(1, 1) == TOMB then
        -- Finished with dependents: told this one already, or tells it now.
        local outcome, value, told = read_tomb(c)
        if not holds(told, entry) then
          if outcome == 'done' then done[#done + 1], done_values[#done_values + 1] = id, value
          else failed[#failed + 1], failed_values[#failed_values + 1] = id, value end
          set[#set + 1], set[#set + 2] = id, c .. entry
        end
      elseif c then
        codes[i] = 1
        if not holds(c, entry) then set[#set + 1], set[#set + 2] = id, c .. entry end
      else
        local j = rec and record.unpack(rec)
        local state = j and locate(k, id, j)[1]
        if state == 'done' and j.batch then
          local outcome, value = batch_outcome(j)
          if outcome == 'done' then done[#done + 1], done_values[#done_values + 1] = id, value
          else failed[#failed + 1], failed_values[#failed_values + 1] = id, value end
        elseif state == 'done' then
          done[#done + 1], done_values[#done_values + 1] = id, j.result or ''
        elseif state == 'dead' then
          failed[#failed + 1], failed_values[#failed_values + 1] = id, j.error or 'dead'
        elseif not rec and gone.holds(k, id, now) then
          done[#done + 1], done_values[#done_values + 1] = id, ''
        else
          missing = missing or not rec
          codes[i] = 1
          set[#set + 1], set[#set + 2] = id, entry
        end
      end
    end
    if missing then sharded(k) end -- (a spread topic's jobs are in its shards)
    if #set > 0 then redis.call('HSET', k.flow, unpack(set)) end
    -- (finished ones: as if they finished now, to this dependent alone)
    local own = flows.topic(k)
    for _, batch in ipairs({ { done, done_values, 'done' }, { failed, failed_values, 'failed' } }) do
      local list = batch[1]
      if #list > 0 then
        local a = {}
        for i, id in ipairs(list) do
          a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = own, id, batch[3], batch[2][i]
        end
        flows.send_settled(k, ptopic, pid, fmt(gen), a, 1)
      end
    end
    return codes
  end

--[[ redisched_forget: job pid of topic ptopic (put sequence gen) waits no
longer (released, dead, deleted or updated) for jobs of this topic (version
35; a mover calls it, from the dependent's outbox).
ARGV: ptopic pid gen count id... [NOW ms]        (count: 1..1000)
  Each id drops the dependent: from its dependents while it has not
  finished, from those its tombstone told once it has (the tombstone goes
  with the last of them). However often it is called, once.
Output: how many ids held the dependent.
]]
  function flows.forget(keys, args)
    local k = check_keys(keys)
    local _, _, _, ids, cur, entry = dependent_args(k, args)
    local set, gone_ids, n = {}, {}, 0
    for i, id in ipairs(ids) do
      local c = cur[i]
      if c then
        local head, list = '', c
        if c:sub(1, 1) == TOMB then
          local _, _, told = read_tomb(c)
          head, list = c:sub(1, #c - #told), told
        end
        local rest = without(list, entry)
        if #rest < #list then
          n = n + 1
          if rest == '' then gone_ids[#gone_ids + 1] = id
          else set[#set + 1], set[#set + 2] = id, head .. rest end
        end
      end
    end
    if #set > 0 then redis.call('HSET', k.flow, unpack(set)) end
    if #gone_ids > 0 then redis.call('HDEL', k.flow, unpack(gone_ids)) end
    return n
  end

  -- resolve's part for job pid: its dependencies in settled ({topic, id,
  -- outcome, value} each; fields and states theirs).
  local function settle_job(k, pid, gen, fields, states, settled, now)
    local set, seen, n, killer = {}, {}, 0, nil
    for i, s in ipairs(states) do
      if s and PENDING[s] and not seen[fields[i]] then
        seen[fields[i]] = true
        local st = settled[i]
        if st[3] == 'done' then set[#set + 1], set[#set + 2] = fields[i], 'D' .. st[4]
        elseif s == 'f' then killer = st; break
        elseif s == 'i' then set[#set + 1], set[#set + 2] = fields[i], 'X' .. st[4]
        else set[#set + 1], set[#set + 2] = fields[i], 'R' .. st[4] end
        n = n + 1
      end
    end
    if not killer and n == 0 then return 0 end
    -- The outcomes settled so far into record j (and the killer's, a
    -- dependency of policy fail that failed, when it dies of it).
    local function settle_record(j, killed_by)
      local states = dep_states(k, pid, gen, j.deps)
      for i, d in ipairs(j.deps) do
        local st = states[i]
        if st and SETTLED[st:sub(1, 1)] then d.outcome, d.value = SETTLED[st:sub(1, 1)], st:sub(2) end
        if killed_by and d.topic == killed_by[1] and d.id == killed_by[2] then
          d.outcome, d.value = 'failed', killed_by[4]
        end
      end
    end
    -- (The record, which lists every dependency, is read only to kill or
    -- release the job: a read per settlement made a flow of n dependencies
    -- cost n^2. Its fields hold its gen, so the job is this one.)
    local function job()
      local rec = redis.call('HGET', k.jobs, pid)
      return rec and record.unpack(rec)
    end
    if killer then
      local j = job()
      if not j then return 0 end
      local err = 'dependency ' .. killer[1] .. '/' .. killer[2] .. ' failed: ' .. killer[4]
      if #err > ERROR_MAX then err = err:sub(1, ERROR_MAX) end
      settle_record(j, killer)
      flows.unblock(k, pid, j)
      j.error = err
      redis.call('HSET', k.jobs, pid, record.pack(j))
      redis.call('ZADD', k.dead, now, pid)
      redis.call('HINCRBY', k.meta, 'dead_total', 1)
      finished(pid)
      history.count(k, now, 'x', 1)
      flows.notify(k, { pid }, 'failed', err)
      return 3
    end
    -- (Read before the first write: unpacking may refuse a newer format.)
    local left = tonumber(redis.call('HGET', k.flow, left_field(pid)) or 0) - n
    local j = left <= 0 and job()
    if left <= 0 and not j then return 0 end
    redis.call('HSET', k.flow, unpack(set))
    if redis.call('HINCRBY', k.flow, left_field(pid), -n) > 0 then return 1 end
    -- Released: the deps' outcomes into its record, then it waits.
    settle_record(j)
    flows.unblock(k, pid, j)
    place.one(k, pid, j, now)
    return 2
  end

--[[ redisched_resolve: dependencies of job pid of this topic have settled
(version 35; a mover calls it, from the dependency's outbox).
ARGV: pid gen count (topic id outcome value)... [NOW ms]   (count: 1..1000)
  outcome: done (value: its result) or failed (value: its error). Each
  dependency still pending in job pid of put sequence gen settles by its
  policy; one settled before, or a job that is no longer blocked, or
  another job of that id (another gen), is left as it is. When the last
  dependency settles, the job is released: it waits in delayed or ready
  by its due time, and its deps, with outcomes, are in its record. A
  dependency of policy fail that failed kills it instead (dead, its error
  naming the dependency), and its own dependents hear it failed.
Output: 0 nothing settled (or only what had settled before); 1 settled,
  still blocked; 2 released; 3 dead.
]]
  function flows.resolve(keys, args)
    local k = check_keys(keys)
    local pid = id_arg(args[1])
    local gen = fmt(int_arg(args[2], 'gen', 1, SEQ_MAX))
    local count = int_arg(args[3], 'count', 1, BATCH_MAX)
    if #args < 3 + 4 * count then bad('expected ' .. count .. ' topic id outcome value groups') end
    local fields, settled = {}, {}
    for i = 1, count do
      local at = 3 + 4 * (i - 1)
      local topic = topic_arg(args[at + 1], 'dependency topic')
      local id = id_arg(args[at + 2])
      local outcome = args[at + 3]
      if not OUTCOMES[outcome] then bad('outcome must be done or failed, got ' .. show(outcome)) end
      fields[i], settled[i] = dep_field(pid, gen, topic, id), { topic, id, outcome, args[at + 4] }
    end
    local now = clock(options(args, 4 + 4 * count, #args, OPT_NOW))
    if not redis.call('ZSCORE', k.blocked, pid) then
      sharded(k)
      -- No longer waits: what it waited for need not remember it (a
      -- deleted batch's members' fields go as they finish).
      redis.call('HDEL', k.flow, unpack(fields))
      let_go(k, pid, gen, settled)
      return 0
    end
    local states = redis.call('HMGET', k.flow, unpack(fields))
    -- (those it does not wait for, or no longer: a batch's settled members,
    -- news for another job of its id: told to forget it, after the decisions)
    local strays = {}
    for i = 1, count do
      if not states[i] then strays[#strays + 1] = settled[i] end
    end
    local r
    for i = 1, count do
      if states[i] == BATCHED then r = settle_batch(k, pid, gen, fields, states, settled, now) break end
    end
    if not r then r = settle_job(k, pid, gen, fields, states, settled, now) end
    if #strays > 0 then let_go(k, pid, gen, strays) end
    return r
  end

--[[ redisched_outbox: the entries of this topic's outbox, oldest first, for
a mover (version 35; read-only).
ARGV: count                                       (count: 1..1000)
Output: {entry, fn, topic, arg...} each: call redisched_<fn> on topic with
  the args (routed by the first id among them on a spread topic), then
  redisched_moved with the entry.
]]
  function flows.outbox(keys, args)
    local k = check_keys(keys)
    local count = int_arg(args[1], 'count', 1, BATCH_MAX)
    if #args > 1 then bad('unexpected ' .. show(args[2])) end
    local out = {}
    for i, e in ipairs(redis.call('XRANGE', k.outbox, '-', '+', 'COUNT', count)) do
      local o = cmsgpack.unpack(e[2][2])
      table.insert(o, 1, e[1])
      out[i] = o
    end
    return out
  end

--[[ redisched_moved: outbox entries a mover has carried out (version 35).
ARGV: entry...                                    (1..1000 entries)
Output: how many were deleted (an entry deleted before is not counted).
  An outbox left empty is deleted: one that exists holds entries, so a
  mover finds them by a SCAN of outbox keys.
]]
  function flows.moved(keys, args)
    local k = check_keys(keys)
    if #args == 0 or #args > BATCH_MAX then bad('give 1..' .. BATCH_MAX .. ' entries') end
    for _, e in ipairs(args) do
      if not e:match('^%d+%-%d+$') then bad('entry must be a stream id, got ' .. show(e)) end
    end
    local n = redis.call('XDEL', k.outbox, unpack(args))
    if redis.call('XLEN', k.outbox) == 0 then redis.call('DEL', k.outbox) end
    return n
  end

--[[ redisched_batch: makes a batch, adds members to it, seals it (version
36). A batch groups jobs of any topics, put before or after they are
added, so that jobs can wait for them all: a job put with AFTER this topic
and the batch's id is its callback, run once the batch is sealed and each
member finished (policy fail: on success, it dies when a member failed;
ignore: on complete, it runs either way; docs/flows.md, "Batches").
ARGV: id [ADD count (topic id)...] [SEAL] [KEEP ms] [NOW ms]   (count: 1..10000)
  The first call on an id makes the batch: open, blocked. ADD names jobs as
  members, each once (one named again while it has not finished is left
  as it is; one named again after it finished counts again); one not put
  yet is waited for. A member finishes done (acked, or taken for good) or
  failed (dead, or deleted before it finished). SEAL closes the batch to
  new members; once sealed with every member finished, it is done, kept
  KEEP ms (default a week, from when it finished), and tells the jobs
  waiting for it: done when every member was done, else failed ("<n> of
  <total> members failed (the last: <topic>/<id>: <error>)"). Deleting a
  batch that has not finished fails the jobs waiting for it. A batch is
  read with redisched_get (its fields batch_sealed, batch_total,
  batch_done, batch_failed; error: the last member's failure); a put
  cannot change it.
Output: the batch as redisched_get's array, after the call.
  Errors: the id names a job; ADD to a sealed or finished batch.
]]
  local BATCH_OPTIONS = { ADD = -2, SEAL = 0, KEEP = 1, NOW = 1 }
  function flows.batch(keys, args)
    local k = check_keys(keys)
    local id = id_arg(args[1])
    if id == '*' then bad("a batch's id cannot be '*', which asks put for a generated id") end
    local o = options(args, 2, #args, BATCH_OPTIONS)
    local now = clock(o)
    local keep = o.KEEP and int_arg(o.KEEP, 'KEEP', 1, DELAY_MAX)
    local members, seen, own = {}, {}, flows.topic(k)
    if o.ADD then
      local a = o.ADD
      for i = 2, #a, 2 do
        local topic, mid = topic_arg(a[i], 'ADD topic'), id_arg(a[i + 1])
        if topic == own and mid == id then bad('a batch cannot hold itself') end
        local key = topic .. SEP .. mid
        if not seen[key] then
          seen[key] = true
          members[#members + 1] = { topic = topic, id = mid }
        end
      end
    end
    local rec, j = redis.call('HGET', k.jobs, id), nil
    if rec then
      j = record.unpack(rec)
      if not j.batch then bad(id .. ' is a job, not a batch') end
      if not redis.call('ZSCORE', k.blocked, id) then
        if #members > 0 then bad('batch ' .. id .. ' has finished: it takes no more members') end
        local f = job_fields(id, j, 'done', tonumber(redis.call('ZSCORE', k.done, id)))
        flows.batch_fields(j, f)
        return f
      end
      if #members > 0 and j.batch.sealed then bad('batch ' .. id .. ' is sealed: it takes no more members') end
    else
      sharded(k) -- (a spread topic's batches are in its shards)
      j = { priority = 0, created = now, seq = take_seq(k, 1), due = now, body = '', deps = {},
            batch = { sealed = false, total = 0, done = 0, failed = 0 }, keep = BATCH_KEEP }
      redis.call('ZADD', k.blocked, now, id)
      redis.call('HSET', k.flow, left_field(id), 1) -- (open: the seal to come)
    end
    if keep then j.keep = keep end
    local gen, b, change = fmt(j.seq), j.batch, 0
    if #members > 0 then
      local names, new, set = {}, {}, {}
      for i, m in ipairs(members) do names[i] = dep_field(id, gen, m.topic, m.id) end
      for i = 1, #names, 1000 do
        local got = redis.call('HMGET', k.flow, unpack(names, i, math.min(i + 999, #names)))
        for x = 1, math.min(1000, #names - i + 1) do
          if not got[x] then
            new[#new + 1] = members[i + x - 1]
            set[#set + 1], set[#set + 2] = names[i + x - 1], BATCHED
          end
        end
      end
      for i = 1, #set, 1000 do redis.call('HSET', k.flow, unpack(set, i, math.min(i + 999, #set))) end
      b.total, change = b.total + #new, #new
      flows.ask(k, 'depend', id, gen, new)
    end
    if o.SEAL and not b.sealed then b.sealed, change = true, change - 1 end
    local finished_now = batch_store(k, id, j, change, now) == 2
    local f = job_fields(id, j, finished_now and 'done' or 'blocked',
                         finished_now and after(now, j.keep) or j.created)
    flows.batch_fields(j, f)
    return f
  end
end

---------------------------------------------------------------- put

-- The id that asks for a generated one, as XADD's "*" does: "<now>-<seq>",
-- unique in the topic since its counter never repeats.
local GENERATE = '*'

local function generated_id(now, seq)
  return fmt(now) .. '-' .. fmt(seq)
end

-- Validates one job's arguments; returns a description of it. An AT in the
-- past makes the job due now (p.at keeps it as given, for restore).
local function parse_job(id, body, o, now, body_max, id_checked)
  local p = { id = id_arg(id, id_checked), body = body }
  if body == nil then bad('body is missing') end
  if #body > body_max then bad('body is ' .. #body .. ' bytes, over the limit of ' .. body_max) end
  if o.DELAY and o.AT then bad('give DELAY or AT, not both') end
  if (o.REPLACE and 1 or 0) + (o.UPSERT and 1 or 0) + (o.DEBOUNCE and 1 or 0) > 1 then
    bad('give one of REPLACE, UPSERT and DEBOUNCE')
  end
  p.due = now
  if o.DELAY then p.due = after(now, int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX)) end
  if o.AT then
    p.at = int_arg(o.AT, 'AT', 0, MS_MAX)
    if p.at > now then p.due = p.at end
  end
  p.priority = o.PRIORITY and int_arg(o.PRIORITY, 'PRIORITY', PRIO_MIN, PRIO_MAX) or 0
  -- A TTR is kept even when it equals the default: reserve's TTR applies
  -- only to jobs that have none. TTR 0: delivered at most once (reserve
  -- takes the job for good, as pull does).
  if o.TTR then p.ttr = int_arg(o.TTR, 'TTR', 0, TTR_MAX) end
  if o.ATTEMPTS then
    local n = int_arg(o.ATTEMPTS, 'ATTEMPTS', 1, ATTEMPTS_MAX)
    if n ~= DEFAULT_ATTEMPTS then p.max_attempts = n end
  end
  if o.BACKOFF then
    local kind = BACKOFF_KINDS[o.BACKOFF[1]:lower()]
    if not kind then bad('BACKOFF kind must be fixed or exponential, got ' .. show(o.BACKOFF[1])) end
    local base = int_arg(o.BACKOFF[2], 'BACKOFF base', 0, DELAY_MAX)
    local cap = int_arg(o.BACKOFF[3], 'BACKOFF cap', 0, DELAY_MAX)
    if kind == BACKOFF_KINDS.exponential and cap < base then bad('BACKOFF cap is below its base') end
    local d = DEFAULT_BACKOFF
    if kind ~= d[1] or base ~= d[2] or cap ~= d[3] then p.backoff = { kind, base, cap } end
  end
  -- KEEP: the retention its ack should give it (reserve reports it).
  if o.KEEP then
    local keep = int_arg(o.KEEP, 'KEEP', 0, DELAY_MAX)
    if keep > 0 then p.keep = keep end
  end
  p.mode = (o.REPLACE and 'replace') or (o.UPSERT and 'upsert') or (o.DEBOUNCE and 'debounce')
    or 'create'
  if p.id == GENERATE and p.mode ~= 'create' then
    bad('a generated id (*) cannot go with REPLACE, UPSERT or DEBOUNCE')
  end
  return p
end

-- A new job from a validated put; seq is its put sequence.
local function new_job(p, seq, created)
  return { priority = p.priority, seq = seq, created = created, due = p.due, ttr = p.ttr, max_attempts = p.max_attempts,
           backoff = p.backoff, keep = p.keep, body = p.body }
end

-- Picks a generated id for put sequence seq; in the rare case that a job
-- already holds it (someone chose such an id), takes the numbers after
-- last, the highest the call has taken so far. taken(id) says whether id
-- is held. Read only: returns the id, its sequence and the new last; the
-- caller takes its numbers from the counter in one HINCRBY, after it.
local function fresh_id(k, now, seq, last, taken)
  local id = generated_id(now, seq)
  while taken(id) do
    last = last + 1
    if last > SEQ_MAX then seq_room(k, SEQ_MAX + 1) end -- (refuses: used up)
    seq, id = last, generated_id(now, last)
  end
  return id, seq, last
end

-- CONFIRM (version 37), for a caller that sends WAIT after a put: a put
-- answered "exists" wrote nothing, so WAIT on its connection waited for
-- nothing (it covers that connection's own writes), and a put retried over
-- a new connection after a failed first try was confirmed at once, the
-- replicas perhaps without the job. With CONFIRM such a put writes a field
-- and deletes it (nothing changes), so that WAIT waits for the replicas to
-- reach all that is stored, the job included.
-- (The write comes last, once nothing can refuse the call.)
local confirm = { PUTMANY_WORDS = { MAXBODY = 1, NOW = 1, CONFIRM = 0 } }
function confirm.write(k)
  redis.call('HSET', k.meta, 'confirm', 1)
  redis.call('HDEL', k.meta, 'confirm')
end
-- put's answer -1, written for with CONFIRM.
function confirm.exists(k, o)
  if o.CONFIRM then confirm.write(k) end
  return EXISTS
end

-- The bodies of the redisched_<name> functions that no other code calls:
-- fields of one table rather than locals, which the main chunk had run
-- out of (Lua allows 200: the map above); register, at the end, names them.
local fcall = {}

--[[ redisched_put: add one job, or update it with REPLACE/UPSERT.
ARGV: id body [DELAY ms | AT unix-ms] [PRIORITY -4294966295..1000] [TTR ms] [ATTEMPTS n]
      [BACKOFF fixed|exponential base-ms cap-ms] [KEEP ms]
      [REPLACE | UPSERT | DEBOUNCE] [AFTER count (topic id policy)...]
      [MAXBODY bytes] [CONFIRM] [NOW ms]
  DELAY/AT: when it is due (default now; an AT in the past means now).
  PRIORITY: higher runs first (0). TTR: time-to-run of a reservation (none:
  reserve's TTR, else 30000); TTR 0: delivered at most once (reserve takes
  the job for good). ATTEMPTS: tries before dead (5).
  BACKOFF: delay after a failure (exponential 1000 600000).
  KEEP: once acked, keep the job (and its result) this long, so that its
  producer can wait for it and read it; reserve reports it to the worker,
  whose ack gives it (0: not kept).
  REPLACE: update an existing job only; UPSERT: create or update.
  DEBOUNCE: create, or update a job that is still waiting (delayed or
  ready): its body and options become this put's and its due time this
  put's (with DELAY 5000, "run once, 5 s after the last put"); a job
  reserved, dead or done is left as it is (-1).
  MAXBODY: the largest body accepted (1048576).
  CONFIRM (version 37): when the job exists (-1), write and undo a field
  of the topic's meta all the same, so that a WAIT after the call waits
  for the replicas to have the job (see confirm, above).
  id "*": a generated id, "<created ms>-<n>" (not with REPLACE, UPSERT or
  DEBOUNCE).
  AFTER (version 35): the job waits, blocked, until the count (1..10000)
  jobs named settle (flows, above): each a topic, an id, and what its
  failure does (policy: fail, this job dies; ignore, it runs all the
  same; drop, it runs, the dependency left out). Then it waits in delayed
  or ready by its due time. A new job only (not REPLACE, UPSERT or
  DEBOUNCE). An update of a blocked job (REPLACE, UPSERT) makes it an
  ordinary job, waiting for nothing; DEBOUNCE leaves it (-1).
Output: 1 created, 2 updated, -1 the id exists (no flag; DEBOUNCE: not
  waiting), 0 no such job (REPLACE); for "*" the generated id (a string).
  An update keeps created, resets attempts, and ends a reservation. -1 and
  0 change nothing.
]]
local function put(keys, args)
  local k = check_keys(keys)
  local o = options(args, 3, #args, PUT_OPTIONS, flows.PUT_MORE)
  local body_max = body_limit(o)
  local now = clock(o)
  local p = parse_job(args[1], args[2], o, now, body_max)
  local id, old = p.id, nil
  local create = p.mode == 'create'
  local deps = o.AFTER and flows.parse(o.AFTER, flows.topic(k), id)
  if deps and not create then bad('AFTER goes with a new job only, not REPLACE, UPSERT or DEBOUNCE') end
  -- (its list's end read before the first write; a put that names an
  -- update keeps a delayed job in the set: place says why)
  local pl = place.begin(k, now, not deps and p.due <= now, not deps and p.due > now and create)
  -- Writes job j: blocked when it waits for others, else where it waits.
  local function store(j, list_delayed)
    if deps then
      j.deps = deps
      flows.block(k, id, j)
    else
      place.job(pl, id, j, list_delayed)
      place.write(pl)
    end
    history.count(k, now, 'p', 1)
  end
  if id == GENERATE then
    local seq
    local cur = seq_room(k, 1)
    local last
    id, seq, last = fresh_id(k, now, cur + 1, cur + 1,
                             function(g) return redis.call('HEXISTS', k.jobs, g) == 1 end)
    redis.call('HINCRBY', k.meta, 'seq', last - cur)
    store(new_job(p, seq, now), true)
    return id
  end
  if create then
    -- The common case: HEXISTS, ZSCORE, HINCRBY, HSET, ZADD.
    if redis.call('HEXISTS', k.jobs, id) == 1 or gone.holds(k, id, now) then return confirm.exists(k, o) end
  else
    old = redis.call('HGET', k.jobs, id)
    if not old and p.mode == 'replace' then
      sharded(k)
      return MISSING
    end
  end
  local where
  if old then
    -- A new version of the job: keeps its creation time, starts its attempts
    -- afresh and ends any reservation (the holder's token goes stale).
    old = record.unpack(old)
    if old.batch then bad(id .. ' is a batch: a put cannot change it') end
    where = locate(k, id, old)
    if p.mode == 'debounce' and where[1] ~= 'delayed' and where[1] ~= 'ready' then return confirm.exists(k, o) end
  end
  local j = new_job(p, take_seq(k, 1), old and old.created or now)
  if where then take_out(k, id, where) end
  store(j, create)
  return old and UPDATED or OK
end

--[[ redisched_restore: put back a job as an export wrote it (backups and
migrations): its state, creation time, attempts, last error and attempt
history as they were.
ARGV: id body state created attempts [AT due-ms] [PRIORITY n] [TTR ms]
      [ATTEMPTS n] [BACKOFF kind base cap] [KEEP ms] [ERROR text] [DIED ms]
      [HISTORY bytes] [PROGRESS attempt at value] [LOG bytes] [REPLACE] [NOW ms]
  HISTORY (version 30): the attempt history, laid out as the stored format
  lays it out (its count, then each entry), checked field by field.
  PROGRESS and LOG (version 31): the job's progress (as progress takes its
  value) and its log (laid out as the stored format lays it out).
  state: delayed, ready or dead (a reserved job comes back ready; its
  reservation belonged to the old place). A delayed or ready job goes to
  delayed or ready by its due time, AT (default created), kept as given.
Output: 1 restored, -1 the id exists (without REPLACE; nothing changes).
]]
local RESTORE_OPTIONS = { AT = 1, PRIORITY = 1, TTR = 1, ATTEMPTS = 1, BACKOFF = 3, KEEP = 1,
                          ERROR = 1, DIED = 1, HISTORY = 1, PROGRESS = 3, LOG = 1, REPLACE = 0,
                          NOW = 1 }
local function restore(keys, args)
  local k = check_keys(keys)
  if #args < 5 then bad('expected id body state created attempts, got ' .. #args .. ' argument(s)') end
  local o = options(args, 6, #args, RESTORE_OPTIONS)
  local state = args[3]
  if state ~= 'delayed' and state ~= 'ready' and state ~= 'dead' then
    bad('state must be delayed, ready or dead, got ' .. show(state))
  end
  local now = clock(o)
  local created = int_arg(args[4], 'created', 0, MS_MAX)
  local made = int_arg(args[5], 'attempts', 0, ATTEMPTS_MAX)
  local p = parse_job(args[1], args[2], o, now, BODY_MAX_LIMIT)
  if p.id == GENERATE then bad('restore needs the job\'s id') end
  if o.ERROR and #o.ERROR > ERROR_MAX then bad('ERROR is over ' .. ERROR_MAX .. ' bytes') end
  local died = o.DIED and int_arg(o.DIED, 'DIED', 0, MS_MAX) or now
  local history = o.HISTORY and record.history_arg(o.HISTORY)
  local progress
  if o.PROGRESS then
    local v = o.PROGRESS
    progress = { attempt = int_arg(v[1], 'PROGRESS attempt', 1, ATTEMPTS_MAX),
                 at = int_arg(v[2], 'PROGRESS at', 0, MS_MAX), value = v[3] }
    record.progress_arg(v[3])
  end
  local log = o.LOG and record.log_arg(o.LOG)
  local old = redis.call('HGET', k.jobs, p.id)
  if old and not o.REPLACE then return EXISTS end
  old = old and record.unpack(old)
  if old and old.batch then bad(p.id .. ' is a batch: a restore cannot change it') end
  local where = old and locate(k, p.id, old)
  local j = new_job(p, take_seq(k, 1), created)
  j.due = p.at or created
  if made > 0 then j.attempts = made end
  j.error = o.ERROR
  j.history, j.progress, j.log = history, progress, log
  if where then take_out(k, p.id, where) end
  if state == 'dead' then
    redis.call('HSET', k.jobs, p.id, record.pack(j))
    redis.call('ZADD', k.dead, died, p.id)
  else
    place.one(k, p.id, j, now)
  end
  return OK
end

--[[ redisched_putmany: add or update many jobs in one call.
ARGV: count  id body nopts [option value...]  ...  [MAXBODY bytes] [CONFIRM] [NOW ms]
  count: 1..1000 jobs, each its id, body, nopts and nopts words of put's
  per-job options; then MAXBODY, CONFIRM (version 37: as put's, when any
  job exists) and NOW, for all.
Output: an array of put's codes, one per job, in order (the generated id
  for a job given as "*"). A job id given twice in one call is treated as
  two puts, in order. Refused jobs (-1, 0) take no sequence number; when
  every job is refused, nothing changes.
]]
function fcall.putmany(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  local nargs = #args
  -- Jobs without options (the usual batch) skip option parsing entirely,
  -- and so do jobs with DELAY alone (the usual delayed batch): delays[i].
  local ids, bodies, opts, delays, pos = {}, {}, {}, {}, 2
  for i = 1, count do
    if pos + 2 > nargs then bad('job ' .. i .. ' of ' .. count .. ' is incomplete') end
    ids[i], bodies[i] = args[pos], args[pos + 1]
    local nopts = args[pos + 2]
    if nopts == '0' then
      pos = pos + 3
    elseif nopts == '2' and pos + 4 <= nargs
        and (args[pos + 3] == 'DELAY' or args[pos + 3]:upper() == 'DELAY') then
      delays[i] = args[pos + 4]
      pos = pos + 5
    else
      nopts = int_arg(nopts, 'option count of job ' .. i, 0, 20)
      if pos + 2 + nopts > nargs then bad('job ' .. i .. ' has fewer option words than ' .. nopts) end
      opts[i] = options(args, pos + 3, pos + 2 + nopts, PUT_OPTIONS)
      pos = pos + 3 + nopts
    end
  end
  local g = options(args, pos, nargs, confirm.PUTMANY_WORDS)
  local body_max = body_limit(g)
  local now = clock(g)

  -- Validate everything before the first write. One scan finds whether any
  -- id has a control character; parse_job then names the job. A job with
  -- DELAY alone has its due time in dues[i], and no other option.
  local ids_clean = not table.concat(ids):find('%c')
  local parsed, dues, at = {}, {}, 0
  local ok, err = pcall(function()
    for i = 1, count do
      at = i
      local id = ids[i]
      if opts[i] or not ids_clean or id == '' or #id > ID_MAX or #bodies[i] > body_max then
        local o = opts[i] or (delays[i] and { DELAY = delays[i] }) or NO_OPTIONS
        parsed[i] = parse_job(id, bodies[i], o, now, body_max, ids_clean)
      elseif delays[i] then
        dues[i] = after(now, int_arg(delays[i], 'DELAY', 0, DELAY_MAX))
      end
    end
  end)
  if not ok then
    if type(err) == 'table' and err.bad then bad('job ' .. at .. ': ' .. err.bad:sub(8)) end
    error(err)
  end

  -- Decide every job's outcome, in order, from what is stored and what this
  -- call stores before it.
  local olds = redis.call('HMGET', k.jobs, unpack(ids))
  local codes, present, before, latest = {}, {}, {}, {}
  local stored = 0
  -- Ids in their retry window, for creates of ids not stored: one ZMSCORE.
  local windows
  for i = 1, count do
    if not olds[i] and ids[i] ~= GENERATE and (not parsed[i] or parsed[i].mode == 'create') then
      windows = redis.call('ZMSCORE', k.gone, unpack(ids))
      break
    end
  end
  -- DEBOUNCE updates only a job still waiting: this call's own version
  -- is; a stored one is if it is in delayed or ready.
  local function waiting(id)
    if latest[id] then return true end
    local st = locate(k, id, record.unpack(before[id]))[1]
    return st == 'delayed' or st == 'ready'
  end
  for i = 1, count do
    local id, p = ids[i], parsed[i]
    local mode = p and p.mode or 'create'
    if id == GENERATE then
      stored = stored + 1
    else
      if present[id] == nil then
        present[id] = olds[i] ~= false
        if olds[i] then before[id] = olds[i] end
      end
      if mode == 'create' and (present[id] or windows and windows[i] and tonumber(windows[i]) > now) then
        codes[i] = EXISTS
      elseif not present[id] and mode == 'replace' then codes[i] = MISSING
      elseif present[id] and mode == 'debounce' and not waiting(id) then codes[i] = EXISTS
      else
        codes[i] = present[id] and UPDATED or OK
        present[id] = true
        latest[id] = i
        stored = stored + 1
      end
    end
  end
  if stored == 0 then
    -- (A call that stores a job writes anyway: CONFIRM only when none.)
    if g.CONFIRM then
      for i = 1, count do
        if codes[i] == EXISTS then confirm.write(k); break end
      end
    end
    return codes
  end
  -- Updates of jobs stored before this call: decoded and located before the
  -- first write.
  local created_of, where_of = {}, {}
  for id, rec in pairs(before) do
    if latest[id] then
      local old = record.unpack(rec)
      if old.batch then bad(id .. ' is a batch: a put cannot change it') end
      created_of[id], where_of[id] = old.created, locate(k, id, old)
    end
  end

  -- The lists' ends (before the first write); the delayed list's only when
  -- a job may go there: delayed, and put without an update mode (as put).
  local function to_list(i)
    local p = parsed[i]
    if p then return p.due > now and p.mode == 'create' end
    return dues[i] ~= nil and dues[i] > now
  end
  local list_delayed = false
  if next(parsed) or next(dues) then
    for i = 1, count do
      if to_list(i) then list_delayed = true; break end
    end
  end
  local pl = place.begin(k, now, true, list_delayed)
  -- (the numbers, read: taken in one HINCRBY once the ids are chosen)
  local cur = seq_room(k, stored)
  local seq, seqs, last = cur + 1, {}, cur + stored
  for i = 1, count do
    if ids[i] == GENERATE then
      -- A generated id is never one this call names.
      local id, s
      id, s, last = fresh_id(k, now, seq, last, function(gid)
        return present[gid] ~= nil or redis.call('HEXISTS', k.jobs, gid) == 1
      end)
      ids[i], codes[i], present[id], latest[id], seqs[i] = id, id, true, i, s
      seq = seq + 1
    elseif codes[i] > 0 then
      seqs[i], seq = seq, seq + 1
    end
  end
  redis.call('HINCRBY', k.meta, 'seq', last - cur)
  for id, where in pairs(where_of) do take_out(k, id, where) end
  -- Each job placed once, as its last version, in the call's order (a
  -- generated id that was taken gets a number above the batch's block, so
  -- the batch's numbers need not rise; place compares them).
  for i = 1, count do
    local id, s = ids[i], seqs[i]
    if s and latest[id] == i then
      local p = parsed[i]
      if p then
        place.job(pl, id, new_job(p, s, created_of[id] or now), to_list(i))
      else -- pack's common cases, without a table per job
        place.add(pl, id, nil, struct.pack('>I7I2', s, 0) .. id, dues[i] or now, 0, s, true,
                  bodies[i])
      end
    end
  end
  place.write(pl)
  if k.history then
    local n = 0
    for _, c in ipairs(codes) do if type(c) ~= 'number' or c > 0 then n = n + 1 end end
    history.count(k, now, 'p', n)
  end
  return codes
end

---------------------------------------------------------------- read

--[[ redisched_get: read one job.
ARGV: id [NOBODY] [DEPS] [NOW ms]   (NOBODY: version 33; the body is '')
Output: nil when there is no such job; else a flat field/value array: id,
  state (delayed|ready|reserved|dead|done|blocked), body, priority, created, due,
  attempts, max_attempts, ttr, backoff, backoff_base, backoff_cap, and when
  present error; reserved adds token, reserved_at, deadline; dead adds died;
  done adds finished, expires; then always own_ttr (1: ttr is the job's own,
  put with TTR; 0: the default, reserve's TTR applies). A delayed job whose
  due time has come is ready (read-only: the clock is read only for a
  delayed job). A job put with AFTER (version 35) ends with deps_total and
  deps_left (pending; 0 once released); with DEPS also deps, each
  dependency's {topic, id, policy, outcome (pending|done|failed|dropped),
  value (a done one's result, a failed one's error)}, as they now are.
]]
function fcall.get(keys, args)
  local k = check_keys(keys)
  local id = id_arg(args[1])
  local o = options(args, 2, #args, flows.GET_OPTIONS)
  now_arg(o)
  local rec = redis.call('HGET', k.jobs, id)
  if not rec then
    sharded(k) -- (a miss, and only then, looks for a spread topic)
    return nil
  end
  local j = record.unpack(rec)
  local w = locate(k, id, j)
  local state, score = w[1], w[4]
  j.token, j.reserved_at, j.worker = w[5], w[6], w[7]
  if state == 'delayed' and score <= clock(o) then
    state, j.due = 'ready', score
  end
  if o.NOBODY then j.body = '' end
  local f = job_fields(id, j, state, score)
  if j.batch then flows.batch_fields(j, f) elseif j.deps then flows.fields(k, id, j, state, f, o.DEPS) end
  return f
end

local STATE_SETS = { delayed = true, ready = true, reserved = true, dead = true, done = true, blocked = true }

--[[ redisched_list: jobs of one state, in the order they will leave it.
ARGV: state (delayed|ready|reserved|dead|done|blocked) offset count [NOBODY] [NOW ms]
  offset: 0..2^40; count: 1..1000. NOBODY leaves bodies out (body is '').
  "peek" is list ready 0 n: the next n jobs reserve would hand out.
  Due delayed jobs are made ready first, as reserve does (list's only write).
  In a backlog, due jobs still in delayed are listed as ready after the
  ready set, in due order; delayed lists only jobs not yet due.
Output: {total in that state, job, job...}, each job as redisched_get's array.
]]
local function list(keys, args)
  local k = check_keys(keys)
  local state = args[1] and args[1]:lower()
  if not STATE_SETS[state] then
    bad('state must be delayed, ready, reserved, dead, done or blocked, got ' .. show(args[1]))
  end
  local offset = int_arg(args[2], 'offset', 0, OFFSET_MAX)
  local count = int_arg(args[3], 'count', 1, BATCH_MAX)
  local o = options(args, 4, #args, OPT_NOBODY_NOW)
  local now = clock(o)
  -- The page is read as it will be once the due jobs are made ready, and
  -- its records checked, before the promotion (the only write) is made.
  local plan = waiting.promotion(k, now)
  local npromoted = plan and plan.n or 0
  local set = k[state]
  local entries, total -- entries: {member, score, state}
  -- Delayed jobs: the first ndue of the lane are due (npromoted of those
  -- move now, the rest are a backlog).
  local delayed_lane, ndue = nil, npromoted
  local backlog = plan and plan.backlog
  if state == 'delayed' or (state == 'ready' and backlog) then
    delayed_lane = waiting.lane(k, 'delayed')
    if backlog then ndue = waiting.due(k, now) end
  end
  if state == 'ready' then
    local lane = waiting.lane(k, 'ready')
    local nready = waiting.size(lane) + npromoted
    total, entries = nready + ndue - npromoted, {}
    if offset < nready then
      local page = waiting.page(lane, offset, count, plan)
      for i = 1, #page / 2 do entries[i] = { page[2 * i - 1], tonumber(page[2 * i]), 'ready' } end
    end
    if #entries < count and offset + #entries < total then
      local from = offset + #entries - nready
      local n = math.min(count - #entries, total - nready - from)
      local page = waiting.page(delayed_lane, npromoted + from, n)
      for i = 1, #page / 2 do
        entries[#entries + 1] = { page[2 * i - 1], tonumber(page[2 * i]), 'due' }
      end
    end
  elseif state == 'delayed' then
    total = waiting.size(delayed_lane) - ndue
    local page = waiting.page(delayed_lane, ndue + offset, count)
    entries = {}
    for i = 1, #page / 2 do entries[i] = { page[2 * i - 1], tonumber(page[2 * i]), 'delayed' } end
  else
    total = state == 'reserved' and reservations.count(k) or redis.call('ZCARD', set)
    local page = redis.call('ZRANGE', set, offset, offset + count - 1, 'WITHSCORES')
    entries = {}
    for i = 1, #page / 2 do
      -- (the reserved set's pin comes last, after every reservation)
      if page[2 * i - 1] ~= PIN.member then
        entries[#entries + 1] = { page[2 * i - 1], tonumber(page[2 * i]), state }
      end
    end
  end
  local ids = {}
  for i, e in ipairs(entries) do
    if state == 'reserved' then ids[i] = reserved_id(e[1])
    elseif state == 'ready' or state == 'delayed' then ids[i] = member_id(e[1])
    else ids[i] = e[1] end
  end
  local recs = known.read(k, ids).recs
  local leases = state == 'reserved' and #ids > 0 and redis.call('HMGET', k.leases, unpack(ids))
  waiting.promote(k, plan)
  local out = { total }
  for i, id in ipairs(ids) do
    local rec = recs[i]
    if rec then
      local j = record.unpack(rec)
      if o.NOBODY then j.body = '' end
      if leases and leases[i] then
        local _
        j.token, j.reserved_at, _, j.worker = parse_lease(leases[i])
      end
      local e = entries[i]
      local f
      if e[3] == 'due' then
        j.due = e[2]
        f = job_fields(id, j, 'ready', e[2])
      else
        f = job_fields(id, j, state, e[2])
      end
      if j.batch then flows.batch_fields(j, f) elseif j.deps then flows.fields(k, id, j, state, f) end
      out[#out + 1] = f
    end
  end
  return out
end

--[[ redisched_stats: counts of one topic (read-only: moves nothing).
ARGV: [NOW ms]
Output: flat field/value array: delayed, ready, reserved, dead, done, paused
  (0|1), next_due (earliest due time of a delayed job not yet due, -1 if
  none), and the totals kept since the topic began: failed_total, dead_total,
  lapsed_total; the limits (redisched_limit) and limit_used; schedules (how
  many, redisched_schedule). Delayed jobs whose due time has come count as
  ready. Version 35: blocked (jobs waiting for others, flows) and outbox
  (entries for movers, not yet carried out). Version 38: pause_end (when a
  timed pause ends, -1: not paused, or no end). With the 12th key (version 34), also the history's totals
  (redisched_history): put_total, started_total, done_total, and wait_total
  (ms from due to start, summed over the jobs started).
]]
function fcall.stats(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_NOW)
  local now = clock(o)
  local meta = redis.call('HMGET', k.meta, 'failed_total', 'dead_total', 'lapsed_total',
                           'limit_rate', 'limit_window', 'limit_concurrency', 'limit_start', 'limit_used',
                           'limit_aging', 'schedules', 'shards')
  local ready, delayed = waiting.lane(k, 'ready'), waiting.lane(k, 'delayed')
  local rate = tonumber(meta[4] or 0)
  local used = 0
  if rate > 0 then
    local window = tonumber(meta[5])
    if tonumber(meta[7] or -1) == now - now % window then used = tonumber(meta[8] or 0) end
  end
  local due, due_in_list = waiting.due(k, now)
  local paused, pause_end = waiting.paused_at(k, ready.paused, now)
  local out = {
    'delayed', waiting.size(delayed) - due,
    'ready', waiting.size(ready) + due,
    'reserved', reservations.count(k), 'dead', redis.call('ZCARD', k.dead),
    'done', redis.call('ZCARD', k.done), 'paused', paused and 1 or 0,
    'next_due', waiting.next_due(k, now, due_in_list),
    'failed_total', tonumber(meta[1] or 0), 'dead_total', tonumber(meta[2] or 0),
    'lapsed_total', tonumber(meta[3] or 0),
    'limit_rate', rate, 'limit_window', tonumber(meta[5] or 0),
    'limit_concurrency', tonumber(meta[6] or 0), 'limit_used', used,
    'limit_aging', tonumber(meta[9] or 0),
    'schedules', tonumber(meta[10] or 0),
    'shards', meta[11] == '*' and -1 or (meta[11] and select(2, meta[11]:gsub('%S+', ''))) or 0,
    -- Version 35: jobs waiting for others (flows), and outbox entries not
    -- yet carried out.
    'blocked', redis.call('ZCARD', k.blocked), 'outbox', redis.call('XLEN', k.outbox),
    -- Version 38: when a timed pause ends (-1: not paused, or no end).
    'pause_end', pause_end,
  }
  if k.history then
    local t = history.totals(k.history)
    for j, name in ipairs({ 'put_total', 'started_total', 'done_total' }) do
      out[#out + 1], out[#out + 2] = name, t[j]
    end
    out[#out + 1], out[#out + 2] = 'wait_total', t[7]
  end
  return out
end

---------------------------------------------------------------- take

-- How many jobs a limited topic may hand out now, at most n. Returns that
-- room and the limits: {rate, start, window, used = the rate's window and
-- its count so far (for started() and next_time), capped = the cap left
-- less room than n}.
local function limit_room(k, now, n)
  local l = redis.call('HMGET', k.meta, 'limit_rate', 'limit_window', 'limit_concurrency',
                       'limit_start', 'limit_used', 'limit_aging')
  local rate, cap = tonumber(l[1] or 0), tonumber(l[3] or 0)
  local room, lim = n, {}
  if l[6] then lim.aging = tonumber(l[6]) end
  if rate > 0 then
    lim.rate, lim.window = rate, tonumber(l[2])
    lim.start = now - now % lim.window
    lim.used = tonumber(l[4] or -1) == lim.start and tonumber(l[5] or 0) or 0
    room = math.max(math.min(room, rate - lim.used), 0)
  end
  if cap > 0 then
    local free = cap - reservations.count(k)
    if free < room then room, lim.capped = math.max(free, 0), true end
  end
  return room, lim
end

-- n jobs of a limited topic were handed out: counted in the rate's window.
local function started(k, lim, n)
  if lim and lim.rate and n > 0 then
    redis.call('HSET', k.meta, 'limit_start', lim.start, 'limit_used', lim.used + n)
  end
end

-- The start of reserve and pull: due jobs made ready (at most a batch), then
-- up to count of them popped (no more than a limited topic's limits allow).
-- With recover, when fewer than count can be handed out, lapsed
-- reservations (up to REQUEUE_INLINE) are requeued first. Returns, when
-- paused, when the pause ends (-1: no end), else nil and the popped
-- {member, score or false, ...} to hand out, the
-- backlog (nil if none), the limits (nil if none), and what the caller
-- needs to read the popped jobs' records (taken_records).
--
-- It decides before its first write. In the common case (waiting.front's
-- taken, and no lapsed reservation to requeue) it writes nothing: the
-- caller reads the jobs' records, decides what to answer, and then takes
-- them (taken_records, waiting.take). Otherwise it reads the record of
-- every job it may hand out (waiting.candidates) or requeue, and checks
-- them before it moves anything: a record this version does not read
-- refuses the call.
local function take(k, now, count, recover)
  local f = waiting.front(k, now, count)
  if f.sharded then sharded(k) end -- (a spread topic says where its jobs are)
  -- The lapsed reservations reserve may recover, read once when fewer than
  -- count jobs (n) may come from the fronts; none: nothing lapsed to
  -- requeue (nil).
  local lapsed, lapsed_read
  local function no_lapsed(n)
    if recover and n < count and not lapsed_read then
      lapsed_read = true
      lapsed = redis.call('ZRANGEBYSCORE', k.reserved, '-inf', now, 'LIMIT', 0, REQUEUE_INLINE)
      if #lapsed == 0 then lapsed = nil end
    end
    return not lapsed
  end
  if f.taken and no_lapsed(f.n) then
    if f.n == 0 then return nil, {} end
    return nil, f.popped, nil, nil, f
  end
  local paused, pause_end = waiting.paused_at(k, f.paused, now)
  if paused then
    waiting.promote(k, f.plan)
    return pause_end
  end
  local room, lim = count, nil
  if f.nmarks > 0 then room, lim = limit_room(k, now, count) end
  local age = lim and lim.aging
  -- the ids of the jobs this call may hand out, requeue or rewrite
  local may = waiting.candidates(k, f, count, age)
  no_lapsed(f.seen)
  if lapsed then
    for _, m in ipairs(lapsed) do may[#may + 1] = reserved_id(m) end
    seq_room(k, #lapsed) -- (a job put back takes a number)
  end
  local kn = known.read(k, may)

  waiting.promote(k, f.plan)
  if lapsed and math.min(room, waiting.size(waiting.lane(k, 'ready'))) < count then
    requeue_members(k, lapsed, now, kn)
    if lim then room, lim = limit_room(k, now, count) end
  end
  local popped = waiting.pop(k, f, room, age)
  -- (a timed pause that ended: its mark goes, after the pop that skipped it)
  if f.paused then waiting.end_pause(k) end
  return nil, popped, f.backlog, lim, kn
end

-- The ids and records of the n jobs take popped (t: its last result). In
-- take's common case they are read here, and the caller, once it has
-- decided (unpacking a record this version does not read refuses the call
-- with nothing written), calls waiting.take(k, t) before its first write.
local function taken_records(k, popped, n, t)
  local ids = {}
  for i = 1, n do ids[i] = member_id(popped[2 * i - 1]) end
  if t.taken then return ids, redis.call('HMGET', k.jobs, unpack(ids)) end
  return ids, known.records(k, t, ids)
end

-- reserve's and pull's next: 0 when the caller should call again at once,
-- otherwise the earliest time a delayed job falls due (and for reserve, a
-- reservation lapses), -1 when nothing is scheduled.
local function next_time(k, now, handed, count, backlog, lapses, lim)
  -- The rate is used up: nothing more before its next window.
  if lim and lim.rate and handed < count and lim.used + handed >= lim.rate then
    return lim.start + lim.window
  end
  if handed >= count or backlog then return 0 end
  local t = waiting.next_due(k, -1, 0)
  -- Held by the cap: room comes when a reservation ends (a worker looks
  -- again when its own ack is in) or lapses.
  if lapses or (lim and lim.capped) then
    local d = reservations.earliest(k)
    -- A pull recovers no lapsed reservation (a reserve, requeue or the
    -- sweeper brings it back): its time is the first one still to lapse.
    if not lapses and d >= 0 and d <= now then d = reservations.first_after(k, now) end
    if d >= 0 and (t < 0 or d < t) then t = d end
  end
  if t >= 0 and t <= now then return 0 end
  return t
end

--[[ redisched_reserve: hand out up to count ready jobs for a time-to-run.
ARGV: count [TTR ms] [WORKER name] [NOW ms]
  count: 1..1000. TTR applies to jobs put without one of their own (30000).
  WORKER (version 30): who reserves, 1..128 bytes without control
  characters (e.g. its worker registry id): get and list show it on the
  reservation, and the job's history on the attempt when it fails or lapses.
  Due delayed jobs become ready first (up to 1000); when fewer than count
  jobs can be handed out (fewer are ready, or a limit leaves less room),
  lapsed reservations (up to 100) are requeued first (an attempt each,
  freeing the slots they held under a cap), then jobs are handed out in
  order.
Output: {now, next, paused, job, job...}
  next: 0 = call again at once (count jobs were handed out, or more are due
  or lapsed than one call moves); -1 = nothing is scheduled; otherwise the
  earliest time (ms) a delayed job falls due or a reservation (this call's
  included) lapses.
  paused: 1 when the topic is paused (no jobs are handed out; next is when
  a timed pause ends, -1 for one without end).
  job: {id, body, token, attempt, max_attempts, priority, created, due, deadline, keep}
  The token must accompany ack, release, fail and touch of that job. keep:
  the retention the job was put with (KEEP; 0 if none), for its ack's KEEP. A job
  put with TTR 0 is delivered at most once: it is removed by this call (as
  pull removes it), with token 0, deadline 0 and keep 0 (KEEP or not) and
  no reservation.
]]
-- reserve's and reservejob's options: TTR (nil: none given) and WORKER.
local function reserve_options(o)
  local ttr = o.TTR and int_arg(o.TTR, 'TTR', 1, TTR_MAX)
  local worker = o.WORKER
  if worker and (worker == '' or #worker > WORKER_ID_MAX or worker:find('%c')) then
    bad('WORKER must be 1..' .. WORKER_ID_MAX .. ' bytes without control characters, got ' .. show(worker))
  end
  return ttr, worker
end

function fcall.reserve(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  local o = options(args, 2, #args, OPT_RESERVE)
  local ttr_arg, worker = reserve_options(o)
  local now = clock(o)
  local pause_end, popped, backlog, lim, taken = take(k, now, count, true)
  if pause_end then return { now, pause_end, 1 } end
  local out = { now, 0, 0 }
  local n = #popped / 2
  if n > 0 then
    local ids, recs = taken_records(k, popped, n, taken)
    -- The records stay as they are: the reservation lives in the reserved
    -- set and the leases hash. A job of TTR 0 is taken for good instead, as
    -- pull takes it: token 0, deadline 0, no reservation.
    local leases, zadd, w, once, per_ttr, first = {}, {}, 0, nil, {}, nil
    for i, id in ipairs(ids) do
      local rec = recs[i]
      if rec then
        -- A record of head's case is read without a table of its own (the
        -- most frequent path of all; record.PLAIN holds the rest).
        local j, body, created, due, token, at
        created, token, at = record.head(rec)
        if created then
          j, body, due = record.PLAIN, rec:sub(at), created
        else
          j = record.unpack(rec)
          body, created, due, token = j.body, j.created, j.due, j.place or j.seq
        end
        local ttr = j.ttr or ttr_arg or DEFAULT_TTR
        if ttr == 0 then
          once = once or {}
          once[#once + 1] = id
          if j.keep then finished(id) end -- taken for good: gone for its waiter
          out[#out + 1] = { id, body, 0, (j.attempts or 0) + 1, max_attempts(j), j.priority, created, due, 0, 0 }
        else
          local deadline = now + ttr
          -- Texts made once per call and time-to-run, not per job (number
          -- formatting is a good part of a batch's time inside Redis): the
          -- deadline and the lease's tail.
          local t = per_ttr[ttr]
          if not t then
            t = { fmt(deadline), lease_tail(now, ttr, worker) }
            per_ttr[ttr] = t
            if not first or deadline < first then first = deadline end
          end
          local tok = fmt(token)
          leases[w + 1], leases[w + 2] = id, tok .. t[2]
          zadd[w + 1], zadd[w + 2] = t[1], lease_member(id, tok)
          w = w + 2
          out[#out + 1] = { id, body, token, (j.attempts or 0) + 1, max_attempts(j), j.priority, created, due,
                            deadline, j.keep or 0 }
        end
      end
    end
    -- Decided: the writes (take's first, when it left them to this call).
    if taken.taken then waiting.take(k, taken) end
    if w > 0 then
      leases[w + 1], leases[w + 2] = PIN.lease, PIN.lease_value
      redis.call('HSET', k.leases, unpack(leases))
      reservations.announce(k, first)
      -- The pin first: a set that is still a listpack becomes a skiplist
      -- before the reservations go in.
      redis.call('ZADD', k.reserved, '+inf', PIN.member, unpack(zadd))
    end
    if once then
      redis.call('HDEL', k.jobs, unpack(once))
      gone.remember(k, once, gone.window(k), now)
      flows.notify(k, once, 'done', '')
    end
    if k.history then history.started(k, out, 8, once and #once or 0) end
  end
  started(k, lim, #out - 3)
  out[2] = next_time(k, now, #out - 3, count, backlog, true, lim)
  return out
end

--[[ redisched_pull: take up to count ready jobs for good (at-most-once).
ARGV: count [NOW ms]
  As reserve, but lapsed reservations are not recovered (requeue does that).
Output: {now, next, paused, job, job...} as reserve (next counts only delayed
  jobs, and under a full concurrency cap the first reservation still to lapse),
  each job {id, body, attempt, max_attempts, priority, created, due}; the
  jobs are gone.
]]
function fcall.pull(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  local o = options(args, 2, #args, OPT_NOW)
  local now = clock(o)
  local pause_end, popped, backlog, lim, taken = take(k, now, count, false)
  if pause_end then return { now, pause_end, 1 } end
  local out = { now, 0, 0 }
  local n = #popped / 2
  if n > 0 then
    local ids, recs = taken_records(k, popped, n, taken)
    for i, id in ipairs(ids) do
      if recs[i] then
        local j = record.unpack(recs[i])
        out[#out + 1] = { id, j.body, (j.attempts or 0) + 1, max_attempts(j), j.priority, j.created, j.due }
        if j.keep then finished(id) end -- taken for good: gone for its waiter
      end
    end
    if taken.taken then waiting.take(k, taken) end
    redis.call('HDEL', k.jobs, unpack(ids))
    gone.remember(k, ids, gone.window(k), now)
    flows.notify(k, ids, 'done', '')
    if k.history then history.started(k, out, 7, #out - 3) end
  end
  started(k, lim, #out - 3)
  out[2] = next_time(k, now, #out - 3, count, backlog, false, lim)
  return out
end

--[[ redisched_reservejob: one job, named by its id, reserved (version 38).
ARGV: id [TTR ms] [WORKER name] [NOW ms]
  TTR and WORKER as reserve's. The job may be ready, delayed (due or not)
  or dead: it is taken from there and reserved, ahead of every other job
  and whatever the topic's pause and limits (it is a choice, not a turn:
  beanstalkd's reserve-job). A dead job comes back as kick brings it, its
  attempts counted from 0 again, under a new token. A job put with TTR 0
  is taken for good, as reserve takes it.
Output: {outcome, now, job}: outcome 1 with the job, as reserve hands it
  out ({id, body, token, attempt, max_attempts, priority, created, due,
  deadline, keep}); 0 (no such job) or -2 (reserved, blocked or finished:
  not to be had) with no job, and nothing changed.
]]
function fcall.reservejob(keys, args)
  local k = check_keys(keys)
  local id = id_arg(args[1])
  local o = options(args, 2, #args, OPT_RESERVE)
  local ttr_arg, worker = reserve_options(o)
  local now = clock(o)
  local rec = redis.call('HGET', k.jobs, id)
  if not rec then
    sharded(k) -- (no such job: maybe the topic is spread)
    return { MISSING, now }
  end
  local j = record.unpack(rec)
  local where = locate(k, id, j)
  local state = where[1]
  if state ~= 'ready' and state ~= 'delayed' and state ~= 'dead' then return { WRONG_STATE, now } end
  local ttr = j.ttr or ttr_arg or DEFAULT_TTR
  if state == 'delayed' then j.due = where[4] end -- (its set's score, when there)
  -- Decided: the writes (take_seq's first: it refuses before it writes).
  if state == 'dead' then
    renew(j, take_seq(k, 1)) -- (a token the failed reservation never had)
    j.attempts, j.due = 0, now
    if ttr > 0 then redis.call('HSET', k.jobs, id, record.pack(j)) end
  end
  take_out(k, id, where)
  local token = j.place or j.seq
  local out = { OK, now, { id, j.body, token, (j.attempts or 0) + 1, max_attempts(j), j.priority, j.created,
                           j.due, now + ttr, j.keep or 0 } }
  if ttr == 0 then
    local job = out[3]
    job[3], job[9], job[10] = 0, 0, 0
    if j.keep then finished(id) end -- taken for good: gone for its waiter
    redis.call('HDEL', k.jobs, id)
    gone.remember(k, { id }, gone.window(k), now)
    flows.notify(k, { id }, 'done', '')
  else
    local tok = fmt(token)
    redis.call('HSET', k.leases, id, tok .. lease_tail(now, ttr, worker), PIN.lease, PIN.lease_value)
    reservations.announce(k, now + ttr)
    redis.call('ZADD', k.reserved, '+inf', PIN.member, now + ttr, lease_member(id, tok))
  end
  history.count(k, now, 's', 1, 'w', math.max(now - j.due, 0), 'd', ttr == 0 and 1 or 0)
  return out
end

---------------------------------------------------------------- settle

-- The job if id is reserved under token (and the reservation's member);
-- otherwise nil and the code saying why not.
local function held(k, id, token)
  local lm = lease_member(id, token)
  if not redis.call('ZSCORE', k.reserved, lm) then return nil, not_held(k, id) end
  local rec = redis.call('HGET', k.jobs, id)
  if not rec then return nil, MISSING end
  return record.unpack(rec), lm
end

local function token_arg(v)
  return int_arg(v, 'token', 0, SEQ_MAX)
end

-- A token argument and its lease member's text (fmt of it): the argument
-- itself when it is written as fmt writes it, as tokens from reserve are,
-- which spares formatting it again.
local function token_text(v)
  if v and #v <= 15 and v:find('^[1-9]%d*$') then return tonumber(v), v end
  local n = token_arg(v)
  return n, fmt(n)
end

-- Acks pairs {id, token, token's text} in turn (a repeated id answers as
-- an ack after the first one would: 0, or -2 with KEEP); returns their codes.
-- The common case, every pair held, no id twice and no KEEP, takes one
-- ZREM: its count says all were there. Otherwise the leases say which were
-- held (a lease names the reservation in reserved: they change together).
-- That ZREM is the call's first write and its check at once: nothing after
-- it can fail (not_held's SHARDED comes only from a spread topic or a
-- former shard, which hold no reservations, so the ZREM took nothing).
-- removed: what that ZREM answered when the caller has made it already
-- (ackmany's batch check), else nil. Without KEEP, window and now are
-- gone.prepare's (the acked ids' retry window). With KEEP, a window is an
-- ack's RESULT kept for it at least (version 38): the ids enter the window
-- too, and a job put with a longer KEEP of its own is kept for that.
local function settle_acks(k, pairs_, keep, now, result, removed, window)
  local n, members, ids, seen, twice = #pairs_, {}, {}, {}, false
  for i, p in ipairs(pairs_) do
    members[i], ids[i] = lease_member(p[1], p[3]), p[1]
    if seen[p[1]] then twice = true end
    seen[p[1]] = true
  end
  -- (With KEEP the records are read first: the reservations end only once
  -- that cannot fail.)
  if removed == nil then
    removed = not twice and keep == 0 and redis.call('ZREM', k.reserved, unpack(members))
  end
  local codes, gone_ids, gone_members = {}, ids, members
  if removed == n then
    for i = 1, n do codes[i] = OK end
  else
    gone_ids, gone_members = {}, {}
    local leases, acked = redis.call('HMGET', k.leases, unpack(ids)), {}
    for i, p in ipairs(pairs_) do
      local id = p[1]
      if acked[id] then
        codes[i] = keep > 0 and WRONG_STATE or MISSING
      elseif leases[i] and parse_lease(leases[i]) == p[2] then
        acked[id] = true
        gone_ids[#gone_ids + 1], gone_members[#gone_members + 1] = id, members[i]
        codes[i] = OK
      else
        codes[i] = not_held(k, id)
      end
    end
  end
  if removed then gone_members = nil end -- (the ZREM took them out)
  if #gone_ids == 0 then return codes end
  local recs = keep > 0 and redis.call('HMGET', k.jobs, unpack(gone_ids))
  local jobs = {}
  if recs then
    for i = 1, #gone_ids do jobs[i] = recs[i] and record.unpack(recs[i]) end
  end
  if gone_members then redis.call('ZREM', k.reserved, unpack(gone_members)) end
  redis.call('HDEL', k.leases, unpack(gone_ids))
  if keep > 0 then
    local zadd = {}
    for i, id in ipairs(gone_ids) do
      local j = jobs[i]
      if j then
        j.finished, j.result = now, result
        redis.call('HSET', k.jobs, id, record.pack(j))
        local kept = window and j.keep and j.keep > keep and j.keep or keep
        zadd[#zadd + 1], zadd[#zadd + 2] = now + kept, id
        finished(id)
      end
    end
    if #zadd > 0 then redis.call('ZADD', k.done, unpack(zadd)) end
    trim_done(k, now)
    -- (so that a delete of the kept job leaves the trace an ack without
    -- KEEP leaves: a put retried in create mode, a late depend, find it)
    if window then gone.remember(k, gone_ids, window, now) end
  else
    redis.call('HDEL', k.jobs, unpack(gone_ids))
    gone.remember(k, gone_ids, window, now)
  end
  flows.notify(k, gone_ids, 'done', result)
  history.count(k, now, 'd', #gone_ids)
  return codes
end

--[[ redisched_ack: a reserved job is done.
ARGV: id token [KEEP ms] [RESULT bytes] [FORWARD] [MAXBODY bytes] [NOW ms]
  KEEP: keep the job, state done, this long (for lookups, for waiters, and
  to refuse puts of the same id); default 0: the job is removed at once.
  Give the keep reserve reported for a job put with KEEP. An ack with KEEP
  publishes the id on P:{T}:done ("Waiting for a job") and drops up to 100
  retained jobs whose window has ended.
  RESULT: the handler's result, kept with the job (get shows it), and sent
  to the jobs waiting for this one (version 35); at most MAXBODY bytes
  (1048576), as a body. The job is kept for the topic's retry window at
  least (version 38), or for the KEEP given or the one it was put with
  when longer, and its id enters the window as an ack's without KEEP
  does: a job waiting for this one may have been put already, its depend
  still in an outbox on its way here, and it is sent the result when it
  comes in that window. With a retry window of 0, a RESULT without KEEP is
  refused unless jobs wait for this one. FORWARD (version 36): RESULT is for the jobs
  waiting for this one (a worker that cannot tell whether any waits: the
  C++ Worker's set_result); where it would be refused, it is dropped.
Output: 1 acked, 0 no such job, -2 not reserved, -3 stale token.
]]
function fcall.ack(keys, args)
  local k = check_keys(keys)
  local id = id_arg(args[1])
  local token, text = token_text(args[2])
  local o = options(args, 3, #args, OPT_ACK)
  local keep = o.KEEP and int_arg(o.KEEP, 'KEEP', 0, DELAY_MAX) or 0
  local result, window = o.RESULT, nil
  if result then
    local max = body_limit(o)
    if #result > max then bad('RESULT is ' .. #result .. ' bytes, over the limit of ' .. max) end
    -- A result keeps the job for the retry window at least: a job waiting
    -- for it may have been put already, its depend still on its way
    -- (flows), and the mover that carries it late must find the result,
    -- not a trace without it. With no window, no depend can come late.
    window = gone.window(k)
    if window > 0 then
      if keep < window then keep = window end
    else
      window = nil
      if keep == 0 and redis.call('HEXISTS', k.flow, id) == 0 then
        if not o.FORWARD then
          bad('RESULT needs KEEP, a job waiting for this one, or a retry window: ' ..
            'a result is kept with its finished job')
        end
        result = nil -- (FORWARD: for the jobs waiting, and none does)
      end
    end
  elseif o.FORWARD then
    bad('FORWARD goes with RESULT')
  elseif o.MAXBODY then
    body_limit(o)
  end
  now_arg(o)
  if keep == 0 then
    -- The common case: the ZREM checks and ends the lease.
    local window, now = gone.prepare(k, o)
    if k.history and not now then now = clock(o) end
    if redis.call('ZREM', k.reserved, lease_member(id, text)) == 1 then
      redis.call('HDEL', k.jobs, id)
      redis.call('HDEL', k.leases, id)
      gone.remember(k, { id }, window, now)
      flows.notify(k, { id }, 'done', result)
      history.count(k, now, 'd', 1)
      return OK
    end
    return not_held(k, id)
  end
  return settle_acks(k, { { id, token, text } }, keep, clock(o), result, nil, window)[1]
end

--[[ redisched_ackmany: many reserved jobs are done.
ARGV: count id token [id token...] [KEEP ms] [NOW ms]    (count: 1..1000)
Output: an array of ack's codes, one per job, in order, as if acked one by
  one (an id repeated after its ack answers 0, or -2 with KEEP). With KEEP,
  the acked ids go out in one message on P:{T}:done. No RESULT: results are
  per job (ack them one by one).
]]
function fcall.ackmany(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  if #args < 1 + 2 * count then bad('expected ' .. count .. ' id token pairs') end
  -- The common case, no option and every token as reserve writes it,
  -- checked for the whole batch at once rather than pair by pair; when the
  -- ZREM finds every pair held, nothing else is looked at.
  local removed, window, now
  if #args == 1 + 2 * count then
    local ids, tokens, members, plain = {}, {}, {}, true
    for i = 1, count do
      local id, token = args[2 * i], args[2 * i + 1]
      if id == '' or #id > ID_MAX or token == '' or #token > 15 then plain = false; break end
      ids[i], tokens[i], members[i] = id, token, id .. '\0' .. token
    end
    if plain then
      local all = ',' .. table.concat(tokens, ',')
      plain = not all:find(',[^1-9]') and not all:find('[^%d,]') and not table.concat(ids):find('%c')
    end
    if plain then
      window, now = gone.prepare(k, NO_OPTIONS)
      if k.history and not now then now = clock(NO_OPTIONS) end
      removed = redis.call('ZREM', k.reserved, unpack(members))
      if removed == count then
        redis.call('HDEL', k.leases, unpack(ids))
        redis.call('HDEL', k.jobs, unpack(ids))
        gone.remember(k, ids, window, now)
        flows.notify(k, ids, 'done', '')
        history.count(k, now, 'd', count)
        local codes = {}
        for i = 1, count do codes[i] = OK end
        return codes
      end
    end
  end
  local pairs_ = {}
  for i = 1, count do
    local token, text = token_text(args[2 * i + 1])
    pairs_[i] = { id_arg(args[2 * i]), token, text }
  end
  local o = options(args, 2 + 2 * count, #args, OPT_KEEP_NOW)
  local keep = o.KEEP and int_arg(o.KEEP, 'KEEP', 0, DELAY_MAX) or 0
  now_arg(o)
  if keep > 0 then
    now = clock(o)
  elseif not window then
    window, now = gone.prepare(k, o)
  end
  if k.history and not now then now = clock(o) end
  return settle_acks(k, pairs_, keep, now, nil, removed, window)
end

--[[ redisched_release: put a reserved job back, not counted as an attempt.
ARGV: id token [DELAY ms] [PRIORITY -4294966295..1000] [NOW ms]
Output: a code as ack.
]]
function fcall.release(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local o = options(args, 3, #args, OPT_DELAY_PRIORITY_NOW)
  local delay = o.DELAY and int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX) or 0
  local prio = o.PRIORITY and int_arg(o.PRIORITY, 'PRIORITY', PRIO_MIN, PRIO_MAX)
  local now = clock(o)
  local j, lm = held(k, id, token)
  if not j then return lm end
  renew(j, take_seq(k, 1))
  if prio then j.priority = prio end
  j.due = after(now, delay)
  end_lease(k, id, lm)
  place.one(k, id, j, now)
  return OK
end

--[[ redisched_fail: the attempt failed; retry after backoff or bury.
ARGV: id token error [DEAD] [DELAY ms] [ATTEMPTS n] [PRIORITY n] [NOW ms]
  error: text kept on the job (at most 8192 bytes). DEAD: do not retry.
  DELAY: retry after this long instead of the job's own backoff.
  ATTEMPTS: the handler's max attempts (1..1000): stored on the job as its
  max_attempts before the call decides (dead when the attempts made reach it).
  PRIORITY (version 37): the job's new priority, retried or dead (beanstalkd's
  bury takes one).
  A job put with KEEP that goes dead is published on P:{T}:done, as lapsed
  ones that go dead are (requeue, reserve).
Output: a code as ack, or on success the state it went to: 'delayed',
  'ready' (a zero backoff) or 'dead' (a status string).
]]
function fcall.fail_job(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local err = args[3]
  if err == nil then bad('error text is missing') end
  if #err > ERROR_MAX then bad('error text is over ' .. ERROR_MAX .. ' bytes') end
  local o = options(args, 4, #args, OPT_FAIL)
  local delay = o.DELAY and int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX)
  local attempts = o.ATTEMPTS and int_arg(o.ATTEMPTS, 'ATTEMPTS', 1, ATTEMPTS_MAX)
  local prio = o.PRIORITY and int_arg(o.PRIORITY, 'PRIORITY', PRIO_MIN, PRIO_MAX)
  local now = clock(o)
  local j, lm = held(k, id, token)
  if not j then return lm end
  if prio then j.priority = prio end
  local lease, started, worker, _ = redis.call('HGET', k.leases, id), nil, nil, nil
  if lease then _, started, _, worker = parse_lease(lease) end
  j.error = err
  record.attempt(j, 'failed', started, now, worker)
  if attempts then
    -- Stored as put stores it (the default is not written).
    if attempts == DEFAULT_ATTEMPTS then j.max_attempts = nil else j.max_attempts = attempts end
  end
  local retry = not o.DEAD and j.attempts < max_attempts(j)
  if retry then renew(j, take_seq(k, 1)) end -- (a retry takes a new place)
  redis.call('HINCRBY', k.meta, 'failed_total', 1)
  end_lease(k, id, lm)
  local to = 'dead'
  if retry then
    j.due = after(now, delay or backoff_delay(j))
    to = place.one(k, id, j, now)
  else
    redis.call('HSET', k.jobs, id, record.pack(j))
    redis.call('ZADD', k.dead, now, id)
    redis.call('HINCRBY', k.meta, 'dead_total', 1)
    finished(id) -- dead, kept or not: its waiter has its outcome
    flows.notify(k, { id }, 'failed', err)
  end
  history.count(k, now, 'f', 1, 'x', to == 'dead' and 1 or 0)
  return { ok = to }
end

--[[ redisched_touch: extend a reservation.
ARGV: id token [TTR ms] [NOW ms]
  The new deadline is now + TTR (default: the reservation's time-to-run, as
  reserve set it). A lapsed reservation not yet requeued can be extended.
Output: the new deadline (ms), or a code as ack (0, -2, -3).
]]
function fcall.touch(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local o = options(args, 3, #args, OPT_TTR_NOW)
  local ttr = o.TTR and int_arg(o.TTR, 'TTR', 1, TTR_MAX)
  local now = clock(o)
  local lease = redis.call('HGET', k.leases, id)
  local held_token, _, lease_ttr
  if lease then held_token, _, lease_ttr = parse_lease(lease) end
  if held_token ~= token then return not_held(k, id) end
  local deadline = now + (ttr or lease_ttr)
  reservations.announce(k, deadline)
  redis.call('ZADD', k.reserved, deadline, lease_member(id, token))
  return deadline
end

--[[ redisched_progress: a reserved job's progress, and lines of its log
(version 31).
ARGV: id token count [line...] [PROGRESS value] [NOW ms]
  count: 0..100 log lines, then the lines: UTF-8 text, each cut to its
  first 1024 bytes (less a character the cut would split; get marks it
  cut). The job keeps its latest 100 lines, at most 32768 bytes of them
  (the oldest go first), each with its time and attempt, and counts every
  line it was given (get's log_total).
  PROGRESS: a JSON value (a number, or a small object), 1..1024 bytes:
  the job's progress, with its time and attempt, in place of the last.
  Give lines, PROGRESS or both. The job's record is rewritten (its body
  too), so report a few times a second at most: the C++ Worker gathers a
  handler's reports. Both stay with the job through retries and while it
  is kept done or dead, until it is removed, and an update (REPLACE,
  UPSERT, DEBOUNCE) starts without them. Once stored, the job's id is
  published on the progress channel, named like key 8 (P:{T}:leases).
Output: a code as ack (1 stored; 0, -2, -3 as ack, nothing stored).
]]
local OPT_PROGRESS = { PROGRESS = 1, NOW = 1 }
local function progress(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local count = int_arg(args[3], 'count', 0, LOG_LINES_MAX)
  if #args < 3 + count then bad('expected ' .. count .. ' log line(s)') end
  local o = options(args, 4 + count, #args, OPT_PROGRESS)
  if o.PROGRESS then record.progress_arg(o.PROGRESS) end
  if count == 0 and not o.PROGRESS then bad('nothing to report: give log lines, PROGRESS or both') end
  local lines = {}
  for i = 1, count do lines[i] = record.log_line(args[3 + i], i) end
  local now = clock(o)
  local j, lm = held(k, id, token)
  if not j then return lm end
  local attempt = math.min((j.attempts or 0) + 1, ATTEMPTS_MAX) -- (the one running)
  if o.PROGRESS then j.progress = { attempt = attempt, at = now, value = o.PROGRESS } end
  if count > 0 then record.log(j, lines, attempt, now) end
  redis.call('HSET', k.jobs, id, record.pack(j))
  -- (Last. A user whose ACL names the channels of keys 3, 6 and 7 alone is
  -- refused here, after the write: the ACL needs &P:{T}:*, docs/redis-api.md.)
  redis.call('SPUBLISH', keys[8], id)
  return OK
end

---------------------------------------------------------------- manage

--[[ redisched_delete: remove a job in any state.
ARGV: id [id...]   (at most 1000; an id given twice counts once)
  The ids of removed jobs that had not finished (not done, not dead) are
  published on P:{T}:done: their waiters learn they are gone.
Output: the number of jobs removed (for one id: 1 removed, 0 absent).
]]
function fcall.delete(keys, args)
  local k = check_keys(keys)
  local ids = ids_arg(args)
  local recs = redis.call('HMGET', k.jobs, unpack(ids))
  local gone, where, seen = {}, {}, {}
  for i, id in ipairs(ids) do
    if recs[i] and not seen[id] then
      seen[id] = true
      local j = record.unpack(recs[i])
      gone[#gone + 1] = id
      where[#where + 1] = locate(k, id, j)
    end
  end
  if #gone == 0 then
    sharded(k)
    return 0
  end
  redis.call('HDEL', k.jobs, unpack(gone))
  local unfinished = {}
  for i, id in ipairs(gone) do
    take_out(k, id, where[i])
    if where[i][1] ~= 'done' and where[i][1] ~= 'dead' then
      finished(id)
      unfinished[#unfinished + 1] = id
    end
  end
  -- (a job done or dead told the jobs waiting for it when it finished)
  if #unfinished > 0 then flows.notify(k, unfinished, 'failed', 'deleted') end
  return #gone
end

--[[ redisched_requeue: lapsed reservations back to ready (an attempt each;
dead once attempts reach max_attempts). Safe to run from any number of
processes at once; cheap when nothing lapsed. Also drops up to 100 retained
jobs whose window has ended.
ARGV: [LIMIT n] [NOW ms]     LIMIT: at most this many (1..10000, 1000).
Output: {requeued, buried, next} where next is the earliest deadline still
  pending (ms; at most now when more than LIMIT had lapsed), -1 if none.
]]
function fcall.requeue(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_LIMIT_NOW)
  local limit = limit_arg(o)
  local now = clock(o)
  local lapsed = redis.call('ZRANGEBYSCORE', k.reserved, '-inf', now, 'LIMIT', 0, limit)
  local back, buried = 0, 0
  if #lapsed > 0 then back, buried = requeue_members(k, lapsed, now) end
  trim_done(k, now)
  return { back, buried, reservations.earliest(k) }
end

-- Dead jobs (ids, distinct) back to ready, attempts reset; returns how many
-- were dead.
local function revive(k, ids, now)
  if #ids == 0 then return 0 end
  local died = redis.call('ZMSCORE', k.dead, unpack(ids))
  local live, seen = {}, {}
  for i, id in ipairs(ids) do
    if died[i] and not seen[id] then
      seen[id] = true
      live[#live + 1] = id
    end
  end
  if #live == 0 then return 0 end
  local recs = redis.call('HMGET', k.jobs, unpack(live))
  local jobs, n = {}, 0
  for i = 1, #live do
    if recs[i] then -- (a dead id always has its record)
      n = n + 1
      jobs[n] = record.unpack(recs[i])
      live[n] = live[i]
    end
  end
  if n == 0 then return 0 end
  local seq = take_seq(k, n)
  redis.call('ZREM', k.dead, unpack(live, 1, n))
  local pl = place.begin(k, now)
  for i = 1, n do
    local j = jobs[i]
    renew(j, seq + i - 1)
    j.attempts, j.due = 0, now
    place.job(pl, live[i], j)
  end
  place.write(pl)
  return n
end

--[[ redisched_kick: dead jobs back to ready, attempts reset.
ARGV: id [id...]   (at most 1000; the arguments are all ids: no options)
Output: the number of jobs kicked (ids that are not dead are left alone).
]]
function fcall.kick(keys, args)
  local k = check_keys(keys)
  return revive(k, ids_arg(args), clock(NO_OPTIONS))
end

--[[ redisched_kickall: the oldest dead jobs back to ready, attempts reset.
ARGV: [LIMIT n] [NOW ms]   (n: 1..10000, default 1000)
Output: the number of jobs kicked.
]]
function fcall.kickall(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_LIMIT_NOW)
  local limit = limit_arg(o)
  local now = clock(o)
  return revive(k, redis.call('ZRANGE', k.dead, 0, limit - 1), now)
end

-- Waiting jobs (delayed, or due and not yet moved) made ready now, in
-- their own places: their attempts, error and history stay (an update would
-- start them afresh). Every job is read and located before the first
-- write. Returns how many were delayed.
local function promote_now(k, ids, now)
  if #ids == 0 then return 0 end
  local recs = {}
  -- (In parts: Lua unpacks at most about 8000 values, and LIMIT goes to 10000.)
  for from = 1, #ids, BATCH_MAX do
    local part = redis.call('HMGET', k.jobs, unpack(ids, from, math.min(from + BATCH_MAX - 1, #ids)))
    for i, rec in ipairs(part) do recs[from + i - 1] = rec end
  end
  local moved, jobs, where, seen = {}, {}, {}, {}
  for i, id in ipairs(ids) do
    if recs[i] and not seen[id] then
      seen[id] = true
      local j = record.unpack(recs[i])
      local w = locate(k, id, j)
      if w[1] == 'delayed' then
        moved[#moved + 1], jobs[#jobs + 1], where[#where + 1] = id, j, w
      end
    end
  end
  if #moved == 0 then return 0 end
  local seq = take_seq(k, #moved)
  for i, id in ipairs(moved) do take_out(k, id, where[i]) end
  local pl = place.begin(k, now)
  for i, id in ipairs(moved) do
    local j = jobs[i]
    renew(j, seq + i - 1)
    j.due = now
    place.job(pl, id, j)
  end
  place.write(pl)
  return #moved
end

--[[ redisched_promote: delayed jobs due now (version 32).
ARGV: id [id...]   (at most 1000; the arguments are all ids: no options)
  Each delayed job named goes to ready, due now, with its attempts, error,
  history, progress and log as they were (a put with REPLACE would start
  them afresh); ids that are not delayed are left alone.
Output: the number of jobs promoted.
]]
function fcall.promote(keys, args)
  local k = check_keys(keys)
  local ids = ids_arg(args)
  local n = promote_now(k, ids, clock(NO_OPTIONS))
  if n == 0 then sharded(k) end
  return n
end

--[[ redisched_promoteall: the first delayed jobs due now (version 32).
ARGV: [LIMIT n] [NOW ms]   (n: 1..10000, default 1000)
  The first n delayed jobs, in due order, as promote moves them.
Output: {promoted, left}: left, the delayed jobs still waiting (call again
  while it is above 0).
]]
function fcall.promoteall(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_LIMIT_NOW)
  local limit = limit_arg(o)
  local now = clock(o)
  local page = waiting.page(waiting.lane(k, 'delayed'), 0, limit)
  local ids = {}
  for i = 1, #page / 2 do ids[i] = member_id(page[2 * i - 1]) end
  local n = promote_now(k, ids, now)
  return { n, waiting.size(waiting.lane(k, 'delayed')) }
end

--[[ redisched_purge: dead jobs that died before a time, removed (version 32).
ARGV: before-ms [LIMIT n]   (n: 1..10000, default 1000)
  The dead jobs that died before before-ms, the oldest first, at most n,
  removed with their records, as delete removes them.
Output: {removed, left}: left, the dead jobs that died before before-ms
  still there (call again while it is above 0).
]]
function fcall.purge(keys, args)
  local k = check_keys(keys)
  local before = int_arg(args[1], 'before-ms', 0, MS_MAX)
  local o = options(args, 2, #args, { LIMIT = 1 })
  local limit = limit_arg(o)
  local ids = redis.call('ZRANGE', k.dead, '-inf', '(' .. before, 'BYSCORE', 'LIMIT', 0, limit)
  for from = 1, #ids, BATCH_MAX do -- (in parts, as promote_now reads)
    local to = math.min(from + BATCH_MAX - 1, #ids)
    redis.call('HDEL', k.jobs, unpack(ids, from, to))
    redis.call('ZREM', k.dead, unpack(ids, from, to))
  end
  return { #ids, redis.call('ZCOUNT', k.dead, '-inf', '(' .. before) }
end

--[[ redisched_reschedule: a waiting job's priority or due time, changed
in place (version 33).
ARGV: id [PRIORITY -4294966295..1000] [DELAY ms | AT ms] [NOW ms]   (one of them at least)
  A delayed or ready job takes the priority and due time given (DELAY: from
  now; AT: a time, as put takes it; one in the past is due now) and a new
  place: among the jobs of its priority due in the same millisecond it goes
  last. Its attempts, error, history, progress and log stay (a put with
  REPLACE would start them afresh). A reserved, dead or done job is left
  alone.
Output: a code as ack: 1 changed; 0 no such job; -2 the job is reserved,
  dead or done (left alone).
]]
function fcall.reschedule(keys, args)
  local k = check_keys(keys)
  local id = id_arg(args[1])
  local o = options(args, 2, #args, { PRIORITY = 1, DELAY = 1, AT = 1, NOW = 1 })
  if not (o.PRIORITY or o.DELAY or o.AT) then bad('give PRIORITY, DELAY or AT') end
  if o.DELAY and o.AT then bad('give DELAY or AT, not both') end
  local prio = o.PRIORITY and int_arg(o.PRIORITY, 'PRIORITY', PRIO_MIN, PRIO_MAX)
  local delay = o.DELAY and int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX)
  local at = o.AT and int_arg(o.AT, 'AT', 0, MS_MAX)
  local now = clock(o)
  local rec = redis.call('HGET', k.jobs, id)
  if not rec then
    sharded(k)
    return MISSING
  end
  local j = record.unpack(rec)
  local w = locate(k, id, j)
  if w[1] ~= 'delayed' and w[1] ~= 'ready' then return WRONG_STATE end
  local seq = take_seq(k, 1)
  take_out(k, id, w)
  renew(j, seq)
  if prio then j.priority = prio end
  if delay then j.due = after(now, delay) end
  if at then j.due = math.max(at, now) end
  place.one(k, id, j, now)
  return OK
end

--[[ redisched_limit: a topic's limits, for all its workers together.
ARGV: [RATE n window-ms] [CONCURRENCY k] [AGING ms] [NOW ms]
  RATE: at most n jobs handed out (by reserve and pull) in each window of
  window-ms, the windows aligned to multiples of window-ms of the server's
  clock (fixed windows: a span of window-ms across two windows may see up
  to 2n). n 0..1000000 (0: no rate limit), window-ms 1..86400000.
  CONCURRENCY: at most k jobs reserved at once (k 0..1000000, 0: no cap);
  jobs of TTR 0, taken for good, hold no reservation and are not counted.
  A limit not named stays as it was; without arguments, nothing changes.
  Within the same window the count stays when the rate changes (no window
  hands out more than its rate); a new window starts it afresh. Any
  change publishes the wake-up signal, so waiting workers look again.
  A limited reserve or pull hands out what the limits leave room for, and
  its next says when to look again: when the rate's next window opens
  (once the window's count is reached), or under the cap when the first
  reservation lapses. A worker looks again when its own acks are in: the
  slots it freed are its own to take.
  AGING: priority aging, ms 0..86400000 (0: none). Reserve and pull then
  hand out the ready jobs of highest effective priority, priority + (ms
  since due) / AGING, instead of the highest priority: each level of
  priority counts as AGING ms of waiting, so a job waits at most (p - q) *
  AGING behind jobs of priority p due after it, q being its own. Costs a
  limited reserve two calls per priority present (list keeps the plain
  order).
Output: {rate, window-ms, concurrency, aging} as they now are (0: none).
]]
local function limit(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, { RATE = 2, CONCURRENCY = 1, AGING = 1, NOW = 1 })
  -- Limits hold for one topic's keys: a spread topic takes none (and reads 0s).
  if o.RATE or o.CONCURRENCY or o.AGING then sharded(k) end
  local now = clock(o)
  local rate, window, cap, age
  if o.RATE then
    rate = int_arg(o.RATE[1], 'RATE', 0, RATE_MAX)
    window = int_arg(o.RATE[2], 'RATE window', 1, WINDOW_MAX)
  end
  if o.CONCURRENCY then cap = int_arg(o.CONCURRENCY, 'CONCURRENCY', 0, CONCURRENCY_MAX) end
  if o.AGING then age = int_arg(o.AGING, 'AGING', 0, AGING_MAX) end
  local cur = redis.call('HMGET', k.meta, 'limit_rate', 'limit_window', 'limit_concurrency', 'limit_aging')
  local was_rate, was_window, was_cap = tonumber(cur[1] or 0), tonumber(cur[2] or 0), tonumber(cur[3] or 0)
  local was_age = tonumber(cur[4] or 0)
  age = age or was_age
  if rate == 0 then window = 0 end
  if not rate then rate, window = was_rate, was_window end
  cap = cap or was_cap
  -- Aging compares the fronts of each priority in the ready set: the list
  -- joins it (and, the mark set, starts no more). First: waiting.flush
  -- reads the list before it writes.
  if age > 0 then waiting.flush(k) end
  local changed = false
  if rate ~= was_rate or window ~= was_window then
    if rate > 0 then
      redis.call('HSET', k.meta, 'limit_rate', rate, 'limit_window', window)
    else
      redis.call('HDEL', k.meta, 'limit_rate', 'limit_window')
    end
    -- A new window starts its count afresh; within the same window the
    -- count stays, so that no window hands out more than its rate.
    if window ~= was_window then redis.call('HDEL', k.meta, 'limit_start', 'limit_used') end
    changed = true
  end
  -- A limit of 0 is no field at all.
  for _, f in ipairs({ { 'limit_concurrency', cap, was_cap }, { 'limit_aging', age, was_age } }) do
    if f[2] ~= f[3] then
      if f[2] > 0 then redis.call('HSET', k.meta, f[1], f[2]) else redis.call('HDEL', k.meta, f[1]) end
      changed = true
    end
  end
  -- The mark follows the limits (set again even when they did not change,
  -- which repairs a ready set restored apart from its meta).
  if rate > 0 or cap > 0 or age > 0 then
    changed = waiting.mark(k, LIMIT_MARK) or changed
  else
    changed = waiting.unmark(k, LIMIT_MARK) or changed
  end
  if changed then wake(now) end -- waiting workers look again
  return { rate, window, cap, age }
end

--[[ redisched_retrywindow: the topic's retry window ("The retry window"
above; version 20): how long a put in create mode of a job finished without
a trace (acked without KEEP, or taken for good) answers -1.
ARGV: [ms]   (0..86400000; none: read it)
  0: none, and the ids remembered are forgotten at once. A change holds for
  ids finished from then on. The setting is the topic's own keys': a spread
  topic's shards each hold theirs (the Client sets them all).
Output: {window ms, ids remembered now (their windows may have ended)}
]]
function fcall.retry_window(keys, args)
  local k = check_keys(keys)
  local w
  if #args > 0 then
    if #args > 1 then bad('expected at most one argument (ms), got ' .. #args) end
    w = int_arg(args[1], 'ms', 0, WINDOW_MAX)
  end
  local was = gone.window(k)
  if w and w ~= was then
    if w == RETRY_WINDOW_DEFAULT then
      redis.call('HDEL', k.meta, 'retry_window')
    else
      redis.call('HSET', k.meta, 'retry_window', w)
    end
    if w == 0 then redis.call('DEL', k.gone) end
  end
  return { w or was, redis.call('ZCARD', k.gone) }
end

--[[ redisched_pause / redisched_resume: a paused topic hands out nothing
(reserve and pull return no jobs, paused = 1); puts and the rest still work.
ARGV: pause: [FOR ms] [NOW ms]; resume: [NOW ms] (the time its wake-up
  signal carries)
  FOR (version 38): the pause ends by itself after ms (1..ten years): the
  first reserve or pull from then on hands jobs out and clears it (a paused
  one's next says when; the wake-up signal carries the end, for workers
  that slept on an earlier answer; stats' pause_end). A pause replaces the
  one before: with FOR its end, without FOR no end. A pause that ended by
  itself reads as none; resume clears it (1).
Output: 1 if the state changed (paused, its end moved, or its mark
  cleared), 0 if it already was so (nothing changed).
]]
function fcall.pause(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_FOR_NOW)
  local ms = o.FOR and int_arg(o.FOR, 'FOR', 1, DELAY_MAX)
  local now = clock(o)
  sharded(k) -- (a spread topic is paused shard by shard)
  local was, was_end = waiting.paused_at(k, waiting.marked(k, PAUSED_MARK), now)
  local ends = ms and after(now, ms) or -1
  if was and was_end == ends then return 0 end
  waiting.mark(k, PAUSED_MARK)
  if ms then
    redis.call('HSET', k.meta, 'pause_until', ends)
    wake(ends)
  else
    redis.call('HDEL', k.meta, 'pause_until')
  end
  return 1
end

local function resume(keys, args)
  local k = check_keys(keys)
  local now = clock(options(args, 1, #args, OPT_NOW))
  sharded(k)
  if not waiting.end_pause(k) then return 0 end
  wake(now)
  return 1
end

-- The finished signal's sibling: a schedule changed (its name), or the
-- topic's shards ("~shards"), for those listening on P:{T}:meta. api()
-- publishes it.
local changed_schedule = nil

---------------------------------------------------------------- shards

--[[ redisched_shard: spreads the topic T over shard topics, or ends that.
A spread topic holds no jobs of its own: each job lives in one shard, the
topic P:{T~<suffix>} (its own slot), chosen by the client from the job's id
(docs/redis-api.md, "A topic over many shards"). T keeps the list in its
meta ("shards"), its ready set holds a mark, and its counter is parked, so
that a call meant for its jobs (put, putmany, restore, tick, reserve, pull,
a get or delete that finds nothing, pause, resume, limit, schedule) is
refused with "SHARDED <suffix> ...": a client that did not know reads the
list and calls the shard. A former shard is given "*" ("SHARDED *": ask the
topic it belonged to).
ARGV: [suffix ...]   1..256 suffixes of 1..64 of A-Z a-z 0-9 _ - ., or "*";
  none: the topic holds its own jobs again.
  Refused (BADSTATE) while T holds jobs, schedules or limits; the shards of
  a former list must be empty too, which the caller checks (other slots).
  Publishes "~shards" on P:{T}:meta (workers listening there look again).
Output: the number of suffixes.
]]
function fcall.shard(keys, args)
  local k = check_keys(keys)
  local list, seen = {}, {}
  if not (#args == 1 and args[1] == '*') then
    if #args > SHARDS_MAX then bad('at most ' .. SHARDS_MAX .. ' shards, got ' .. #args) end
    for i = 1, #args do
      local v = args[i]
      if #v < 1 or #v > SHARD_SUFFIX_MAX or v:find('[^%w_%.%-]') then
        bad('shard suffix must be 1..' .. SHARD_SUFFIX_MAX .. ' of A-Z a-z 0-9 _ - ., got ' .. show(v))
      end
      if seen[v] then bad('shard suffix ' .. show(v) .. ' is given twice') end
      seen[v] = true
    end
  end
  for i = 1, #args do list[i] = args[i] end
  local cur = redis.call('HMGET', k.meta, 'shards', 'seq', 'seq_kept', 'schedules')
  if #list > 0 then
    if redis.call('HLEN', k.jobs) > 0 then
      error({ bad = 'BADSTATE the topic holds jobs: spread it while it is empty' })
    end
    if tonumber(cur[4] or 0) > 0 then error({ bad = 'BADSTATE the topic has schedules' }) end
    if waiting.marked(k, LIMIT_MARK) then error({ bad = 'BADSTATE the topic has limits' }) end
    if waiting.marked(k, PAUSED_MARK) then error({ bad = 'BADSTATE the topic is paused: resume it first' }) end
    redis.call('HSET', k.meta, 'shards', table.concat(list, ' '))
    if not cur[1] then
      -- Park the counter (take_seq refuses at SEQ_MAX) and keep it (seq_kept).
      redis.call('HSET', k.meta, 'seq_kept', cur[2] or 0, 'seq', SEQ_MAX)
      waiting.mark(k, SHARD_MARK)
    end
  elseif cur[1] then
    redis.call('HSET', k.meta, 'seq', cur[3] or 0)
    redis.call('HDEL', k.meta, 'shards', 'seq_kept')
    waiting.unmark(k, SHARD_MARK)
  end
  changed_schedule = '~shards'
  return #list
end

--[[ redisched_shards: the topic's shard suffixes ("*" for a former shard);
none when it holds its own jobs. Read only.
ARGV: none
Output: {suffix, ...}
]]
local function shards(keys, args)
  local k = check_keys(keys)
  options(args, 1, #args, NO_WORDS)
  local s = redis.call('HGET', k.meta, 'shards')
  local out = {}
  if s then for v in s:gmatch('%S+') do out[#out + 1] = v end end
  return out
end

---------------------------------------------------------------- schedules

-- A schedule is the meta field "sched:<name>": format byte 1, flags (1
-- paused, 2 catch-up last, 4 an interval rule), next tick (6 bytes), last
-- tick produced (6, 0: none), interval ms (6, 0 for cron), then the cron
-- expression, its time zone and the tick job's option words (NUL-joined),
-- each as 2 bytes of length and the bytes, and the body (the rest). The
-- meta field "schedules" counts them.
local SCHED_PREFIX = 'sched:'
local S_PAUSED, S_LAST, S_EVERY = 1, 2, 4
local SCHED_NAME_MAX = 128
local CRON_MAX = 256
local ZONE_MAX = 64
-- The tick job's options a schedule takes (its due time is the tick's).
local SCHED_JOB_WORDS = { 'PRIORITY', 'TTR', 'ATTEMPTS', 'BACKOFF', 'KEEP' }
local OPT_SCHEDULE = { CRON = 2, EVERY = 1, NEXT = 1, CATCHUP = 1, PAUSED = 0, PRIORITY = 1,
                       TTR = 1, ATTEMPTS = 1, BACKOFF = 3, KEEP = 1, MAXBODY = 1, NOW = 1 }
local OPT_NEXT = { NEXT = 1, NOW = 1 }
local OPT_NAME_NOW = { NAME = 1, NOW = 1 }


local function sched_name(v)
  if v == nil or v == '' then bad('schedule name is missing') end
  if #v > SCHED_NAME_MAX or v:find('[^%w_%.%-]') then
    bad('schedule name must be 1..' .. SCHED_NAME_MAX .. ' characters of A-Z a-z 0-9 _ - ., got ' .. show(v))
  end
  return v
end

local function pack_str(v) return struct.pack('>I2', #v) .. v end

local function encode_schedule(sc)
  local flags = (sc.paused and S_PAUSED or 0) + (sc.catchup == 'last' and S_LAST or 0)
    + (sc.every > 0 and S_EVERY or 0)
  return struct.pack('>BBI6I6I6', 1, flags, sc.next, sc.last, sc.every) .. pack_str(sc.cron)
    .. pack_str(sc.zone) .. pack_str(table.concat(sc.words, '\0')) .. sc.body
end

local function decode_schedule(v)
  local version, flags, nxt, last, every, pos = struct.unpack('>BBI6I6I6', v)
  if version ~= 1 then
    error({ bad = 'BADFORMAT a stored schedule has a format this library version does not read' })
  end
  local sc = { paused = band(flags, S_PAUSED) ~= 0, catchup = band(flags, S_LAST) ~= 0 and 'last' or 'skip',
               next = nxt, last = last, every = every }
  local words
  sc.cron, sc.zone, words, pos = struct.unpack('>I2c0I2c0I2c0', v, pos)
  sc.words = {}
  for w in words:gmatch('[^%z]+') do sc.words[#sc.words + 1] = w end
  sc.body = v:sub(pos)
  return sc
end

local function load_schedule(k, name)
  local v = redis.call('HGET', k.meta, SCHED_PREFIX .. name)
  return v and decode_schedule(v)
end

local function store_schedule(k, name, sc)
  redis.call('HSET', k.meta, SCHED_PREFIX .. name, encode_schedule(sc))
  changed_schedule = name
end

local function schedule_fields(name, sc)
  return { 'name', name, 'kind', sc.every > 0 and 'every' or 'cron', 'cron', sc.cron,
           'zone', sc.zone, 'every', sc.every, 'next', sc.next, 'last', sc.last,
           'paused', sc.paused and 1 or 0, 'catchup', sc.catchup, 'body', sc.body,
           'options', sc.words }
end

-- A tick's job id: the schedule's name and the tick, so that no tick is
-- produced twice.
local function tick_id(name, tick) return name .. '@' .. fmt(tick) end

--[[ redisched_schedule: create or change a recurring job.
ARGV: name body (CRON expr zone | EVERY ms) NEXT ms [CATCHUP skip|last]
      [PAUSED] [PRIORITY n] [TTR ms] [ATTEMPTS n] [BACKOFF kind base cap]
      [KEEP ms] [MAXBODY bytes] [NOW ms]
  name: 1..128 of A-Z a-z 0-9 _ - . Each tick puts one job, id
  "<name>@<tick ms>", with this body and these options, due at the tick.
  CRON: a cron expression (5 or 6 fields) and its IANA time zone; EVERY: a
  fixed interval (1 ms .. ten years). The library stores the rule; the
  scheduler computes the ticks (the C++ library does, docs/redis-api.md,
  "Recurring jobs") and gives the first as NEXT. CATCHUP: what a scheduler
  does with ticks missed while none ran: skip them (default; one due less
  than a minute ago still runs) or run the last one. A change keeps the
  last tick produced (no tick runs twice). Publishes the name on P:{T}:meta.
Output: 1 created, 2 updated.
]]
local function schedule(keys, args)
  local k = check_keys(keys)
  sharded(k) -- (a tick is put in the topic's own keys)
  local name = sched_name(args[1])
  local body = args[2]
  if body == nil then bad('body is missing') end
  local o = options(args, 3, #args, OPT_SCHEDULE)
  if (o.CRON and 1 or 0) + (o.EVERY and 1 or 0) ~= 1 then bad('give CRON expr zone or EVERY ms') end
  local sc = { paused = o.PAUSED == true, cron = '', zone = '', every = 0, body = body, words = {} }
  if o.CRON then
    sc.cron, sc.zone = o.CRON[1], o.CRON[2]
    if sc.cron == '' or #sc.cron > CRON_MAX or sc.cron:find('%c') then
      bad('CRON expression must be 1..' .. CRON_MAX .. ' bytes without control characters')
    end
    if sc.zone == '' or #sc.zone > ZONE_MAX or sc.zone:find('[^%w_%+%-/]') then
      bad('time zone must be an IANA name (1..' .. ZONE_MAX .. ' of A-Z a-z 0-9 _ + - /), got ' .. show(sc.zone))
    end
  else
    sc.every = int_arg(o.EVERY, 'EVERY', 1, DELAY_MAX)
  end
  sc.next = int_arg(o.NEXT, 'NEXT', 0, MS_MAX)
  if o.CATCHUP and o.CATCHUP ~= 'skip' and o.CATCHUP ~= 'last' then
    bad('CATCHUP must be skip or last, got ' .. show(o.CATCHUP))
  end
  sc.catchup = o.CATCHUP or 'skip'
  for _, w in ipairs(SCHED_JOB_WORDS) do
    local v = o[w]
    if v ~= nil then
      sc.words[#sc.words + 1] = w
      if type(v) == 'table' then
        for _, x in ipairs(v) do sc.words[#sc.words + 1] = x end
      else
        sc.words[#sc.words + 1] = v
      end
    end
  end
  -- The tick job's arguments, checked as put checks them.
  parse_job(tick_id(name, sc.next), body, o, now_arg(o) or 0, body_limit(o))
  local old = load_schedule(k, name)
  sc.last = old and old.last or 0
  store_schedule(k, name, sc)
  sweep_notice = { k.sweep, 'schedules ' .. k.tag }
  if old then return UPDATED end
  redis.call('HINCRBY', k.meta, 'schedules', 1)
  return OK
end

--[[ redisched_unschedule: delete a schedule (jobs it made stay).
ARGV: name
Output: 1 deleted, 0 no such schedule.
]]
function fcall.unschedule(keys, args)
  local k = check_keys(keys)
  local name = sched_name(args[1])
  options(args, 2, #args, NO_WORDS)
  if redis.call('HDEL', k.meta, SCHED_PREFIX .. name) == 0 then return MISSING end
  redis.call('HINCRBY', k.meta, 'schedules', -1)
  changed_schedule = name
  return OK
end

--[[ redisched_pauseschedule, redisched_resumeschedule: a paused schedule
produces nothing (its ticks are not caught up when it resumes).
ARGV: name (pause); name NEXT ms [NOW ms] (resume: its next tick, from now)
Output: 1 changed, 0 no such schedule, -2 already paused (not paused).
]]
local function set_paused(keys, args, paused)
  local k = check_keys(keys)
  local name = sched_name(args[1])
  local o = options(args, 2, #args, paused and NO_WORDS or OPT_NEXT)
  local nxt = not paused and int_arg(o.NEXT, 'NEXT', 0, MS_MAX)
  local sc = load_schedule(k, name)
  if not sc then return MISSING end
  if sc.paused == paused then return WRONG_STATE end
  sc.paused = paused
  if nxt then sc.next = nxt end
  store_schedule(k, name, sc)
  return OK
end

function fcall.pause_schedule(keys, args) return set_paused(keys, args, true) end
function fcall.resume_schedule(keys, args) return set_paused(keys, args, false) end

--[[ redisched_schedules: a topic's schedules (read-only).
ARGV: [NAME name] [NOW ms]     NAME: that one only.
Output: {now, schedule, ...} in name order, each a flat field/value array:
  name, kind (cron|every), cron, zone, every, next, last (0: none yet),
  paused, catchup (skip|last), body, options (the tick job's option words).
]]
function fcall.schedules(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_NAME_NOW)
  local out, names = { 0 }, {}
  if o.NAME then
    names[1] = sched_name(o.NAME)
  else
    local all = redis.call('HGETALL', k.meta)
    for i = 1, #all, 2 do
      if all[i]:sub(1, #SCHED_PREFIX) == SCHED_PREFIX then names[#names + 1] = all[i]:sub(#SCHED_PREFIX + 1) end
    end
    table.sort(names)
  end
  out[1] = clock(o)
  for _, name in ipairs(names) do
    local sc = load_schedule(k, name)
    if sc then out[#out + 1] = schedule_fields(name, sc) end
  end
  return out
end

--[[ redisched_tick: a scheduler's step, made once however many run.
ARGV: name expect next [RUN tick] [NOW ms]
  When the schedule's next tick is still expect, it becomes next (> expect),
  and with RUN the tick's job is put: id "<name>@<tick>", due at tick
  (expect <= tick < next, tick <= now), unless the id is taken or a tick
  this late was produced already. Every scheduler that woke for the same
  tick calls with the same expect: the first moves next, the others get -3.
Output: 1 the job was put, 2 next moved without a job, 0 no such schedule,
  -2 paused, -3 stale (next is not expect: another scheduler ticked, or
  the schedule changed); then nothing changes.
]]
local function tick(keys, args)
  local k = check_keys(keys)
  local name = sched_name(args[1])
  local expect = int_arg(args[2], 'expect', 0, MS_MAX)
  local nxt = int_arg(args[3], 'next', 0, MS_MAX)
  local o = options(args, 4, #args, { RUN = 1, NOW = 1 })
  if nxt <= expect then bad('next must be after expect') end
  local run = o.RUN and int_arg(o.RUN, 'RUN', 0, MS_MAX)
  local now = clock(o)
  if run and (run < expect or run >= nxt) then bad('RUN tick must be from expect to before next') end
  if run and run > now then bad('RUN tick ' .. fmt(run) .. ' is still to come (now ' .. fmt(now) .. ')') end
  local sc = load_schedule(k, name)
  if not sc then return MISSING end
  if sc.paused then return WRONG_STATE end
  if sc.next ~= expect then return STALE end
  local made = false
  if run and run > sc.last then
    local id = tick_id(name, run)
    if redis.call('HEXISTS', k.jobs, id) == 0 then
      local jo = { AT = fmt(run) }
      for w, v in pairs(options(sc.words, 1, #sc.words, PUT_OPTIONS)) do jo[w] = v end
      local p = parse_job(id, sc.body, jo, now, BODY_MAX_LIMIT)
      place.one(k, id, new_job(p, take_seq(k, 1), now), now)
      history.count(k, now, 'p', 1)
      made = true
    end
    sc.last = run
  end
  sc.next = nxt
  -- Not a change of the schedule: no message on P:{T}:meta.
  redis.call('HSET', k.meta, SCHED_PREFIX .. name, encode_schedule(sc))
  return made and OK or UPDATED
end

---------------------------------------------------------------- migrate

--[[ redisched_migrate: rewrites what the topic holds in an older stored
format as this version writes it, a bounded part per call (docs/redis-api.md,
"Migrations"). Call it until it answers done. Any number of callers may run
at once and beside every other call: each call is atomic, reads before it
writes, and a part rewritten once is left alone.
ARGV: [LIMIT n]   n: records and members read in one call (1..1000, 1000)
  One pass reads the jobs hash (HSCAN), then the delayed set and the ready
  set (ZSCAN), resumed where the last call left it (meta migrate_cursor:
  the server's run id, the step, the scan's cursor; a cursor of another
  server, after a failover or a restart, starts the pass again, since a
  scan's order is the server's own):
    format 1 records (library version 8): each gets a put sequence and is
    rewritten in format 2; a delayed or ready one also gets its member M
    in place of its id (a delayed job's due time, held in its score alone,
    goes into its record; a ready one gets this version's ready score).
    Those due together take their sequences in version 8's order within a
    call (across calls, in the order the calls read them).
    members of delayed and ready that are an id alone (version 8's) with
    no record: removed (no job holds them).
  When the pass ends, meta migrated holds the version that added the last
  step (26), and a call answers at once until a later version adds one;
  unless one call read the whole topic and rewrote nothing: then nothing is
  written (an idle server's migrations write nothing), and the next call
  reads it again.
Output: {done, rewritten, read}: done 1 when nothing older is left (0: call
  again); how many records this call rewrote (and members removed), and
  how many records and members it read.
]]
local migrate
do
  local OPTIONS = { LIMIT = 1 }
  local READ_DEFAULT = 1000
  -- The version that added the last step: a topic marked with it has had
  -- them all (a later version without a step of its own rescans nothing).
  local LAST_STEP = 26
  local HSET_CHUNK = 500 -- jobs a HSET (Lua unpacks at most ~8000 values)

  -- Version 8's jobs: records of format 1 (by id), each with its member's
  -- set and score when it has one, ordered as version 8 handed them out;
  -- refuses (BADFORMAT) a record of a newer format.
  local function older_jobs(k, recs)
    local jobs = {}
    for id, rec in pairs(recs) do
      if record.older(rec) then
        local j = record.unpack_older(rec)
        j.id = id
        jobs[#jobs + 1] = j
      elseif not record.readable(rec) then
        record.unpack(rec) -- raises BADFORMAT
      end
    end
    -- Version 8's scores: a delayed job's due time (its record holds none);
    -- a ready job's (1000 - priority) * 2^43 + its ready sequence, which
    -- orders it (its due time is its record's). Each gets this version's.
    for _, j in ipairs(jobs) do
      local d = redis.call('ZSCORE', k.delayed, j.id)
      local r = not d and redis.call('ZSCORE', k.ready, j.id)
      if d then
        j.set, j.rank, j.order, j.due = k.delayed, 2, tonumber(d), tonumber(d)
      elseif r then
        j.set, j.rank, j.order = k.ready, 1, tonumber(r)
        j.score = ready_score(j.priority, j.due or j.created)
      else
        j.rank, j.order = 3, 0
      end
    end
    table.sort(jobs, function(x, y)
      if x.rank ~= y.rank then return x.rank < y.rank end
      if x.order ~= y.order then return x.order < y.order end
      return record.legacy_before(x, y)
    end)
    return jobs
  end

  -- Reads one step's next part: the jobs hash's records (step 1), or the
  -- members of delayed (2) or ready (3) that are an id alone, their records
  -- (found: id -> record) or none (orphans: {set, member}). Returns the
  -- scan's next cursor and how many it read.
  local function read_part(k, step, cursor, count, found, orphans)
    if step == 1 then
      local scan = redis.call('HSCAN', k.jobs, cursor, 'COUNT', count)
      local f = scan[2]
      for i = 1, #f, 2 do found[f[i]] = f[i + 1] end
      return scan[1], #f / 2
    end
    local key = step == 2 and k.delayed or k.ready
    local scan = redis.call('ZSCAN', key, cursor, 'COUNT', count)
    local bare, f = {}, scan[2]
    for i = 1, #f, 2 do
      if f[i]:byte(1) >= 32 then bare[#bare + 1] = f[i] end
    end
    if #bare > 0 then
      local recs = redis.call('HMGET', k.jobs, unpack(bare))
      for i, id in ipairs(bare) do
        if recs[i] then found[id] = recs[i] else orphans[#orphans + 1] = { key, id } end
      end
    end
    return scan[1], #f / 2
  end

  function migrate(keys, args)
    local k = check_keys(keys)
    local o = options(args, 1, #args, OPTIONS)
    local limit = o.LIMIT and int_arg(o.LIMIT, 'LIMIT', 1, BATCH_MAX) or READ_DEFAULT
    local state = redis.call('HMGET', k.meta, 'migrated', 'migrate_cursor')
    if tonumber(state[1] or 0) >= LAST_STEP then return { 1, 0, 0 } end
    -- (the server's run id, read only when a cursor is kept or resumed:
    -- INFO costs more than a small topic's whole pass)
    local run
    local step, cursor = 1, '0'
    if state[2] then
      run = redis.call('INFO', 'server'):match('run_id:(%x+)')
      local r, st, c = state[2]:match('^(%x+):(%d):(%d+)$')
      if r == run then step, cursor = tonumber(st), c end
    end
    -- Reads: parts of the steps in turn, until limit elements are read.
    local found, orphans, read = {}, {}, 0
    while step <= 3 and read < limit do
      local n
      cursor, n = read_part(k, step, cursor, limit - read, found, orphans)
      read = read + n
      if cursor == '0' then step = step + 1 end
    end
    local jobs = older_jobs(k, found)
    local first = #jobs > 0 and seq_room(k, #jobs) + 1
    local done = step > 3
    -- Marked done when the pass wrote, or took more than one call: a topic
    -- read whole in one call with nothing older is left as it was, and one
    -- that never held a job has no meta key.
    local mark = done and (first or #orphans > 0 or state[2]) and redis.call('EXISTS', k.meta) == 1
    -- Writes.
    if first then
      redis.call('HINCRBY', k.meta, 'seq', #jobs)
      local hset = {}
      for i, j in ipairs(jobs) do
        j.seq, j.place = first + i - 1, nil
        hset[#hset + 1], hset[#hset + 2] = j.id, record.pack(j)
        if #hset == 2 * HSET_CHUNK then redis.call('HSET', k.jobs, unpack(hset)); hset = {} end
        if j.set then
          redis.call('ZREM', j.set, j.id)
          redis.call('ZADD', j.set, fmt(j.score or j.due), member(j, j.id))
        end
      end
      if #hset > 0 then redis.call('HSET', k.jobs, unpack(hset)) end
    end
    for _, orphan in ipairs(orphans) do redis.call('ZREM', orphan[1], orphan[2]) end
    if mark then
      redis.call('HSET', k.meta, 'migrated', LAST_STEP)
      redis.call('HDEL', k.meta, 'migrate_cursor')
    elseif not done then
      run = run or redis.call('INFO', 'server'):match('run_id:(%x+)')
      redis.call('HSET', k.meta, 'migrate_cursor', run .. ':' .. step .. ':' .. cursor)
    end
    return { done and 1 or 0, #jobs + #orphans, read }
  end
end

--[[ redisched_version: the library's version (an integer), for clients that
load the library when it is missing or older than theirs.
ARGV: none, and no keys (FCALL redisched_version 0)
]]
local function version()
  return LIBRARY_VERSION
end

---------------------------------------------------------------- workers

-- The worker registry (version 28): the workers alive, each as its last
-- beat described it (who, where, which topics, which jobs it runs now),
-- until that beat expires. Two keys of its own, in one slot, and no
-- topic's (a topic's name holds no '~'):
--   KEYS[1]  P:{~workers}:alive    zset  worker id -> when its entry expires (ms)
--   KEYS[2]  P:{~workers}:entries  hash  worker id -> its entry (MessagePack)
-- A worker that ends without leaving (SIGKILL) drops out of reads when its
-- entry expires; a later beat, of any worker, deletes it.
local registry = {}
do
  local TEXT_MAX = 255          -- host, version
  local TOPIC_MAX = 128         -- bytes of a topic's name (the clients' limit)
  local PID_MAX = 2147483647
  local PRUNE_BATCH = 100       -- expired entries one beat deletes

  function registry.keys(keys)
    local alive, entries = keys[1], keys[2]
    if #keys ~= 2 or alive:sub(-6) ~= ':alive' or alive:sub(-17, -7) ~= ':{~workers}'
        or entries ~= alive:sub(1, -7) .. ':entries' then
      error({ bad = 'BADKEYS expected the registry\'s 2 keys (P:{~workers}:alive '
                    .. 'P:{~workers}:entries), got ' .. #keys .. ' starting with ' .. show(alive) })
    end
    return alive, entries
  end

  -- A name or a text of at most max bytes, without control characters.
  local function text(v, what, max, may_be_empty)
    if v == nil or (v == '' and not may_be_empty) then bad(what .. ' is empty') end
    if #v > max then bad(what .. ' is longer than ' .. max .. ' bytes') end
    if v:find('%c') then bad(what .. ' contains a control character') end
    return v
  end

  local function topic(v)
    text(v, 'topic', TOPIC_MAX)
    if v:find('[^%w_%-%.]') then bad('topic ' .. show(v) .. " may hold only letters, digits, '_', '-' and '.'") end
    return v
  end

--[[ redisched_beat: registers a worker, or renews its entry: what it says
now replaces what it said before, and lives ttl ms.
ARGV: id ttl host pid version started ntopics (topic concurrency, each)
      nrunning (topic job started, each) [NOW ms]
  id: 1..128 bytes; ttl: 1000..3600000; host and version: at most 255
  bytes, maybe empty; started: when the worker started (ms); at most 1000
  topics (concurrency 1..1000000) and 1000 running jobs (job: its id;
  started: when its attempt started, ms). No control characters anywhere.
  Also deletes up to 100 entries that expired.
Output: 1 registered (new, or after its entry expired), 2 renewed.
]]
  function registry.beat(keys, args)
    local alive, entries = registry.keys(keys)
    local id = text(args[1], 'worker id', WORKER_ID_MAX)
    local ttl = int_arg(args[2], 'ttl', BEAT_TTL_MIN, BEAT_TTL_MAX)
    local host = text(args[3], 'host', TEXT_MAX, true)
    local pid = int_arg(args[4], 'pid', 0, PID_MAX)
    local version = text(args[5], 'version', TEXT_MAX, true)
    local started = int_arg(args[6], 'started', 0, MS_MAX)
    local i = 7
    local topics = {}
    for _ = 1, int_arg(args[i], 'ntopics', 0, WORKER_LIST_MAX) do
      topics[#topics + 1] = topic(args[i + 1])
      topics[#topics + 1] = int_arg(args[i + 2], 'concurrency', 1, CONCURRENCY_MAX)
      i = i + 2
    end
    i = i + 1
    local running = {}
    for _ = 1, int_arg(args[i], 'nrunning', 0, WORKER_LIST_MAX) do
      running[#running + 1] = topic(args[i + 1])
      running[#running + 1] = id_arg(args[i + 2])
      running[#running + 1] = int_arg(args[i + 3], 'started', 0, MS_MAX)
      i = i + 3
    end
    local now = clock(options(args, i + 1, #args, OPT_NOW))
    local expires = redis.call('ZSCORE', alive, id)
    local renewed = expires and tonumber(expires) > now
    local expired = redis.call('ZRANGEBYSCORE', alive, '-inf', now, 'LIMIT', 0, PRUNE_BATCH)
    if #expired > 0 then
      redis.call('ZREM', alive, unpack(expired))
      redis.call('HDEL', entries, unpack(expired))
    end
    redis.call('ZADD', alive, after(now, ttl), id)
    redis.call('HSET', entries, id,
               cmsgpack.pack({ host, pid, version, started, now, topics, running }))
    return renewed and UPDATED or OK
  end

--[[ redisched_leave: a worker that ends deletes its entry at once.
ARGV: id [NOW ms]
Output: 1 deleted, 0 there was none alive (one that had expired is deleted
  all the same).
]]
  function registry.leave(keys, args)
    local alive, entries = registry.keys(keys)
    local id = text(args[1], 'worker id', WORKER_ID_MAX)
    local now = clock(options(args, 2, #args, OPT_NOW))
    local expires = redis.call('ZSCORE', alive, id)
    if not expires then return MISSING end
    redis.call('ZREM', alive, id)
    redis.call('HDEL', entries, id)
    return tonumber(expires) > now and OK or MISSING
  end

--[[ redisched_workers: the workers alive (read-only).
ARGV: [NOW ms]
Output: {now, worker, ...} in id order, at most 10000, each a flat array:
  id, host, pid, version, started, beat (its last beat, ms), expires (ms),
  topics {topic, concurrency, ...}, running {topic, job, started, ...}.
]]
  function registry.workers(keys, args)
    local alive, entries = registry.keys(keys)
    local now = clock(options(args, 1, #args, OPT_NOW))
    local live = redis.call('ZRANGEBYSCORE', alive, '(' .. fmt(now), '+inf', 'WITHSCORES',
                            'LIMIT', 0, WORKERS_READ_MAX)
    local ids, expires = {}, {}
    for j = 1, #live, 2 do
      ids[#ids + 1] = live[j]
      expires[live[j]] = tonumber(live[j + 1])
    end
    table.sort(ids)
    local out = { now }
    -- (In parts: Lua unpacks at most about 8000 values.)
    for from = 1, #ids, 1000 do
      local part = { unpack(ids, from, math.min(from + 999, #ids)) }
      local packed = redis.call('HMGET', entries, unpack(part))
      for j, id in ipairs(part) do
        if packed[j] then
          local e = cmsgpack.unpack(packed[j])
          out[#out + 1] = { id, e[1], e[2], e[3], e[4], e[5], expires[id], e[6], e[7] }
        end
      end
    end
    return out
  end
end

---------------------------------------------------------------- register

-- Turns a raised {bad = msg} into a clean error reply; other errors pass on.
local function api(fn)
  return function(keys, args)
    wake_at, changed_schedule, sweep_notice, flows.notice = nil, nil, nil, nil
    if #finished_ids > 0 then finished_ids = {} end
    local ok, res = pcall(fn, keys, args)
    if ok then
      if wake_at then redis.call('SPUBLISH', keys[3], wake_at) end
      if #finished_ids > 0 then redis.call('SPUBLISH', keys[6], table.concat(finished_ids, '\n')) end
      if changed_schedule then redis.call('SPUBLISH', keys[7], changed_schedule) end
      -- A hint: a user whose ACL lacks the channel still gets its call done.
      if sweep_notice then redis.pcall('PUBLISH', sweep_notice[1], sweep_notice[2]) end
      if flows.notice then
        redis.pcall('PUBLISH', flows.notice[1], flows.notice[2])
        redis.pcall('SPUBLISH', flows.notice[3], 'outbox')
      end
      return res
    end
    if type(res) == 'table' and res.bad then return redis.error_reply(res.bad) end
    error(res)
  end
end

local function register(name, fn, flags)
  redis.register_function({ function_name = 'redisched_' .. name, callback = api(fn), flags = flags })
end

local RO = { 'no-writes' }
register('put', put)
register('putmany', fcall.putmany)
register('restore', restore)
register('get', fcall.get, RO)
register('list', list)
register('stats', fcall.stats, RO)
register('reserve', fcall.reserve)
register('pull', fcall.pull)
register('reservejob', fcall.reservejob)
register('ack', fcall.ack)
register('ackmany', fcall.ackmany)
register('release', fcall.release)
register('fail', fcall.fail_job)
register('touch', fcall.touch)
register('progress', progress)
register('delete', fcall.delete)
register('requeue', fcall.requeue)
register('kick', fcall.kick)
register('kickall', fcall.kickall)
register('promote', fcall.promote)
register('promoteall', fcall.promoteall)
register('purge', fcall.purge)
register('reschedule', fcall.reschedule)
register('limit', limit)
register('retrywindow', fcall.retry_window)
register('pause', fcall.pause)
register('resume', resume)
register('schedule', schedule)
register('unschedule', fcall.unschedule)
register('pauseschedule', fcall.pause_schedule)
register('resumeschedule', fcall.resume_schedule)
register('schedules', fcall.schedules, RO)
register('tick', tick)
register('shard', fcall.shard)
register('shards', shards, RO)
register('migrate', migrate)
register('version', version, RO)
register('beat', registry.beat)
register('leave', registry.leave)
register('workers', registry.workers, RO)
register('history', history.read, RO)
register('depend', flows.depend)
register('resolve', flows.resolve)
register('outbox', flows.outbox, RO)
register('moved', flows.moved)
register('forget', flows.forget)
register('batch', flows.batch)
