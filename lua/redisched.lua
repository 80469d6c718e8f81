#!lua name=redisched
--[[
redisched: a delayed/priority job queue as one Redis Functions library.

Load it as it is:   redis-cli FUNCTION LOAD REPLACE "$(cat lua/redisched.lua)"
Call it:            FCALL redisched_<op> 8 <the topic's eight keys> <arguments...>

Every function takes the same eight keys of one topic T, in this order
(P is a prefix, "redisched" by default; {T} is the Redis Cluster hash tag):
  KEYS[1] P:{T}:jobs      hash  id -> packed job record (body and metadata)
  KEYS[2] P:{T}:delayed   zset  id -> due time (ms)
  KEYS[3] P:{T}:ready     zset  id -> (1000 - priority) * 2^43 + ready sequence;
                                while paused also NUL "paused" -> -inf
  KEYS[4] P:{T}:reserved  zset  id NUL token -> reservation deadline (ms)
  KEYS[5] P:{T}:dead      zset  id -> time it died (ms)
  KEYS[6] P:{T}:done      zset  id -> time its retention ends (ms) (ack KEEP)
  KEYS[7] P:{T}:meta      hash  seq (counter), totals
  KEYS[8] P:{T}:leases    hash  id -> "token:reserved_at:ttr" of its reservation

A job is in exactly one of delayed, ready, reserved, dead, done: its state
is the set that holds it (docs/lifecycle.md draws the transitions).
Keys are never built here, so the library runs unchanged on Redis Cluster.

Wake-up signal: a call that makes a job ready, or schedules one, publishes
the time it is due (ms, decimal) with SPUBLISH on a channel named like the
ready key, P:{T}:ready (same slot), once per call. Idle workers listen there
and aim a timer at the earliest due time instead of polling (promotion of
due delayed jobs publishes nothing: waiting workers already know that time).

Time is the Redis server's clock in milliseconds. Every function that reads the
clock accepts "NOW <ms>" for tests that need to control time (but kick, whose
arguments are all ids).

Replies use stable codes (docs/redis-api.md). Per-job outcomes are integers:
   1 ok / created      2 updated (put REPLACE/UPSERT)
   0 no such job      -1 id exists (put)
  -2 wrong state      -3 stale token (the reservation is no longer yours)
Invalid arguments are error replies whose first word is a code:
  BADARG <what is wrong>   BADKEYS <what is wrong>   BADFORMAT <what is wrong>
Validation happens before the first write: a refused call changes nothing.
]]

local LIBRARY_VERSION = 8 -- bump on any change of behaviour or stored format

local PRIO_MAX = 1000
local SEQ_SPAN = 8796093022208 -- 2^43: ready sequence numbers below this
local ID_MAX = 256             -- bytes
local BODY_MAX_DEFAULT = 1048576
local BODY_MAX_LIMIT = 536870912
local ERROR_MAX = 8192
local MS_MAX = 253402300799999   -- 9999-12-31, as a due time
local DELAY_MAX = 315576000000   -- ten years
local TTR_MAX = 86400000 * 7     -- a week
local ATTEMPTS_MAX = 1000
local BATCH_MAX = 1000           -- jobs in one call
local PROMOTE_BATCH = 1000       -- due jobs moved to ready in one call
local REQUEUE_INLINE = 100       -- lapsed reservations reserve recovers itself

-- Defaults for what a job does not say (stored only when different).
local DEFAULT_TTR = 30000
local DEFAULT_ATTEMPTS = 5
local DEFAULT_BACKOFF = { 2, 1000, 600000 } -- exponential, 1 s base, 10 min cap

local OK, UPDATED, MISSING, EXISTS, WRONG_STATE, STALE = 1, 2, 0, -1, -2, -3
-- A paused topic's ready set holds this member (no id can: ids hold no
-- control characters) with the lowest score, so the ZPOPMIN that hands out
-- jobs finds the pause without a call of its own.
local PAUSED_MARK = '\0paused'
local BACKOFF_KINDS = { fixed = 1, exponential = 2 }
local BACKOFF_NAMES = { 'fixed', 'exponential' }

-- Record layout (docs/redis-api.md, "Stored format"): a flags byte, an
-- optional second flags byte, the stamp (created ms * 4096 + put sequence mod
-- 4096), the optional fields the flags name, in flag order, then the body.
-- A waiting job with default options has an 8-byte head, so a 100-byte body
-- still fits Redis's 112-byte allocation class.
local F_PRIO, F_DUE, F_MADE, F_ERROR, F_EXT, F_UNKNOWN = 1, 2, 8, 16, 32, 196
local X_TTR, X_ATTEMPTS, X_BACKOFF, X_FINISHED, X_UNKNOWN = 1, 2, 4, 8, 240
local TICKS = 4096
-- The stamp is 56 bits, more than a Lua number holds exactly: it travels as
-- its top 32 and low 24 bits, computed from created and the tick apart.
local STAMP = '>I4I3'

local function stamp_parts(created, seq)
  return math.floor(created / TICKS), (created % TICKS) * TICKS + seq % TICKS
end

local function stamp_created(hi, lo)
  return hi * TICKS + math.floor(lo / TICKS)
end

-- (bit and struct are only reachable inside calls, not while loading.)
local function band(a, b) return bit.band(a, b) end

---------------------------------------------------------------- arguments

local function bad(msg)
  error({ bad = 'BADARG ' .. msg })
end

local function show(v)
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
    bad(name .. ' must be from ' .. lo .. ' to ' .. hi .. ', got ' .. v)
  end
  return n
end

local function id_arg(v, checked)
  if v == nil or v == '' then bad('job id is empty') end
  if #v > ID_MAX then bad('job id is longer than ' .. ID_MAX .. ' bytes') end
  if not checked and v:find('%c') then bad('job id contains a control character') end
  return v
end

local function check_keys(keys)
  if #keys ~= 8 then
    error({ bad = 'BADKEYS expected the topic\'s 8 keys (jobs delayed ready reserved dead done meta leases), got ' .. #keys })
  end
  return { jobs = keys[1], delayed = keys[2], ready = keys[3], reserved = keys[4],
           dead = keys[5], done = keys[6], meta = keys[7], leases = keys[8] }
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
    if i + n > to then bad(word .. ' needs ' .. n .. ' value(s)') end
    if n == 0 then o[word] = true
    elseif n == 1 then o[word] = args[i + 1]
    else o[word] = { unpack(args, i + 1, i + n) } end
    i = i + n + 1
  end
  return o
end

-- The option words each function takes (built once, not per call).
local NO_WORDS = {}
local OPT_FAIL = { DEAD = 0, DELAY = 1, NOW = 1 }
local OPT_DELAY_PRIORITY_NOW = { DELAY = 1, PRIORITY = 1, NOW = 1 }
local OPT_LIMIT_NOW = { LIMIT = 1, NOW = 1 }
local OPT_MAXBODY_NOW = { MAXBODY = 1, NOW = 1 }
local OPT_NOBODY_NOW = { NOBODY = 0, NOW = 1 }
local OPT_NOW = { NOW = 1 }
local OPT_TTR_NOW = { TTR = 1, NOW = 1 }
local OPT_KEEP_NOW = { KEEP = 1, NOW = 1 }
-- put's per-job words (a single put also takes putmany's call-wide ones).
local PUT_OPTIONS = { DELAY = 1, AT = 1, PRIORITY = 1, TTR = 1, ATTEMPTS = 1, BACKOFF = 3,
                      REPLACE = 0, UPSERT = 0 }

-- MAXBODY, or the default limit of a body.
local function body_limit(o)
  return o.MAXBODY and int_arg(o.MAXBODY, 'MAXBODY', 0, BODY_MAX_LIMIT) or BODY_MAX_DEFAULT
end

-- LIMIT of requeue and kickall.
local function limit_arg(o)
  return o.LIMIT and int_arg(o.LIMIT, 'LIMIT', 1, 10000) or 1000
end

-- The job ids that are all of delete's and kick's arguments.
local function ids_arg(args)
  if #args == 0 then bad('job id is missing') end
  if #args > BATCH_MAX then bad('at most ' .. BATCH_MAX .. ' ids in one call') end
  for _, id in ipairs(args) do id_arg(id) end
  return args
end

local function clock(o)
  if o.NOW then return int_arg(o.NOW, 'NOW', 0, MS_MAX) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

---------------------------------------------------------------- records

local function decode(rec)
  local flags, pos = struct.unpack('>B', rec)
  if flags == 0 then -- the common case: nothing but the stamp
    local hi, lo, at = struct.unpack(STAMP, rec, pos)
    local created = stamp_created(hi, lo)
    return { prio = 0, created = created, seq = lo % TICKS, due = created, body = rec:sub(at) }
  end
  local ext, hi, lo = 0, nil, nil
  if band(flags, F_EXT) ~= 0 then ext, pos = struct.unpack('>B', rec, pos) end
  if band(flags, F_UNKNOWN) ~= 0 or band(ext, X_UNKNOWN) ~= 0 then
    error({ bad = 'BADFORMAT a stored job has a format this library version does not read' })
  end
  hi, lo, pos = struct.unpack(STAMP, rec, pos)
  local j = { prio = 0, created = stamp_created(hi, lo), seq = lo % TICKS }
  if band(flags, F_PRIO) ~= 0 then j.prio, pos = struct.unpack('>I2', rec, pos) end
  if band(flags, F_DUE) ~= 0 then j.due, pos = struct.unpack('>I6', rec, pos) end
  if band(flags, F_MADE) ~= 0 then j.made, pos = struct.unpack('>I2', rec, pos) end
  if band(ext, X_TTR) ~= 0 then j.ttr, pos = struct.unpack('>I4', rec, pos) end
  if band(ext, X_ATTEMPTS) ~= 0 then j.max, pos = struct.unpack('>I2', rec, pos) end
  if band(ext, X_BACKOFF) ~= 0 then
    local kind, base, cap
    kind, base, cap, pos = struct.unpack('>BI4I4', rec, pos)
    j.backoff = { kind, base, cap }
  end
  if band(ext, X_FINISHED) ~= 0 then j.finished, pos = struct.unpack('>I6', rec, pos) end
  if band(flags, F_ERROR) ~= 0 then
    local len
    len, pos = struct.unpack('>I2', rec, pos)
    j.err = rec:sub(pos, pos + len - 1)
    pos = pos + len
  end
  j.due = j.due or j.created
  j.body = rec:sub(pos)
  return j
end

-- Packs a job. A job in delayed keeps its due time as its score there, so
-- the record leaves it out (due_in_score); elsewhere it is stored unless it
-- equals the creation time.
local function encode(j, due_in_score)
  local hi, lo = stamp_parts(j.created, j.seq)
  local store_due = not due_in_score and j.due ~= j.created
  if j.prio == 0 and not store_due and not j.made and not j.ttr
      and not j.max and not j.backoff and not j.finished and not j.err then
    return struct.pack('>BI4I3', 0, hi, lo) .. j.body -- the common case, kept fast
  end
  local flags, ext, opt = 0, 0, {}
  if j.prio ~= 0 then flags = flags + F_PRIO; opt[#opt + 1] = struct.pack('>I2', j.prio) end
  if store_due then flags = flags + F_DUE; opt[#opt + 1] = struct.pack('>I6', j.due) end
  if j.made and j.made > 0 then flags = flags + F_MADE; opt[#opt + 1] = struct.pack('>I2', j.made) end
  if j.ttr then ext = ext + X_TTR; opt[#opt + 1] = struct.pack('>I4', j.ttr) end
  if j.max then ext = ext + X_ATTEMPTS; opt[#opt + 1] = struct.pack('>I2', j.max) end
  if j.backoff then
    ext = ext + X_BACKOFF
    opt[#opt + 1] = struct.pack('>BI4I4', j.backoff[1], j.backoff[2], j.backoff[3])
  end
  if j.finished then ext = ext + X_FINISHED; opt[#opt + 1] = struct.pack('>I6', j.finished) end
  if j.err then flags = flags + F_ERROR; opt[#opt + 1] = struct.pack('>I2', #j.err) .. j.err end
  local head
  if ext ~= 0 then head = struct.pack('>BBI4I3', flags + F_EXT, ext, hi, lo)
  else head = struct.pack('>BI4I3', flags, hi, lo) end
  return head .. table.concat(opt) .. j.body
end

-- Numbers go to redis.call as they are: Redis converts them with 17 digits,
-- exact below 2^53 (Lua's own tostring, used by '..', keeps only 14).
local function ready_score(prio, seq)
  return (PRIO_MAX - prio) * SEQ_SPAN + seq % SEQ_SPAN
end

-- Takes n numbers from the topic's sequence; returns the first.
local function take_seq(k, n)
  return redis.call('HINCRBY', k.meta, 'seq', n) - n + 1
end

local function max_attempts(j) return j.max or DEFAULT_ATTEMPTS end

local function backoff_delay(j)
  local b = j.backoff or DEFAULT_BACKOFF
  if b[1] == BACKOFF_KINDS.fixed then return b[2] end
  local d = b[2] * 2 ^ math.max((j.made or 1) - 1, 0)
  if d > b[3] then d = b[3] end
  return d
end

---------------------------------------------------------------- moves

-- Moves due delayed jobs to ready, in order of due time and then put order.
-- Returns true when due jobs remain (more than one call's batch was due).
local function promote(k, now)
  local due = redis.call('ZRANGEBYSCORE', k.delayed, '-inf', now, 'WITHSCORES', 'LIMIT', 0, PROMOTE_BATCH)
  local n = #due / 2
  if n == 0 then return false end
  local more = false
  if n == PROMOTE_BATCH then
    -- Never split the jobs of one due millisecond over two calls: the ones
    -- left behind would lose their place behind jobs put after them.
    more = true
    local last = due[#due]
    local cut = n
    while cut > 0 and due[2 * cut] == last do cut = cut - 1 end
    if cut > 0 then n = cut
    else
      due = redis.call('ZRANGEBYSCORE', k.delayed, last, last, 'WITHSCORES')
      n = #due / 2
    end
  end
  local ids = {}
  for i = 1, n do ids[i] = due[2 * i - 1] end
  local recs = redis.call('HMGET', k.jobs, unpack(ids))
  local moving = {}
  for i = 1, n do
    if recs[i] then
      local j = decode(recs[i])
      j.id, j.due = ids[i], tonumber(due[2 * i])
      moving[#moving + 1] = j
    end
  end
  -- Put order among jobs due in the same millisecond: creation time, then the
  -- put sequence mod 4096, compared modulo (fewer than 2048 puts share a ms).
  table.sort(moving, function(a, b)
    if a.due ~= b.due then return a.due < b.due end
    if a.created ~= b.created then return a.created < b.created end
    return a.seq ~= b.seq and (b.seq - a.seq) % TICKS < TICKS / 2
  end)
  if #moving > 0 then
    local seq = take_seq(k, #moving)
    local zargs, hargs = {}, {}
    for i, j in ipairs(moving) do
      zargs[2 * i - 1] = ready_score(j.prio, seq + i - 1)
      zargs[2 * i] = j.id
      -- Out of delayed, the record must hold the due time itself, unless
      -- that is its creation time (then it is already right).
      if j.due ~= j.created then
        hargs[#hargs + 1] = j.id
        hargs[#hargs + 1] = encode(j)
      end
    end
    redis.call('ZADD', k.ready, unpack(zargs))
    if #hargs > 0 then redis.call('HSET', k.jobs, unpack(hargs)) end
  end
  redis.call('ZREM', k.delayed, unpack(ids))
  return more
end

-- The earliest due time this call made ready or scheduled; api() publishes
-- it once the call succeeds. (Calls run one at a time: api() resets it.)
local wake_at = nil
local function wake(at)
  if not wake_at or at < wake_at then wake_at = at end
end

-- Stores a job and places it in delayed or ready by its due time. A job due
-- now waits in delayed while older due jobs are still there (a backlog larger
-- than one promotion), so ready order always follows due order.
-- Returns 'ready' or 'delayed'.
local function place(k, id, j, now)
  wake(math.max(j.due, now))
  if j.due > now or promote(k, now) then
    redis.call('HSET', k.jobs, id, encode(j, true))
    redis.call('ZADD', k.delayed, j.due, id)
    return 'delayed'
  end
  redis.call('HSET', k.jobs, id, encode(j))
  redis.call('ZADD', k.ready, ready_score(j.prio, take_seq(k, 1)), id)
  return 'ready'
end

-- Reservations. The reserved set's member is id NUL token (ids hold no
-- control characters), so ack, release, fail and touch find and check a
-- reservation in one step; the leases hash says by id which one is current.
local function lease_member(id, token)
  return id .. '\0' .. token
end

local function member_id(member)
  return member:sub(1, member:find('\0', 1, true) - 1)
end

-- "token:reserved_at:ttr" -> token, reserved_at, ttr
local function parse_lease(v)
  local token, at, ttr = v:match('^(%d+):(%d+):(%d+)$')
  return tonumber(token), tonumber(at), tonumber(ttr)
end

-- Why id is not reserved under a given token: stale (reserved under
-- another), wrong state (not reserved), or missing.
local function not_held(k, id)
  if redis.call('HEXISTS', k.leases, id) == 1 then return STALE end
  if redis.call('HEXISTS', k.jobs, id) == 1 then return WRONG_STATE end
  return MISSING
end

local function end_lease(k, id, member)
  redis.call('ZREM', k.reserved, member)
  redis.call('HDEL', k.leases, id)
end

-- The lowest score in a sorted set, or -1 when it is empty.
local function earliest(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return first[2] and tonumber(first[2]) or -1
end

local function paused(k)
  return redis.call('ZSCORE', k.ready, PAUSED_MARK) ~= false
end

-- The state sets whose members are plain ids (reserved's are id NUL token).
local ID_STATES = { 'ready', 'delayed', 'dead', 'done' }

-- Removes an id from every state set; returns the name of the state it was in.
local function unlink(k, id)
  for _, s in ipairs(ID_STATES) do
    if redis.call('ZREM', k[s], id) == 1 then return s end
  end
  local lease = redis.call('HGET', k.leases, id)
  if lease then
    end_lease(k, id, lease_member(id, (parse_lease(lease))))
    return 'reserved'
  end
  return nil
end

-- The state of a job: its name and score there; for a reserved job also
-- its token and reservation time.
local function state_of(k, id)
  for _, s in ipairs(ID_STATES) do
    local score = redis.call('ZSCORE', k[s], id)
    if score then return s, tonumber(score) end
  end
  local lease = redis.call('HGET', k.leases, id)
  if lease then
    local token, at = parse_lease(lease)
    return 'reserved', tonumber(redis.call('ZSCORE', k.reserved, lease_member(id, token))), token, at
  end
  return 'unknown', nil
end

-- A reservation that ended without success: counts an attempt, then back to
-- ready (retry now), delayed (backoff) or dead. Returns 'ready'|'delayed'|'dead'.
local function retry_or_bury(k, id, member, j, now, err, backoff, bury)
  j.made = (j.made or 0) + 1
  j.err = err
  end_lease(k, id, member)
  if bury or j.made >= max_attempts(j) then
    redis.call('HSET', k.jobs, id, encode(j))
    redis.call('ZADD', k.dead, now, id)
    redis.call('HINCRBY', k.meta, 'dead_total', 1)
    return 'dead'
  end
  -- backoff: true for the job's own, a number for a given delay, false for none.
  if type(backoff) == 'number' then j.due = now + backoff
  else j.due = now + (backoff and backoff_delay(j) or 0) end
  return place(k, id, j, now)
end

-- Lapsed reservations back to ready (an attempt each) or dead.
local function requeue_lapsed(k, now, limit)
  local members = redis.call('ZRANGEBYSCORE', k.reserved, '-inf', now, 'LIMIT', 0, limit)
  local back, buried = 0, 0
  for _, member in ipairs(members) do
    local id = member_id(member)
    local rec = redis.call('HGET', k.jobs, id)
    if rec then
      local to = retry_or_bury(k, id, member, decode(rec), now, 'time-to-run lapsed', false, false)
      if to == 'dead' then buried = buried + 1 else back = back + 1 end
    else
      end_lease(k, id, member)
    end
  end
  if back + buried > 0 then redis.call('HINCRBY', k.meta, 'lapsed_total', back + buried) end
  return back, buried
end

-- Drops retained finished jobs whose window has ended.
local function trim_done(k, now)
  local ids = redis.call('ZRANGEBYSCORE', k.done, '-inf', now, 'LIMIT', 0, 100)
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
    'id', id, 'state', state, 'body', j.body, 'priority', j.prio,
    'created', j.created, 'due', j.due, 'attempts', j.made or 0,
    'max_attempts', max_attempts(j), 'ttr', j.ttr or DEFAULT_TTR,
    'backoff', BACKOFF_NAMES[b[1]], 'backoff_base', b[2], 'backoff_cap', b[3],
  }
  if j.err then f[#f + 1] = 'error'; f[#f + 1] = j.err end
  if state == 'reserved' then
    f[#f + 1] = 'token'; f[#f + 1] = j.token
    f[#f + 1] = 'reserved_at'; f[#f + 1] = j.reserved_at
    f[#f + 1] = 'deadline'; f[#f + 1] = score
  elseif state == 'dead' then
    f[#f + 1] = 'died'; f[#f + 1] = score
  elseif state == 'done' then
    f[#f + 1] = 'finished'; f[#f + 1] = j.finished
    f[#f + 1] = 'expires'; f[#f + 1] = score
  end
  return f
end

---------------------------------------------------------------- put

-- The id that asks for a generated one, as XADD's "*" does: "<now>-<seq>",
-- unique in the topic since its sequence never repeats.
local GENERATE = '*'

local function generated_id(now, seq)
  return now .. '-' .. seq
end

-- Validates one job's arguments; returns a description of it.
local function parse_job(id, body, o, now, body_max, id_checked)
  local p = { id = id_arg(id, id_checked), body = body }
  if body == nil then bad('body is missing') end
  if #body > body_max then bad('body is ' .. #body .. ' bytes, over the limit of ' .. body_max) end
  if o.DELAY and o.AT then bad('give DELAY or AT, not both') end
  if o.REPLACE and o.UPSERT then bad('give REPLACE or UPSERT, not both') end
  p.due = now
  if o.DELAY then p.due = now + int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX) end
  if o.AT then p.due = int_arg(o.AT, 'AT', 0, MS_MAX) end
  p.prio = o.PRIORITY and int_arg(o.PRIORITY, 'PRIORITY', 0, PRIO_MAX) or 0
  if o.TTR then
    local ttr = int_arg(o.TTR, 'TTR', 1, TTR_MAX)
    if ttr ~= DEFAULT_TTR then p.ttr = ttr end
  end
  if o.ATTEMPTS then
    local n = int_arg(o.ATTEMPTS, 'ATTEMPTS', 1, ATTEMPTS_MAX)
    if n ~= DEFAULT_ATTEMPTS then p.max = n end
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
  p.mode = (o.REPLACE and 'replace') or (o.UPSERT and 'upsert') or 'create'
  if p.id == GENERATE and p.mode ~= 'create' then
    bad('a generated id (*) cannot go with REPLACE or UPSERT')
  end
  return p
end

-- A new job from a validated put; seq is its put sequence number.
local function new_job(p, seq, now)
  return { prio = p.prio, seq = seq, created = now, due = p.due, ttr = p.ttr, max = p.max,
           backoff = p.backoff, body = p.body }
end

-- Stores one validated job; returns its outcome code.
local function store_job(k, p, seq, now, old)
  if old and p.mode == 'create' then return EXISTS end
  if not old and p.mode == 'replace' then return MISSING end
  local j = new_job(p, seq, now)
  if old then
    -- A new version of the job: keeps its creation time, starts its attempts
    -- afresh and ends any reservation (the holder's token goes stale).
    j.created = decode(old).created
    unlink(k, p.id)
  end
  place(k, p.id, j, now)
  return old and UPDATED or OK
end

--[[ redisched_put: add one job, or update it with REPLACE/UPSERT.
ARGV: id body [DELAY ms | AT unix-ms] [PRIORITY 0..1000] [TTR ms] [ATTEMPTS n]
      [BACKOFF fixed|exponential base-ms cap-ms] [REPLACE | UPSERT]
      [MAXBODY bytes] [NOW ms]
  DELAY/AT: when it is due (default now). PRIORITY: higher runs first (0).
  TTR: time-to-run of a reservation (30000). ATTEMPTS: tries before dead (5).
  BACKOFF: delay after a failure (exponential 1000 600000).
  REPLACE: update an existing job only; UPSERT: create or update.
  MAXBODY: the largest body accepted (1048576).
  id "*": a generated id, "<created ms>-<n>" (not with REPLACE or UPSERT).
Output: 1 created, 2 updated, -1 the id exists (neither flag), 0 no such job
  (REPLACE); for "*" the generated id (a string). An update keeps created,
  resets attempts, and ends a reservation.
]]
local function put(keys, args)
  local k = check_keys(keys)
  local o = options(args, 3, #args, PUT_OPTIONS, OPT_MAXBODY_NOW)
  local body_max = body_limit(o)
  local now = clock(o)
  local p = parse_job(args[1], args[2], o, now, body_max)
  if p.mode ~= 'create' then
    return store_job(k, p, take_seq(k, 1), now, redis.call('HGET', k.jobs, p.id))
  end
  -- The common case: one sequence number orders the job both among puts and
  -- among ready jobs, taken after older due jobs were made ready.
  local backlog = p.due <= now and promote(k, now)
  local seq = take_seq(k, 1)
  local id = p.id == GENERATE and generated_id(now, seq) or p.id
  local j = new_job(p, seq, now)
  local delayed = p.due > now or backlog
  if redis.call('HSETNX', k.jobs, id, encode(j, delayed)) == 0 then return EXISTS end
  wake(math.max(p.due, now))
  if delayed then
    redis.call('ZADD', k.delayed, p.due, id)
  else
    redis.call('ZADD', k.ready, ready_score(p.prio, seq), id)
  end
  return id == p.id and OK or id
end

--[[ redisched_restore: put back a job as an export wrote it (backups and
migrations): its state, creation time, attempts and last error as they were.
ARGV: id body state created attempts [AT due-ms] [PRIORITY n] [TTR ms]
      [ATTEMPTS n] [BACKOFF kind base cap] [ERROR text] [DIED ms] [REPLACE] [NOW ms]
  state: delayed, ready or dead (a reserved job comes back ready; its
  reservation belonged to the old place). AT: its due time (default created).
Output: 1 restored, -1 the id exists (without REPLACE).
]]
local RESTORE_OPTIONS = { AT = 1, PRIORITY = 1, TTR = 1, ATTEMPTS = 1, BACKOFF = 3, ERROR = 1,
                          DIED = 1, REPLACE = 0, NOW = 1 }
local function restore(keys, args)
  local k = check_keys(keys)
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
  local old = redis.call('HGET', k.jobs, p.id)
  if old and not o.REPLACE then return EXISTS end
  if old then unlink(k, p.id) end
  local j = new_job(p, take_seq(k, 1), created)
  j.due = o.AT and p.due or created
  if made > 0 then j.made = made end
  j.err = o.ERROR
  if state == 'dead' then
    redis.call('HSET', k.jobs, p.id, encode(j))
    redis.call('ZADD', k.dead, died, p.id)
  else
    place(k, p.id, j, now)
  end
  return OK
end

--[[ redisched_putmany: add or update many jobs in one call.
ARGV: count, then count times: id body nopts [option value...] (nopts words of
      put's per-job options), then [MAXBODY bytes] [NOW ms] for all.
Output: an array of put's codes, one per job, in order (the generated id
  for a job given as "*"). A job id given twice in one call is treated as
  two puts, in order.
]]
local function putmany(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  local nargs = #args
  -- Jobs without options (the usual batch) skip option parsing entirely.
  local ids, bodies, opts, pos = {}, {}, {}, 2
  for i = 1, count do
    if pos + 2 > nargs then bad('job ' .. i .. ' of ' .. count .. ' is incomplete') end
    ids[i], bodies[i] = args[pos], args[pos + 1]
    local nopts = args[pos + 2]
    if nopts == '0' then
      pos = pos + 3
    else
      nopts = int_arg(nopts, 'option count of job ' .. i, 0, 20)
      if pos + 2 + nopts > nargs then bad('job ' .. i .. ' has fewer option words than ' .. nopts) end
      opts[i] = options(args, pos + 3, pos + 2 + nopts, PUT_OPTIONS)
      pos = pos + 3 + nopts
    end
  end
  local g = options(args, pos, nargs, OPT_MAXBODY_NOW)
  local body_max = body_limit(g)
  local now = clock(g)

  -- Validate everything before the first write. One scan finds whether any
  -- id has a control character; parse_job then names the job.
  local ids_clean = not table.concat(ids):find('%c')
  local parsed, at = {}, 0
  local ok, err = pcall(function()
    for i = 1, count do
      at = i
      local id = ids[i]
      if opts[i] or not ids_clean or id == '' or #id > ID_MAX or #bodies[i] > body_max then
        parsed[i] = parse_job(id, bodies[i], opts[i] or NO_OPTIONS, now, body_max, ids_clean)
      end
    end
  end)
  if not ok then
    if type(err) == 'table' and err.bad then bad('job ' .. at .. ': ' .. err.bad:sub(8)) end
    error(err)
  end

  local backlog = false
  for i = 1, count do
    if not parsed[i] or parsed[i].due <= now then backlog = promote(k, now); break end
  end
  local seq = take_seq(k, count)
  local generated = {}
  for i = 1, count do
    if ids[i] == GENERATE then
      ids[i], generated[i] = generated_id(now, seq + i - 1), true
      if parsed[i] then parsed[i].id = ids[i] end
    end
  end
  local olds = redis.call('HMGET', k.jobs, unpack(ids))
  -- New jobs are written with one HSET and one ZADD per set; the rare
  -- updates and in-call repeats go one by one, in order.
  local codes, seen = {}, {}
  local hset, zdelayed, zready, nh, nd, nr = {}, {}, {}, 0, 0, 0
  local function flush()
    if nh > 0 then redis.call('HSET', k.jobs, unpack(hset, 1, nh)) end
    if nd > 0 then redis.call('ZADD', k.delayed, unpack(zdelayed, 1, nd)) end
    if nr > 0 then redis.call('ZADD', k.ready, unpack(zready, 1, nr)) end
    nh, nd, nr = 0, 0, 0
  end
  for i = 1, count do
    local id, p, s = ids[i], parsed[i], seq + i - 1
    local old = olds[i] or seen[id]
    if old or (p and p.mode ~= 'create') then
      flush() -- so this job sees every earlier one stored
      p = p or parse_job(id, bodies[i], NO_OPTIONS, now, body_max, true)
      codes[i] = store_job(k, p, s, now, old and redis.call('HGET', k.jobs, id))
      if codes[i] > 0 then seen[id] = true end
    else
      local rec, due, prio
      if p then
        prio, due = p.prio, p.due
        rec = encode(new_job(p, s, now), due > now or backlog)
      else -- encode's common case, without a table per job
        prio, due = 0, now
        rec = struct.pack('>BI4I3', 0, stamp_parts(now, s)) .. bodies[i]
      end
      hset[nh + 1], hset[nh + 2], nh = id, rec, nh + 2
      wake(due > now and due or now)
      if due > now or backlog then
        zdelayed[nd + 1], zdelayed[nd + 2], nd = due, id, nd + 2
      else
        zready[nr + 1], zready[nr + 2], nr = ready_score(prio, s), id, nr + 2
      end
      seen[id] = true
      codes[i] = generated[i] and id or OK
    end
  end
  flush()
  return codes
end

---------------------------------------------------------------- read

--[[ redisched_get: read one job.
ARGV: id
Output: nil when there is no such job; else a flat field/value array: id,
  state (delayed|ready|reserved|dead|done), body, priority, created, due,
  attempts, max_attempts, ttr, backoff, backoff_base, backoff_cap, and when
  present error; reserved adds token, reserved_at, deadline; dead adds died;
  done adds finished, expires.
]]
local function get(keys, args)
  local k = check_keys(keys)
  local id = id_arg(args[1])
  local rec = redis.call('HGET', k.jobs, id)
  if not rec then return nil end
  local j = decode(rec)
  local state, score
  state, score, j.token, j.reserved_at = state_of(k, id)
  return job_fields(id, j, state, score)
end

local STATE_SETS = { delayed = true, ready = true, reserved = true, dead = true, done = true }

--[[ redisched_list: jobs of one state, in the order they will leave it.
ARGV: state (delayed|ready|reserved|dead|done) offset count [NOBODY] [NOW ms]
  count is at most 1000. NOBODY leaves bodies out (body is '').
  "peek" is list ready 0 n: the next n jobs reserve would hand out.
  Due delayed jobs are made ready first, so the lists show what reserve
  would see (the only write, and none when nothing is due).
Output: {total in that state, job, job...}, each job as redisched_get's array.
]]
local function list(keys, args)
  local k = check_keys(keys)
  local state = args[1] and args[1]:lower()
  if not STATE_SETS[state] then bad('state must be delayed, ready, reserved, dead or done, got ' .. show(args[1] or '')) end
  local offset = int_arg(args[2], 'offset', 0, 2 ^ 40)
  local count = int_arg(args[3], 'count', 1, BATCH_MAX)
  local o = options(args, 4, #args, OPT_NOBODY_NOW)
  promote(k, clock(o))
  local set = k[state]
  local skip = (state == 'ready' and paused(k)) and 1 or 0 -- the pause mark comes first
  local page = redis.call('ZRANGE', set, offset + skip, offset + skip + count - 1, 'WITHSCORES')
  local out = { redis.call('ZCARD', set) - skip }
  if #page == 0 then return out end
  local ids = {}
  for i = 1, #page / 2 do
    ids[i] = state == 'reserved' and member_id(page[2 * i - 1]) or page[2 * i - 1]
  end
  local recs = redis.call('HMGET', k.jobs, unpack(ids))
  local leases = state == 'reserved' and redis.call('HMGET', k.leases, unpack(ids))
  for i, id in ipairs(ids) do
    if recs[i] then
      local j = decode(recs[i])
      if o.NOBODY then j.body = '' end
      if leases and leases[i] then j.token, j.reserved_at = parse_lease(leases[i]) end
      out[#out + 1] = job_fields(id, j, state, tonumber(page[2 * i]))
    end
  end
  return out
end

--[[ redisched_stats: counts of one topic.
Output: flat field/value array: delayed, ready, reserved, dead, done, paused
  (0|1), next_due (earliest due time of a delayed job, -1 if none), and the
  totals kept since the topic began: failed_total, dead_total, lapsed_total.
  Due delayed jobs are made ready first, as list does.
ARGV: [NOW ms]
]]
local function stats(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_NOW)
  promote(k, clock(o))
  local meta = redis.call('HMGET', k.meta, 'failed_total', 'dead_total', 'lapsed_total')
  local is_paused = paused(k)
  return {
    'delayed', redis.call('ZCARD', k.delayed),
    'ready', redis.call('ZCARD', k.ready) - (is_paused and 1 or 0),
    'reserved', redis.call('ZCARD', k.reserved), 'dead', redis.call('ZCARD', k.dead),
    'done', redis.call('ZCARD', k.done), 'paused', is_paused and 1 or 0,
    'next_due', earliest(k.delayed),
    'failed_total', tonumber(meta[1] or 0), 'dead_total', tonumber(meta[2] or 0),
    'lapsed_total', tonumber(meta[3] or 0),
  }
end

---------------------------------------------------------------- take


-- The header of reserve's and pull's reply: when the caller should look again.
local function wake_info(k, now, handed, count, is_paused)
  if is_paused then return { now, -1, 1 } end
  if handed >= count then return { now, 0, 0 } end
  local due, lapse = earliest(k.delayed), earliest(k.reserved)
  if due < 0 or (lapse >= 0 and lapse < due) then due = lapse end
  return { now, due, 0 }
end

-- The start of reserve and pull: due jobs made ready, then up to count of
-- them popped. Returns the reply's header, and (unless paused or nothing
-- was ready) the popped ids, their ready scores and their records. With
-- recover, lapsed reservations are requeued first when too few are ready.
local function take(k, now, count, recover)
  promote(k, now)
  local popped = redis.call('ZPOPMIN', k.ready, count)
  if popped[1] == PAUSED_MARK then
    -- Paused: put back the mark and whatever came out behind it.
    local back = {}
    for i = 1, #popped, 2 do back[i], back[i + 1] = popped[i + 1], popped[i] end
    redis.call('ZADD', k.ready, unpack(back))
    return wake_info(k, now, 0, count, true)
  end
  if recover and #popped < 2 * count and redis.call('ZCOUNT', k.reserved, '-inf', now) > 0 then
    requeue_lapsed(k, now, REQUEUE_INLINE)
    local more = redis.call('ZPOPMIN', k.ready, count - #popped / 2)
    for _, v in ipairs(more) do popped[#popped + 1] = v end
  end
  local n = #popped / 2
  local out = wake_info(k, now, n, count, false)
  if n == 0 then return out end
  local ids, scores = {}, {}
  for i = 1, n do ids[i], scores[i] = popped[2 * i - 1], popped[2 * i] end
  return out, ids, scores, redis.call('HMGET', k.jobs, unpack(ids))
end

--[[ redisched_reserve: hand out up to count ready jobs for a time-to-run.
ARGV: count [TTR ms] [NOW ms]
  count: 1..1000. TTR applies to jobs put without one of their own (30000).
  Due delayed jobs become ready first; when too few jobs are ready, lapsed
  reservations are requeued first (an attempt each).
Output: {now, next, paused, job, job...}
  next: 0 = jobs may remain, call again; -1 = nothing is scheduled; otherwise
  the earliest time (ms) a delayed job is due or a reservation lapses.
  paused: 1 when the topic is paused (no jobs are handed out).
  job: {id, body, token, attempt, max_attempts, priority, created, due, deadline}
  The token must accompany ack, release, fail and touch of that job.
]]
local function reserve(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  local o = options(args, 2, #args, OPT_TTR_NOW)
  local ttr_arg = o.TTR and int_arg(o.TTR, 'TTR', 1, TTR_MAX)
  local now = clock(o)
  local out, ids, scores, recs = take(k, now, count, true)
  if not ids then return out end
  -- The records stay as they are: the reservation lives in the reserved set
  -- and the leases hash.
  local leases, zadd, n = {}, {}, 0
  for i, id in ipairs(ids) do
    local rec = recs[i]
    if rec then
      local j = decode(rec)
      local token = tonumber(scores[i]) % SEQ_SPAN -- unique: one per entry to ready
      local ttr = j.ttr or ttr_arg or DEFAULT_TTR
      local deadline = now + ttr
      leases[n + 1], leases[n + 2] = id, token .. ':' .. now .. ':' .. ttr
      zadd[n + 1], zadd[n + 2] = deadline, lease_member(id, token)
      n = n + 2
      out[#out + 1] = { id, j.body, token, (j.made or 0) + 1, max_attempts(j), j.prio, j.created, j.due, deadline }
    end
  end
  if n > 0 then
    redis.call('HSET', k.leases, unpack(leases))
    redis.call('ZADD', k.reserved, unpack(zadd))
  end
  return out
end

--[[ redisched_pull: take up to count ready jobs for good (at-most-once).
ARGV: count [NOW ms]
Output: {now, next, paused, job, job...} as reserve, each job
  {id, body, attempt, max_attempts, priority, created, due}; the jobs are gone.
]]
local function pull(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  local o = options(args, 2, #args, OPT_NOW)
  local now = clock(o)
  local out, ids, _, recs = take(k, now, count, false)
  if not ids then return out end
  redis.call('HDEL', k.jobs, unpack(ids))
  for i, id in ipairs(ids) do
    if recs[i] then
      local j = decode(recs[i])
      out[#out + 1] = { id, j.body, (j.made or 0) + 1, max_attempts(j), j.prio, j.created, j.due }
    end
  end
  return out
end

---------------------------------------------------------------- settle

-- The job if id is reserved under token (and the reservation's member);
-- otherwise nil and the code saying why not.
local function held(k, id, token)
  local member = lease_member(id, token)
  if not redis.call('ZSCORE', k.reserved, member) then return nil, not_held(k, id) end
  return decode(redis.call('HGET', k.jobs, id)), member
end

local function token_arg(v)
  return int_arg(v, 'token', 1, SEQ_SPAN)
end

-- Acks the held jobs of pairs {id, token}; returns their codes.
local function settle_acks(k, pairs_, o)
  local keep = o.KEEP and int_arg(o.KEEP, 'KEEP', 0, DELAY_MAX) or 0
  local now = (keep > 0 or o.NOW) and clock(o)
  local members = {}
  for i, p in ipairs(pairs_) do members[i] = lease_member(p[1], p[2]) end
  local found = redis.call('ZMSCORE', k.reserved, unpack(members))
  local codes, gone, gone_members, seen = {}, {}, {}, {}
  for i, p in ipairs(pairs_) do
    if seen[p[1]] then
      codes[i] = WRONG_STATE -- acked earlier in this call
    elseif found[i] then
      seen[p[1]] = true
      gone[#gone + 1], gone_members[#gone_members + 1] = p[1], members[i]
      codes[i] = OK
    else
      codes[i] = not_held(k, p[1])
    end
  end
  if #gone > 0 then
    redis.call('ZREM', k.reserved, unpack(gone_members))
    redis.call('HDEL', k.leases, unpack(gone))
    if keep > 0 then
      local recs = redis.call('HMGET', k.jobs, unpack(gone))
      for i, id in ipairs(gone) do
        local j = decode(recs[i])
        j.finished = now
        redis.call('HSET', k.jobs, id, encode(j))
        redis.call('ZADD', k.done, now + keep, id)
      end
    else
      redis.call('HDEL', k.jobs, unpack(gone))
    end
  end
  if keep > 0 then trim_done(k, now) end
  return codes
end

--[[ redisched_ack: a reserved job is done.
ARGV: id token [KEEP ms] [NOW ms]
  KEEP: keep the job, state done, this long (for lookups and to refuse puts
  of the same id); default 0: the job is removed at once.
Output: 1 acked, 0 no such job, -2 not reserved, -3 stale token.
]]
local function ack(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local o = options(args, 3, #args, OPT_KEEP_NOW)
  -- The common case in three calls: the ZREM checks and ends the lease.
  if not o.KEEP and redis.call('ZREM', k.reserved, lease_member(id, token)) == 1 then
    redis.call('HDEL', k.jobs, id)
    redis.call('HDEL', k.leases, id)
    return OK
  end
  return settle_acks(k, { { id, token } }, o)[1]
end

--[[ redisched_ackmany: many reserved jobs are done.
ARGV: count id token [id token...] [KEEP ms] [NOW ms]    (count: 1..1000)
Output: an array of ack's codes, one per job, in order.
]]
local function ackmany(keys, args)
  local k = check_keys(keys)
  local count = int_arg(args[1], 'count', 1, BATCH_MAX)
  if #args < 1 + 2 * count then bad('expected ' .. count .. ' id token pairs') end
  local pairs_ = {}
  for i = 1, count do pairs_[i] = { id_arg(args[2 * i]), token_arg(args[2 * i + 1]) } end
  return settle_acks(k, pairs_, options(args, 2 + 2 * count, #args, OPT_KEEP_NOW))
end

--[[ redisched_release: put a reserved job back, not counted as an attempt.
ARGV: id token [DELAY ms] [PRIORITY 0..1000] [NOW ms]
Output: a code as ack.
]]
local function release(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local o = options(args, 3, #args, OPT_DELAY_PRIORITY_NOW)
  local delay = o.DELAY and int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX) or 0
  local prio = o.PRIORITY and int_arg(o.PRIORITY, 'PRIORITY', 0, PRIO_MAX)
  local now = clock(o)
  local j, member = held(k, id, token)
  if not j then return member end
  if prio then j.prio = prio end
  j.due = now + delay
  end_lease(k, id, member)
  place(k, id, j, now)
  return OK
end

--[[ redisched_fail: the attempt failed; retry after backoff or bury.
ARGV: id token error [DEAD] [DELAY ms] [NOW ms]
  error: text kept on the job (at most 8192 bytes). DEAD: do not retry.
  DELAY: retry after this long instead of the job's own backoff.
Output: a code as ack, or on success the state it went to: 'delayed',
  'ready' (a zero backoff) or 'dead' (a status string).
]]
local function fail_job(keys, args)
  local k = check_keys(keys)
  local id, token = id_arg(args[1]), token_arg(args[2])
  local err = args[3]
  if err == nil then bad('error text is missing') end
  if #err > ERROR_MAX then bad('error text is over ' .. ERROR_MAX .. ' bytes') end
  local o = options(args, 4, #args, OPT_FAIL)
  local delay = o.DELAY and int_arg(o.DELAY, 'DELAY', 0, DELAY_MAX)
  local now = clock(o)
  local j, member = held(k, id, token)
  if not j then return member end
  redis.call('HINCRBY', k.meta, 'failed_total', 1)
  return { ok = retry_or_bury(k, id, member, j, now, err, delay or true, o.DEAD) }
end

--[[ redisched_touch: extend a reservation.
ARGV: id token [TTR ms] [NOW ms]
  The new deadline is now + TTR (default: the reservation's time-to-run).
Output: the new deadline (ms), or a code as ack (0, -2, -3).
]]
local function touch(keys, args)
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
  redis.call('ZADD', k.reserved, deadline, lease_member(id, token))
  return deadline
end

---------------------------------------------------------------- manage

--[[ redisched_delete: remove a job in any state.
ARGV: id [id...]
Output: the number of jobs removed (for one id: 1 removed, 0 absent).
]]
local function delete(keys, args)
  local k = check_keys(keys)
  local n = 0
  for _, id in ipairs(ids_arg(args)) do
    if redis.call('HDEL', k.jobs, id) == 1 then
      unlink(k, id)
      n = n + 1
    end
  end
  return n
end

--[[ redisched_requeue: lapsed reservations back to ready (an attempt each;
dead once attempts reach max_attempts). Safe to run from any number of
processes at once; cheap when nothing lapsed.
ARGV: [LIMIT n] [NOW ms]     LIMIT: at most this many (1..10000, 1000).
Output: {requeued, buried, next} where next is the earliest deadline still
  pending (ms), -1 if none.
]]
local function requeue(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_LIMIT_NOW)
  local limit = limit_arg(o)
  local now = clock(o)
  local back, buried = requeue_lapsed(k, now, limit)
  trim_done(k, now)
  return { back, buried, earliest(k.reserved) }
end

-- Dead jobs back to ready, attempts reset; returns how many were dead.
local function revive(k, ids, now)
  local n = 0
  for _, id in ipairs(ids) do
    local rec = redis.call('ZREM', k.dead, id) == 1 and redis.call('HGET', k.jobs, id)
    if rec then
      local j = decode(rec)
      j.made, j.due = 0, now
      place(k, id, j, now)
      n = n + 1
    end
  end
  return n
end

--[[ redisched_kick: dead jobs back to ready, attempts reset.
ARGV: id [id...]   (at most 1000)
Output: the number of jobs kicked (ids that are not dead are left alone).
]]
local function kick(keys, args)
  local k = check_keys(keys)
  return revive(k, ids_arg(args), clock(NO_OPTIONS))
end

--[[ redisched_kickall: the oldest dead jobs back to ready, attempts reset.
ARGV: [LIMIT n] [NOW ms]   (n: 1..10000, default 1000)
Output: the number of jobs kicked.
]]
local function kickall(keys, args)
  local k = check_keys(keys)
  local o = options(args, 1, #args, OPT_LIMIT_NOW)
  local limit = limit_arg(o)
  local now = clock(o)
  return revive(k, redis.call('ZRANGE', k.dead, 0, limit - 1), now)
end

--[[ redisched_pause / redisched_resume: a paused topic hands out nothing
(reserve and pull return no jobs, paused = 1); puts and the rest still work.
ARGV: none
Output: 1 if the state changed, 0 if it already was so.
]]
local function pause(keys, args)
  local k = check_keys(keys)
  options(args, 1, #args, NO_WORDS)
  return redis.call('ZADD', k.ready, 'NX', '-inf', PAUSED_MARK)
end

local function resume(keys, args)
  local k = check_keys(keys)
  options(args, 1, #args, NO_WORDS)
  local changed = redis.call('ZREM', k.ready, PAUSED_MARK)
  if changed == 1 then wake(clock(NO_OPTIONS)) end
  return changed
end

--[[ redisched_version: the library's version (an integer), for clients that
load the library when it is missing or older than theirs.
]]
local function version()
  return LIBRARY_VERSION
end

---------------------------------------------------------------- register

-- Turns a raised {bad = msg} into a clean error reply; other errors pass on.
local function api(fn)
  return function(keys, args)
    wake_at = nil
    local ok, res = pcall(fn, keys, args)
    if ok then
      if wake_at then redis.call('SPUBLISH', keys[3], wake_at) end
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
register('putmany', putmany)
register('restore', restore)
register('get', get, RO)
register('list', list)
register('stats', stats)
register('reserve', reserve)
register('pull', pull)
register('ack', ack)
register('ackmany', ackmany)
register('release', release)
register('fail', fail_job)
register('touch', touch)
register('delete', delete)
register('requeue', requeue)
register('kick', kick)
register('kickall', kickall)
register('pause', pause)
register('resume', resume)
register('version', version, RO)
