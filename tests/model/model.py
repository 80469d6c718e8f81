"""A reference model of one topic of the redisched Functions library.

Written from docs/redis-api.md and docs/lifecycle.md, not from the Lua: each
method takes the arguments of one FCALL (as the strings sent) and returns the
reply the docs promise, changing the model as the call would change the topic.
Replies use Python values: int, bytes, list, None, Status('ready') for a
status reply, and Error('BADARG') for an error reply (compared by code).

Time is always given (NOW), except for kick, whose arguments are all ids: the
test tells the model the server's clock for it (kick_now).
"""
import dataclasses
import json
import re
from typing import Optional

TIME_SPAN = 2 ** 43
MS_MAX = 2 ** 43 - 1
SEQ_MAX = 2 ** 53 - 1
PRIO_MAX = 1000
PRIO_MIN = 1000 - (2 ** 32 - 1)  # version 37: beanstalkd's 2^32 priorities
ID_MAX = 256
BODY_MAX_DEFAULT = 1048576
BODY_MAX_LIMIT = 536870912
ERROR_MAX = 8192
HISTORY_MAX = 10          # entries of a job's history (version 30)
PROGRESS_MAX = 1024       # bytes of a job's progress value (version 31)
LOG_LINES_MAX = 100       # lines its log keeps
LOG_LINE_MAX = 1024       # bytes of a line (a longer one is cut)
LOG_BYTES_MAX = 32768     # bytes of all its lines
HISTORY_ERROR_MAX = 1024  # bytes of an entry's error
WORKER_ID_MAX = 128       # reserve's WORKER
DELAY_MAX = 315576000000
TTR_MAX = 86400000 * 7
ATTEMPTS_MAX = 1000
BATCH_MAX = 1000
LIMIT_MAX = 10000
OFFSET_MAX = 2 ** 40
DEFAULT_TTR = 30000
DEFAULT_ATTEMPTS = 5
DEFAULT_BACKOFF = ('exponential', 1000, 600000)
WINDOW_MAX = 86400000   # a rate window, and a retry window (version 20)
RETRY_WINDOW_DEFAULT = 60000
LAPSED = b'time-to-run lapsed'


class Error:
    """An error reply, compared by its code (the first word)."""

    def __init__(self, code):
        self.code = code

    def __eq__(self, other):
        return isinstance(other, Error) and other.code == self.code

    def __repr__(self):
        return f'Error({self.code})'


class Status:
    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, Status) and other.text == self.text

    def __repr__(self):
        return f'Status({self.text})'


def utf8_prefix(b, n):
    """The first n bytes of b, less a UTF-8 character they would cut in two."""
    if len(b) <= n:
        return b
    i = n - 1
    while i > n - 4 and b[i] & 0xC0 == 0x80:
        i -= 1
    lead = b[i]
    size = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
    return b[:i] if size > 1 and i + size > n else b[:n]


class Refused(Exception):
    """An argument the docs say is refused (the call answers BADARG)."""

    def __init__(self, code='BADARG'):
        super().__init__(code)
        self.code = code


@dataclasses.dataclass
class Job:
    id: bytes
    body: bytes
    prio: int
    created: int
    due: int
    seq: int            # put order
    place: int          # the token of its next reservation
    state: str          # the set that holds it: delayed ready reserved dead done
    made: int = 0
    max: Optional[int] = None
    ttr: Optional[int] = None     # its own (put with TTR; 0: at most once)
    backoff: Optional[tuple] = None
    err: Optional[bytes] = None
    finished: Optional[int] = None
    keep: Optional[int] = None    # put's KEEP (> 0)
    result: Optional[bytes] = None  # ack's RESULT
    token: Optional[int] = None
    reserved_at: Optional[int] = None
    deadline: Optional[int] = None
    lease_ttr: Optional[int] = None
    died: Optional[int] = None
    expires: Optional[int] = None
    worker: Optional[bytes] = None  # reserve's WORKER (version 30)
    # Attempts that ended without success, oldest first, the last
    # HISTORY_MAX: (attempt, outcome, started, ended, worker, error, cut).
    history: list = dataclasses.field(default_factory=list)
    # What its handlers reported (version 31): (attempt, at, value), and
    # the log's lines (at, attempt, text, cut), the latest kept, of
    # log_total.
    progress: Optional[tuple] = None
    log: list = dataclasses.field(default_factory=list)
    log_total: int = 0

    def attempt(self, outcome, now):
        """An attempt that ended without success (err says why)."""
        self.made += 1
        err = self.err
        cut = len(err) > HISTORY_ERROR_MAX
        self.history = (self.history + [(self.made, outcome, min(self.reserved_at, now), now,
                                         self.worker, utf8_prefix(err, HISTORY_ERROR_MAX), cut)]
                        )[-HISTORY_MAX:]

    def key(self):
        """Ready order: higher priority, earlier due time, put order; the
        first two as one score, (PRIO_MAX - priority) * 2^43 + due, a double:
        below priority -23 the due time is rounded in it (version 37)."""
        return (float((PRIO_MAX - self.prio) * TIME_SPAN + self.due), self.seq)

    def lease_member(self):
        return self.id + b'\0' + str(self.token).encode()


# ---------------------------------------------------------------- arguments

def s(v):
    return v.decode() if isinstance(v, bytes) else v


def b(v):
    return v if isinstance(v, bytes) else str(v).encode()


def int_arg(v, lo, hi):
    if v is None:
        raise Refused()
    v = s(v)
    if len(v) > 18 or not re.fullmatch(r'-?[0-9]+', v):
        raise Refused()
    n = int(v)
    if n < lo or n > hi:
        raise Refused()
    return n


def id_arg(v):
    if v is None or v == b'' or len(v) > ID_MAX:
        raise Refused()
    if any(c < 32 or c == 127 for c in v):
        raise Refused()
    return v


def options(args, spec):
    o = {}
    i = 0
    while i < len(args):
        word = s(args[i]).upper()
        if word not in spec:
            raise Refused()
        if word in o:
            raise Refused()
        n = spec[word]
        if i + n > len(args) - 1:
            raise Refused()
        if n == 0:
            o[word] = True
        elif n == 1:
            o[word] = args[i + 1]
        else:
            o[word] = list(args[i + 1:i + 1 + n])
        i += n + 1
    return o


PUT_WORDS = {'DELAY': 1, 'AT': 1, 'PRIORITY': 1, 'TTR': 1, 'ATTEMPTS': 1, 'BACKOFF': 3,
             'KEEP': 1, 'REPLACE': 0, 'UPSERT': 0, 'DEBOUNCE': 0}
WAITING = ('delayed', 'ready')  # the states DEBOUNCE updates


class Put:
    pass


def parse_job(id_, body, o, now, body_max):
    p = Put()
    p.id = id_arg(id_)
    if body is None:
        raise Refused()
    p.body = body
    if len(body) > body_max:
        raise Refused()
    if 'DELAY' in o and 'AT' in o:
        raise Refused()
    if sum(m in o for m in ('REPLACE', 'UPSERT', 'DEBOUNCE')) > 1:
        raise Refused()
    p.due, p.at = now, None
    if 'DELAY' in o:
        p.due = min(now + int_arg(o['DELAY'], 0, DELAY_MAX), MS_MAX)
    if 'AT' in o:
        p.at = int_arg(o['AT'], 0, MS_MAX)
        p.due = max(p.at, now)  # an AT in the past means now
    p.prio = int_arg(o['PRIORITY'], PRIO_MIN, PRIO_MAX) if 'PRIORITY' in o else 0
    # TTR 0: delivered at most once (reserve takes the job for good).
    p.ttr = int_arg(o['TTR'], 0, TTR_MAX) if 'TTR' in o else None
    p.max = None
    if 'ATTEMPTS' in o:
        p.max = int_arg(o['ATTEMPTS'], 1, ATTEMPTS_MAX)
    p.backoff = None
    if 'BACKOFF' in o:
        kind = s(o['BACKOFF'][0]).lower()
        if kind not in ('fixed', 'exponential'):
            raise Refused()
        base = int_arg(o['BACKOFF'][1], 0, DELAY_MAX)
        cap = int_arg(o['BACKOFF'][2], 0, DELAY_MAX)
        if kind == 'exponential' and cap < base:
            raise Refused()
        p.backoff = (kind, base, cap)
    p.keep = int_arg(o['KEEP'], 0, DELAY_MAX) if 'KEEP' in o else None
    p.keep = p.keep or None  # KEEP 0: not kept
    p.mode = ('replace' if 'REPLACE' in o else 'upsert' if 'UPSERT' in o
              else 'debounce' if 'DEBOUNCE' in o else 'create')
    if p.id == b'*' and p.mode != 'create':
        raise Refused()
    return p


# ---------------------------------------------------------------- the topic

# The history's kinds (version 34), in its rows' order.
HISTORY_KINDS = ('put', 'started', 'done', 'failed', 'dead', 'lapsed', 'wait')


class Topic:
    def __init__(self, promote_batch=1000, requeue_inline=100, trim_batch=100, history=False):
        self.promote_batch = promote_batch
        self.requeue_inline = requeue_inline
        self.trim_batch = trim_batch
        self.jobs = {}
        self.seq = 0
        self.failed_total = self.dead_total = self.lapsed_total = 0
        self.paused = False     # its mark is set (a timed pause that ended keeps it
        self.pause_end = None   # until a reserve or pull takes it away): pause FOR's end
        self.shards = None    # redisched_shard: the suffixes (a list of bytes), when spread
        self.seq_kept = 0     # the counter while it is parked (spread)
        self.wake = None      # the wake-up signal of the last call, if any
        self.finished = []    # the ids the last call published on the finished channel
        self.reported = []    # and on the progress channel (version 31)
        self.kick_now = None  # the server's clock during a kick (set by the test)
        self.retry_window = RETRY_WINDOW_DEFAULT  # (version 20)
        self.gone = {}        # id -> the end of its retry window (P:{T}:gone)
        self.migrated = False     # redisched_migrate has marked the topic done (version 24)
        self.migrating = False    # a migrate call left a cursor
        self.migrate_seen = None  # (the library's reply, its meta key existed) (set by the test)
        # The history (version 34, "The topic's history"), when the calls
        # name its key: minute -> the counts of HISTORY_KINDS.
        self.history = history
        self.minutes = {}
        self.counted = None   # the last call's counts, until it succeeds
        self.call_now = None  # the last call's NOW

    # ------------------------------------------------------------ helpers

    def remember(self, ids, now):
        """Ids finished without a trace (version 20, "The retry window")."""
        if self.retry_window == 0:
            return
        self.gone = {i: t for i, t in self.gone.items() if t > now}
        for id_ in ids:
            self.gone[id_] = now + self.retry_window

    def in_window(self, id_, now):
        return self.gone.get(id_, -1) > now

    def take_seq(self, n):
        first = self.seq + 1
        self.seq += n
        if self.seq > SEQ_MAX:
            self.seq -= n
            self.sharded()  # a spread topic parks its counter at SEQ_MAX
            raise Refused('BADSTATE')
        return first

    def sharded(self):
        """A call meant for the jobs of a spread topic ("A topic over many shards")."""
        if self.shards is not None:
            raise Refused('SHARDED')

    def signal(self, t):
        if self.wake is None or t < self.wake:
            self.wake = t

    def place(self, j, now):
        """A job (new or moving) goes to delayed or ready by its due time."""
        j.token = j.reserved_at = j.deadline = j.lease_ttr = None
        j.died = j.expires = None
        if j.due > now:
            j.state = 'delayed'
            self.signal(j.due)
        else:
            j.state = 'ready'
            self.signal(now)
        self.jobs[j.id] = j

    def in_state(self, state):
        return [j for j in self.jobs.values() if j.state == state]

    def ready_order(self):
        return sorted(self.in_state('ready'), key=Job.key)

    def due_delayed(self, now):
        return sorted((j for j in self.in_state('delayed') if j.due <= now),
                      key=lambda j: (j.due, j.seq))

    def promote(self, now):
        """Up to promote_batch due jobs to ready, in (due, put order); returns the
        first one left behind as (due, seq), or None."""
        due = self.due_delayed(now)
        for j in due[:self.promote_batch]:
            j.state = 'ready'
        if len(due) > self.promote_batch:
            left = due[self.promote_batch]
            return (left.due, left.seq)
        return None

    def not_held(self, id_):
        j = self.jobs.get(id_)
        if j is None:
            self.sharded()
            return 0
        return -3 if j.state == 'reserved' else -2

    def held(self, id_, token):
        j = self.jobs.get(id_)
        return j if j is not None and j.state == 'reserved' and j.token == token else None

    def lapsed(self, now, limit):
        res = sorted((j for j in self.in_state('reserved') if j.deadline <= now),
                     key=lambda j: (j.deadline, j.lease_member()))
        return res[:limit]

    def requeue_jobs(self, jobs, now):
        back = [j for j in jobs if j.made + 1 < (j.max or DEFAULT_ATTEMPTS)]
        seq = self.take_seq(len(back)) if back else None
        buried = 0
        for j in jobs:
            j.err = LAPSED
            j.attempt('lapsed', now)
            if j.made >= (j.max or DEFAULT_ATTEMPTS):
                j.state, j.died = 'dead', now
                j.token = j.reserved_at = j.deadline = j.lease_ttr = j.worker = None
                buried += 1
                self.finished.append(j.id)  # dead, kept or not (version 19)
            else:
                j.place, seq = seq, seq + 1
                j.due = now
                self.place(j, now)
        self.dead_total += buried
        self.lapsed_total += len(jobs)
        return len(back), buried

    def trim_done(self, now):
        gone = sorted((j for j in self.in_state('done') if j.expires <= now),
                      key=lambda j: (j.expires, j.id))[:self.trim_batch]
        for j in gone:
            del self.jobs[j.id]

    def backoff_delay(self, j):
        kind, base, cap = j.backoff or DEFAULT_BACKOFF
        if kind == 'fixed':
            return base
        return min(base * 2 ** max(j.made - 1, 0), cap)

    def fields(self, j, state, now=None):
        bk = j.backoff or DEFAULT_BACKOFF
        f = [b'id', j.id, b'state', state.encode(), b'body', j.body, b'priority', j.prio,
             b'created', j.created, b'due', j.due, b'attempts', j.made,
             b'max_attempts', j.max or DEFAULT_ATTEMPTS,
             b'ttr', j.ttr if j.ttr is not None else DEFAULT_TTR,
             b'backoff', bk[0].encode(), b'backoff_base', bk[1], b'backoff_cap', bk[2]]
        if j.err is not None:
            f += [b'error', j.err]
        if state == 'reserved':
            f += [b'token', j.token, b'reserved_at', j.reserved_at, b'deadline', j.deadline]
            if j.worker is not None:
                f += [b'worker', j.worker]
        elif state == 'dead':
            f += [b'died', j.died]
        elif state == 'done':
            f += [b'finished', j.finished, b'expires', j.expires]
        f += [b'own_ttr', int(j.ttr is not None)]  # older readers stop before it
        if j.keep:
            f += [b'keep', j.keep]
        if j.result is not None:
            f += [b'result', j.result]
        if j.history:  # version 30
            h = []
            for attempt, outcome, started, ended, worker, err, cut in j.history:
                e = [b'attempt', attempt, b'outcome', outcome.encode(), b'started', started,
                     b'ended', ended]
                if worker is not None:
                    e += [b'worker', worker]
                e += [b'error', err]
                if cut:
                    e += [b'error_cut', 1]
                h.append(e)
            f += [b'history', h]
        if self.progress_of(j):  # version 31
            attempt, at, value = j.progress
            f += [b'progress', value, b'progress_attempt', attempt, b'progress_at', at]
        if j.log:
            lines = []
            for at, attempt, text, cut in j.log:
                lines.append([b'at', at, b'attempt', attempt, b'line', text] + ([b'cut', 1] if cut else []))
            f += [b'log', lines, b'log_total', j.log_total]
        return f

    @staticmethod
    def progress_of(j):
        return j.progress is not None

    def now_opt(self, o):
        if 'NOW' not in o:
            raise AssertionError('the model needs NOW')
        self.call_now = int_arg(o['NOW'], 0, MS_MAX)
        return self.call_now

    def count(self, kind, n):
        """n of a kind of HISTORY_KINDS, counted by this call once it succeeds."""
        self.counted[HISTORY_KINDS.index(kind)] += n

    def history_rows(self, first, last):
        """redisched_history minute's rows from minute first to last."""
        return [[m * 60000] + c for m, c in sorted(self.minutes.items())
                if first <= m <= last and any(c)]

    def history_total(self):
        return [sum(c[i] for c in self.minutes.values()) for i in range(len(HISTORY_KINDS))]

    # ------------------------------------------------------------ calls

    def call(self, op, args):
        """The reply of FCALL redisched_<op> with these arguments."""
        self.wake = None
        self.finished = []
        self.reported = []
        snapshot = (self.seq, self.failed_total, self.dead_total, self.lapsed_total, self.paused,
                    {k: dataclasses.replace(v) for k, v in self.jobs.items()}, self.retry_window,
                    dict(self.gone), self.pause_end)
        self.counted, self.call_now = [0] * len(HISTORY_KINDS), None
        try:
            reply = getattr(self, 'op_' + op)([b(a) for a in args])
            # failed, dead and lapsed: as the totals count them
            self.count('failed', self.failed_total - snapshot[1])
            self.count('dead', self.dead_total - snapshot[2])
            self.count('lapsed', self.lapsed_total - snapshot[3])
            if self.history and any(self.counted):
                assert self.call_now is not None, 'a count without NOW'
                have = self.minutes.setdefault(self.call_now // 60000, [0] * len(HISTORY_KINDS))
                for i, n in enumerate(self.counted):
                    have[i] += n
            return reply
        except Refused as e:
            (self.seq, self.failed_total, self.dead_total, self.lapsed_total, self.paused,
             self.jobs, self.retry_window, self.gone, self.pause_end) = snapshot
            self.wake = None
            self.finished = []
            self.reported = []
            return Error(e.code)

    def op_put(self, args):
        # (CONFIRM: a write that changes nothing, for WAIT; nothing to model)
        o = options(args[2:], dict(PUT_WORDS, MAXBODY=1, CONFIRM=0, NOW=1))
        body_max = int_arg(o['MAXBODY'], 0, BODY_MAX_LIMIT) if 'MAXBODY' in o else BODY_MAX_DEFAULT
        now = self.now_opt(o)
        p = parse_job(args[0] if args else None, args[1] if len(args) > 1 else None, o, now,
                      body_max)
        if p.id == b'*':
            seq = self.take_seq(1)
            gid = f'{now}-{seq}'.encode()
            while gid in self.jobs:
                seq = self.take_seq(1)
                gid = f'{now}-{seq}'.encode()
            self.place(self.new_job(p, gid, seq, now), now)
            self.count('put', 1)
            return gid
        old = self.jobs.get(p.id)
        if p.mode == 'create' and (old is not None or self.in_window(p.id, now)):
            return -1
        if old is None and p.mode == 'replace':
            self.sharded()
            return 0
        if old is not None and p.mode == 'debounce' and old.state not in WAITING:
            return -1
        seq = self.take_seq(1)
        self.place(self.new_job(p, p.id, seq, old.created if old else now), now)
        self.count('put', 1)
        return 2 if old else 1

    def new_job(self, p, id_, seq, created):
        return Job(id=id_, body=p.body, prio=p.prio, created=created, due=p.due, seq=seq,
                   place=seq, state='new', max=p.max, ttr=p.ttr, backoff=p.backoff, keep=p.keep)

    def op_putmany(self, args):
        count = int_arg(args[0] if args else None, 1, BATCH_MAX)
        pos, jobs = 1, []
        for _ in range(count):
            if pos + 2 > len(args) - 1:
                raise Refused()
            id_, body, nopts = args[pos], args[pos + 1], args[pos + 2]
            nopts = int_arg(nopts, 0, 20)
            if pos + 2 + nopts > len(args) - 1:
                raise Refused()
            o = options(args[pos + 3:pos + 3 + nopts], PUT_WORDS)
            jobs.append((id_, body, o))
            pos += 3 + nopts
        g = options(args[pos:], {'MAXBODY': 1, 'CONFIRM': 0, 'NOW': 1})
        body_max = int_arg(g['MAXBODY'], 0, BODY_MAX_LIMIT) if 'MAXBODY' in g else BODY_MAX_DEFAULT
        now = self.now_opt(g)
        parsed = [parse_job(i, bd, o, now, body_max) for i, bd, o in jobs]
        # Decide in order.
        codes, present, stored, mine = [], {}, [], set()
        for i, p in enumerate(parsed):
            if p.id == b'*':
                codes.append(None)
                stored.append(i)
                continue
            if p.id not in present:
                present[p.id] = p.id in self.jobs
            if p.mode == 'create' and (present[p.id] or self.in_window(p.id, now)):
                codes.append(-1)
            elif not present[p.id] and p.mode == 'replace':
                codes.append(0)
            elif (present[p.id] and p.mode == 'debounce' and p.id not in mine
                  and self.jobs[p.id].state not in WAITING):
                codes.append(-1)
            else:
                codes.append(2 if present[p.id] else 1)
                present[p.id] = True
                mine.add(p.id)
                stored.append(i)
        if not stored:
            return codes
        seq = self.take_seq(len(stored))
        seqs, ids = {}, [p.id for p in parsed]
        for i in stored:
            if parsed[i].id == b'*':
                s_ = seq
                gid = f'{now}-{s_}'.encode()
                while gid in present or gid in self.jobs:
                    s_ = self.take_seq(1)
                    gid = f'{now}-{s_}'.encode()
                present[gid] = True
                ids[i], codes[i], seqs[i] = gid, gid, s_
            else:
                seqs[i] = seq
            seq += 1
        latest = {}
        for i in stored:
            latest[ids[i]] = i
        created = {}
        for id_ in latest:
            if id_ in self.jobs:
                created[id_] = self.jobs[id_].created
        for i in stored:
            if latest[ids[i]] == i:
                self.place(self.new_job(parsed[i], ids[i], seqs[i], created.get(ids[i], now)), now)
        self.count('put', len(stored))  # (an id given twice: two puts)
        return codes

    def op_restore(self, args):
        if len(args) < 5:
            raise Refused()
        o = options(args[5:], {'AT': 1, 'PRIORITY': 1, 'TTR': 1, 'ATTEMPTS': 1, 'BACKOFF': 3,
                               'KEEP': 1, 'ERROR': 1, 'DIED': 1, 'REPLACE': 0, 'NOW': 1})
        state = s(args[2])
        if state not in ('delayed', 'ready', 'dead'):
            raise Refused()
        now = self.now_opt(o)
        created = int_arg(args[3], 0, MS_MAX)
        made = int_arg(args[4], 0, ATTEMPTS_MAX)
        o2 = {k: v for k, v in o.items() if k not in ('ERROR', 'DIED', 'NOW')}
        p = parse_job(args[0], args[1], o2, now, BODY_MAX_LIMIT)
        if p.id == b'*':
            raise Refused()
        if 'ERROR' in o and len(o['ERROR']) > ERROR_MAX:
            raise Refused()
        died = int_arg(o['DIED'], 0, MS_MAX) if 'DIED' in o else now
        if p.id in self.jobs and 'REPLACE' not in o:
            return -1
        seq = self.take_seq(1)
        j = self.new_job(p, p.id, seq, created)
        j.due = p.at if p.at is not None else created
        j.made = made
        j.err = o.get('ERROR')
        if state == 'dead':
            j.state, j.died = 'dead', died
            self.jobs[j.id] = j
        else:
            self.place(j, now)
        return 1

    def op_get(self, args):
        id_ = id_arg(args[0] if args else None)
        o = options(args[1:], {'NOBODY': 0, 'NOW': 1})
        now = self.now_opt(o)
        j = self.jobs.get(id_)
        if j is None:
            self.sharded()
            return None
        state = j.state
        if state == 'delayed' and j.due <= now:
            state = 'ready'
        if 'NOBODY' in o:  # (version 33)
            return self.fields(dataclasses.replace(j, body=b''), state)
        return self.fields(j, state)

    def op_stats(self, args):
        o = options(args, {'NOW': 1})
        now = self.now_opt(o)
        total = self.history_total()
        delayed = self.in_state('delayed')
        due = [j for j in delayed if j.due <= now]
        later = [j.due for j in delayed if j.due > now]
        return [b'delayed', len(delayed) - len(due),
                b'ready', len(self.in_state('ready')) + len(due),
                b'reserved', len(self.in_state('reserved')), b'dead', len(self.in_state('dead')),
                b'done', len(self.in_state('done')), b'paused', int(self.paused_now(now)[0]),
                b'next_due', min(later) if later else -1,
                b'failed_total', self.failed_total, b'dead_total', self.dead_total,
                b'lapsed_total', self.lapsed_total,
                # redisched_limit is not modelled: no topic here has limits.
                b'limit_rate', 0, b'limit_window', 0, b'limit_concurrency', 0, b'limit_used', 0,
                b'limit_aging', 0, b'schedules', 0,
                b'shards', -1 if self.shards == [b'*'] else len(self.shards or []),
                # flows (version 35) are not modelled yet: none blocked, no outbox.
                b'blocked', 0, b'outbox', 0, b'pause_end', self.paused_now(now)[1]] + (
                    [b'put_total', total[0], b'started_total', total[1], b'done_total', total[2],
                     b'wait_total', total[6]] if self.history else [])

    def op_list(self, args):
        state = s(args[0]).lower() if args else None
        if state not in ('delayed', 'ready', 'reserved', 'dead', 'done', 'blocked'):
            raise Refused()
        offset = int_arg(args[1] if len(args) > 1 else None, 0, OFFSET_MAX)
        count = int_arg(args[2] if len(args) > 2 else None, 1, BATCH_MAX)
        o = options(args[3:], {'NOBODY': 0, 'NOW': 1})
        now = self.now_opt(o)
        backlog = self.promote(now)
        if state == 'ready':
            entries = [(j, 'ready') for j in self.ready_order()]
            if backlog:
                entries += [(j, 'ready') for j in self.due_delayed(now)]
        elif state == 'delayed':
            entries = [(j, 'delayed') for j in
                       sorted((j for j in self.in_state('delayed') if j.due > now),
                              key=lambda j: (j.due, j.seq))]
        elif state == 'reserved':
            entries = [(j, state) for j in
                       sorted(self.in_state(state), key=lambda j: (j.deadline, j.lease_member()))]
        elif state == 'dead':
            entries = [(j, state) for j in sorted(self.in_state(state), key=lambda j: (j.died, j.id))]
        else:
            entries = [(j, state) for j in
                       sorted(self.in_state(state), key=lambda j: (j.expires, j.id))]
        out = [len(entries)]
        for j, st in entries[offset:offset + count]:
            f = self.fields(j, st)
            if 'NOBODY' in o:
                f[5] = b''
            out.append(f)
        return out

    def paused_now(self, now):
        """Whether the topic is paused now, and when its pause ends (-1: no
        end); a timed pause that ended counts as none (version 38)."""
        if not self.paused or (self.pause_end is not None and self.pause_end <= now):
            return False, -1
        return True, -1 if self.pause_end is None else self.pause_end

    def take(self, count, now, recover):
        """(jobs to hand out, backlog), or (None, when the pause ends)."""
        backlog = self.promote(now)
        paused, end = self.paused_now(now)
        if paused:
            return None, end
        self.paused, self.pause_end = False, None  # (a timed pause's mark goes)
        self.sharded()  # (its mark heads the ready set)
        order = self.ready_order()
        if recover and len(order) < count:
            lapsed = self.lapsed(now, self.requeue_inline)
            if lapsed:
                self.requeue_jobs(lapsed, now)
                order = self.ready_order()
        popped = order[:count]
        if backlog:
            popped = [j for j in popped if (j.due, j.seq) < backlog]
        return popped, backlog

    def next_time(self, now, handed, count, backlog, lapses):
        if handed >= count or backlog:
            return 0
        times = [j.due for j in self.in_state('delayed')]
        if lapses:
            times += [j.deadline for j in self.in_state('reserved')]
        if not times:
            return -1
        t = min(times)
        return 0 if t <= now else t

    @staticmethod
    def reserve_options(o):
        """reserve's and reservejob's TTR (None: none given) and WORKER."""
        ttr = int_arg(o['TTR'], 1, TTR_MAX) if 'TTR' in o else None
        worker = o.get('WORKER')
        if worker is not None and (not worker or len(worker) > WORKER_ID_MAX
                                   or re.search(rb'[\x00-\x1f\x7f]', b(worker))):
            raise Refused()
        return ttr, worker

    def op_reserve(self, args):
        count = int_arg(args[0] if args else None, 1, BATCH_MAX)
        o = options(args[1:], {'TTR': 1, 'WORKER': 1, 'NOW': 1})
        ttr, worker = self.reserve_options(o)
        now = self.now_opt(o)
        handed, backlog = self.take(count, now, True)
        if handed is None:
            return [now, backlog, 1]
        out, once = [now, 0, 0], []
        self.started(handed, now)
        for j in handed:
            if j.ttr == 0:
                # At most once: gone as pull takes it; token 0, deadline 0.
                del self.jobs[j.id]
                once.append(j.id)
                if j.keep:
                    self.finished.append(j.id)
                out.append([j.id, j.body, 0, j.made + 1, j.max or DEFAULT_ATTEMPTS, j.prio,
                            j.created, j.due, 0, 0])
                continue
            j.state, j.token, j.reserved_at = 'reserved', j.place, now
            j.worker = b(worker) if worker is not None else None
            j.lease_ttr = j.ttr if j.ttr is not None else ttr or DEFAULT_TTR
            j.deadline = now + j.lease_ttr
            out.append([j.id, j.body, j.token, j.made + 1, j.max or DEFAULT_ATTEMPTS, j.prio,
                        j.created, j.due, j.deadline, j.keep or 0])
        if once:
            self.remember(once, now)
        self.count('done', len(once))
        out[1] = self.next_time(now, len(handed), count, backlog, True)
        return out

    def op_reservejob(self, args):
        """One job by its id, reserved ahead of the rest and whatever the
        pause and limits (version 38): ready, delayed or dead (then as kick
        brings it back: attempts from 0, a new place)."""
        id_ = id_arg(args[0] if args else None)
        o = options(args[1:], {'TTR': 1, 'WORKER': 1, 'NOW': 1})
        ttr, worker = self.reserve_options(o)
        now = self.now_opt(o)
        j = self.jobs.get(id_)
        if j is None:
            self.sharded()
            return [0, now]
        if j.state not in ('ready', 'delayed', 'dead'):
            return [-2, now]
        if j.state == 'dead':
            j.place, j.made, j.due = self.take_seq(1), 0, now
            j.died = j.expires = None
        self.started([j], now)
        if j.ttr == 0:
            del self.jobs[id_]
            self.remember([id_], now)
            self.count('done', 1)
            if j.keep:
                self.finished.append(id_)
            return [1, now, [id_, j.body, 0, j.made + 1, j.max or DEFAULT_ATTEMPTS, j.prio,
                             j.created, j.due, 0, 0]]
        j.state, j.token, j.reserved_at = 'reserved', j.place, now
        j.worker = b(worker) if worker is not None else None
        j.lease_ttr = j.ttr if j.ttr is not None else ttr or DEFAULT_TTR
        j.deadline = now + j.lease_ttr
        return [1, now, [id_, j.body, j.token, j.made + 1, j.max or DEFAULT_ATTEMPTS, j.prio,
                         j.created, j.due, j.deadline, j.keep or 0]]

    def op_pull(self, args):
        count = int_arg(args[0] if args else None, 1, BATCH_MAX)
        o = options(args[1:], {'NOW': 1})
        now = self.now_opt(o)
        handed, backlog = self.take(count, now, False)
        if handed is None:
            return [now, backlog, 1]
        out = [now, 0, 0]
        self.started(handed, now)
        self.count('done', len(handed))
        for j in handed:
            del self.jobs[j.id]
            if j.keep:
                self.finished.append(j.id)
            out.append([j.id, j.body, j.made + 1, j.max or DEFAULT_ATTEMPTS, j.prio, j.created,
                        j.due])
        if handed:
            self.remember([j.id for j in handed], now)
        out[1] = self.next_time(now, len(handed), count, backlog, False)
        return out

    def started(self, handed, now):
        """Jobs handed out: started, and their wait from due."""
        self.count('started', len(handed))
        self.count('wait', sum(max(0, now - j.due) for j in handed))

    def settle(self, pairs, keep, now, result=None, window=None):
        codes, acked = [], []
        for id_, token in pairs:
            if id_ in acked:
                codes.append(-2 if keep > 0 else 0)
            elif self.held(id_, token):
                acked.append(id_)
                codes.append(1)
            else:
                codes.append(self.not_held(id_))
        for id_ in acked:
            j = self.jobs[id_]
            if keep > 0:
                # (kept for a window: for the job's own KEEP when longer)
                kept = max(keep, j.keep or 0) if window else keep
                j.state, j.finished, j.expires = 'done', now, now + kept
                j.result = result
                j.token = j.reserved_at = j.deadline = j.lease_ttr = None
                self.finished.append(id_)
            else:
                del self.jobs[id_]
        if acked and keep > 0:
            self.trim_done(now)
            if window:
                self.remember(acked, now)
        elif acked:
            self.remember(acked, now)
        self.count('done', len(acked))
        return codes

    def op_ack(self, args):
        id_ = id_arg(args[0] if args else None)
        token = int_arg(args[1] if len(args) > 1 else None, 0, SEQ_MAX)
        o = options(args[2:], {'KEEP': 1, 'RESULT': 1, 'MAXBODY': 1, 'NOW': 1})
        keep = int_arg(o['KEEP'], 0, DELAY_MAX) if 'KEEP' in o else 0
        body_max = int_arg(o['MAXBODY'], 0, BODY_MAX_LIMIT) if 'MAXBODY' in o else BODY_MAX_DEFAULT
        result = o.get('RESULT')
        if result is not None and len(result) > body_max:
            raise Refused()
        window = None
        if result is not None:
            # (kept for the retry window at least, for a depend that may be
            # on its way; version 38. No job waits: flows are not modelled.)
            if self.retry_window > 0:
                window, keep = self.retry_window, max(keep, self.retry_window)
            elif keep == 0:
                raise Refused()
        now = self.now_opt(o)
        return self.settle([(id_, token)], keep, now, result, window)[0]

    def op_ackmany(self, args):
        count = int_arg(args[0] if args else None, 1, BATCH_MAX)
        if len(args) < 1 + 2 * count:
            raise Refused()
        pairs = [(id_arg(args[1 + 2 * i]), int_arg(args[2 + 2 * i], 0, SEQ_MAX))
                 for i in range(count)]
        o = options(args[1 + 2 * count:], {'KEEP': 1, 'NOW': 1})
        keep = int_arg(o['KEEP'], 0, DELAY_MAX) if 'KEEP' in o else 0
        now = self.now_opt(o)
        return self.settle(pairs, keep, now)

    def op_release(self, args):
        id_ = id_arg(args[0] if args else None)
        token = int_arg(args[1] if len(args) > 1 else None, 0, SEQ_MAX)
        o = options(args[2:], {'DELAY': 1, 'PRIORITY': 1, 'NOW': 1})
        delay = int_arg(o['DELAY'], 0, DELAY_MAX) if 'DELAY' in o else 0
        prio = int_arg(o['PRIORITY'], PRIO_MIN, PRIO_MAX) if 'PRIORITY' in o else None
        now = self.now_opt(o)
        j = self.held(id_, token)
        if j is None:
            return self.not_held(id_)
        j.place = self.take_seq(1)
        if prio is not None:
            j.prio = prio
        j.due = min(now + delay, MS_MAX)
        self.place(j, now)
        return 1

    def op_fail(self, args):
        id_ = id_arg(args[0] if args else None)
        token = int_arg(args[1] if len(args) > 1 else None, 0, SEQ_MAX)
        if len(args) < 3:
            raise Refused()
        err = args[2]
        if len(err) > ERROR_MAX:
            raise Refused()
        o = options(args[3:], {'DEAD': 0, 'DELAY': 1, 'ATTEMPTS': 1, 'PRIORITY': 1, 'NOW': 1})
        delay = int_arg(o['DELAY'], 0, DELAY_MAX) if 'DELAY' in o else None
        attempts = int_arg(o['ATTEMPTS'], 1, ATTEMPTS_MAX) if 'ATTEMPTS' in o else None
        prio = int_arg(o['PRIORITY'], PRIO_MIN, PRIO_MAX) if 'PRIORITY' in o else None
        now = self.now_opt(o)
        j = self.held(id_, token)
        if j is None:
            return self.not_held(id_)
        if prio is not None:
            j.prio = prio  # (version 37) retried or dead
        j.err = err
        j.attempt('failed', now)
        if attempts is not None:
            j.max = attempts  # the handler's, stored before the decision
        self.failed_total += 1
        if 'DEAD' not in o and j.made < (j.max or DEFAULT_ATTEMPTS):
            j.place = self.take_seq(1)
            j.due = min(now + (delay if delay is not None else self.backoff_delay(j)), MS_MAX)
            self.place(j, now)
            return Status(j.state)
        j.state, j.died = 'dead', now
        j.token = j.reserved_at = j.deadline = j.lease_ttr = None
        self.dead_total += 1
        self.finished.append(id_)  # dead, kept or not (version 19)
        return Status('dead')

    def op_touch(self, args):
        id_ = id_arg(args[0] if args else None)
        token = int_arg(args[1] if len(args) > 1 else None, 0, SEQ_MAX)
        o = options(args[2:], {'TTR': 1, 'NOW': 1})
        ttr = int_arg(o['TTR'], 1, TTR_MAX) if 'TTR' in o else None
        now = self.now_opt(o)
        j = self.held(id_, token)
        if j is None:
            return self.not_held(id_)
        j.deadline = now + (ttr or j.lease_ttr)
        return j.deadline

    def op_progress(self, args):
        id_ = id_arg(args[0] if args else None)
        token = int_arg(args[1] if len(args) > 1 else None, 0, SEQ_MAX)
        count = int_arg(args[2] if len(args) > 2 else None, 0, LOG_LINES_MAX)
        if len(args) < 3 + count:
            raise Refused()
        o = options(args[3 + count:], {'PROGRESS': 1, 'NOW': 1})
        value = o.get('PROGRESS')
        if value is not None:
            if not 0 < len(value) <= PROGRESS_MAX:
                raise Refused()
            try:
                json.loads(value.decode('utf-8'))
            except ValueError:
                raise Refused()
        if count == 0 and value is None:
            raise Refused()
        lines = []
        for line in args[3:3 + count]:
            text = utf8_prefix(line, LOG_LINE_MAX)
            try:
                text.decode('utf-8')
            except UnicodeDecodeError:
                raise Refused()
            lines.append((text, len(line) > LOG_LINE_MAX))
        now = self.now_opt(o)
        j = self.held(id_, token)
        if j is None:
            return self.not_held(id_)
        attempt = min(j.made + 1, ATTEMPTS_MAX)
        if value is not None:
            j.progress = (attempt, now, value)
        if lines:
            kept = j.log + [(now, attempt, text, cut) for text, cut in lines]
            while len(kept) > LOG_LINES_MAX or sum(len(x[2]) for x in kept) > LOG_BYTES_MAX:
                kept.pop(0)
            j.log = kept
            j.log_total = min(j.log_total + len(lines), 2 ** 32 - 1)
        self.reported.append(id_)
        return 1

    def ids_arg(self, args):
        if not args or len(args) > BATCH_MAX:
            raise Refused()
        return [id_arg(a) for a in args]

    def op_delete(self, args):
        n = 0
        for id_ in dict.fromkeys(self.ids_arg(args)):
            if id_ in self.jobs:
                if self.jobs[id_].state not in ('done', 'dead'):  # kept or not (version 19)
                    self.finished.append(id_)
                del self.jobs[id_]
                n += 1
        if n == 0:
            self.sharded()
        return n

    def op_requeue(self, args):
        o = options(args, {'LIMIT': 1, 'NOW': 1})
        limit = int_arg(o['LIMIT'], 1, LIMIT_MAX) if 'LIMIT' in o else 1000
        now = self.now_opt(o)
        lapsed = self.lapsed(now, limit)
        back, buried = self.requeue_jobs(lapsed, now) if lapsed else (0, 0)
        self.trim_done(now)
        deadlines = [j.deadline for j in self.in_state('reserved')]
        return [back, buried, min(deadlines) if deadlines else -1]

    def revive(self, jobs, now):
        if not jobs:
            return 0
        seq = self.take_seq(len(jobs))
        for i, j in enumerate(jobs):
            j.place, j.made, j.due = seq + i, 0, now
            self.place(j, now)
        return len(jobs)

    def op_kick(self, args):
        ids = self.ids_arg(args)
        now = self.kick_now
        dead = [self.jobs[i] for i in dict.fromkeys(ids)
                if i in self.jobs and self.jobs[i].state == 'dead']
        return self.revive(dead, now)

    def op_kickall(self, args):
        o = options(args, {'LIMIT': 1, 'NOW': 1})
        limit = int_arg(o['LIMIT'], 1, LIMIT_MAX) if 'LIMIT' in o else 1000
        now = self.now_opt(o)
        dead = sorted(self.in_state('dead'), key=lambda j: (j.died, j.id))[:limit]
        return self.revive(dead, now)

    def op_promoteall(self, args):
        """The first LIMIT delayed jobs (due order) due now, in place
        (version 32): attempts and history kept, a new place each."""
        o = options(args, {'LIMIT': 1, 'NOW': 1})
        limit = int_arg(o['LIMIT'], 1, LIMIT_MAX) if 'LIMIT' in o else 1000
        now = self.now_opt(o)
        jobs = sorted(self.in_state('delayed'), key=lambda j: (j.due, j.seq))[:limit]
        if jobs:
            seq = self.take_seq(len(jobs))
            for i, j in enumerate(jobs):
                j.place, j.due = seq + i, now
                self.place(j, now)
        return [len(jobs), len(self.in_state('delayed'))]

    def op_reschedule(self, args):
        """A waiting job's priority and/or due time changed in place (version
        33): attempts and history kept, a new place."""
        id_ = id_arg(args[0] if args else None)
        o = options(args[1:], {'PRIORITY': 1, 'DELAY': 1, 'AT': 1, 'NOW': 1})
        if not ('PRIORITY' in o or 'DELAY' in o or 'AT' in o) or ('DELAY' in o and 'AT' in o):
            raise Refused()
        prio = int_arg(o['PRIORITY'], PRIO_MIN, PRIO_MAX) if 'PRIORITY' in o else None
        delay = int_arg(o['DELAY'], 0, DELAY_MAX) if 'DELAY' in o else None
        at = int_arg(o['AT'], 0, MS_MAX) if 'AT' in o else None
        now = self.now_opt(o)
        j = self.jobs.get(id_)
        if j is None:
            self.sharded()
            return 0
        if j.state not in ('delayed', 'ready'):
            return -2
        j.place = self.take_seq(1)
        if prio is not None:
            j.prio = prio
        if delay is not None:
            j.due = min(now + delay, MS_MAX)
        if at is not None:
            j.due = max(at, now)
        self.place(j, now)
        return 1

    def op_purge(self, args):
        """The dead that died before a time removed, the oldest first (version 32)."""
        before = int_arg(args[0] if args else None, 0, MS_MAX)
        o = options(args[1:], {'LIMIT': 1})
        limit = int_arg(o['LIMIT'], 1, LIMIT_MAX) if 'LIMIT' in o else 1000
        old = sorted((j for j in self.in_state('dead') if j.died < before), key=lambda j: (j.died, j.id))
        for j in old[:limit]:
            del self.jobs[j.id]
        return [min(len(old), limit), max(len(old) - limit, 0)]

    def op_retrywindow(self, args):
        if len(args) > 1:
            raise Refused()
        if args:
            w = int_arg(args[0], 0, WINDOW_MAX)
            if w != self.retry_window and w == 0:
                self.gone = {}
            self.retry_window = w
        return [self.retry_window, len(self.gone)]

    def op_migrate(self, args):
        """The walks write no record of an older format: a call rewrites
        nothing and changes no job. Once a call ends a migration that took
        more than one call, in a topic that has a meta key, the topic is
        marked done and calls answer at once; before, a call reads at most
        the records and members there are."""
        o = options(args, {'LIMIT': 1})
        if 'LIMIT' in o:
            int_arg(o['LIMIT'], 1, LIMIT_MAX)
        if self.migrated:
            return [1, 0, 0]
        real, meta = self.migrate_seen
        # (read: records, then members of delayed and ready: each job's at
        # most twice, the pin and the marks)
        if not (isinstance(real, list) and len(real) == 3 and real[0] in (0, 1) and real[1] == 0
                and 0 <= real[2] <= 2 * len(self.jobs) + 4):
            return ['not a reply of a topic of %d records and none older' % len(self.jobs)]
        self.migrated = real[0] == 1 and meta and self.migrating
        self.migrating = real[0] == 0
        return real

    def op_pause(self, args):
        """FOR (version 38): a pause that ends by itself; a pause replaces
        the one before."""
        o = options(args, {'FOR': 1, 'NOW': 1})
        ms = int_arg(o['FOR'], 1, DELAY_MAX) if 'FOR' in o else None
        now = self.now_opt(o)
        self.sharded()
        ends = None if ms is None else min(now + ms, MS_MAX)
        was, end = self.paused_now(now)
        if was and end == (-1 if ends is None else ends):
            return 0
        self.paused, self.pause_end = True, ends
        if ends is not None:
            self.signal(ends)  # (for workers that slept on an earlier answer)
        return 1

    def op_resume(self, args):
        """Clears a pause, one that ended by itself too."""
        o = options(args, {'NOW': 1})
        now = self.now_opt(o)
        self.sharded()
        if not self.paused:
            return 0
        self.paused, self.pause_end = False, None
        self.signal(now)
        return 1

    def op_shard(self, args):
        """redisched_shard: spread over shards (suffixes), or end it (none)."""
        if not (len(args) == 1 and args[0] == b'*'):
            if len(args) > 256 or len(set(args)) != len(args):
                raise Refused()
            for v in args:
                if not 1 <= len(v) <= 64 or not re.fullmatch(rb'[A-Za-z0-9_.\-]+', v):
                    raise Refused()
        if args:
            if self.jobs or self.paused:
                raise Refused('BADSTATE')
            if self.shards is None:
                self.seq_kept, self.seq = self.seq, SEQ_MAX
            self.shards = list(args)
        elif self.shards is not None:
            self.seq, self.shards = self.seq_kept, None
        return len(args)

    def op_shards(self, args):
        options(args, {})
        return list(self.shards or [])


# Outcomes that refuse: the call must leave every key as it was.
def is_refusal(op, reply):
    if isinstance(reply, Error):
        return True
    if op in ('put', 'restore', 'release', 'touch', 'ack', 'fail'):
        return isinstance(reply, int) and reply <= 0
    if op in ('putmany', 'ackmany'):
        return all(isinstance(c, int) and c <= 0 for c in reply)
    if op in ('delete', 'kick', 'kickall', 'pause', 'resume'):
        return reply == 0
    if op == 'reservejob':
        return reply[0] <= 0
    return False
