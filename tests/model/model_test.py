#!/usr/bin/python3
"""Model-based test of the redisched Functions library (lua/redisched.lua).

Sequential phase: hypothesis draws random call sequences (every public
function, valid and refused arguments, wrong keys) under a controlled clock
(NOW), runs each call on a real redis-server and on the reference model of
docs/redis-api.md (model.py), and after every call compares the reply, the
wake-up signal, every job's get, stats, every list, and the raw keys (decoded
records and set members against the model; structural invariants; tokens
strictly increasing per job; a refused call changes no byte of any key). A
failure is shrunk to a minimal call list, printed as FCALLs.

Concurrent phase: several connections on the real clock put, reserve, ack,
release, fail, touch and requeue with short time-to-runs; the history is then
checked: no job acked by two holders, every token issued once, nothing that
was put is lost.

Mutants (--mutants): each planted bug (a mutated copy of the library) must
make the sequential phase fail within --mutant-chunks chunks.

Usage: model_test.py --lua lua/redisched.lua [--budget SECONDS] [--seed N]
       [--concurrent SECONDS] [--mutants [--mutant-chunks N] [--share K/N]]
       [--examples N] [--steps N]
Run with Debian's /usr/bin/python3 (python3-hypothesis).
"""
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import argparse
import collections
import random
import re
import threading
import time
import traceback

import hypothesis
import hypothesis.core
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

import harness
from harness import Conn, RedisServer, check_invariants, decode_record, dump, read_raw, topic_keys
from model import Error, Status, Topic, is_refusal

# Bounds lowered so that a few jobs make a backlog (harness.BOUNDS).
SMALL = {'PROMOTE_BATCH': 3, 'REQUEUE_INLINE': 2, 'TRIM_BATCH': 2}
REAL = {'PROMOTE_BATCH': 1000, 'REQUEUE_INLINE': 100, 'TRIM_BATCH': 100}
# The model's clock starts here (NOW), far from the server's, and a second
# before a minute begins: most runs count their history in two minutes.
T0 = 1_019_000


class Env:
    """What the machine runs against (set up once per process)."""
    conn = sub = keys = bounds = code = None
    calls = 0
    outcomes = collections.Counter()  # (op, outcome) -> calls, for --verbose

    @classmethod
    def messages(cls):
        """Wake-up and finished signals published since the last look, as
        (channel, payload) (the PING's answer comes after every message sent
        before it)."""
        cls.sub.sock.sendall(harness.encode(['PING']))
        out = []
        while True:
            r = cls.sub.read()
            if r == [b'pong', b'']:
                return out
            if isinstance(r, list) and r and r[0] == b'smessage':
                out.append((r[1], r[2]))


# A report's arguments (redisched_progress, version 31) after id and
# token, by x: (log lines, their text, a progress value). 60 long lines pass
# the log's 32768 bytes in one call, 100 after any other its 100 lines; 8 and 9
# cut a line across a 3-byte and a 2-byte UTF-8 character; 7 (no JSON) and
# 10 (nothing) are refused before anything moves.
REPORTS = [(1, 'l0', None), (0, '', '1'), (60, 'l2', '{"percent":2}'), (3, 'l3', None),
           (1, 'l4', '4'), (60, 'L' * 1500, None), (100, 'l6', None), (0, '', 'nope'),
           (3, 'ab' + '\u9519' * 400, '[1,"x"]'), (1, '\u00e9' * 600, None), (0, '', None),
           (60, 'L' * 1500, '{"percent":11}'), (2, 'l12', '12')]


def report(x):
    count, line, progress = REPORTS[x % len(REPORTS)]
    return [count] + [line] * count + (['PROGRESS', progress] if progress is not None else [])


def subscribe(port, keys):
    sub = Conn(port)
    sub.sock.sendall(harness.encode(['SSUBSCRIBE', keys[2], keys[5], keys[7]]))
    for _ in range(3):
        r = sub.read()
        assert r[0] == b'ssubscribe', r
    return sub


# ---------------------------------------------------------------- strategies

IDS = [b'a', b'b', b'c', b'd', b'e', 'é✓'.encode()]
ID = st.sampled_from(IDS)
ID_OR_STAR = st.sampled_from(IDS + [b'*'])
BODY = st.binary(max_size=6)
WHEN = st.one_of(st.tuples(st.just('DELAY'), st.integers(0, 25)),
                 st.tuples(st.just('AT'), st.integers(-10, 25)))
OPTS = st.fixed_dictionaries({}, optional={
    'WHEN': WHEN,
    'PRIORITY': st.sampled_from([0, 1, 7, 1000, -1, -24, -2500, -4294966295]),
    'TTR': st.sampled_from([0, 0, 0, 1, 4, 15, 40, 30000]),  # 0: delivered at most once
    'ATTEMPTS': st.sampled_from([1, 2, 3, 5]),
    'BACKOFF': st.tuples(st.sampled_from(['fixed', 'exponential']), st.integers(0, 8),
                         st.integers(8, 30)),
    'MODE': st.sampled_from(['REPLACE', 'UPSERT', 'DEBOUNCE']),
    'KEEP': st.sampled_from([0, 5, 30]),
    # (call-wide: put's CONFIRM, putmany's when any job draws it)
    'CONFIRM': st.just(True),
})
JOB = st.tuples(st.sampled_from(['held', 'held', 'any']), st.integers(0, 15))
TOK = st.tuples(st.sampled_from(['cur', 'cur', 'cur', 'old', 'any', 'next']), st.integers(0, 40))
MAYBE = lambda s: st.one_of(st.none(), s)  # noqa: E731
ATTEMPTS = MAYBE(st.sampled_from([1, 2, 3, 5, 1000]))  # fail's ATTEMPTS (the handler's)
STATES = ['delayed', 'ready', 'reserved', 'dead', 'done']

# Calls the docs say are refused (BADARG). x: (id, token) of a reserved job.
BAD = [
    ('put', lambda n, x: ['a', 'b', 'PRIORITY', '1001', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'DELAY', '-1', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'AT', str(2 ** 43), 'NOW', n]),
    ('put', lambda n, x: ['', 'b', 'NOW', n]),
    ('put', lambda n, x: ['a\x01', 'b', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'TTR', '-1', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'TTR', '604800001', 'NOW', n]),
    ('restore', lambda n, x: ['a', 'b', 'ready', '1', '0', 'TTR', '-1', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'NOW', 'abc']),
    ('put', lambda n, x: ['a', 'b', 'NOW', str(2 ** 43)]),
    ('put', lambda n, x: ['a', 'b', 'COLOR', 'red', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'PRIORITY', '1', 'PRIORITY', '2', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'BACKOFF', 'fixed', '5000000000000', '0', 'NOW', n]),
    ('put', lambda n, x: ['*', 'b', 'UPSERT', 'NOW', n]),
    ('put', lambda n, x: ['*', 'b', 'DEBOUNCE', 'NOW', n]),
    ('put', lambda n, x: ['a', 'b', 'DEBOUNCE', 'REPLACE', 'NOW', n]),
    ('put', lambda n, x: ['a', 'xxxxxx', 'MAXBODY', '3', 'NOW', n]),
    ('put', lambda n, x: ['a', 'NOW', n]),
    ('putmany', lambda n, x: ['2', 'a', 'b', '0', 'c', 'd', '2', 'PRIORITY', '5000', 'NOW', n]),
    ('putmany', lambda n, x: ['2', 'a', 'b', '0']),
    ('putmany', lambda n, x: ['0', 'NOW', n]),
    ('restore', lambda n, x: ['a', 'b']),
    ('restore', lambda n, x: ['a', 'b', 'reserved', '1', '0', 'NOW', n]),
    ('restore', lambda n, x: ['a', 'b', 'ready', str(2 ** 44), '0', 'NOW', n]),
    ('reserve', lambda n, x: ['0', 'NOW', n]),
    ('reserve', lambda n, x: ['1', 'TTR', '-5', 'NOW', n]),
    ('reserve', lambda n, x: ['1', 'TTR', '0', 'NOW', n]),
    ('reserve', lambda n, x: ['1', 'WORKER', '', 'NOW', n]),
    ('reserve', lambda n, x: ['1', 'WORKER', 'w\n1', 'NOW', n]),
    ('reserve', lambda n, x: ['1', 'WORKER', 'w' * 129, 'NOW', n]),
    ('pull', lambda n, x: ['1001', 'NOW', n]),
    ('reservejob', lambda n, x: ['', 'NOW', n]),
    ('reservejob', lambda n, x: [x[0], 'TTR', '0', 'NOW', n]),
    ('reservejob', lambda n, x: [x[0], 'WORKER', 'w\x01', 'NOW', n]),
    ('reservejob', lambda n, x: [x[0], 'COUNT', '1', 'NOW', n]),
    ('reservejob', lambda n, x: []),
    ('ack', lambda n, x: [x[0], x[1], 'NOW', 'abc']),
    ('ack', lambda n, x: [x[0], 'notanumber', 'NOW', n]),
    ('ack', lambda n, x: [x[0], x[1], 'KEEP', '-1', 'NOW', n]),
    ('ack', lambda n, x: [x[0], x[1], 'RESULT', 'r', 'MAXBODY', '0', 'NOW', n]),
    ('ack', lambda n, x: [x[0], x[1], 'KEEP', '5', 'RESULT', 'toolong', 'MAXBODY', '3', 'NOW', n]),
    ('ackmany', lambda n, x: ['3', x[0], x[1], 'NOW', n]),
    ('ackmany', lambda n, x: ['1', x[0], x[1], 'NOW', 'x']),
    ('release', lambda n, x: [x[0], x[1], 'PRIORITY', '2000', 'NOW', n]),
    ('fail', lambda n, x: [x[0], x[1]]),
    ('fail', lambda n, x: [x[0], x[1], 'e', 'DELAY', 'x', 'NOW', n]),
    ('fail', lambda n, x: [x[0], x[1], 'e', 'ATTEMPTS', '0', 'NOW', n]),
    ('fail', lambda n, x: [x[0], x[1], 'e', 'ATTEMPTS', '1001', 'NOW', n]),
    ('fail', lambda n, x: [x[0], x[1], 'e', 'ATTEMPTS', '2', 'ATTEMPTS', '3', 'NOW', n]),
    ('fail', lambda n, x: [x[0], x[1], 'e', 'PRIORITY', '1001', 'NOW', n]),
    ('touch', lambda n, x: [x[0], x[1], 'TTR', '0', 'NOW', n]),
    ('progress', lambda n, x: [x[0], x[1], '0', 'NOW', n]),
    ('promoteall', lambda n, x: ['LIMIT', '0', 'NOW', n]),
    ('purge', lambda n, x: ['soon']),
    ('reschedule', lambda n, x: [x[0], 'NOW', n]),
    ('reschedule', lambda n, x: [x[0], 'DELAY', '1', 'AT', n, 'NOW', n]),
    ('reschedule', lambda n, x: [x[0], 'PRIORITY', '1001', 'NOW', n]),
    ('purge', lambda n, x: [n, 'LIMIT', '10001']),
    ('progress', lambda n, x: [x[0], x[1], '2', 'one', 'NOW', n]),
    ('progress', lambda n, x: [x[0], x[1], '101'] + ['l'] * 101 + ['NOW', n]),
    ('progress', lambda n, x: [x[0], x[1], '0', 'PROGRESS', '', 'NOW', n]),
    ('progress', lambda n, x: [x[0], x[1], '0', 'PROGRESS', '7' * 1025, 'NOW', n]),
    ('delete', lambda n, x: []),
    ('kick', lambda n, x: ['']),
    ('kickall', lambda n, x: ['LIMIT', '0', 'NOW', n]),
    ('requeue', lambda n, x: ['LIMIT', '10001', 'NOW', n]),
    ('list', lambda n, x: ['sideways', '0', '10', 'NOW', n]),
    ('list', lambda n, x: ['ready', '0', '0', 'NOW', n]),
    ('stats', lambda n, x: ['extra']),
    ('get', lambda n, x: ['a', 'NOW', '-1']),
    ('pause', lambda n, x: ['FOR', '0', 'NOW', n]),
    ('pause', lambda n, x: ['FOR', '315576000001', 'NOW', n]),
    ('pause', lambda n, x: ['UNTIL', n, 'NOW', n]),
    ('resume', lambda n, x: ['NOW', 'x']),
    ('retrywindow', lambda n, x: ['-1']),
    ('retrywindow', lambda n, x: ['86400001']),
    ('retrywindow', lambda n, x: ['5', '6']),
    ('migrate', lambda n, x: ['LIMIT', '0']),
    ('migrate', lambda n, x: ['LIMIT', '10001']),
    ('migrate', lambda n, x: ['NOW', n]),
    ('migrate', lambda n, x: ['LIMIT']),
]

OPS = st.one_of(
    st.tuples(st.just('put'), ID_OR_STAR, BODY, OPTS),
    st.tuples(st.just('put'), ID, BODY, OPTS),
    st.tuples(st.just('putmany'), st.lists(st.tuples(ID_OR_STAR, BODY, OPTS), min_size=1, max_size=4)),
    st.tuples(st.just('burst'), st.integers(2, 8), st.integers(0, 12)),
    st.tuples(st.just('restore'), ID, BODY, st.sampled_from(['delayed', 'ready', 'dead']),
              st.integers(-40, 20), st.integers(0, 3), OPTS, st.booleans(), st.booleans(),
              st.booleans()),
    st.tuples(st.just('reserve'), st.integers(1, 4), MAYBE(st.sampled_from([1, 3, 10, 30, 30000])),
              MAYBE(st.sampled_from(['w1', 'host:42:ab', 'w' * 128]))),
    st.tuples(st.just('reserve'), st.integers(1, 2), st.none(), st.none()),
    st.tuples(st.just('reserve'), st.integers(1, 3), st.sampled_from([3, 10, 30000]), st.just('w:2')),
    st.tuples(st.just('put'), ID, BODY, st.just({})),
    st.tuples(st.just('putmany'), st.lists(st.tuples(ID, BODY, st.just({})), min_size=1, max_size=4)),
    # DELAY alone: putmany's fast path for the usual delayed batch.
    st.tuples(st.just('putmany'), st.lists(st.tuples(ID_OR_STAR, BODY, st.fixed_dictionaries({
        'WHEN': st.tuples(st.just('DELAY'), st.integers(0, 25))})), min_size=1, max_size=4)),
    st.tuples(st.just('pull'), st.integers(1, 3)),
    # One job by its id (version 38): any job, a dead or a held one now and then.
    st.tuples(st.just('reservejob'), st.tuples(st.sampled_from(['any', 'any', 'dead', 'held']),
                                               st.integers(0, 15)),
              MAYBE(st.sampled_from([1, 10, 30000])), MAYBE(st.sampled_from(['w1', 'w' * 128]))),
    # A worker's turn: reserve, then settle each job handed out with its token.
    st.tuples(st.just('work'), st.integers(1, 3), MAYBE(st.sampled_from([3, 30000])),
              st.sampled_from(['ack', 'ack', 'fail', 'fail', 'fail_n', 'release', 'touch', 'keep',
                               'report', 'report']),
              st.integers(0, 12)),
    st.tuples(st.just('ack'), JOB, TOK, MAYBE(st.integers(0, 20)),
              MAYBE(st.sampled_from([b'', b'ok', b'12345678']))),
    st.tuples(st.just('ack'), JOB, TOK, st.none(), st.none()),
    st.tuples(st.just('ackmany'), st.lists(st.tuples(JOB, TOK), min_size=1, max_size=4),
              MAYBE(st.integers(0, 20))),
    st.tuples(st.just('release'), JOB, TOK, MAYBE(st.integers(0, 20)),
              MAYBE(st.sampled_from([0, 3, 1000]))),
    # fail: DEAD, DELAY, the handler's ATTEMPTS, a new PRIORITY (version 37).
    st.tuples(st.just('fail'), JOB, TOK, st.booleans(), MAYBE(st.integers(0, 20)), ATTEMPTS,
              MAYBE(st.sampled_from([0, 5, -30, -4294966295]))),
    st.tuples(st.just('fail'), JOB, TOK, st.just(False), MAYBE(st.integers(0, 20)), ATTEMPTS,
              st.none()),
    st.tuples(st.just('release'), JOB, TOK, st.none(), st.none()),
    st.tuples(st.just('touch'), JOB, TOK, MAYBE(st.integers(1, 30))),
    st.tuples(st.just('report'), JOB, TOK, st.integers(0, len(REPORTS) - 1)),
    st.tuples(st.just('delete'), st.lists(JOB, min_size=1, max_size=3)),
    st.tuples(st.just('requeue'), MAYBE(st.integers(1, 3))),
    st.tuples(st.just('kick'), st.lists(JOB, min_size=1, max_size=3)),
    st.tuples(st.just('kickall'), MAYBE(st.integers(1, 3))),
    st.tuples(st.just('promoteall'), MAYBE(st.integers(1, 3))),  # (version 32)
    st.tuples(st.just('purge'), st.integers(-5, 5), MAYBE(st.integers(1, 3))),
    # A waiting job's priority and/or due time, in place (version 33): DELAY
    # from now, AT a time (in the past too).
    st.tuples(st.just('reschedule'), JOB, MAYBE(st.sampled_from([0, 3, 1000])),
              MAYBE(st.tuples(st.sampled_from(['DELAY', 'AT']), st.integers(-10, 25)))),
    # Paused (for a few ms now and then: version 38), or resumed.
    st.tuples(st.just('pause'), st.sampled_from([True, False, False]), MAYBE(st.integers(1, 15))),
    # Spread over shards (the topic must be empty), ended, closed ("*"), or refused.
    st.tuples(st.just('shard'), st.sampled_from([[], [], ['1-0', '1-1'], ['a'], ['*'],
                                                 ['a', 'a'], ['b c'], ['x' * 65]])),
    # Spread and ended again, more often: the counter parked while the
    # topic is spread must come back (a planted bug took 20 chunks to miss).
    st.tuples(st.just('shard'), st.sampled_from([['1-0', '1-1'], []])),
    st.tuples(st.just('shards')),
    # The retry window (version 20): read, none, a few ms (so windows end
    # within a run), the default.
    st.tuples(st.just('retrywindow'), st.sampled_from([None, 0, 5, 40, 60000])),
    # Migration (version 24): the walks write no older format, so it
    # rewrites nothing, but it must change nothing either.
    st.tuples(st.just('migrate'), MAYBE(st.sampled_from([1, 2, 1000]))),
    st.tuples(st.just('list'), st.sampled_from(STATES), st.integers(0, 3), st.integers(1, 4),
              st.booleans()),
    st.tuples(st.just('get'), JOB, st.booleans()),  # (NOBODY: version 33)
    st.tuples(st.just('stats')),
    st.tuples(st.just('bad'), st.integers(0, len(BAD) - 1), st.integers(0, 5)),
    st.tuples(st.just('badkeys'), st.sampled_from(['put', 'reserve', 'ack', 'delete', 'stats']),
              st.integers(0, 3)),
)


def opt_words(o, now, modes=True):
    w = []
    if 'WHEN' in o:
        kind, v = o['WHEN']
        w += [kind, v if kind == 'DELAY' else max(0, now + v)]
    for k in ('PRIORITY', 'TTR', 'ATTEMPTS', 'KEEP'):
        if k in o:
            w += [k, o[k]]
    if 'BACKOFF' in o:
        w += ['BACKOFF', *o['BACKOFF']]
    if modes and 'MODE' in o:
        w.append(o['MODE'])
    return w


def confirm_word(opts):
    return ['CONFIRM'] if any('CONFIRM' in o for o in opts) else []


def outcome(op, reply):
    """A coarse name for a reply, for the coverage table."""
    if isinstance(reply, Error):
        return reply.code
    if isinstance(reply, Status):
        return reply.text
    if op in ('reserve', 'pull'):
        once = sum(1 for j in reply[3:] if op == 'reserve' and j[2] == 0)  # TTR 0
        return 'paused' if reply[2] else '%d jobs%s, next %s' % (
            len(reply) - 3, ' (%d at most once)' % once if once else '',
            'now' if reply[1] == 0 else 'none' if reply[1] < 0 else 'later')
    if op == 'reservejob':
        return {1: 'reserved', 0: 'no such job', -2: 'not to be had'}[reply[0]] + (
            ' at most once' if reply[0] == 1 and reply[2][2] == 0 else '')
    if isinstance(reply, list):
        return 'list'
    if isinstance(reply, int):
        return str(reply) if reply <= 2 else '>2'
    return type(reply).__name__


def show(args):
    out = []
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        try:
            t = a.decode()
            out.append(t if t and all(c.isprintable() and c not in ' \'"' for c in t) else repr(t))
        except UnicodeDecodeError:
            out.append(repr(a))
    return ' '.join(out)


def b(v):
    return v if isinstance(v, bytes) else str(v).encode()


# ---------------------------------------------------------------- the machine

class TopicMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        Env.conn.check('FLUSHALL')
        # The library keeps a topic's history counts in its Lua state for up
        # to a second before it writes them: a fresh copy forgets the last
        # run's.
        harness.load(Env.conn, Env.code)
        Env.messages()
        self.model = Topic(promote_batch=Env.bounds['PROMOTE_BATCH'],
                           requeue_inline=Env.bounds['REQUEUE_INLINE'],
                           trim_batch=Env.bounds['TRIM_BATCH'], history=True)
        self.now = T0
        self.log = []
        self.issued = {}  # id -> tokens handed out, in order

    # ------------------------------------------------------------ rules

    @rule(op=OPS, dt=st.sampled_from([0, 0, 0, 1, 1, 2]))
    def call(self, op, dt):
        self.now += dt
        kind = op[0]
        if kind == 'work':
            _, count, ttr, action, x = op
            worker = ['WORKER', 'worker:%d' % (x % 3)] if x % 3 else []
            reply = self.run('reserve', [count] + (['TTR', ttr] if ttr else []) + worker
                             + ['NOW', self.now])
            # (an error past the history's 1024 bytes, which its entry cuts)
            # (x 12: one of UTF-8's 3-byte characters across the cut)
            err = 'e%d' % x if x < 11 else 'E%d' % x * 400 if x == 11 else 'ab' + '\u9519' * 400
            for job in reply[3:] if isinstance(reply, list) else []:
                id_, token = job[0], job[2]
                if action == 'ack':
                    self.run('ack', [id_, token, 'NOW', self.now])
                elif action == 'keep':
                    self.run('ack', [id_, token, 'KEEP', x, 'NOW', self.now])
                elif action == 'fail':
                    self.run('fail', [id_, token, err] + (['DELAY', x] if x % 2 else [])
                             + ['NOW', self.now])
                elif action == 'fail_n':  # a handler's own max attempts
                    self.run('fail', [id_, token, err, 'ATTEMPTS', x % 4 + 1, 'NOW', self.now])
                elif action == 'release':
                    self.run('release', [id_, token, 'DELAY', x % 5, 'NOW', self.now])
                elif action == 'report':  # (version 31) progress and log lines; still held
                    self.run('progress', [id_, token, *report(x), 'NOW', self.now])
                    if x % 2:  # (then 100 more: the log's bound of lines)
                        self.run('progress', [id_, token, *report(6), 'NOW', self.now])
                else:
                    self.run('touch', [id_, token, 'TTR', x + 1, 'NOW', self.now])
        elif kind == 'bad':
            name, make = BAD[op[1]]
            self.run(name, make(self.now, self.some_reservation(op[2])))
        elif kind == 'badkeys':
            self.run_badkeys(op[1], op[2])
        else:
            name, args = self.resolve(op)
            self.run(name, args)

    @rule(ms=st.integers(1, 120))
    def advance(self, ms):
        self.now += ms

    # ------------------------------------------------------------ resolving

    def pick(self, sel):
        how, i = sel  # held: a reserved job's id, dead: a dead one's, when there are
        state = {'held': 'reserved', 'dead': 'dead'}.get(how)
        some = sorted(j.id for j in self.model.jobs.values() if j.state == state)
        ids = some or sorted(set(IDS) | set(self.model.jobs))
        return ids[i % len(ids)]

    def token(self, id_, sel):
        how, x = sel
        j = self.model.jobs.get(id_)
        issued = self.issued.get(id_, [])
        if how == 'cur':
            if j is not None and j.state == 'reserved':
                return j.token
            return issued[-1] if issued else x
        if how == 'old':
            return issued[x % len(issued)] if issued else x
        if how == 'next':
            return (j.token if j is not None and j.token else x) + 1
        return x

    def some_reservation(self, i):
        held = sorted((j.id, j.token) for j in self.model.jobs.values() if j.state == 'reserved')
        return held[i % len(held)] if held else (b'a', 1)

    def resolve(self, op):
        kind, n = op[0], self.now
        if kind == 'put':
            _, id_, body, o = op
            return 'put', [id_, body, *opt_words(o, n), *confirm_word([o]), 'NOW', n]
        if kind == 'putmany':
            args = [len(op[1])]
            for id_, body, o in op[1]:
                w = opt_words(o, n)
                args += [id_, body, len(w), *w]
            return 'putmany', args + confirm_word([o for _, _, o in op[1]]) + ['NOW', n]
        if kind == 'burst':  # jobs due in the same millisecond (a backlog when due)
            count, d = op[1], op[2]
            args = [count]
            for i in range(count):
                args += [b'*', b'burst', 4, 'AT', n + d, 'PRIORITY', [0, 1, 7][i % 3]]
            return 'putmany', args + ['NOW', n]
        if kind == 'restore':
            _, id_, body, state, created, made, o, replace, err, died = op
            args = [id_, body, state, max(0, n + created), made, *opt_words(o, n, modes=False)]
            if err:
                args += ['ERROR', 'oops']
            if died:
                args += ['DIED', n - 3]
            if replace:
                args.append('REPLACE')
            return 'restore', args + ['NOW', n]
        if kind == 'reserve':
            args = [op[1]] + (['TTR', op[2]] if op[2] is not None else [])
            args += ['WORKER', op[3]] if op[3] is not None else []
            return 'reserve', args + ['NOW', n]
        if kind == 'pull':
            return 'pull', [op[1], 'NOW', n]
        if kind == 'reservejob':
            args = [self.pick(op[1])] + (['TTR', op[2]] if op[2] is not None else [])
            args += ['WORKER', op[3]] if op[3] is not None else []
            return 'reservejob', args + ['NOW', n]
        if kind == 'ack':
            id_ = self.pick(op[1])
            args = [id_, self.token(id_, op[2])] + (['KEEP', op[3]] if op[3] is not None else [])
            if op[4] is not None:  # a result; over MAXBODY 4 when long
                args += ['RESULT', op[4]] + (['MAXBODY', 4] if len(op[4]) > 4 else [])
            return 'ack', args + ['NOW', n]
        if kind == 'ackmany':
            args = [len(op[1])]
            for sel, tok in op[1]:
                id_ = self.pick(sel)
                args += [id_, self.token(id_, tok)]
            return 'ackmany', args + (['KEEP', op[2]] if op[2] is not None else []) + ['NOW', n]
        if kind == 'release':
            id_ = self.pick(op[1])
            args = [id_, self.token(id_, op[2])]
            if op[3] is not None:
                args += ['DELAY', op[3]]
            if op[4] is not None:
                args += ['PRIORITY', op[4]]
            return 'release', args + ['NOW', n]
        if kind == 'fail':
            id_ = self.pick(op[1])
            args = [id_, self.token(id_, op[2]), 'it broke'] + (['DEAD'] if op[3] else [])
            if op[4] is not None:
                args += ['DELAY', op[4]]
            if op[5] is not None:
                args += ['ATTEMPTS', op[5]]
            if op[6] is not None:
                args += ['PRIORITY', op[6]]
            return 'fail', args + ['NOW', n]
        if kind == 'report':
            id_ = self.pick(op[1])
            return 'progress', [id_, self.token(id_, op[2]), *report(op[3]), 'NOW', n]
        if kind == 'touch':
            id_ = self.pick(op[1])
            args = [id_, self.token(id_, op[2])] + (['TTR', op[3]] if op[3] is not None else [])
            return 'touch', args + ['NOW', n]
        if kind in ('delete', 'kick'):
            return kind, [self.pick(i) for i in op[1]]
        if kind == 'purge':  # before a dead job's time of death (the bound), or now + op[1]
            died = sorted({j.died for j in self.model.jobs.values() if j.state == 'dead'})
            before = died[op[1] % len(died)] if died and op[1] >= 0 else max(n + op[1], 0)
            return 'purge', [before] + (['LIMIT', op[2]] if op[2] is not None else [])
        if kind == 'reschedule':
            args = [self.pick(op[1])] + (['PRIORITY', op[2]] if op[2] is not None else [])
            if op[3] is not None:
                args += [op[3][0], max(op[3][1], 0) if op[3][0] == 'DELAY' else max(n + op[3][1], 0)]
            return 'reschedule', args + ['NOW', n]
        if kind in ('requeue', 'kickall', 'promoteall'):
            return kind, (['LIMIT', op[1]] if op[1] is not None else []) + ['NOW', n]
        if kind == 'pause':
            if not op[1]:
                return 'resume', ['NOW', n]
            return 'pause', (['FOR', op[2]] if op[2] is not None else []) + ['NOW', n]
        if kind == 'list':
            return 'list', [op[1], op[2], op[3]] + (['NOBODY'] if op[4] else []) + ['NOW', n]
        if kind == 'get':
            return 'get', [self.pick(op[1])] + (['NOBODY'] if op[2] else []) + ['NOW', n]
        if kind == 'stats':
            return 'stats', ['NOW', n]
        if kind == 'shard':
            return 'shard', list(op[1])
        if kind == 'shards':
            return 'shards', []
        if kind == 'retrywindow':
            return 'retrywindow', [] if op[1] is None else [op[1]]
        if kind == 'migrate':
            return 'migrate', [] if op[1] is None else ['LIMIT', op[1]]
        raise AssertionError(kind)

    # ------------------------------------------------------------ running

    def fail(self, what):
        raise AssertionError('%s\n-- the calls (K = the topic\'s %d keys, fresh topic):\n%s'
                             % (what, len(Env.keys), '\n'.join(self.log)))

    def expect(self, ok, what):
        if not ok:
            self.fail(what)

    def run(self, op, args):
        keys = Env.keys
        before = dump(Env.conn, keys)
        t0 = int(Env.conn.call('TIME')[0]) * 1000 if op == 'kick' else None
        meta_before = Env.conn.call('EXISTS', keys[6]) if op == 'migrate' else None
        real = Env.conn.call('FCALL', 'redisched_' + op, len(keys), *keys, *args)
        Env.calls += 1
        self.log.append('FCALL redisched_%s %d $K %s' % (op, len(keys), show(args)))
        if op == 'migrate':
            # How many records a migrate reads is its HSCAN's to say: the
            # model checks the reply against what it holds instead.
            self.model.migrate_seen = (real, meta_before == 1)
        if op == 'kick' and isinstance(real, int) and real > 0:
            # kick reads the server's clock: learn it from a job it kicked.
            t1 = (int(Env.conn.call('TIME')[0]) + 1) * 1000
            dead = [b(i) for i in args if b(i) in self.model.jobs and self.model.jobs[b(i)].state == 'dead']
            self.expect(dead, 'kick kicked %d jobs, the model has none dead among them' % real)
            due = decode_record(Env.conn.check('HGET', keys[0], dead[0]))['due']
            self.expect(t0 <= due <= t1, 'kick\'s time %d is not the server\'s' % due)
            self.model.kick_now = due
        want = self.model.call(op, args)
        Env.outcomes[(op, outcome(op, want))] += 1
        self.expect(real == want, 'reply of %s\n   library: %r\n   model:   %r' % (op, real, want))
        signals = Env.messages()
        expected = [(b(keys[2]), b(self.model.wake))] if self.model.wake is not None else []
        if self.model.finished:
            expected.append((b(keys[5]), b'\n'.join(self.model.finished)))
        for id_ in self.model.reported:  # (version 31: the progress channel)
            expected.append((b(keys[7]), id_))
        self.expect(signals == expected,
                    'signals of %s: %r, the model says %r' % (op, signals, expected))
        if is_refusal(op, want):
            self.expect(dump(Env.conn, keys) == before, 'a refused %s changed a key' % op)
        if op in ('reserve', 'reservejob') and isinstance(real, list):
            for job in real[3:] if op == 'reserve' else real[2:]:
                if job[2] == 0:  # a job of TTR 0, taken for good: no reservation, no token
                    continue
                seen = self.issued.setdefault(job[0], [])
                self.expect(not seen or job[2] > seen[-1],
                            'token %d of %r is not above its last one %r' % (job[2], job[0], seen))
                seen.append(job[2])
        self.observe()
        return real

    def run_badkeys(self, op, how):
        keys = list(Env.keys)
        if how == 0:
            keys = keys[:7]
        elif how == 1:
            keys[4] = topic_keys('other')[4]
        elif how == 2:
            keys[2], keys[3] = keys[3], keys[2]
        else:
            keys = [k.replace(b'{', b'').replace(b'}', b'') for k in keys]
        args = {'put': ['a', 'b', 'NOW', self.now], 'reserve': ['1', 'NOW', self.now],
                'ack': ['a', '1', 'NOW', self.now], 'delete': ['a'], 'stats': ['NOW', self.now]}[op]
        before = dump(Env.conn, Env.keys)
        names = set(Env.conn.call('KEYS', '*'))
        real = Env.conn.call('FCALL', 'redisched_' + op, len(keys), *keys, *args)
        Env.calls += 1
        self.log.append('FCALL redisched_%s %d %s %s' % (op, len(keys), show(keys), show(args)))
        self.expect(real == Error('BADKEYS'), 'wrong keys: %r' % real)
        self.expect(dump(Env.conn, Env.keys) == before and set(Env.conn.call('KEYS', '*')) == names,
                    'a call with wrong keys wrote')
        self.expect(Env.messages() == [], 'a call with wrong keys signalled')

    # ------------------------------------------------------------ observing

    def observe(self):
        m, n, keys = self.model, self.now, Env.keys
        raw = read_raw(Env.conn, keys)
        try:
            recs, where = check_invariants(raw, keys)
        except AssertionError as e:
            self.fail('raw keys: %s' % e)
        self.compare_raw(raw, recs, where)
        ids = sorted(set(IDS) | set(m.jobs))
        cmds = [('FCALL', 'redisched_get', len(keys), *keys, i, 'NOW', n) for i in ids]
        cmds.append(('FCALL', 'redisched_stats', len(keys), *keys, 'NOW', n))
        # The history (version 34): every minute since the run began (a
        # spread topic's own with SPREAD), and the total (SHARDED when
        # spread: its calls count in its shards).
        spread = ['SPREAD'] if m.shards else []
        cmds.append(('FCALL', 'redisched_history', len(keys), *keys, 'minute', T0, n, *spread,
                     'NOW', n))
        cmds.append(('FCALL', 'redisched_history', len(keys), *keys, 'total', 'NOW', n))
        # list writes only when a delayed job is due: then it is an op, not a look.
        lists = not m.due_delayed(n)
        if lists:
            for state in STATES:
                cmds.append(('FCALL', 'redisched_list', len(keys), *keys, state, 0, 1000, 'NOW', n))
            cmds.append(('FCALL', 'redisched_list', len(keys), *keys, 'ready', 1, 2, 'NOBODY', 'NOW', n))
        replies = Env.conn.pipeline(cmds)
        for i, id_ in enumerate(ids):
            want = m.call('get', [id_, b'NOW', b(n)])  # (SHARDED on a spread topic)
            self.expect(replies[i] == want, 'get %r\n   library: %r\n   model:   %r'
                        % (id_, replies[i], want))
        want = m.op_stats([b'NOW', b(n)])
        self.expect(replies[len(ids)] == want, 'stats\n   library: %r\n   model:   %r'
                    % (replies[len(ids)], want))
        minutes, total = replies[len(ids) + 1], replies[len(ids) + 2]
        want = ([n] + m.history_rows(T0 // 60000, n // 60000) if m.shards != [b'*']
                else Error('SHARDED'))
        self.expect(minutes == want, 'history by the minute\n   library: %r\n   model:   %r'
                    % (minutes, want))
        want = [n, [0] + m.history_total()] if not m.shards else Error('SHARDED')
        self.expect(total == want, 'history total\n   library: %r\n   model:   %r' % (total, want))
        if lists:
            looks = [[s, 0, 1000] for s in STATES] + [['ready', 1, 2, 'NOBODY']]
            for r, args in zip(replies[len(ids) + 3:], looks):
                want = m.op_list([b(a) for a in args] + [b'NOW', b(n)])
                self.expect(r == want, 'list %s\n   library: %r\n   model:   %r' % (args, r, want))

    def compare_raw(self, raw, recs, where):
        m = self.model
        self.expect(int(raw['meta'].get(b'seq', 0)) == m.seq,
                    'counter %r, the model says %d' % (raw['meta'].get(b'seq'), m.seq))
        for name in ('failed_total', 'dead_total', 'lapsed_total'):
            self.expect(int(raw['meta'].get(name.encode(), 0)) == getattr(m, name), name)
        self.expect(set(recs) == set(m.jobs), 'jobs stored %r, the model has %r'
                    % (sorted(recs), sorted(m.jobs)))
        self.expect((raw['ready'][:1] == [(harness.PAUSED, float('-inf'))]) == m.paused, 'pause mark')
        self.expect(raw['meta'].get(b'pause_until') == (None if m.pause_end is None else b(m.pause_end)),
                    'pause_until %r, the model says %r' % (raw['meta'].get(b'pause_until'), m.pause_end))
        self.expect(((harness.SHARDED, float('-inf')) in raw['ready']) == (m.shards is not None),
                    'shard mark')
        self.expect(raw['meta'].get(b'shards') == (b' '.join(m.shards) if m.shards else None),
                    'shards %r, the model says %r' % (raw['meta'].get(b'shards'), m.shards))
        for id_, j in m.jobs.items():
            r = recs[id_]
            kinds = {'fixed': 1, 'exponential': 2}
            bk = j.backoff or ('exponential', 1000, 600000)
            outcomes = {'failed': 1, 'lapsed': 2}
            got = (r['created'], r['seq'], r['place'], r['prio'], r['due'], r['made'], r.get('ttr'),
                   r.get('max') or 5, r.get('backoff') or (2, 1000, 600000), r.get('err'),
                   r['body'], where[id_], r.get('history'), r.get('progress'), r.get('log'))
            wanted = (j.created, j.seq, j.place, j.prio, j.due, j.made, j.ttr, j.max or 5,
                      (kinds[bk[0]], bk[1], bk[2]), j.err, j.body, j.state,
                      [(a, outcomes[o] + (128 if cut else 0), st, en, w or b'', e)
                       for a, o, st, en, w, e, cut in j.history] or None,
                      j.progress, (j.log_total, j.log) if j.log else None)
            self.expect(got == wanted, 'record of %r\n   stored: %r\n   model:  %r' % (id_, got, wanted))
            if j.state == 'done':
                self.expect(r.get('finished') == j.finished, 'finished of %r' % id_)
        self.expect(dict(raw['gone']) == m.gone, 'retry windows %r, the model says %r'
                    % (dict(raw['gone']), m.gone))
        want_window = None if m.retry_window == 60000 else b'%d' % m.retry_window
        self.expect(raw['meta'].get(b'retry_window') == want_window, 'retry_window %r, the model says %d'
                    % (raw['meta'].get(b'retry_window'), m.retry_window))
        members = {s: dict(raw[s]) for s in ('reserved', 'dead', 'done')}
        for id_, j in m.jobs.items():
            if j.state == 'reserved':
                self.expect(members['reserved'].get(j.lease_member()) == j.deadline and
                            raw['leases'].get(id_) == b'%d:%d:%d' % (j.token, j.reserved_at, j.lease_ttr)
                            + (b':' + j.worker if j.worker is not None else b''),
                            'reservation of %r' % id_)
            elif j.state == 'dead':
                self.expect(members['dead'].get(id_) == j.died, 'died of %r' % id_)
            elif j.state == 'done':
                self.expect(members['done'].get(id_) == j.expires, 'expires of %r' % id_)


# ---------------------------------------------------------------- runs

def run_sequential(budget, seed, examples, steps, shrink, verbose=False, stop_on_failure=True,
                   max_chunks=None):
    """Chunks of hypothesis runs (seed, seed+1, ...) until the budget
    (seconds) is spent, or max_chunks have run if given, alternating lowered
    and real housekeeping bounds. Returns (failures, chunks run)."""
    deadline = time.time() + budget
    chunk, failures = 0, []
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    while chunk < max_chunks if max_chunks is not None else time.time() < deadline:
        Env.bounds = SMALL if chunk % 3 != 2 else REAL
        Env.code = harness.library_source(Env.lua, Env.bounds, Env.mutation, write_order=True)
        harness.load(Env.conn, Env.code)
        hypothesis.core.global_force_seed = seed + chunk
        s = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                     database=None, phases=phases, suppress_health_check=list(HealthCheck),
                     verbosity=hypothesis.Verbosity.normal if verbose else hypothesis.Verbosity.quiet,
                     print_blob=False)
        try:
            run_state_machine_as_test(TopicMachine, settings=s)
        except Exception as e:  # noqa: BLE001 - a failure of the library or the model
            failures.append((seed + chunk, e))
            if stop_on_failure:
                return failures, chunk + 1
        chunk += 1
    return failures, chunk


def run_concurrent(seconds, threads, seed):
    """Several connections on the real clock; then the history is checked."""
    harness.load(Env.conn, harness.library_source(Env.lua, None, Env.mutation, write_order=True))
    Env.conn.check('FLUSHALL')
    keys = Env.keys
    stop = time.time() + seconds
    history = []  # (thread, op, id, token, reply)
    lock = threading.Lock()
    errors = []

    def worker(t):
        try:
            rng = random.Random(seed * 100 + t)
            c = Conn(Env.port)
            log = []
            n = 0

            def fcall(op, *args):
                r = c.call('FCALL', 'redisched_' + op, len(keys), *keys, *args)
                if isinstance(r, Error):
                    raise AssertionError('%s %r: %s' % (op, args, r.message))
                return r
            while time.time() < stop:
                x = rng.random()
                if x < 0.3:
                    n += 1
                    id_ = b'w%d-%d' % (t, n)
                    opts = ['PRIORITY', rng.randint(0, 3)]
                    if rng.random() < 0.3:
                        opts += ['DELAY', rng.randint(0, 20)]
                    if rng.random() < 0.3:
                        opts += ['ATTEMPTS', rng.randint(1, 3)]
                    once = rng.random() < 0.1  # TTR 0: delivered at most once
                    if once:
                        opts += ['TTR', 0]
                    log.append((t, 'put', id_, None, fcall('put', id_, b'x', *opts)))
                    if once:
                        log.append((t, 'put once', id_, None, 1))
                elif x < 0.8:
                    r = fcall('reserve', rng.randint(1, 3), 'TTR', rng.choice([20, 50, 200]))
                    for job in r[3:]:
                        id_, token = job[0], job[2]
                        if token == 0:  # taken for good: nothing to settle
                            log.append((t, 'once', id_, token, job[8]))
                            if rng.random() < 0.3:
                                log.append((t, 'ack once', id_, token, fcall('ack', id_, token)))
                            continue
                        log.append((t, 'reserve', id_, token, 1))
                        y = rng.random()
                        if y < 0.1:
                            time.sleep(rng.choice([0.03, 0.06]))  # past its time-to-run
                        if y < 0.55:
                            log.append((t, 'ack', id_, token, fcall('ack', id_, token)))
                        elif y < 0.65:
                            log.append((t, 'ackmany', id_, token, fcall('ackmany', 2, id_, token, id_, token)[0]))
                        elif y < 0.75:
                            log.append((t, 'release', id_, token, fcall('release', id_, token)))
                        elif y < 0.85:
                            n_ = ['ATTEMPTS', rng.randint(1, 4)] if rng.random() < 0.5 else []
                            r2 = fcall('fail', id_, token, 'boom', 'DELAY', rng.randint(0, 10), *n_)
                            log.append((t, 'fail', id_, token, r2))
                        else:
                            d = fcall('touch', id_, token, 'TTR', 100)
                            log.append((t, 'touch', id_, token, d))
                            log.append((t, 'ack', id_, token, fcall('ack', id_, token)))
                elif x < 0.85:
                    fcall('requeue', 'LIMIT', 50)
                    log.append((t, 'requeue', None, None, 0))
                elif x < 0.88:
                    r = fcall('pull', 1)
                    for job in r[3:]:
                        log.append((t, 'pull', job[0], None, 1))
                else:
                    time.sleep(0.002)
            with lock:
                history.extend(log)
            c.close()
        except Exception:  # noqa: BLE001
            errors.append(traceback.format_exc())

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise AssertionError('a worker failed:\n' + errors[0])
    # Drain: far in the future every reservation lapses and every job is due.
    now = int(Env.conn.check('TIME')[0]) * 1000 + 10 * 86400000
    for _ in range(1000):
        Env.conn.check('FCALL', 'redisched_requeue', len(keys), *keys, 'LIMIT', 10000, 'NOW', now)
        r = Env.conn.check('FCALL', 'redisched_reserve', len(keys), *keys, 1000, 'TTR', 1000, 'NOW', now)
        for job in r[3:]:
            if job[2] == 0:
                history.append(('drain', 'once', job[0], 0, job[8]))
                continue
            history.append(('drain', 'reserve', job[0], job[2], 1))
            history.append(('drain', 'ack', job[0], job[2],
                            Env.conn.check('FCALL', 'redisched_ack', len(keys), *keys, job[0], job[2])))
        if len(r) == 3:
            break
    # The history.
    put = {h[2] for h in history if h[1] == 'put' and h[4] == 1}
    put_once = {h[2] for h in history if h[1] == 'put once'}
    acked, issued, pulled, once = {}, {}, set(), set()
    for who, op, id_, token, reply in history:
        if op == 'reserve':
            assert token not in issued.setdefault(id_, set()), 'token %d of %r handed out twice' % (token, id_)
            assert id_ not in put_once, '%r of TTR 0 was reserved with a token' % id_
            issued[id_].add(token)
        if op in ('ack', 'ackmany') and reply == 1:
            acked.setdefault(id_, []).append((who, token))
        if op in ('pull', 'once'):
            assert id_ not in pulled and id_ not in once, '%r taken for good twice' % id_
            (pulled if op == 'pull' else once).add(id_)
        if op == 'once':
            assert id_ in put_once and reply == 0, '%r handed out at most once: %r' % (id_, reply)
        if op == 'ack once':
            assert reply == 0, 'ack of %r (TTR 0) after reserve answered %r' % (id_, reply)
    for id_, holders in acked.items():
        assert len(holders) == 1, '%r was acked by %d holders: %r' % (id_, len(holders), holders)
        assert holders[0][1] in issued.get(id_, ()), '%r acked with a token never handed out' % id_
        assert id_ in put, '%r acked but never put' % id_
    raw = read_raw(Env.conn, keys)
    recs, where = check_invariants(raw, keys)
    stats = Env.conn.check('FCALL', 'redisched_stats', len(keys), *keys, 'NOW', now)
    left = {i for i, s in where.items() if s != 'dead'}
    assert not left, 'jobs left after the drain: %r' % sorted(left)[:10]
    lost = put - set(acked) - pulled - once - set(recs)
    assert not lost, 'jobs lost: %r' % sorted(lost)[:10]
    assert not (set(acked) & (pulled | once)), 'a job both acked and taken for good'
    assert not (set(acked) & set(recs)), 'an acked job is still stored'
    assert not (put_once - pulled - once), 'jobs of TTR 0 not handed out: %r' % sorted(put_once - pulled - once)[:10]
    # Without DEAD, a job dies when its attempts reach its max (fail's
    # ATTEMPTS included, stored on the job).
    for id_ in recs:
        g = Env.conn.check('FCALL', 'redisched_get', len(keys), *keys, id_, 'NOW', now)
        g = dict(zip(g[0::2], g[1::2]))
        assert g[b'attempts'] >= g[b'max_attempts'], 'dead %r: %r' % (id_, g)
    calls = len(history)
    return {'calls': calls, 'puts': len(put), 'acked': len(acked), 'pulled': len(pulled),
            'once': len(once),
            'dead': len(recs), 'stale_refused': sum(1 for h in history if h[1] in ('ack', 'ackmany', 'release', 'fail', 'touch') and h[4] in (-3, -2)),
            'stats': dict(zip(stats[0::2], stats[1::2]))}


# ---------------------------------------------------------------- mutants

# Planted bugs: (name, text in lua/redisched.lua, replacement), or (name,
# [(text, replacement), ...]) for a bug of several edits. Each must be caught.
MUTANTS = [
    ('priority ignored in the ready order',
     'return (PRIO_MAX - prio) * TIME_SPAN + due', 'return PRIO_MAX * TIME_SPAN + due'),
    ('ack leaves the lease behind',
     "      redis.call('HDEL', k.leases, id)\n      gone.remember",
     "      gone.remember"),
    ('a retried put makes a job acked a moment ago again',
     "if redis.call('HEXISTS', k.jobs, id) == 1 or gone.holds(k, id, now) then",
     "if redis.call('HEXISTS', k.jobs, id) == 1 then"),
    ('a retry window never ends',
     "  redis.call('ZREMRANGEBYSCORE', k.gone, '-inf', now)\n", ""),
    ('a stale token answers wrong state',
     "if redis.call('HEXISTS', k.leases, id) == 1 then return STALE end",
     "if redis.call('HEXISTS', k.leases, id) == 1 then return WRONG_STATE end"),
    ('a lapse is not counted as an attempt',
     "      record.attempt(j, 'lapsed', started, now, worker)\n",
     "      record.attempt(j, 'lapsed', started, now, worker)\n      j.attempts = j.attempts - 1\n"),
    # The attempt history (version 30).
    ('a lapse\'s history entry names no worker',
     "if leases[i] then _, started, _, worker = parse_lease(leases[i]) end",
     "if leases[i] then _, started = parse_lease(leases[i]) end"),
    ('a history entry keeps its error whole',
     "err, cut = utf8_prefix(err, HISTORY_ERROR_MAX), true", "cut = true"),
    ('reserve ignores the backlog', 'if f.backlog and #popped > 0 then', 'if false then'),
    ('a get that misses on a spread topic answers nil',
     "    sharded(k) -- (a miss, and only then, looks for a spread topic)\n", ''),
    ('an unspread topic keeps the parked counter',
     "    redis.call('HSET', k.meta, 'seq', cur[3] or 0)\n", ''),
    ('a refused put moves the counter',
     "if redis.call('HEXISTS', k.jobs, id) == 1 or gone.holds(k, id, now) then return confirm.exists(k, o) end",
     "if redis.call('HEXISTS', k.jobs, id) == 1 then take_seq(k, 1) return confirm.exists(k, o) end"),
    ('stats counts due delayed jobs as delayed',
     "'ready', waiting.size(ready) + due,", "'ready', waiting.size(ready),"),
    ('touch ignores its TTR', 'now + (ttr or lease_ttr)', 'now + lease_ttr'),
    ('the reserved pin reads as the next deadline',
     '  if not t or t == math.huge then return -1 end', '  if not t then return -1 end'),
    ('stats counts the reserved pin', "    'reserved', reservations.count(k), 'dead'",
     "    'reserved', redis.call('ZCARD', k.reserved), 'dead'"),
    ('the ready lane counts its pin', "nset = unpinned.ready_count(k), nlist",
     "nset = redis.call('ZCARD', k.ready) - skip, nlist"),
    ('putmany\'s debounce replaces a running job',
     "elseif present[id] and mode == 'debounce' and not waiting(id) then codes[i] = EXISTS",
     "elseif false then codes[i] = EXISTS"),
    ('debounce replaces a running job',
     "if p.mode == 'debounce' and where[1] ~= 'delayed' and where[1] ~= 'ready' then return confirm.exists(k, o) end",
     ''),
    ('reserve\'s TTR overrides the job\'s', 'local ttr = j.ttr or ttr_arg or DEFAULT_TTR\n        if ttr == 0',
     'local ttr = ttr_arg or j.ttr or DEFAULT_TTR\n        if ttr == 0'),
    # Caught by the write-order checker alone: the counter is put back
    # before the refusal, so every key is as it was.
    ('a put refused for the counter writes it first',
     [("  local cur = tonumber(redis.call('HGET', k.meta, 'seq') or 0)\n"
       "  if cur + n > SEQ_MAX then\n",
       "  local cur = redis.call('HINCRBY', k.meta, 'seq', n) - n\n"
       "  if cur + n > SEQ_MAX then\n"
       "    redis.call('HINCRBY', k.meta, 'seq', -n)\n"),
      ("  redis.call('HINCRBY', k.meta, 'seq', n)\n  return cur + 1\n", "  return cur + 1\n")]),
    # Library 27: the marks behind waiting.
    ('the pause mark is not a mark', 'return m == LIMIT_MARK or m == PAUSED_MARK or m == SHARD_MARK',
     'return m == LIMIT_MARK or m == SHARD_MARK'),
    ('resume leaves the pause mark', "  if not waiting.end_pause(k) then return 0 end",
     "  if not waiting.marked(k, PAUSED_MARK) then return 0 end"),
    ('reserve of a spread topic answers as an empty one',
     "  if f.sharded then sharded(k) end -- (a spread topic says where its jobs are)\n", ''),
    # (Reserve's plain take re-reading the ready set after it recovers
    # lapsed reservations: since the ready list (version 17) most of the
    # model's ready jobs are listed, so it reaches that path rarely; with
    # version 18 seed 1 no longer did within 30 s. functions_test's
    # ReserveRecoversLapsedJobsBeforeItTakesAndKeepsTheOrder, plain path,
    # catches it: it hands out y twice.)
    ('reserve recovers lapsed reservations only when nothing is ready',
     'if recover and n < count and not lapsed_read then', 'if recover and n == 0 and not lapsed_read then'),
    ('reserve takes due jobs of mixed priorities in due order',
     "      if record.member_prio_bytes(e, 14) ~= prio then return nil end\n", ''),
    ('ackmany acks a repeated id twice', 'if acked[id] then', 'if false then'),
    ('delete leaves a reservation\'s lease',
     "  if state == 'reserved' then redis.call('HDEL', k.leases, id) end\n", ''),
    ('fail allows one attempt too many', 'local retry = not o.DEAD and j.attempts < max_attempts(j)',
     'local retry = not o.DEAD and j.attempts <= max_attempts(j)'),
    ('exponential backoff off by one', "2 ^ math.max((j.attempts or 1) - 1, 0)", "2 ^ (j.attempts or 1)"),
    ('a due job reads as delayed at its own millisecond', "if state == 'delayed' and score <= clock(o) then",
     "if state == 'delayed' and score < clock(o) then"),
    ('release keeps the old place (token reused)', '  renew(j, take_seq(k, 1))\n  if prio then j.priority = prio end',
     '  take_seq(k, 1)\n  if prio then j.priority = prio end'),
    ('putmany orders updates after the whole block', "      seqs[i], seq = seq, seq + 1\n",
     "      seqs[i], seq = seq + count, seq + 1\n"),
    ('keys checked by count only', "    if keys[i] ~= base .. ':' .. KEY_NAMES[i] then",
     "    if false then"),
    ('a refused ack with KEEP trims retained jobs', "  if #gone_ids == 0 then return codes end",
     "  if #gone_ids == 0 then if keep > 0 then trim_done(k, now) end return codes end"),
    ('putmany takes numbers for refused jobs', "local seq, seqs, last = cur + 1, {}, cur + stored",
     "local seq, seqs, last = cur + 1, {}, cur + count"),
    ('promotion drops the priority',
     "for _, e in ipairs(plan.moved) do zadd[#zadd + 1], zadd[#zadd + 2] = fmt((ready_list.key(e))), e:sub(7) end",
     "for _, e in ipairs(plan.moved) do zadd[#zadd + 1], zadd[#zadd + 2] = fmt(ready_score(0, (delayed_list.key(e)))), e:sub(7) end"),
    # Library version 37: priorities below 0 (beanstalkd's), stored wide.
    ('a listed job of a wide priority sorts by its low bytes',
     "    if prio == record.WIDE then prio = struct.unpack('>i8', e, at) end\n", ''),
    ('list pages the jobs it promotes in due order, not ready order',
     "  table.sort(keyed, function(x, y) return ready_list.after(y.s, y.q, x.s, x.q) end)\n", ""),
    # Library version 10.
    ('a job of TTR 0 is reserved like any other', '        if ttr == 0 then\n', '        if false then\n'),
    ('a job of TTR 0 is handed out and kept',
     "      redis.call('HDEL', k.jobs, unpack(once))\n", ''),
    ('fail\'s ATTEMPTS decides but is not stored',
     "    if attempts == DEFAULT_ATTEMPTS then j.max_attempts = nil else j.max_attempts = attempts end\n  end\n"
     "  local retry = not o.DEAD and j.attempts < max_attempts(j)",
     "  end\n  local retry = not o.DEAD and j.attempts < (attempts or max_attempts(j))"),
    ('fail\'s ATTEMPTS is stored after the decision',
     [("  record.attempt(j, 'failed', started, now, worker)\n  if attempts then",
       "  record.attempt(j, 'failed', started, now, worker)\n  local decided_by = max_attempts(j)\n  if attempts then"),
      ("local retry = not o.DEAD and j.attempts < max_attempts(j)", "local retry = not o.DEAD and j.attempts < decided_by")]),
    ('own_ttr is 0 for a TTR equal to the default', "f[#f + 1] = j.ttr and 1 or 0",
     "f[#f + 1] = (j.ttr and j.ttr ~= DEFAULT_TTR) and 1 or 0"),
    # Library version 17: the ready list.
    ('reserve takes the list\'s front first', '      from_list = ready_list.after(s, q, es, eq)',
     '      from_list = true'),
    # (Library version 27: put, putmany and every return to waiting share
    # one placement path, so one planted bug there is one for them all.)
    ('a put appends to the ready list out of order',
     'if r and (s > r or s == r and seq > pl.rq) then', 'if r then'),
    ('a batch appends to the ready list against its own order',
     'then pl.rs, pl.rq, listed = s, seq, true end', 'then listed = true end'),
    ('a listed job is in no state', "  return { 'ready', list, ready_list.entry(j, id), ready_score(j.priority, j.due) }",
     "  return { 'unknown' }"),
    ('the ready lane leaves its list out', "nlist = redis.call('LLEN', k.queue) }",
     "nlist = 0 }"),
    ('pages split the list and the set the wrong way',
     'local s, q = lane.key(e)\n      local s2, q2 = ready_list.zkey(z[1], z[2])\n'
     '      if ready_list.after(s, q, s2, q2) then hi = i else lo = i + 1 end',
     'local s, q = lane.key(e)\n      local s2, q2 = ready_list.zkey(z[1], z[2])\n'
     '      if ready_list.after(s2, q2, s, q) then hi = i else lo = i + 1 end'),
    # Library version 22: list pages the due jobs it promotes before it writes.
    ('list pages the jobs it promotes and the ready ones split the wrong way',
     'local s, q = ready_list.key(moved[i + 1])\n      local s2, q2 = ready_list.zkey(z[1], z[2])\n'
     '      if ready_list.after(s, q, s2, q2) then hi = i else lo = i + 1 end',
     'local s, q = ready_list.key(moved[i + 1])\n      local s2, q2 = ready_list.zkey(z[1], z[2])\n'
     '      if ready_list.after(s2, q2, s, q) then hi = i else lo = i + 1 end'),
    # Library version 23: every key a call touches is one of its KEYS (the
    # key checker beside the write-order checker answers UNDECLARED).
    ('the ready list named apart from its key', "queue = keys[9] or base .. ':queue'",
     "queue = base .. ':queued'"),
    ('the retry window named apart from its key', "gone = keys[11] or base .. ':gone'",
     "gone = base .. ':gone2'"),
    # Library version 18: the delayed list.
    ('promotion leaves the delayed list', 'local entries = delayed_list.due_front(k, now, PROMOTE_BATCH + 1)',
     'local entries = {}'),
    ('promotion takes delayed list entries before they are due', 'delayed_list.key(es[i + 1]) <= now do',
     'delayed_list.key(es[i + 1]) <= now + 1 do'),
    ('a put appends delayed jobs out of their order',
     'if list_delayed and d and (due > d or due == d and seq > pl.dq) then',
     'if list_delayed and d then'),
    ('putmany lists a job put with DELAY alone but leaves its record unflagged',
     'rec = record.plain(pl.now, seq, due, delayed and listed or nil, body)',
     'rec = record.plain(pl.now, seq, due, nil, body)'),
    ('a job in the delayed list reads as ready',
     "  if j.later then return { 'delayed', list, ready_list.entry(j, id), j.due } end\n", ''),
    ('a job keeps its delayed-list flag wherever it goes', 'j.later = delayed and listed or nil',
     'j.later = j.later or delayed and listed or nil'),
    ('the delayed lane leaves its list out', "nlist = redis.call('LLEN', k.later) }",
     "nlist = 0 }"),
    ('stats count one due job of the delayed list at most', '  while due_at(hi) do lo, hi = hi + 1, 2 * hi + 1 end\n',
     '  hi = lo\n'),
    ('the next due time ignores the delayed list', "  local t = waiting.next_due(k, -1, 0)\n",
     "  local first = redis.call('ZRANGE', k.delayed, 0, 0, 'WITHSCORES')\n"
     "  local t = first[2] and tonumber(first[2]) or -1\n"),
    ('list delayed pages the set alone',
     "local page = waiting.page(delayed_lane, ndue + offset, count)",
     "delayed_lane.nlist = 0\n    local page = waiting.page(delayed_lane, ndue + offset, count)"),
    ('stats\' next due time ignores the delayed list',
     "  local e = redis.call('LINDEX', k.later, due_in_list)\n", "  local e = nil\n"),
    # Version 31: a job's progress and log.
    ('a report of a reservation since taken again is stored',
     "  local j, lm = held(k, id, token)\n  if not j then return lm end\n  local attempt",
     "  local lease = redis.call('HGET', k.leases, id)\n"
     "  local j, lm = held(k, id, lease and parse_lease(lease) or token)\n"
     "  if not j then return lm end\n  local attempt"),
    ('the log keeps a line past its 100', 'while #kept - drop > LOG_LINES_MAX or',
     'while #kept - drop > LOG_LINES_MAX + 1 or'),
    ('the log keeps lines past its 32768 bytes', 'or bytes > LOG_BYTES_MAX do', 'do'),
    # Version 32: promote in place, purge.
    ('a promoted job starts its attempts again', "    j.due = now\n    place.job(pl, id, j)",
     "    j.due, j.attempts = now, nil\n    place.job(pl, id, j)"),
    ('promoteall promotes one more than its limit',
     "local page = waiting.page(waiting.lane(k, 'delayed'), 0, limit)",
     "local page = waiting.page(waiting.lane(k, 'delayed'), 0, limit + 1)"),
    ('purge removes the dead that died at its time too', "'(' .. before, 'BYSCORE'", "before, 'BYSCORE'"),
    # Version 38: reservejob, pause FOR.
    ('a timed pause never ends', "if e and e <= now then return false, -1 end", ""),
    ('a timed pause tells no sleeping worker when it ends', "    wake(ends)\n", ""),
    ('a timed pause that ended keeps its mark after a reserve',
     "  if f.paused then waiting.end_pause(k) end\n", ""),
    ('a dead job reserved by id keeps the token of the reservation that failed',
     "    renew(j, take_seq(k, 1)) -- (a token", "    take_seq(k, 1) -- (a token"),
    ('reservejob takes a job another worker holds',
     "if state ~= 'ready' and state ~= 'delayed' and state ~= 'dead' then",
     "if state == 'blocked' or state == 'done' then"),
    # Version 33: reschedule in place, get NOBODY.
    ('a rescheduled job starts its attempts again', "  renew(j, seq)\n  if prio then j.priority = prio end",
     "  renew(j, seq)\n  j.attempts = nil\n  if prio then j.priority = prio end"),
    ('reschedule moves a reserved job',
     "if w[1] ~= 'delayed' and w[1] ~= 'ready' then return WRONG_STATE end",
     "if w[1] == 'dead' or w[1] == 'done' then return WRONG_STATE end"),
    ('get NOBODY sends the body', "  if o.NOBODY then j.body = '' end\n  local f = job_fields",
     "  local f = job_fields"),
    # Version 34: the topic's history.
    ('a job started before its due time counts a negative wait',
     'if w > 0 then wait = wait + w end', 'wait = wait + w'),
    ('acks count no done', "history.count(k, now, 'd', #gone_ids)", "history.count(k, now, 'd', 0)"),
    ('putmany counts its refused jobs as put',
     "if type(c) ~= 'number' or c > 0 then n = n + 1 end", "n = n + 1"),
    ('a lapse that buries counts as lapsed only',
     "history.count(k, now, 'l', back + buried, 'x', buried)", "history.count(k, now, 'l', back + buried)"),
    ('counts of an earlier minute are added to the next',
     "    if e and e.minute ~= minute then\n      flush(key, e)\n      e = nil\n    end\n",
     "    if e and e.minute ~= minute then e.minute = minute end\n"),
    # (A single put appending its delayed job out of order: seeds 1 to 3
    # missed it within 30 s once puts with an update mode went to the set;
    # functions_test's DelayedListTest.JobsInDueOrderAreListed... catches
    # it, as its c, due before the list's end, must go to the set.)
    # (The backlog's first job left from the list rather than the set needs
    # a backlog of both whose list part comes first, and a job of higher
    # priority due after it: functions_test's
    # DelayedListTest.ABacklogHoldsBackJobsDueAfterTheFirstLeftInTheList.)
    # (Limits are not in the model: functions_test's
    # ReadyListTest.AgingMovesTheListIntoTheSet covers the flush.)
]


def edits(mutant):
    """A planted bug's edits: [(text, replacement), ...]."""
    return mutant[1] if len(mutant) == 2 else [mutant[1:]]


def run_mutants(chunks_each, seed, examples, steps, only=None, share=(1, 1)):
    """Each planted bug against the same chunks (seed, seed+1, ...), at most
    chunks_each: a count, not seconds, so that the verdict does not depend
    on how busy the machine is. share (k, n): the k-th of every n planted
    bugs only, so that n processes share them."""
    caught, missed = [], []
    k, n = share
    for i, mutant in enumerate(MUTANTS):
        name = mutant[0]
        if (only and only not in name) or i % n != k - 1:
            continue
        Env.mutation = edits(mutant)
        t = time.time()
        failures, chunks = run_sequential(0, seed, examples, steps, shrink=False,
                                          max_chunks=chunks_each)
        took = time.time() - t
        Env.mutation = None
        if failures:
            first = str(failures[0][1]).split('\n')[0]
            caught.append(name)
            print('caught   %-55s %5.1fs %3d chunks  %s' % (name, took, chunks, first[:80]), flush=True)
        else:
            missed.append(name)
            print('MISSED   %-55s %5.1fs %3d chunks' % (name, took, chunks), flush=True)
    return caught, missed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--lua', required=True)
    ap.add_argument('--budget', type=float, default=40, help='seconds of sequential runs')
    ap.add_argument('--mutant-chunks', type=int, default=20,
                    help='with --mutants: chunks of runs each planted bug must be caught within')
    ap.add_argument('--concurrent', type=float, default=8, help='seconds of the concurrent phase')
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--examples', type=int, default=30, help='hypothesis examples per chunk')
    ap.add_argument('--steps', type=int, default=60, help='calls per example')
    ap.add_argument('--mutants', action='store_true', help='check that the planted bugs are caught')
    ap.add_argument('--share', default='1/1', metavar='K/N',
                    help='with --mutants: the K-th of every N planted bugs (N processes share them)')
    ap.add_argument('--only', help='with --mutants: only the planted bugs whose name holds this; '
                    'without: run the sequential phase (shrinking) on that planted bug')
    ap.add_argument('--verbose', action='store_true')
    a = ap.parse_args()
    m = re.fullmatch(r'([1-9][0-9]*)/([1-9][0-9]*)', a.share)
    if not m or int(m.group(1)) > int(m.group(2)):
        ap.error('--share is K/N with 1 <= K <= N, not %r' % a.share)
    share = (int(m.group(1)), int(m.group(2)))
    seed = a.seed if a.seed is not None else random.randrange(1, 10 ** 6)
    server = RedisServer()
    try:
        Env.port = server.port
        Env.conn = Conn(server.port)
        Env.keys = topic_keys('model', count=15)  # the history's and the flows' keys too (versions 34, 35)
        Env.sub = subscribe(server.port, Env.keys)
        Env.lua = a.lua
        Env.mutation = None
        t = time.time()
        if a.mutants:
            caught, missed = run_mutants(a.mutant_chunks, seed, a.examples, a.steps, a.only, share)
            print('seed %d: %d of %d planted bugs caught in %.0fs'
                  % (seed, len(caught), len(caught) + len(missed), time.time() - t))
            if not caught and not missed:
                print('no planted bug selected')
                return 1
            return 1 if missed else 0
        if a.only:
            Env.mutation = next(edits(m) for m in MUTANTS if a.only in m[0])
        failures, chunks = run_sequential(a.budget, seed, a.examples, a.steps, shrink=True,
                                          verbose=a.verbose)
        if a.verbose:
            for (op, what), n in sorted(Env.outcomes.items()):
                print('%8d  %-8s %s' % (n, op, what))
        print('sequential: seeds %d..%d, %d calls in %.0fs%s'
              % (seed, seed + chunks - 1, Env.calls, time.time() - t,
                 '' if not failures else ', FAILED at seed %d' % failures[0][0]), flush=True)
        if failures:
            e = failures[0][1]
            if isinstance(e, AssertionError):
                print(e)  # what differs, and the (shrunk) calls that lead there
            else:
                print(''.join(traceback.format_exception(type(e), e, e.__traceback__)))
            return 1
        if a.concurrent > 0:
            t = time.time()
            r = run_concurrent(a.concurrent, a.threads, seed)
            print('concurrent: %d calls on %d connections in %.0fs: %d jobs put, %d acked, %d pulled, '
                  '%d reserved at most once (TTR 0), %d dead, %d stale or late calls refused'
                  % (r['calls'], a.threads, time.time() - t, r['puts'], r['acked'], r['pulled'],
                     r['once'], r['dead'], r['stale_refused']))
        return 0
    finally:
        server.stop()


if __name__ == '__main__':
    sys.exit(main())
