#!/usr/bin/python3
"""Regression tests of the Functions library: one per point of issue 11 and
issue 9 (a refused call changes nothing), the points the docs settle, the
three changes of library version 10 (TTR 0 delivered at most once, fail's
ATTEMPTS, own_ttr in get and list), issue 33's check of the calls against
their docs (version 21), and the upgrades from library versions 8
and 9 (their records and sets read and moved by this version; the old
libraries are in fixtures/).

Usage: regressions_test.py --lua lua/redisched.lua
       regressions_test.py --expect-fail --lua tests/model/fixtures/redisched_v8.lua \
                                               tests/model/fixtures/redisched_v9.lua
--expect-fail runs, against each older library, the cases of every change it
predates (FIXED_IN: the version that made each case pass), and passes only if
every one of them fails there (so each would have caught it).
"""
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import argparse
import os
import re
from itertools import takewhile
import unittest

import harness
from harness import Conn, RedisServer, check_invariants, decode_record, dump, read_raw, topic_keys
from model import Error, Status

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, 'fixtures')
OLD = {8: os.path.join(FIXTURES, 'redisched_v8.lua'), 9: os.path.join(FIXTURES, 'redisched_v9.lua')}
LUA = None
SERVER = None
EXPECT_FAIL = False
MS_MAX = 2 ** 43 - 1


class Case(unittest.TestCase):
    def setUp(self):
        self.c = Conn(SERVER.port)
        self.c.check('FLUSHALL')
        # With the write-order checker (this version only: it names the
        # library's own tables): no case's error comes after a write.
        harness.load(self.c, harness.library_source(LUA, write_order=not EXPECT_FAIL))
        self.K = topic_keys('t')
        # A library older than version 23 takes the first eight keys.
        self.old = EXPECT_FAIL

    def load(self, path):
        """Loads another library (this one with the checkers); calls take
        its keys."""
        self.old = path != LUA
        harness.load(self.c, harness.library_source(path, write_order=not self.old and not EXPECT_FAIL))

    def tearDown(self):
        self.c.close()

    def f(self, op, *args, keys=None):
        keys = keys or (self.K[:8] if self.old else self.K)
        return self.c.call('FCALL', 'redisched_' + op, len(keys), *keys, *args)

    def published(self, channel, calls):
        """What calls() published on channel (SSUBSCRIBE), in order."""
        sub = Conn(SERVER.port)
        sub.sock.sendall(harness.encode(['SSUBSCRIBE', channel]))
        sub.read()
        calls()
        sub.sock.sendall(harness.encode(['PING']))
        got = []
        while True:
            r = sub.read()
            if r == [b'pong', b'']:
                break
            got.append(r[2])
        sub.close()
        return got

    def ids(self, reply):
        return [j[0].decode() for j in reply[3:]]

    def listed(self, state, now, count=1000):
        r = self.f('list', state, 0, count, 'NOW', now)
        return [dict(zip(j[0::2], j[1::2]))[b'id'].decode() for j in r[1:]]

    def field(self, id_, name, now=None):
        r = self.f('get', id_, *(['NOW', now] if now is not None else []))
        if r is None:
            return None
        return dict(zip(r[0::2], r[1::2])).get(name.encode())

    def fields(self, id_, now=None):
        """get's field/value pairs as a list of (field, value), in order."""
        r = self.f('get', id_, *(['NOW', now] if now is not None else []))
        return None if r is None else list(zip(r[0::2], r[1::2]))

    @property
    def gone(self):
        return harness.gone_key(self.K)

    def keys_left(self):
        """The keys that hold more than a pin (version 16 leaves the ready
        set's and the reserved set's behind)."""
        pins = {self.K[2]: harness.READY_PIN, self.K[3]: harness.RESERVED_PIN}
        return [k for k in self.c.call('KEYS', '*')
                if k not in pins or self.c.call('ZRANGE', k, 0, -1) != [pins[k]]]

    def unchanged(self, call, keys=None):
        """Runs call(); asserts that no key of the database changed."""
        names = set(self.c.call('KEYS', '*')) | set(self.K)
        before = dump(self.c, sorted(names))
        result = call()
        after_names = set(self.c.call('KEYS', '*'))
        self.assertEqual(after_names - names, set(), 'the call created keys')
        self.assertEqual(dump(self.c, sorted(names)), before, 'the call changed a key')
        return result


# ---------------------------------------------------------------- issue 11

class Ordering(Case):
    def test_01_putmany_upsert_keeps_put_order(self):
        self.f('putmany', 2, 'p', 'body', 1, 'UPSERT', 'q', 'body', 0, 'NOW', 1000)
        self.assertEqual(self.ids(self.f('reserve', 2, 'NOW', 1000)), ['p', 'q'])

    def test_02_list_delayed_shows_the_order_they_leave_in(self):
        for id_ in ['c', 'a', 'b']:
            self.f('put', id_, 'x', 'AT', 5000, 'NOW', 1000)
        self.assertEqual(self.listed('delayed', 1000), ['c', 'a', 'b'])
        self.assertEqual(self.ids(self.f('reserve', 10, 'NOW', 5000)), ['c', 'a', 'b'])

    def test_03_lapsed_reservations_come_back_before_reserve_pops(self):
        self.f('put', 'h1', 'x', 'PRIORITY', 9, 'NOW', 1000)
        self.f('put', 'h2', 'x', 'PRIORITY', 9, 'NOW', 1000)
        self.assertEqual(len(self.f('reserve', 2, 'TTR', 100, 'NOW', 1000)), 5)
        self.f('put', 'low', 'x', 'NOW', 1100)
        self.assertEqual(self.ids(self.f('reserve', 2, 'NOW', 1100)), ['h1', 'h2'])
        self.assertEqual(self.field('low', 'state', 1100), b'ready')

    def test_04a_jobs_that_lapse_together_come_back_in_put_order(self):
        self.f('put', 'z', 'x', 'NOW', 1000)
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.assertEqual(self.ids(self.f('reserve', 2, 'TTR', 50, 'NOW', 1000)), ['z', 'a'])
        self.assertEqual(self.f('requeue', 'NOW', 1050)[:2], [2, 0])
        self.assertEqual(self.listed('ready', 1050), ['z', 'a'])
        self.assertEqual(self.ids(self.f('reserve', 2, 'NOW', 1050)), ['z', 'a'])

    def test_04b_a_released_job_put_earlier_goes_first(self):
        self.f('put', 'early', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        self.f('put', 'late', 'x', 'AT', 1010, 'NOW', 1001)
        self.assertEqual(self.f('release', 'early', token, 'NOW', 1010), 1)
        self.assertEqual(self.ids(self.f('reserve', 2, 'NOW', 1010)), ['early', 'late'])

    def test_05_put_order_is_exact_at_any_rate(self):
        names = []
        for batch in range(3):
            args = [1000]
            for i in range(1000):
                names.append('j%04d' % (batch * 1000 + i))
                args += [names[-1], 'x', 2, 'AT', 9000]
            self.assertEqual(len(self.f('putmany', *args, 'NOW', 1000)), 1000)
        got = []
        for _ in range(3):
            got += self.ids(self.f('reserve', 1000, 'NOW', 9000))
        self.assertEqual(got, names)

    def test_06_reads_report_due_jobs_as_ready_and_stats_writes_nothing(self):
        for batch in range(2):
            args = [1000 if batch == 0 else 501]
            for i in range(args[0]):
                args += ['d%d-%d' % (batch, i), 'x', 2, 'AT', 2000 + batch * 1000 + i]
            self.f('putmany', *args, 'NOW', 1000)
        self.f('put', 'later', 'x', 'AT', 50000, 'NOW', 1000)
        s = self.unchanged(lambda: self.f('stats', 'NOW', 10000))
        s = dict(zip(s[0::2], s[1::2]))
        self.assertEqual((s[b'ready'], s[b'delayed'], s[b'next_due']), (1501, 1, 50000))
        self.assertEqual(self.field('d1-500', 'state', 10000), b'ready')
        # reserve never hands out a job that fell due after one still waiting.
        self.f('put', 'now', 'x', 'NOW', 10000)
        got = []
        for _ in range(5):
            got += self.ids(self.f('reserve', 1000, 'NOW', 10000))
        self.assertEqual(got[-1], 'now')
        self.assertEqual(len(got), 1502)

    def test_06b_in_a_backlog_no_job_goes_ahead_of_an_older_due_one(self):
        args = [1000, 'first', 'x', 4, 'AT', 2000, 'PRIORITY', 5]
        for i in range(999):
            args += ['zero%d' % i, 'x', 2, 'AT', 2001]
        self.f('putmany', *args, 'NOW', 1000)
        self.f('put', 'older', 'x', 'AT', 2500, 'PRIORITY', 5, 'NOW', 1000)
        self.f('put', 'newer', 'x', 'PRIORITY', 5, 'NOW', 3000)
        got = []
        for _ in range(10):
            r = self.f('reserve', 2, 'NOW', 3000)
            got += [i for i in self.ids(r) if not i.startswith('zero')]
        self.assertEqual(got, ['first', 'older', 'newer'])

    def test_06c_in_a_backlog_a_wide_priority_is_held_by_its_exact_due_time(self):
        # (model_test, seed 541729: a job of priority -24 due with the
        # backlog's first held job, put after it, went ahead of it: its
        # score holds its due time rounded down by a millisecond.) Promotions
        # of 3, as the model test's small bounds: the fourth burst job stays
        # delayed, the backlog's first.
        harness.load(self.c, harness.library_source(LUA, {'PROMOTE_BATCH': 3}, write_order=True))
        for _ in range(3):
            self.f('put', 'a', '', 'NOW', 1019000)
        args = []
        for prio in (0, 1, 7, 0):
            args += ['*', 'burst', 4, 'AT', 1019001, 'PRIORITY', prio]
        self.f('putmany', 4, *args, 'NOW', 1019000)
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 1019000)), ['a'])
        self.f('put', 'b', '', 'PRIORITY', -24, 'NOW', 1019001)
        self.assertEqual(self.ids(self.f('reserve', 4, 'NOW', 1019001)),
                         ['1019000-4', '1019000-3', '1019000-2'])
        self.assertEqual(self.ids(self.f('reserve', 4, 'NOW', 1019001)), ['1019000-5', 'b'])


class Limits(Case):
    def test_07_an_explicit_ttr_equal_to_the_default_is_kept(self):
        self.f('put', 'x', 'b', 'TTR', 30000, 'NOW', 1000)
        self.assertEqual(self.f('reserve', 1, 'TTR', 5000, 'NOW', 1000)[3][8], 31000)

    def test_08_backoff_holds_its_whole_range(self):
        self.f('put', 'x', 'b', 'BACKOFF', 'fixed', 5000000000, 0, 'NOW', 1000)
        self.assertEqual(self.field('x', 'backoff_base'), 5000000000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(self.f('fail', 'x', token, 'e', 'NOW', 1000), Status('delayed'))
        self.assertEqual(self.field('x', 'due', 1000), 5000001000)
        self.f('put', 'y', 'b', 'BACKOFF', 'exponential', 1000, 5184000000, 'NOW', 1000)
        self.assertEqual(self.field('y', 'backoff_cap'), 5184000000)

    def test_09_times_are_refused_beyond_what_is_stored(self):
        r = self.f('restore', 'x', 'b', 'ready', 20000000000000, 0, 'NOW', 1000)
        self.assertEqual(r, Error('BADARG'))
        self.assertEqual(self.f('restore', 'x', 'b', 'ready', MS_MAX, 0, 'NOW', 1000), 1)
        self.assertEqual(self.field('x', 'created'), MS_MAX)
        self.assertEqual(self.f('put', 'y', 'b', 'AT', MS_MAX + 1, 'NOW', 1000), Error('BADARG'))

    def test_10_numbers_are_written_as_integers(self):
        self.assertEqual(self.f('put', 'big', 'b', 'NOW', 100000000000000), Error('BADARG'))
        self.c.check('HSET', self.K[6], 'seq', 99999999999999)
        self.f('put', 'x', 'b', 'NOW', MS_MAX)
        r = self.f('reserve', 1, 'NOW', MS_MAX)
        self.assertEqual(r[3][2], 100000000000000)
        self.assertEqual(self.c.call('HGET', self.K[7], 'x'),
                         b'100000000000000:%d:30000' % MS_MAX)
        self.assertEqual(self.field('x', 'token'), 100000000000000)
        self.assertEqual(self.f('touch', 'x', 100000000000000, 'NOW', MS_MAX), MS_MAX + 30000)
        self.assertEqual(self.f('delete', 'x'), 1)
        check_invariants(read_raw(self.c, self.K), self.K)
        # Left: the counter, the leases hash's pin (version 15 on) and the
        # reserved and ready sets' (version 16 on).
        self.assertEqual(set(self.c.call('KEYS', '*')) - {self.K[7], self.K[3], self.K[2]}, {self.K[6]})
        self.assertIn(self.c.call('HKEYS', self.K[7]), ([], [harness.LEASES_PIN]))
        self.assertIn(self.c.call('ZRANGE', self.K[3], 0, -1), ([], [harness.RESERVED_PIN]))
        self.assertIn(self.c.call('ZRANGE', self.K[2], 0, -1), ([], [harness.READY_PIN]))

    def test_11_the_counter_never_wraps_to_a_refused_token(self):
        self.c.check('HSET', self.K[6], 'seq', 8796093022206)
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.f('put', 'b', 'x', 'NOW', 1000)
        r = self.f('reserve', 2, 'NOW', 1000)
        tokens = [j[2] for j in r[3:]]
        self.assertEqual(tokens, [8796093022207, 8796093022208])
        self.assertEqual(self.f('ackmany', 2, 'a', tokens[0], 'b', tokens[1]), [1, 1])

    def test_11b_the_counter_refuses_rather_than_wrap(self):
        self.c.check('HSET', self.K[6], 'seq', 2 ** 53 - 2)
        self.assertEqual(self.f('put', 'a', 'x', 'NOW', 1000), 1)
        r = self.unchanged(lambda: self.f('put', 'b', 'x', 'NOW', 1000))
        self.assertEqual(r, Error('BADSTATE'))

    def test_12_every_argument_is_checked_on_every_path(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        r = self.unchanged(lambda: self.f('ack', 'a', token, 'NOW', 'abc'))
        self.assertEqual(r, Error('BADARG'))
        r = self.unchanged(lambda: self.f('ack', 'a', token + 1, 'NOW', 'abc'))
        self.assertEqual(r, Error('BADARG'))
        self.assertEqual(self.f('ack', 'a', token, 'NOW', 1000), 1)


# ---------------------------------------------------------------- issue 9

class RefusedCallsChangeNothing(Case):
    def test_put_of_an_existing_id(self):
        self.f('put', 'r1', 'x', 'NOW', 1000)
        self.f('put', 'due', 'x', 'AT', 1500, 'NOW', 1000)
        r = self.unchanged(lambda: self.f('put', 'r1', 'y', 'NOW', 2000))
        self.assertEqual(r, -1)

    def test_replace_of_a_missing_job_even_on_a_new_topic(self):
        r = self.unchanged(lambda: self.f('put', 'nosuch', 'x', 'REPLACE', 'NOW', 1000))
        self.assertEqual(r, 0)
        self.assertEqual(self.c.call('KEYS', '*'), [])

    def test_putmany_with_every_job_refused(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        r = self.unchanged(lambda: self.f('putmany', 3, 'a', 'y', 0, 'b', 'y', 1, 'REPLACE',
                                          'a', 'z', 0, 'NOW', 1000))
        self.assertEqual(r, [-1, 0, -1])

    def test_putmany_takes_no_number_for_a_refused_job(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.assertEqual(self.f('putmany', 3, 'a', 'y', 0, 'b', 'y', 0, 'c', 'y', 0, 'NOW', 1000),
                         [-1, 1, 1])
        self.assertEqual(self.c.call('HGET', self.K[6], 'seq'), b'3')

    def test_ack_of_a_missing_job_trims_nothing(self):
        self.f('put', 'k', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        self.f('ack', 'k', token, 'KEEP', 1000, 'NOW', 1000)
        r = self.unchanged(lambda: self.f('ack', 'nosuch', 1, 'KEEP', 1000, 'NOW', 5000))
        self.assertEqual(r, 0)
        self.assertEqual(self.field('k', 'state'), b'done')

    def test_stale_and_wrong_state_calls(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'TTR', 10, 'NOW', 1000)[3][2]
        self.f('requeue', 'NOW', 1010)
        for op, args in [('ack', []), ('release', []), ('touch', []), ('fail', ['e'])]:
            r = self.unchanged(lambda: self.f(op, 'a', token, *args, 'NOW', 1020))
            self.assertEqual(r, -2, op)
        self.f('reserve', 1, 'NOW', 1020)
        for op, args in [('ack', []), ('release', []), ('touch', []), ('fail', ['e'])]:
            r = self.unchanged(lambda: self.f(op, 'a', token, *args, 'NOW', 1020))
            self.assertEqual(r, -3, op)

    def test_keys_are_checked_by_name_before_anything_is_written(self):
        self.c.check('SET', 'notaset', 'x')
        self.f('put', 'a', 'x', 'NOW', 1000)
        wrong = [
            self.K[:7],
            self.K[:2] + [b'notaset'] + self.K[3:],
            [self.K[0], self.K[2], self.K[1]] + self.K[3:],
            self.K[:7] + [topic_keys('other')[7]],
            [k.replace(b'{t}', b't') for k in self.K],
            [k.replace(b'{t}', b'{}') for k in self.K],
        ]
        for keys in wrong:
            for op, args in [('put', ['b', 'x', 'NOW', 1000]), ('reserve', [1, 'NOW', 1000]),
                             ('stats', []), ('delete', ['a'])]:
                r = self.unchanged(lambda: self.f(op, *args, keys=keys))
                self.assertEqual(r, Error('BADKEYS'), (op, keys))

    def test_restore_with_too_few_arguments(self):
        r = self.unchanged(lambda: self.f('restore', 'a', 'b'))
        self.assertEqual(r, Error('BADARG'))


# ---------------------------------------------------------------- settled in the docs

class Settled(Case):
    def test_resume_takes_now(self):
        self.f('pause')
        self.assertEqual(self.f('resume', 'NOW', 1234), 1)

    def test_reserve_next_counts_this_calls_reservation(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.f('put', 'b', 'x', 'AT', 90000, 'NOW', 1000)
        r = self.f('reserve', 5, 'TTR', 500, 'NOW', 1000)
        self.assertEqual((self.ids(r), r[1]), (['a'], 1500))

    def test_ackmany_with_a_repeated_id(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(self.f('ackmany', 3, 'a', token + 5, 'a', token, 'a', token), [-3, 1, 0])
        self.f('put', 'b', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(self.f('ackmany', 2, 'b', token, 'b', token, 'KEEP', 100, 'NOW', 1000),
                         [1, -2])

    def test_ack_after_the_lapse_was_requeued(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'TTR', 10, 'NOW', 1000)[3][2]
        self.assertEqual(self.f('ack', 'a', token, 'NOW', 1011), 1)  # lapsed, not yet requeued
        self.f('put', 'b', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'TTR', 10, 'NOW', 1000)[3][2]
        self.f('requeue', 'NOW', 1011)
        self.assertEqual(self.f('ack', 'b', token, 'NOW', 1012), -2)

    def test_restore_of_a_ready_job_due_later_is_delayed(self):
        self.f('restore', 'a', 'x', 'ready', 500, 0, 'AT', 5000, 'NOW', 1000)
        self.assertEqual(self.field('a', 'state', 1000), b'delayed')
        self.assertEqual(self.field('a', 'state', 5000), b'ready')

    def test_an_at_in_the_past_means_now(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.f('put', 'b', 'x', 'AT', 10, 'NOW', 1001)
        self.assertEqual(self.field('b', 'due'), 1001)
        self.assertEqual(self.ids(self.f('reserve', 2, 'NOW', 1001)), ['a', 'b'])

    def test_wake_up_signal_of_a_put(self):
        def calls():
            self.f('put', 'a', 'x', 'NOW', 1000)
            self.f('put', 'b', 'x', 'AT', 1500, 'NOW', 1000)
            self.f('put', 'a', 'x', 'NOW', 1000)  # refused: no signal
        self.assertEqual(self.published(self.K[2], calls), [b'1000', b'1500'])


# ---------------------------------------------------------------- version 19

class Version19(Case):
    """Jobs put without KEEP are published on the finished channel when they
    go dead or are deleted, so that their waiters wake at once."""

    def test_v19_01_dead_or_deleted_jobs_are_published_kept_or_not(self):
        self.f('putmany', 4, 'failed', 'x', 0, 'lapsed', 'x', 2, 'ATTEMPTS', 1,
               'deleted', 'x', 0, 'acked', 'x', 0, 'NOW', 1000)
        r = self.f('reserve', 4, 'TTR', 100, 'NOW', 1000)
        token = {j[0]: j[2] for j in r[3:]}

        def calls():
            self.assertEqual(self.f('fail', 'failed', token[b'failed'], 'boom', 'DEAD',
                                    'NOW', 1001), Status('dead'))
            self.assertEqual(self.f('requeue', 'NOW', 2000)[1], 1)  # lapsed: dead
            self.f('put', 'deleted', 'x', 'NOW', 2000)              # refused: exists
            self.assertEqual(self.f('delete', 'deleted', 'nothing'), 1)
            self.assertEqual(self.f('delete', 'failed'), 1)         # dead: published already
        self.assertEqual(self.published(self.K[5], calls), [b'failed', b'lapsed', b'deleted'])


# ---------------------------------------------------------------- version 20

class Version20(Case):
    """The retry window: a put retried after its job ran answers -1."""

    def finish(self, how, id_, now):
        """Runs the job id_ to its end the way named, at time now."""
        if how == 'pull':
            self.assertEqual(self.ids(self.f('pull', 1, 'NOW', now)), [id_])
            return
        r = self.f('reserve', 1, 'NOW', now)
        self.assertEqual(self.ids(r), [id_])
        if how == 'ack':
            self.assertEqual(self.f('ack', id_, r[3][2], 'NOW', now), 1)
        elif how == 'ackmany':
            self.assertEqual(self.f('ackmany', 1, id_, r[3][2], 'NOW', now), [1])

    def test_v20_01_a_put_retried_after_its_job_finished_answers_exists(self):
        for how in ('ack', 'ackmany', 'pull', 'ttr0'):
            id_ = 'job-' + how
            self.assertEqual(self.f('put', id_, 'x', *(['TTR', 0] if how == 'ttr0' else []),
                                    'NOW', 1000), 1)
            self.finish('reserve' if how == 'ttr0' else how, id_, 1000)
            self.assertIsNone(self.f('get', id_, 'NOW', 1001))
            # The retry, inside the window: refused, and nothing changes.
            self.assertEqual(self.unchanged(lambda: self.f('put', id_, 'x', 'NOW', 1001)), -1, how)
            self.assertEqual(self.unchanged(lambda: self.f('putmany', 1, id_, 'x', 0, 'NOW', 60999)),
                             [-1], how)
            # An update is no retry of a create: UPSERT makes it again.
            self.assertEqual(self.f('put', id_, 'y', 'UPSERT', 'NOW', 1002), 1, how)
            self.finish('ack', id_, 1002)
            # Outside the window (60 s by default), a put creates it again.
            self.assertEqual(self.f('put', id_, 'x', 'NOW', 61002), 1, how)
            self.finish('ack', id_, 61002)

    def test_v20_02_the_window_is_the_topics_and_0_turns_it_off(self):
        self.assertEqual(self.f('retrywindow'), [60000, 0])
        self.assertEqual(self.f('retrywindow', 10), [10, 0])
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.finish('ack', 'a', 1000)
        self.assertEqual(self.f('put', 'a', 'x', 'NOW', 1009), -1)
        self.assertEqual(self.f('put', 'a', 'x', 'NOW', 1010), 1)  # its window ended
        self.finish('ack', 'a', 1010)
        # The next finishing call drops the ids whose window ended.
        self.assertEqual(self.f('retrywindow'), [10, 1])
        self.f('put', 'b', 'x', 'NOW', 2000)
        self.finish('ack', 'b', 2000)
        self.assertEqual(self.c.call('ZRANGE', self.gone, 0, -1), [b'b'])
        self.assertEqual(self.f('retrywindow', 0), [0, 0])
        self.assertEqual(self.f('put', 'b', 'x', 'NOW', 2001), 1)
        self.finish('ack', 'b', 2001)
        self.assertNotIn(self.gone, self.c.call('KEYS', '*'))
        for bad in (['-1'], ['86400001'], ['x'], ['1', '2']):
            r = self.unchanged(lambda: self.f('retrywindow', *bad))
            self.assertIsInstance(r, Error, bad)
            self.assertEqual(r.code, 'BADARG', bad)

    def test_v20_03_a_job_acked_with_keep_is_refused_for_its_keep_not_the_window(self):
        self.f('put', 'kept', 'x', 'KEEP', 5, 'NOW', 1000)
        r = self.f('reserve', 1, 'NOW', 1000)
        self.assertEqual(self.f('ack', 'kept', r[3][2], 'KEEP', 5, 'NOW', 1000), 1)
        self.assertEqual(self.f('put', 'kept', 'x', 'NOW', 1001), -1)  # its record
        self.assertNotIn(self.gone, self.c.call('KEYS', '*'))


# ---------------------------------------------------------------- version 21

class Version21(Case):
    """Issue 33's check of the calls against their docs: pull's next under a
    full cap (01, a bug of the library, fixed in version 21), and the points
    where the docs said otherwise than the library, settled in the docs
    (02-05: they pass on version 20 too)."""

    def test_v21_01_a_capped_pull_looks_again_when_the_first_reservation_still_to_lapse_does(self):
        self.f('put', 'a', 'x', 'TTR', 1, 'NOW', 1000)
        self.f('put', 'c', 'x', 'NOW', 1000)
        self.f('limit', 'CONCURRENCY', 2, 'NOW', 1000)
        r = self.f('reserve', 2, 'NOW', 1000)
        self.assertEqual(sorted(self.ids(r)), ['a', 'c'])
        deadline = {j[0]: j[8] for j in r[3:]}
        self.f('put', 'd', 'x', 'NOW', 1005)
        # a lapsed at 1001 (a pull does not bring it back); c holds the
        # other slot until its deadline: the time to look again.
        r = self.f('pull', 1, 'NOW', 1010)
        self.assertEqual(r[:3], [1010, deadline[b'c'], 0])
        self.assertEqual(self.ids(r), [])

    def test_v21_02_limit_answers_rate_window_concurrency_and_aging(self):
        self.assertEqual(self.f('limit', 'RATE', 100, 1000, 'CONCURRENCY', 20), [100, 1000, 20, 0])
        self.assertEqual(self.f('limit', 'AGING', 50), [100, 1000, 20, 50])
        self.assertEqual(self.f('limit', 'RATE', 0, 1, 'CONCURRENCY', 0, 'AGING', 0), [0, 0, 0, 0])

    def test_v21_03_aged_jobs_exactly_p_minus_q_levels_apart_go_by_priority(self):
        self.f('limit', 'AGING', 100, 'NOW', 1000)
        self.f('put', 'low', 'x', 'PRIORITY', 0, 'AT', 1000, 'NOW', 1000)
        self.f('put', 'high', 'x', 'PRIORITY', 5, 'AT', 1500, 'NOW', 1000)
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 2000)), ['high'])
        self.f('put', 'high2', 'x', 'PRIORITY', 5, 'AT', 1501, 'NOW', 2000)
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 2000)), ['low'],
                         'due more than 5 levels of 100 ms later: the older goes first')

    def test_v21_04_a_ttr_0_job_put_with_keep_comes_with_keep_0_and_is_not_kept(self):
        self.f('put', 'once', 'x', 'TTR', 0, 'KEEP', 1000, 'NOW', 1000)
        r = self.f('reserve', 1, 'NOW', 1000)
        self.assertEqual(self.ids(r), ['once'])
        self.assertEqual(r[3][2], 0)   # token
        self.assertEqual(r[3][8], 0)   # deadline
        self.assertEqual(r[3][9], 0)   # keep
        self.assertIsNone(self.f('get', 'once', 'NOW', 1001))

    def test_v21_05_under_a_cap_lapsed_reservations_come_back_though_enough_are_ready(self):
        self.f('limit', 'CONCURRENCY', 1, 'NOW', 1000)
        self.f('put', 'a', 'x', 'TTR', 1, 'NOW', 1000)
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 1000)), ['a'])
        self.f('put', 'b', 'x', 'NOW', 1000)
        self.f('put', 'c', 'x', 'NOW', 1000)
        # Two ready, two asked, but a's lapsed reservation holds the one
        # slot: a comes back (ready again, due now), and the slot goes to b.
        r = self.f('reserve', 2, 'NOW', 2000)
        self.assertEqual(self.ids(r), ['b'])
        self.assertEqual(self.field('a', 'state', 2000), b'ready')
        stats = dict(zip(*[iter(self.f('stats', 'NOW', 2000))] * 2))
        self.assertEqual(stats[b'lapsed_total'], 1)
        self.assertEqual(stats[b'reserved'], 1)

    def test_v21_06_a_spread_topic_refuses_reserve_and_pull_before_any_write(self):
        self.assertEqual(self.f('shard', '0', '1'), 2)
        for op in ('reserve', 'pull'):
            r = self.unchanged(lambda: self.f(op, 1, 'NOW', 1000))
            self.assertIsInstance(r, Error, op)
            self.assertEqual(r.code, 'SHARDED', op)   # not WRITEORDER


class Version27(Case):
    """Issue 33, step 2: put, putmany and every return to waiting place jobs
    by one path (place, in the library), each job of a call in turn."""

    def listed_ids(self, key):
        return [e[15:].decode() for e in self.c.call('LRANGE', key, 0, -1)]

    def set_ids(self, key):
        return [m[9:].decode() for m in self.c.call('ZRANGE', key, 0, -1)
                if m != harness.READY_PIN]

    def test_v27_01_a_batch_against_its_own_order_lists_what_follows_the_end(self):
        K, f = self.K, self.f
        self.assertEqual(f('putmany', 3, 'a', 'x', 0, 'b', 'x', 2, 'PRIORITY', 5,
                           'c', 'x', 0, 'NOW', 1000), [1, 1, 1])
        self.assertEqual(self.listed_ids(K[8]), ['a', 'c'])
        self.assertEqual(self.set_ids(K[2]), ['b'])
        self.assertEqual(f('putmany', 3, 'd', 'x', 2, 'DELAY', 5000, 'e', 'x', 2, 'DELAY', 1000,
                           'g', 'x', 2, 'DELAY', 6000, 'NOW', 1000), [1, 1, 1])
        self.assertEqual(self.listed_ids(K[9]), ['d', 'g'])
        self.assertEqual(self.set_ids(K[1]), ['e'])
        self.assertEqual(self.field('e', 'state', 1000), b'delayed')
        self.assertEqual(self.ids(f('reserve', 10, 'NOW', 10000)), ['b', 'a', 'c', 'e', 'd', 'g'])

    def test_v27_03_a_call_broken_off_in_its_write_leaves_nothing_to_the_next(self):
        # The placement's arrays outlive a call: an error reply to one of
        # its writes (here WRONGTYPE on the delayed set, after the HSET)
        # must not hand its entries to the next call, another topic's.
        c, f = self.c, self.f
        c.call('SET', self.K[1], 'not a sorted set')
        self.assertIsInstance(f('put', 'x', 'b', 'DELAY', 1000, 'UPSERT', 'NOW', 1000), Error)
        other = topic_keys('u')
        self.assertEqual(f('put', 'y', 'b', 'NOW', 1000, keys=other), 1)
        self.assertEqual(c.call('EXISTS', other[1]), 0, "the other topic's delayed set")
        self.assertEqual(self.ids(f('reserve', 10, 'NOW', 5000, keys=other)), ['y'])

    def test_v27_02_a_requeue_of_5000_lapsed_reservations_writes_in_parts(self):
        # (Lua unpacks at most ~8000 values: one HSET of 5000 records after
        # the first write would be WRITEORDER here.)
        f = self.f
        for start in range(0, 5000, 1000):
            args = []
            for i in range(start, start + 1000):
                args += ['j%04d' % i, 'b', 0]
            f('putmany', 1000, *args, 'NOW', 1000)
            self.assertEqual(len(self.ids(f('reserve', 1000, 'TTR', 1, 'NOW', 1000))), 1000)
        self.assertEqual(f('requeue', 'LIMIT', 5000, 'NOW', 2000), [5000, 0, -1])
        self.assertEqual(self.field('j4999', 'state', 2000), b'ready')
        self.assertEqual(f('stats', 'NOW', 2000)[1::2][:3], [0, 5000, 0])


class Version22(Case):
    """Issue 33: a record this version does not read (a newer format: bit 64
    of its first flags byte, reserved by the stored-format table) refuses
    reserve, pull and list before their first write, so the jobs stay where
    a reserve finds them; and every other call either reads past it or
    refuses with nothing changed."""

    def plant(self, id_, on=True):
        rec = self.c.call('HGET', self.K[0], id_)
        flags = rec[0] | 64 if on else rec[0] & ~64
        self.c.check('HSET', self.K[0], id_, bytes([flags]) + rec[1:])

    def refused(self, op, *args):
        r = self.unchanged(lambda: self.f(op, *args))
        self.assertIsInstance(r, Error, op)
        self.assertEqual(r.code, 'BADFORMAT', '%s: %s' % (op, getattr(r, 'message', r)))
        return r

    def put3(self, how, now=1000):
        """a, b, c put so that they leave in that order: in the ready list
        (plain puts), in the ready set (each put of a lower priority than
        the one before sorts after the list's end... so: rising priority
        puts go to the set), or delayed in the delayed list or set."""
        for i, id_ in enumerate('abc'):
            if how == 'list':
                self.f('put', id_, 'x', 'NOW', now)
            elif how == 'set':
                self.f('put', id_, 'x', 'PRIORITY', 10 - i, 'AT', now - 10 + i, 'NOW', now - 10 + i)
            elif how == 'delayed list':
                self.f('put', id_, 'x', 'DELAY', 100 + i, 'NOW', now)
            elif how == 'delayed set':
                self.f('put', id_, 'x', 'DELAY', 100 - i, 'NOW', now)  # each due before the list's end
        return now + 200 if how.startswith('delayed') else now

    def where(self):
        return {k.decode() if isinstance(k, bytes) else k: self.c.call('TYPE', k)
                for k in self.c.call('KEYS', '*')}

    def test_v22_01_reserve_and_pull_refuse_with_nothing_moved_and_hand_the_jobs_out_once_readable(self):
        for op in ('reserve', 'pull'):
            for how in ('list', 'set', 'delayed list', 'delayed set'):
                with self.subTest(op=op, how=how):
                    self.c.check('FLUSHALL')
                    harness.load(self.c, harness.library_source(LUA, write_order=True))
                    at = self.put3(how)
                    self.plant('b')
                    self.refused(op, 3, 'NOW', at)
                    self.refused('list', 'ready', 0, 10, 'NOW', at)
                    self.plant('b', on=False)
                    r = self.f(op, 3, 'NOW', at)
                    self.assertEqual(self.ids(r), ['c', 'b', 'a'] if how == 'delayed set' else ['a', 'b', 'c'])

    def test_v22_02_a_record_reserve_would_not_reach_does_not_refuse_it(self):
        self.put3('list')
        self.plant('c')
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 1000)), ['a'])
        self.assertEqual(self.ids(self.f('pull', 1, 'NOW', 1000)), ['b'])
        self.refused('reserve', 1, 'NOW', 1000)

    def test_v22_03_a_lapsed_reservation_it_would_requeue_refuses_reserve(self):
        self.f('put', 'a', 'x', 'TTR', 1, 'NOW', 1000)
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 1000)), ['a'])
        self.plant('a')
        self.f('put', 'b', 'x', 'NOW', 1000)
        self.refused('reserve', 2, 'NOW', 2000)
        # pull requeues nothing: it hands out b.
        self.assertEqual(self.ids(self.f('pull', 2, 'NOW', 2000)), ['b'])
        self.plant('a', on=False)
        r = self.f('reserve', 2, 'NOW', 2000)
        self.assertEqual(self.ids(r), ['a'])
        self.assertEqual(r[3][3], 2)  # its second attempt

    def test_v22_04_under_limits_and_aging_too(self):
        for limit in (['CONCURRENCY', 10], ['RATE', 10, 1000], ['AGING', 100]):
            with self.subTest(limit=limit):
                self.c.check('FLUSHALL')
                harness.load(self.c, harness.library_source(LUA, write_order=True))
                self.f('limit', *limit, 'NOW', 900)
                at = self.put3('set')
                self.f('put', 'd', 'x', 'DELAY', 50, 'PRIORITY', 1, 'NOW', at)
                self.plant('d')
                for op in ('reserve', 'pull'):
                    self.refused(op, 4, 'NOW', at + 60)
                self.plant('d', on=False)
                self.assertEqual(sorted(self.ids(self.f('reserve', 4, 'NOW', at + 60))), ['a', 'b', 'c', 'd'])

    def test_v22_05_list_refuses_every_state_with_nothing_promoted(self):
        self.f('put', 'r', 'x', 'NOW', 1000)
        self.assertEqual(self.ids(self.f('reserve', 1, 'NOW', 1000)), ['r'])
        self.f('put', 'd', 'x', 'NOW', 1000)
        self.f('fail', 'd', self.f('reserve', 1, 'NOW', 1000)[3][2], 'boom', 'DEAD', 'NOW', 1000)
        self.assertEqual(self.field('d', 'state'), b'dead')
        self.f('put', 'k', 'x', 'KEEP', 100000, 'NOW', 1000)
        self.assertEqual(self.f('ack', 'k', self.f('reserve', 1, 'NOW', 1000)[3][2], 'KEEP', 100000,
                                'NOW', 1000), 1)
        self.f('put', 'v', 'x', 'NOW', 1000)
        self.f('put', 'due', 'x', 'DELAY', 10, 'NOW', 1000)
        self.f('put', 'later', 'x', 'DELAY', 100000, 'NOW', 1000)
        for id_, state in (('v', 'ready'), ('due', 'ready'), ('later', 'delayed'), ('r', 'reserved'),
                           ('d', 'dead'), ('k', 'done')):
            with self.subTest(state=state, id=id_):
                self.plant(id_)
                self.refused('list', state, 0, 10, 'NOW', 2000)
                self.plant(id_, on=False)
        self.assertEqual(self.listed('ready', 2000), ['v', 'due'])

    def test_v22_07_a_generated_id_that_is_taken_at_the_counters_end_refuses_before_any_write(self):
        # The last number's generated id is held (someone chose it): the
        # next would pass the counter's end. Library 21 took the first
        # number, then raised (WRITEORDER under the checker).
        last = 2 ** 53 - 1
        for op, args in (('put', ['*', 'x']), ('putmany', [2, 'a', 'x', 0, '*', 'y', 0])):
            with self.subTest(op=op):
                self.c.check('FLUSHALL')
                harness.load(self.c, harness.library_source(LUA, write_order=True))
                self.f('put', '1000-%d' % last, 'mine', 'NOW', 1000)
                self.c.check('HSET', self.K[6], 'seq', last - (2 if op == 'putmany' else 1))
                r = self.unchanged(lambda: self.f(op, *args, 'NOW', 1000))
                self.assertEqual(r, Error('BADSTATE'), getattr(r, 'message', r))
                # One number short of the end, the id after it is free.
                self.c.check('HSET', self.K[6], 'seq', last - (3 if op == 'putmany' else 2))
                self.c.check('DEL', '1000-%d' % last)
                r = self.f(op, *args, 'NOW', 1000)
                self.assertNotIsInstance(r, Error, getattr(r, 'message', r))

    def test_v22_06_every_call_reads_past_such_a_record_or_refuses_with_nothing_changed(self):
        # Each state, each call that names the job or may meet it: no call
        # raises after its first write (the write-order checker answers
        # WRITEORDER then), and a refusal is BADFORMAT with every key as it was.
        def setup(state):
            self.c.check('FLUSHALL')
            harness.load(self.c, harness.library_source(LUA, write_order=True))
            self.f('put', 'j', 'x', 'TTR', 1000, 'KEEP', 5000,
                   *(['DELAY', 10] if state == 'delayed' else []), 'NOW', 1000)
            self.f('put', 'o', 'y', 'NOW', 1000)
            token = 0
            if state in ('reserved', 'dead', 'done', 'lapsed'):
                r = self.f('reserve', 1, 'NOW', 1000)
                token = r[3][2]
                if state == 'dead':
                    self.f('fail', 'j', token, 'e', 'DEAD', 'NOW', 1000)
                if state == 'done':
                    self.f('ack', 'j', token, 'KEEP', 5000, 'NOW', 1000)
            self.plant('j')
            return token
        now = [1000, 1005, 3000]
        for state in ('ready', 'delayed', 'reserved', 'lapsed', 'dead', 'done'):
            for call in (['get', 'j'], ['stats'], ['list', 'ready', 0, 10], ['list', state if state != 'lapsed' else 'reserved', 0, 10],
                         ['reserve', 2], ['pull', 2], ['ack', 'j', '{t}'], ['ack', 'j', '{t}', 'KEEP', 10],
                         ['ackmany', 1, 'j', '{t}'], ['release', 'j', '{t}'], ['fail', 'j', '{t}', 'e'],
                         ['touch', 'j', '{t}'], ['delete', 'j'], ['requeue'], ['kick', 'j'], ['kickall'],
                         ['put', 'j', 'z', 'REPLACE'], ['put', 'j', 'z', 'DEBOUNCE'], ['put', 'j', 'z'],
                         ['putmany', 1, 'j', 'z', 1, 'UPSERT'],
                         ['restore', 'j', 'z', 'ready', 1000, 0, 'REPLACE'],
                         ['pause'], ['resume'], ['limit', 'CONCURRENCY', 5]):
                for t in now:
                    with self.subTest(state=state, call=call, now=t):
                        token = setup(state)
                        args = [token if a == '{t}' else a for a in call[1:]]
                        if call[0] not in ('kick',):
                            args += ['NOW', t]
                        names = set(self.c.call('KEYS', '*')) | set(self.K)
                        before = dump(self.c, sorted(names))
                        r = self.f(call[0], *args)
                        if isinstance(r, Error):
                            why = getattr(r, 'message', r)
                            self.assertNotEqual(r.code, 'WRITEORDER', why)
                            self.assertEqual(dump(self.c, sorted(names)), before, why)



class Version30(Case):
    """Issue 35, point 2: the attempt history, and reserve's WORKER."""

    def history(self, id_, now):
        h = dict(zip(*[iter(self.f('get', id_, 'NOW', now))] * 2)).get(b'history')
        return None if h is None else [dict(zip(e[0::2], e[1::2])) for e in h]

    def test_v30_01_failed_and_lapsed_attempts_keep_when_who_and_why_the_last_ten(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'ATTEMPTS', 14, 'BACKOFF', 'fixed', 0, 0, 'NOW', 1000), 1)
        self.assertIsNone(self.history('a', 1000))
        # A reserve that names its worker: get shows it on the reservation.
        r = f('reserve', 1, 'TTR', 50, 'WORKER', 'host:7:ab', 'NOW', 1000)
        fields = dict(zip(*[iter(f('get', 'a', 'NOW', 1001))] * 2))
        self.assertEqual(fields[b'worker'], b'host:7:ab')
        listed = f('list', 'reserved', 0, 10, 'NOW', 1001)[1]
        self.assertEqual(dict(zip(listed[0::2], listed[1::2]))[b'worker'], b'host:7:ab')
        self.assertEqual(f('fail', 'a', r[3][2], 'first', 'NOW', 1010), Status('ready'))
        self.assertEqual(self.history('a', 1010), [
            {b'attempt': 1, b'outcome': b'failed', b'started': 1000, b'ended': 1010,
             b'worker': b'host:7:ab', b'error': b'first'}])
        # A lapse, without a worker named: requeue keeps it too.
        f('reserve', 1, 'TTR', 50, 'NOW', 1020)
        self.assertEqual(f('requeue', 'NOW', 1070), [1, 0, -1])
        self.assertEqual(self.history('a', 1070)[1], {
            b'attempt': 2, b'outcome': b'lapsed', b'started': 1020, b'ended': 1070,
            b'error': b'time-to-run lapsed'})
        # Twelve more: the last ten stay; an error over 1024 bytes is cut in
        # its entry and kept whole as the job's error.
        now = 1100
        for n in range(3, 15):
            r = f('reserve', 1, 'TTR', 50, 'WORKER', 'w%d' % n, 'NOW', now)
            err = ('e%d ' % n) * 400 if n == 14 else 'e%d' % n
            self.assertEqual(f('fail', 'a', r[3][2], err, 'NOW', now + 5),
                             Status('dead' if n == 14 else 'ready'))
            now += 10
        h = self.history('a', now)
        self.assertEqual([e[b'attempt'] for e in h], list(range(5, 15)))
        self.assertEqual([e[b'worker'] for e in h], [b'w%d' % n for n in range(5, 15)])
        self.assertEqual(len(h[-1][b'error']), 1024)
        self.assertEqual(h[-1][b'error_cut'], 1)
        self.assertNotIn(b'error_cut', h[-2])
        self.assertEqual(self.field('a', 'error'), (b'e14 ' * 400))
        # kick keeps the history (attempts start again); an update drops it.
        self.assertEqual(f('kick', 'a'), 1)
        self.assertEqual(len(self.history('a', now)), 10)
        r = f('reserve', 1, 'WORKER', 'k', 'NOW', now)
        self.assertEqual(r[3][3], 1)
        self.assertEqual(f('fail', 'a', r[3][2], 'again', 'NOW', now + 1), Status('ready'))
        self.assertEqual([(e[b'attempt'], e[b'error']) for e in self.history('a', now + 1)[-2:]],
                         [(14, b'e14 ' * 256), (1, b'again')])
        self.assertEqual(f('put', 'a', 'y', 'REPLACE', 'NOW', now + 2), 2)
        self.assertIsNone(self.history('a', now + 2))

    def test_v30_03_restore_takes_the_history_back_and_checks_it(self):
        import struct
        f = self.f

        def entry(attempt, code, started, ended, worker=b'', err=b'e'):
            return (struct.pack('>HBQ', attempt, code, 0)[:3] + started.to_bytes(6, 'big')
                    + ended.to_bytes(6, 'big') + bytes([len(worker)]) + worker
                    + len(err).to_bytes(2, 'big') + err)
        good = bytes([2]) + entry(1, 1, 900, 950, b'w:1', b'boom') + entry(2, 2 + 128, 960, 990, b'', b'x' * 1024)
        self.assertEqual(f('restore', 'a', 'x', 'dead', 800, 2, 'ERROR', 'late', 'HISTORY', good,
                           'NOW', 1000), 1)
        self.assertEqual(self.history('a', 1000), [
            {b'attempt': 1, b'outcome': b'failed', b'started': 900, b'ended': 950, b'worker': b'w:1',
             b'error': b'boom'},
            {b'attempt': 2, b'outcome': b'lapsed', b'started': 960, b'ended': 990, b'error': b'x' * 1024,
             b'error_cut': 1}])
        bad = [b'', bytes([0]), bytes([11]) + entry(1, 1, 1, 2) * 11, good[:-1], good + b'!',
               bytes([1]) + entry(0, 1, 1, 2), bytes([1]) + entry(1, 3, 1, 2),
               bytes([1]) + entry(1, 1, 5, 2), bytes([1]) + entry(1, 1, 1, 2, b'w\n'),
               bytes([1]) + entry(1, 1, 1, 2, b'w' * 129), bytes([1]) + entry(1, 1, 1, 2, b'', b'e' * 1025)]
        for blob in bad:
            self.assertEqual(f('restore', 'b', 'x', 'ready', 800, 0, 'HISTORY', blob, 'NOW', 1000),
                             Error('BADARG'), blob[:40])
        self.assertIsNone(self.field('b', 'state'))

    def test_v30_02_a_bad_worker_is_refused_before_anything_moves(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'NOW', 1000), 1)
        for bad in ('', 'w\x01', 'w' * 129):
            self.assertEqual(f('reserve', 1, 'WORKER', bad, 'NOW', 1000), Error('BADARG'))
        self.assertEqual(self.field('a', 'state', 1000), b'ready')
        r = f('reserve', 1, 'WORKER', 'w' * 128, 'NOW', 1000)
        self.assertEqual(self.field('a', 'worker', 1000), b'w' * 128)
        self.assertEqual(r[3][0], b'a')



class Version31(Case):
    """Issue 35, point 1: a reserved job's progress and log."""

    def report(self, id_, now):
        fields = dict(zip(*[iter(self.f('get', id_, 'NOW', now))] * 2))
        log = fields.get(b'log')
        return (fields.get(b'progress'), fields.get(b'progress_attempt'), fields.get(b'progress_at'),
                None if log is None else [dict(zip(e[0::2], e[1::2])) for e in log],
                fields.get(b'log_total'))

    def test_v31_01_progress_and_lines_stay_with_the_job_through_its_attempts(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'BACKOFF', 'fixed', 0, 0, 'NOW', 1000), 1)
        self.assertEqual(self.report('a', 1000), (None, None, None, None, None))
        r = f('reserve', 1, 'TTR', 50, 'NOW', 1000)
        token = r[3][2]
        got = self.published(self.K[7], lambda: self.assertEqual(
            f('progress', 'a', token, 2, 'one', 'two', 'PROGRESS', '{"percent": 40}', 'NOW', 1005), 1))
        self.assertEqual(got, [b'a'])
        self.assertEqual(f('progress', 'a', token, 0, 'PROGRESS', '55', 'NOW', 1006), 1)
        self.assertEqual(self.report('a', 1006), (b'55', 1, 1006, [
            {b'at': 1005, b'attempt': 1, b'line': b'one'}, {b'at': 1005, b'attempt': 1, b'line': b'two'}], 2))
        # A stale token, a job not reserved, no job: refused, nothing moves.
        for args, code in ((['a', token + 1], -3), (['b', 1], 0)):
            self.assertEqual(self.unchanged(lambda: f('progress', *args, 1, 'z', 'NOW', 1007)), code)
        # A failure keeps both; the next attempt's lines say their attempt.
        self.assertEqual(f('fail', 'a', token, 'boom', 'NOW', 1010), Status('ready'))
        self.assertEqual(self.report('a', 1010)[0], b'55')
        self.assertEqual(self.unchanged(lambda: f('progress', 'a', token, 1, 'z', 'NOW', 1011)), -2)
        r = f('reserve', 1, 'TTR', 50, 'NOW', 1020)
        self.assertEqual(f('progress', 'a', r[3][2], 1, 'three', 'NOW', 1021), 1)
        # A lapse keeps them too.
        self.assertEqual(f('requeue', 'NOW', 1100), [1, 0, -1])
        progress, attempt, at, log, total = self.report('a', 1100)
        self.assertEqual((progress, attempt, at, total), (b'55', 1, 1006, 3))
        self.assertEqual([(e[b'line'], e[b'attempt']) for e in log], [(b'one', 1), (b'two', 1), (b'three', 2)])
        # An ack with KEEP keeps them on the done job; an update drops them.
        r = f('reserve', 1, 'NOW', 1100)
        self.assertEqual(f('progress', 'a', r[3][2], 0, 'PROGRESS', '100', 'NOW', 1101), 1)
        self.assertEqual(f('ack', 'a', r[3][2], 'KEEP', 1000, 'NOW', 1102), 1)
        self.assertEqual(self.report('a', 1102)[:2], (b'100', 3))
        self.assertEqual(f('put', 'a', 'y', 'REPLACE', 'NOW', 1103), 2)
        self.assertEqual(self.report('a', 1103), (None, None, None, None, None))

    def test_v31_02_the_log_keeps_its_latest_lines_within_its_bounds(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'NOW', 1000), 1)
        token = f('reserve', 1, 'NOW', 1000)[3][2]
        for n in range(3):
            lines = ['line %d-%d' % (n, i) for i in range(50)]
            self.assertEqual(f('progress', 'a', token, 50, *lines, 'NOW', 1001 + n), 1)
        log, total = self.report('a', 1010)[3:]
        self.assertEqual(total, 150)
        self.assertEqual([e[b'line'] for e in log], [b'line %d-%d' % (n, i) for n in (1, 2) for i in range(50)])
        # A long line is cut at 1024 bytes, less the character the cut splits.
        long_line = 'a' * 1023 + '\u00e9' + 'b' * 10
        self.assertEqual(f('progress', 'a', token, 1, long_line, 'NOW', 1020), 1)
        last = self.report('a', 1020)[3][-1]
        self.assertEqual((last[b'line'], last[b'cut']), (b'a' * 1023, 1))
        # 32768 bytes of lines at most: forty lines of 1024 keep the last 32.
        self.assertEqual(f('progress', 'a', token, 40, *(['%04d' % i + 'z' * 1020 for i in range(40)]),
                           'NOW', 1030), 1)
        log, total = self.report('a', 1030)[3:]
        self.assertEqual((len(log), total), (32, 191))
        self.assertEqual(log[0][b'line'][:4], b'0008')
        # Refused before anything moves.
        bad = [[1, b'\xff'], [1, b'\xed\xa0\x80'], [0], [0, 'PROGRESS', 'nope'],
               [0, 'PROGRESS', ''], [0, 'PROGRESS', '1' * 1025], [0, 'PROGRESS', b'"\xff"'],
               [101] + ['l'] * 101, [2, 'only one'], [-1, 'x'], [1, 'x', 'BOGUS']]
        for args in bad:
            self.assertEqual(self.unchanged(lambda: f('progress', 'a', token, *args, 'NOW', 1040)),
                             Error('BADARG'), args)

    def test_v31_03_restore_takes_the_progress_and_log_back_and_checks_them(self):
        import struct
        f = self.f

        def line(at, attempt, text, cut=0):
            return at.to_bytes(6, 'big') + struct.pack('>HBH', attempt, cut, len(text)) + text
        good = struct.pack('>IH', 7, 2) + line(900, 1, b'one') + line(950, 2, b'x' * 1024, 1)
        self.assertEqual(f('restore', 'a', 'x', 'dead', 800, 2, 'PROGRESS', 2, 940, '[1,2]',
                           'LOG', good, 'NOW', 1000), 1)
        self.assertEqual(self.report('a', 1000), (b'[1,2]', 2, 940, [
            {b'at': 900, b'attempt': 1, b'line': b'one'},
            {b'at': 950, b'attempt': 2, b'line': b'x' * 1024, b'cut': 1}], 7))
        bad_logs = [b'', struct.pack('>IH', 1, 0), struct.pack('>IH', 1, 2) + line(1, 1, b'a') * 2,
                    good[:-1], good + b'!', struct.pack('>IH', 1, 1) + line(1, 0, b'a'),
                    struct.pack('>IH', 1, 1) + line(1, 1, b'a', 2),
                    struct.pack('>IH', 1, 1) + line(1, 1, b'a' * 1025),
                    struct.pack('>IH', 1, 1) + line(1, 1, b'\xff'),
                    struct.pack('>IH', 40, 40) + line(1, 1, b'a' * 1024) * 40]
        for blob in bad_logs:
            self.assertEqual(f('restore', 'b', 'x', 'ready', 800, 0, 'LOG', blob, 'NOW', 1000),
                             Error('BADARG'), blob[:40])
        for args in ([0, 1, '1'], [1, 1, 'nope'], [1, -1, '1']):
            self.assertEqual(f('restore', 'b', 'x', 'ready', 800, 0, 'PROGRESS', *args, 'NOW', 1000),
                             Error('BADARG'), args)
        self.assertIsNone(self.field('b', 'state'))


class Version32(Case):
    """Issue 35, point 5: promote delayed jobs in place, purge old dead ones."""

    def test_v32_01_promote_makes_delayed_jobs_due_now_and_keeps_their_attempts(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'BACKOFF', 'fixed', 60000, 60000, 'NOW', 1000), 1)
        token = f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(f('progress', 'a', token, 1, 'tried', 'NOW', 1001), 1)
        self.assertEqual(f('fail', 'a', token, 'boom', 'NOW', 1002), Status('delayed'))
        self.assertEqual(f('put', 'b', 'y', 'DELAY', 5000, 'NOW', 1003), 1)  # (the delayed list)
        self.assertEqual(f('put', 'c', 'z', 'NOW', 1003), 1)
        # Not delayed (c is ready), or absent: left alone, nothing changes.
        self.assertEqual(self.unchanged(lambda: f('promote', 'c', 'nope')), 0)
        self.assertEqual(f('promote', 'a', 'a', 'c'), 1)
        self.assertEqual(self.field('a', 'state', 1004), b'ready')
        self.assertEqual(self.field('a', 'attempts', 1004), 1)
        self.assertEqual(len(self.field('a', 'history', 1004)), 1)
        self.assertEqual(len(self.field('a', 'log', 1004)), 1)
        self.assertLessEqual(self.field('a', 'due', 1004), int(self.c.call('TIME')[0]) * 1000 + 1000)
        # promoteall: the first n in due order, then the rest.
        for i in range(5):
            self.assertEqual(f('put', 'd%d' % i, 'w', 'DELAY', 10000 + i, 'NOW', 1005), 1)
        self.assertEqual(f('promoteall', 'LIMIT', 3, 'NOW', 1006), [3, 3])
        self.assertEqual([self.field(i, 'state', 1006) for i in ('b', 'd0', 'd1', 'd2', 'd3')],
                         [b'ready', b'ready', b'ready', b'delayed', b'delayed'])
        self.assertEqual(f('promoteall', 'NOW', 1007), [3, 0])
        self.assertEqual(f('promoteall', 'NOW', 1008), [0, 0])
        r = f('reserve', 10, 'NOW', 1009)
        self.assertEqual(sorted(self.ids(r)), ['a', 'b', 'c', 'd0', 'd1', 'd2', 'd3', 'd4'])

    def test_v32_02_purge_removes_the_dead_that_died_before_a_time(self):
        f = self.f
        for i in range(5):
            self.assertEqual(f('put', 'e%d' % i, 'x', 'ATTEMPTS', 1, 'NOW', 1000), 1)
            token = f('reserve', 1, 'NOW', 1000 + i)[3][2]
            self.assertEqual(f('fail', 'e%d' % i, token, 'boom', 'NOW', 2000 + i), Status('dead'))
        self.assertEqual(self.unchanged(lambda: f('purge', 2000)), [0, 0])
        self.assertEqual(f('purge', 2003, 'LIMIT', 2), [2, 1])
        self.assertIsNone(self.field('e0', 'state'))
        self.assertEqual(f('purge', 2003), [1, 0])
        self.assertEqual([self.field('e%d' % i, 'state') for i in (3, 4)], [b'dead', b'dead'])
        for bad in (['x'], [-1], [2003, 'LIMIT', 0], [2003, 'NOW', 5]):
            self.assertEqual(self.unchanged(lambda: f('purge', *bad)), Error('BADARG'), bad)

    def test_v32_03_a_limit_of_10000_works_past_what_lua_unpacks_at_once(self):
        f = self.f
        for part in range(9):
            args = []
            for i in range(1000):
                args += ['j%d' % (part * 1000 + i), 'x', 2, 'DELAY', 60000]
            f('putmany', 1000, *args, 'NOW', 1000)
        self.assertEqual(f('promoteall', 'LIMIT', 10000, 'NOW', 2000), [9000, 0])
        for i in range(9000):
            f('restore', 'd%d' % i, 'x', 'dead', 1000, 1, 'DIED', 1500)
        self.assertEqual(f('purge', 1600, 'LIMIT', 10000), [9000, 0])

class Version33(Case):
    """Issue 35, point 5: a waiting job's priority and due time changed in
    place; get without the body."""

    def test_v33_01_reschedule_keeps_attempts_and_moves_only_waiting_jobs(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'BACKOFF', 'fixed', 0, 0, 'NOW', 1000), 1)
        token = f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(f('fail', 'a', token, 'boom', 'NOW', 1001), Status('ready'))
        self.assertEqual(f('put', 'b', 'y', 'PRIORITY', 5, 'NOW', 1002), 1)
        # a goes first by priority, then back to due in 5 s; its attempt stays.
        self.assertEqual(f('reschedule', 'a', 'PRIORITY', 9, 'NOW', 1003), 1)
        self.assertEqual(self.listed('ready', 1003)[:2], ['a', 'b'])
        self.assertEqual(f('reschedule', 'a', 'DELAY', 5000, 'NOW', 1004), 1)
        self.assertEqual(self.field('a', 'state', 1004), b'delayed')
        self.assertEqual(self.field('a', 'due', 1004), 6004)
        self.assertEqual(self.field('a', 'priority', 1004), 9)
        self.assertEqual(self.field('a', 'attempts', 1004), 1)
        self.assertEqual(len(self.field('a', 'history', 1004)), 1)
        self.assertEqual(f('reschedule', 'a', 'AT', 2000, 'NOW', 1005), 1)
        self.assertEqual(self.field('a', 'due', 1005), 2000)
        self.assertEqual(f('reschedule', 'a', 'AT', 10, 'NOW', 1006), 1)  # (past: due now)
        self.assertEqual(self.field('a', 'due', 1006), 1006)
        self.assertEqual(self.field('a', 'state', 1006), b'ready')
        # Reserved, dead or absent: left alone.
        token = f('reserve', 1, 'NOW', 1007)[3][2]
        self.assertEqual(self.unchanged(lambda: f('reschedule', 'a', 'PRIORITY', 1, 'NOW', 1008)), -2)
        self.assertEqual(f('fail', 'a', token, 'boom', 'DEAD', 'NOW', 1009), Status('dead'))
        self.assertEqual(self.unchanged(lambda: f('reschedule', 'a', 'DELAY', 1, 'NOW', 1010)), -2)
        self.assertEqual(self.unchanged(lambda: f('reschedule', 'nope', 'DELAY', 1, 'NOW', 1010)), 0)
        for bad in ([], ['DELAY', 1, 'AT', 5], ['PRIORITY', 1001], ['DELAY', -1], ['SOON', 1]):
            self.assertEqual(self.unchanged(lambda: f('reschedule', 'b', *bad, 'NOW', 1011)),
                             Error('BADARG'), bad)

    def test_v33_02_get_nobody_leaves_the_body_out(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x' * 1000, 'NOW', 1000), 1)
        whole, bare = f('get', 'a', 'NOW', 1000), f('get', 'a', 'NOBODY', 'NOW', 1000)
        at = whole.index(b'body') + 1
        self.assertEqual(whole[at], b'x' * 1000)
        self.assertEqual(bare[:at] + [b'x' * 1000] + bare[at + 1:], whole)


class Version38(Case):
    """Issue 37, beanstalkd's reserve-job: one job reserved by its id, ahead
    of the rest."""

    def test_v38_01_reservejob_takes_a_waiting_or_dead_job_ahead_of_the_rest(self):
        f = self.f
        self.assertEqual(f('put', 'hi', 'h', 'PRIORITY', 9, 'NOW', 1000), 1)
        self.assertEqual(f('put', 'lo', 'l', 'NOW', 1000), 1)
        self.assertEqual(f('put', 'later', 'd', 'DELAY', 60000, 'NOW', 1000), 1)
        # lo, behind hi, and later, not yet due: each reserved by its id.
        lo = f('reservejob', 'lo', 'TTR', 5000, 'WORKER', 'w1', 'NOW', 1001)
        self.assertEqual(lo[:2], [1, 1001])
        self.assertEqual(lo[2][:2], [b'lo', b'l'])
        self.assertEqual(lo[2][3:], [1, 5, 0, 1000, 1000, 6001, 0])
        self.assertEqual(self.field('lo', 'worker', 1001), b'w1')
        r = f('reservejob', 'later', 'NOW', 1002)
        self.assertEqual((r[0], r[2][0], r[2][7], r[2][8]), (1, b'later', 61000, 31002))
        # Another reserve hands out hi alone.
        self.assertEqual(self.ids(f('reserve', 10, 'NOW', 1003)), ['hi'])
        # Held (even by the caller), or absent: not to be had, nothing changed.
        self.assertEqual(self.unchanged(lambda: f('reservejob', 'lo', 'NOW', 1004)), [-2, 1004])
        self.assertEqual(self.unchanged(lambda: f('reservejob', 'nope', 'NOW', 1004)), [0, 1004])
        # Its token settles it as reserve's does.
        self.assertEqual(f('ack', 'lo', lo[2][2], 'NOW', 1005), 1)

    def test_v38_02_a_dead_job_comes_back_with_a_new_token_and_its_attempts_from_zero(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'ATTEMPTS', 1, 'NOW', 1000), 1)
        old = f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(f('fail', 'a', old, 'boom', 'NOW', 1001), Status('dead'))
        r = f('reservejob', 'a', 'NOW', 1002)
        self.assertEqual((r[0], r[2][3], r[2][4], r[2][7]), (1, 1, 1, 1002))
        self.assertGreater(r[2][2], old)
        self.assertEqual(self.field('a', 'state', 1002), b'reserved')
        self.assertEqual(f('ack', 'a', old, 'NOW', 1003), -3)  # (the failed reservation's)
        self.assertEqual(f('ack', 'a', r[2][2], 'NOW', 1003), 1)

    def test_v38_03_pause_and_limits_do_not_hold_a_job_asked_for_by_id(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'NOW', 1000), 1)
        self.assertEqual(f('put', 'b', 'y', 'NOW', 1000), 1)
        self.assertEqual(f('pause'), 1)
        self.assertEqual(f('reserve', 1, 'NOW', 1001)[2], 1)
        self.assertEqual(f('reservejob', 'b', 'NOW', 1001)[0], 1)
        self.assertEqual(f('resume', 'NOW', 1002), 1)
        self.assertEqual(self.ids(f('reserve', 5, 'NOW', 1002)), ['a'])

    def test_v38_04_a_job_of_ttr_0_is_taken_for_good_and_a_blocked_one_is_not_to_be_had(self):
        f = self.f
        self.assertEqual(f('put', 'once', 'x', 'TTR', 0, 'NOW', 1000), 1)
        r = f('reservejob', 'once', 'NOW', 1001)
        self.assertEqual((r[0], r[2][2], r[2][8]), (1, 0, 0))
        self.assertIsNone(self.field('once', 'state', 1001))
        self.assertEqual(f('put', 'after', 'y', 'NOW', 1002), 1)
        self.assertEqual(f('put', 'child', 'z', 'AFTER', 1, 't', 'after', 'fail', 'NOW', 1002), 1)
        self.assertEqual(self.field('child', 'state', 1002), b'blocked')
        self.assertEqual(self.unchanged(lambda: f('reservejob', 'child', 'NOW', 1003)), [-2, 1003])
        self.assertEqual(self.unchanged(lambda: f('reservejob')), Error('BADARG'))  # (no id)
        for bad in ([''], ['a\x01'], ['a', 'TTR', 0], ['a', 'WORKER', ''], ['a', 'COUNT', 1]):
            self.assertEqual(self.unchanged(lambda: f('reservejob', *bad, 'NOW', 1003)),
                             Error('BADARG'), bad)


    def test_v38_05_a_timed_pause_ends_by_itself_at_the_first_reserve_after_its_end(self):
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'NOW', 1000), 1)
        self.assertEqual(f('pause', 'FOR', 500, 'NOW', 1000), 1)
        # Paused: reserve says when the pause ends, and stats too.
        self.assertEqual(f('reserve', 1, 'NOW', 1200), [1200, 1500, 1])
        stats = f('stats', 'NOW', 1200)
        self.assertEqual(stats[stats.index(b'pause_end') + 1], 1500)
        # The same pause again changes nothing; another end does.
        self.assertEqual(self.unchanged(lambda: f('pause', 'FOR', 300, 'NOW', 1200)), 0)
        self.assertEqual(f('pause', 'FOR', 400, 'NOW', 1200), 1)
        # Over: read as not paused; the first reserve clears it.
        stats = f('stats', 'NOW', 1600)
        self.assertEqual((stats[stats.index(b'paused') + 1], stats[stats.index(b'pause_end') + 1]), (0, -1))
        self.assertEqual(self.ids(f('reserve', 1, 'NOW', 1600)), ['a'])
        self.assertEqual(self.c.call('ZRANGE', self.K[2], 0, -1), [])
        self.assertIsNone(self.c.call('HGET', self.K[6], 'pause_until'))
        # Without FOR a pause has no end; resume ends either.
        self.assertEqual(f('pause', 'FOR', 100, 'NOW', 1700), 1)
        self.assertEqual(f('pause', 'NOW', 1700), 1)
        self.assertEqual(f('reserve', 1, 'NOW', 99000), [99000, -1, 1])
        self.assertEqual(f('resume', 'NOW', 99000), 1)
        # A pause for a time tells sleeping workers when it ends; resume
        # clears one that ended by itself.
        self.assertEqual(self.published(self.K[2], lambda: f('pause', 'FOR', 50, 'NOW', 100000)),
                         [b'100050'])
        self.assertEqual(f('resume', 'NOW', 200000), 1)
        self.assertEqual(self.unchanged(lambda: f('resume', 'NOW', 200000)), 0)
        for bad in (['FOR', 0], ['FOR', 315576000001], ['FOR'], ['UNTIL', 5]):
            self.assertEqual(self.unchanged(lambda: f('pause', *bad, 'NOW', 1000)), Error('BADARG'), bad)


    def test_v38_06_a_result_that_no_job_waits_for_yet_is_kept_for_the_retry_window(self):
        # A job waiting for this one may have been put already, its depend
        # still in an outbox on its way (flows): the result stays for it.
        f = self.f
        self.assertEqual(f('put', 'a', 'x', 'NOW', 1000), 1)
        t = f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(f('ack', 'a', t, 'RESULT', 'pdf', 'NOW', 1001), 1)
        self.assertEqual((self.field('a', 'state', 1002), self.field('a', 'result', 1002)),
                         (b'done', b'pdf'))
        self.assertEqual(self.field('a', 'expires', 1002), 61001)  # (the default window)
        self.assertEqual(f('put', 'a', 'again', 'NOW', 2000), -1)
        f('requeue', 'NOW', 61001)  # (a sweep: drops what was kept, once over)
        self.assertEqual(f('put', 'a', 'again', 'NOW', 61001), 1)
        self.assertEqual(f('delete', 'a'), 1)
        # A job put with a longer KEEP of its own is kept for that; deleted,
        # its id stays in the window as an ack's without KEEP does.
        self.assertEqual(f('put', 'k', 'x', 'KEEP', 120000, 'NOW', 61002), 1)
        t = f('reserve', 1, 'NOW', 61002)[3][2]
        self.assertEqual(f('ack', 'k', t, 'RESULT', 'r', 'NOW', 61003), 1)
        self.assertEqual(self.field('k', 'expires', 61004), 181003)
        self.assertEqual(f('delete', 'k'), 1)
        self.assertEqual(f('put', 'k', 'again', 'NOW', 61005), -1)
        # A KEEP shorter than the window: the window still holds the result.
        self.assertEqual(f('put', 's', 'x', 'NOW', 61006), 1)
        t = f('reserve', 1, 'NOW', 61006)[3][2]
        self.assertEqual(f('ack', 's', t, 'KEEP', 10, 'RESULT', 'r', 'NOW', 61007), 1)
        self.assertEqual(self.field('s', 'expires', 61008), 121007)
        self.assertEqual(self.c.call('ZSCORE', self.gone, 's'), b'121007')
        # A window of 0: no depend can still come, so a result is refused
        # (nothing changed), and with FORWARD dropped.
        self.assertEqual(f('retrywindow', 0), [0, 0])
        self.assertEqual(f('put', 'b', 'x', 'NOW', 62000), 1)
        t = f('reserve', 1, 'NOW', 62000)[3][2]
        self.assertEqual(self.unchanged(lambda: f('ack', 'b', t, 'RESULT', 'pdf', 'NOW', 62001)),
                         Error('BADARG'))
        self.assertEqual(f('ack', 'b', t, 'RESULT', 'pdf', 'FORWARD', 'NOW', 62001), 1)
        self.assertIsNone(self.field('b', 'state', 62002))


class Source(unittest.TestCase):
    """What the library's source says of itself."""

    def test_the_main_chunk_holds_the_locals_its_map_says(self):
        # Lua 5.1 allows a function (the main chunk too) 200 active
        # locals: the map at the top of the file says how many the top
        # level declares, and the peak, where a top-level do-block's own
        # locals (indented two spaces; none nests a block) are active
        # too. A library past 200 at its peak does not load.
        import re

        def declared(line, indent):
            if re.match(indent + r'local function \w', line):
                return 1
            m = re.match(indent + r'local ([\w\s,]+?)(=|$)', line)
            return len([x for x in m.group(1).split(',') if x.strip()]) if m else 0

        with open(LUA) as f:
            code = f.read()
        n = peak = 0
        block = None  # the locals of the top-level do-block we are in
        for line in code.splitlines():
            if block is None and line == 'do':
                block = 0
            elif block is not None and line == 'end':
                block = None
            elif block is not None:
                self.assertFalse(re.match(r'  (do|for|while|if)\b', line),
                                 'a block nested in a top-level do-block: count its locals too')
                block += declared(line, '  ')
                peak = max(peak, n + block)
            else:
                n += declared(line, '')
                peak = max(peak, n)
        said = re.search(r'the main chunk holds (\d+) of the 200 locals Lua\s+allows a function '
                         r'at its top level, and (\d+) at its peak', code)
        self.assertIsNotNone(said, 'the map states no count of locals')
        self.assertEqual((int(said.group(1)), int(said.group(2))), (n, peak))
        self.assertLessEqual(peak, 200)

    def test_only_the_storage_module_touches_the_lanes(self):
        # Issue 33: ready and delayed storage (sets, lists, pins, marks)
        # sits behind the storage module (waiting and place, one do-block);
        # every call asks it. The migration alone also reads the sets,
        # for the older format it rewrites.
        import re
        with open(LUA) as f:
            code = f.read()
        start = code.index('local waiting, place = {}, {}\ndo\n')
        end = code.index('\nend\n', start)
        migrate = code.index('-' * 64 + ' migrate')
        migrate_end = code.index('-' * 64 + ' ', migrate + 70)
        outside = code[:start] + code[end:migrate] + code[migrate_end:]
        outside = re.sub(r'--\[\[.*?\]\]', '', outside, flags=re.S)
        touched = []
        for line in outside.splitlines():
            if line.strip().startswith('--'):
                continue
            if re.search(r'\bk\.(queue|later|ready|delayed)\b|ready_list|delayed_list|unpinned', line):
                touched.append(line.strip())
        self.assertEqual(touched, [])
        # (and the module's helpers are its own: nothing outside names them)
        for helper in ('ready_list', 'delayed_list', 'unpinned'):
            self.assertNotIn('local %s' % helper, code[:start])


def headers(code):
    """Each function's header block: {name: its ARGV text}, for every
    redisched_<name> the block's first line names."""
    out = {}
    for m in re.finditer(r'--\[\[ (redisched_\w+(?:(?: / |, )redisched_\w+)*):(.*?)\]\]', code, re.S):
        lines = m.group(2).splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith('ARGV:'))
        argv = [lines[start][len('ARGV:'):]]
        argv += takewhile(lambda line: line.startswith('      '), lines[start + 1:])
        names = re.findall(r'redisched_(\w+)', m.group(1))
        # A block of two functions gives each its part, "a; b".
        parts = ' '.join(argv).split(';') if len(names) > 1 else [' '.join(argv)]
        for name, part in zip(names, parts):
            out[name] = re.sub(r'^\s*%s:' % name, '', part)
    return out


def option_words(argv):
    """The option words of a signature: its upper-case words (arguments
    and values are lower case)."""
    return set(re.findall(r'\b([A-Z][A-Z_]+)\b', argv))


def positional(argv):
    """The arguments before the first option, as words (a parenthesis
    holds a note or a choice, left out; "none" is no argument)."""
    if argv.strip().startswith('none'):
        return []
    return re.findall(r'[a-z][\w.-]*', re.sub(r'\([^)]*\)', '', argv).split('[')[0])


# The least each function's call needs before its options, for the probe
# below (the functions whose arguments after those are no option words,
# ids or suffixes or a value, are left out of it: putmany, delete, kick,
# retrywindow, shard, shards, unschedule, version).
PROBE = {
    'put': ['a', 'b'], 'restore': ['a', 'b', 'ready', 1000, 0], 'get': ['a'],
    'list': ['ready', 0, 10], 'stats': [], 'reserve': [1], 'pull': [1], 'ack': ['a', 1],
    'ackmany': [1, 'a', 1], 'release': ['a', 1], 'fail': ['a', 1, 'e'], 'touch': ['a', 1],
    'progress': ['a', 1, 0], 'reservejob': ['a'], 'pause': [], 'promoteall': [], 'purge': [1000], 'reschedule': ['a'],
    'requeue': [], 'kickall': [], 'limit': [], 'resume': [], 'schedules': [],
    'tick': ['n', 1000, 2000], 'schedule': ['n', 'b'], 'pauseschedule': ['n'],
    'resumeschedule': ['n'], 'history': ['total'],
}
# (history reads the twelfth key, which the others leave out)
PROBE_KEYS = {'history': 12}


class Headers(Case):
    """Every function's header block (the library's own documentation of
    its arguments) matches its code and docs/redis-api.md (issue 33)."""

    def setUp(self):
        super().setUp()
        with open(LUA) as f:
            self.headers = headers(f.read())

    def test_every_registered_function_has_a_header(self):
        with open(LUA) as f:
            registered = set(re.findall(r"^register\('(\w+)'", f.read(), re.M))
        self.assertEqual(set(self.headers), registered)

    def test_each_function_takes_the_options_its_header_names_and_no_other(self):
        every = set().union(*(option_words(a) for a in self.headers.values())) | {'BOGUS'}
        for name, args in PROBE.items():
            said = option_words(self.headers[name])
            taken = set()
            for word in sorted(every):
                self.c.check('FLUSHALL')
                r = self.f(name, *args, word, keys=topic_keys('t', count=PROBE_KEYS.get(name, 11)))
                unknown = isinstance(r, Error) and 'unknown option' in r.message
                if not unknown:
                    taken.add(word)
            self.assertEqual(taken, said, name)

    def test_the_docs_repeat_each_signature(self):
        with open(os.path.join(os.path.dirname(LUA), '..', 'docs', 'redis-api.md')) as f:
            docs = f.read()
        for name, argv in self.headers.items():
            m = re.search(r'^FCALL(?:_RO)? redisched_%s +\d+ <[^>]*keys>(.*?)$' % name, docs, re.M)
            if name == 'version':
                continue  # no keys
            self.assertIsNotNone(m, name)
            # Its line, and the indented ones that go on with it.
            lines = docs[m.start():docs.index('```', m.start())].splitlines()
            lines = lines[:1] + list(takewhile(lambda line: line.startswith(' '), lines[1:]))
            doc_words = ' '.join(re.split(r'<[^>]*keys>', line, maxsplit=1)[-1].split('->')[0]
                                 for line in lines)
            self.assertEqual(option_words(doc_words), option_words(argv), name)
            self.assertEqual(positional(doc_words), positional(argv), name)


# ---------------------------------------------------------------- version 10

class Version10(Case):
    """TTR 0 (delivered at most once), fail's ATTEMPTS, own_ttr."""

    def test_v10_01_a_job_of_ttr_0_is_delivered_at_most_once(self):
        self.assertEqual(self.f('put', 'once', 'hello', 'TTR', 0, 'NOW', 1000), 1)
        self.assertEqual(self.field('once', 'ttr'), 0)
        r = self.f('reserve', 5, 'TTR', 60000, 'NOW', 1000)
        # token 0, deadline 0: no reservation; nothing scheduled after it.
        # (Version 12 appends the job's keep to each job.)
        self.assertEqual(r[:3] + [r[3][:9]], [1000, -1, 0, [b'once', b'hello', 0, 1, 5, 0, 1000, 1000, 0]])
        self.assertIsNone(self.f('get', 'once'))
        for op, args in [('ack', []), ('ack', ['KEEP', 100]), ('release', []), ('fail', ['e']),
                         ('fail', ['e', 'ATTEMPTS', 3]), ('touch', [])]:
            r = self.unchanged(lambda: self.f(op, 'once', 0, *args, 'NOW', 1001))
            self.assertEqual(r, 0, (op, args))
        s = self.f('stats', 'NOW', 1001)
        # (Later versions append fields: version 13 schedules.)
        self.assertEqual(s[:30], [b'delayed', 0, b'ready', 0, b'reserved', 0, b'dead', 0, b'done', 0,
                                  b'paused', 0, b'next_due', -1, b'failed_total', 0, b'dead_total', 0,
                                  b'lapsed_total', 0, b'limit_rate', 0, b'limit_window', 0,
                                  b'limit_concurrency', 0, b'limit_used', 0, b'limit_aging', 0])
        # The worker that took it crashes: a week later nothing comes back.
        self.assertEqual(self.f('requeue', 'NOW', 1000 + 8 * 86400000), [0, 0, -1])
        self.assertEqual(self.f('reserve', 5, 'NOW', 1000 + 8 * 86400000)[3:], [])
        # (Version 20 remembers its id for the retry window: P:{T}:gone.)
        self.assertEqual(sorted(self.keys_left()), sorted([self.K[6], self.gone]))

    def test_v10_02_a_job_of_ttr_0_leaves_in_its_place(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.f('put', 'b', 'x', 'TTR', 0, 'NOW', 1000)
        self.f('put', 'c', 'x', 'TTR', 0, 'PRIORITY', 5, 'NOW', 1000)
        self.f('put', 'd', 'x', 'NOW', 1000)
        r = self.f('reserve', 2, 'NOW', 1000)
        self.assertEqual(self.ids(r), ['c', 'a'])
        self.assertEqual([(j[2] > 0, j[8]) for j in r[3:]], [(False, 0), (True, 31000)])
        r = self.f('reserve', 2, 'TTR', 100, 'NOW', 1001)
        self.assertEqual((self.ids(r), r[1]), (['b', 'd'], 0))
        self.assertEqual([(j[2] > 0, j[8]) for j in r[3:]], [(False, 0), (True, 1101)])
        s = dict(zip(*[iter(self.f('stats', 'NOW', 1001))] * 2))
        self.assertEqual((s[b'ready'], s[b'reserved']), (0, 2))
        # Nobody acks: the leased jobs come back, those of TTR 0 never.
        self.assertEqual(self.f('requeue', 'NOW', 10 ** 9)[:2], [2, 0])
        self.assertEqual(self.ids(self.f('reserve', 5, 'NOW', 10 ** 9)), ['a', 'd'])

    def test_v10_03_ttr_0_through_putmany_restore_get_and_list(self):
        self.assertEqual(self.f('putmany', 2, 'p', 'x', 2, 'TTR', 0, 'q', 'y', 4, 'TTR', 0, 'DELAY', 10,
                                'NOW', 1000), [1, 1])
        self.assertEqual(self.f('restore', 'r', 'z', 'ready', 900, 2, 'TTR', 0, 'NOW', 1000), 1)
        for id_ in 'pqr':
            self.assertEqual(dict(self.fields(id_))[b'ttr'], 0, id_)
            self.assertEqual(self.fields(id_)[-1], (b'own_ttr', 1), id_)
        listed = self.f('list', 'ready', 0, 10, 'NOW', 1000)
        self.assertEqual([dict(zip(j[0::2], j[1::2]))[b'ttr'] for j in listed[1:]], [0, 0])
        r = self.f('reserve', 5, 'NOW', 1010)
        self.assertEqual([(j[0], j[2], j[3], j[8]) for j in r[3:]],
                         [(b'r', 0, 3, 0), (b'p', 0, 1, 0), (b'q', 0, 1, 0)])
        self.assertEqual(sorted(self.keys_left()), sorted([self.K[6], self.gone]))

    def test_v10_04_reserve_and_touch_keep_a_ttr_of_1_or_more(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        token = self.f('reserve', 1, 'NOW', 1000)[3][2]
        for op, args in [('reserve', [1, 'TTR', 0]), ('touch', ['a', token, 'TTR', 0]),
                         ('put', ['b', 'x', 'TTR', -1]), ('put', ['b', 'x', 'TTR', 604800001]),
                         ('putmany', [1, 'b', 'x', 2, 'TTR', -1]),
                         ('restore', ['b', 'x', 'ready', 1000, 0, 'TTR', 604800001])]:
            r = self.unchanged(lambda: self.f(op, *args, 'NOW', 1000))
            self.assertEqual(r, Error('BADARG'), (op, args))

    def test_v10_05_fails_attempts_overrides_the_jobs_and_get_shows_it(self):
        # koda: the job says 5, its handler 3: buried after 3, and get says 3.
        self.f('put', 'x', 'b', 'ATTEMPTS', 5, 'BACKOFF', 'fixed', 10, 0, 'NOW', 1000)
        t = self.f('reserve', 1, 'NOW', 1000)[3][2]
        self.assertEqual(self.f('fail', 'x', t, 'e1', 'ATTEMPTS', 3, 'NOW', 1000), Status('delayed'))
        self.assertEqual(self.field('x', 'max_attempts'), 3)
        j = self.f('reserve', 1, 'NOW', 1010)[3]
        self.assertEqual((j[3], j[4]), (2, 3))  # attempt 2 of 3
        self.assertEqual(self.f('fail', 'x', j[2], 'e2', 'ATTEMPTS', 3, 'NOW', 1010), Status('delayed'))
        j = self.f('reserve', 1, 'NOW', 1020)[3]
        self.assertEqual(self.f('fail', 'x', j[2], 'e3', 'ATTEMPTS', 3, 'NOW', 1020), Status('dead'))
        self.assertEqual([self.field('x', n) for n in ('state', 'attempts', 'max_attempts')],
                         [b'dead', 3, 3])
        # More than the job's: put with 1, the handler allows 2.
        self.f('put', 'y', 'b', 'ATTEMPTS', 1, 'BACKOFF', 'fixed', 0, 0, 'NOW', 1000)
        t = self.f('reserve', 1, 'NOW', 1030)[3][2]
        self.assertEqual(self.f('fail', 'y', t, 'e', 'ATTEMPTS', 2, 'NOW', 1030), Status('ready'))
        self.assertEqual(self.field('y', 'max_attempts'), 2)
        # It stays the job's: the lapse of the next attempt buries it.
        self.assertEqual(self.f('reserve', 1, 'TTR', 10, 'NOW', 1030)[3][4], 2)
        self.assertEqual(self.f('requeue', 'NOW', 1040), [0, 1, -1])
        self.assertEqual([self.field('y', n) for n in ('state', 'attempts', 'max_attempts')],
                         [b'dead', 2, 2])
        # Fewer: the default 5, the handler 1: dead at the first failure.
        self.f('put', 'z', 'b', 'NOW', 1000)
        t = self.f('reserve', 1, 'NOW', 1050)[3][2]
        self.assertEqual(self.f('fail', 'z', t, 'e', 'ATTEMPTS', 1, 'NOW', 1050), Status('dead'))
        self.assertEqual(self.field('z', 'max_attempts'), 1)
        # With DEAD it is stored too; a kick keeps it.
        self.f('put', 'w', 'b', 'NOW', 1000)
        t = self.f('reserve', 1, 'NOW', 1060)[3][2]
        self.assertEqual(self.f('fail', 'w', t, 'e', 'DEAD', 'ATTEMPTS', 7, 'NOW', 1060), Status('dead'))
        self.assertEqual(self.f('kick', 'w'), 1)
        self.assertEqual([self.field('w', n) for n in ('attempts', 'max_attempts')], [0, 7])

    def test_v10_06_fails_attempts_is_checked_and_a_refused_fail_stores_nothing(self):
        self.f('put', 'x', 'b', 'NOW', 1000)
        t = self.f('reserve', 1, 'TTR', 10, 'NOW', 1000)[3][2]
        for bad in (['ATTEMPTS', 0], ['ATTEMPTS', 1001], ['ATTEMPTS', 'x'], ['ATTEMPTS', -1],
                    ['ATTEMPTS', 2, 'ATTEMPTS', 3], ['DEAD', 'ATTEMPTS']):
            r = self.unchanged(lambda: self.f('fail', 'x', t, 'e', *bad, 'NOW', 1000))
            self.assertEqual(r, Error('BADARG'), bad)
        # A fail answered with a code stores no ATTEMPTS either.
        r = self.unchanged(lambda: self.f('fail', 'x', t + 1, 'e', 'ATTEMPTS', 2, 'NOW', 1000))
        self.assertEqual(r, -3)
        r = self.unchanged(lambda: self.f('fail', 'nosuch', 1, 'e', 'ATTEMPTS', 2, 'NOW', 1000))
        self.assertEqual(r, 0)
        self.f('requeue', 'NOW', 1010)
        r = self.unchanged(lambda: self.f('fail', 'x', t, 'e', 'ATTEMPTS', 2, 'NOW', 1010))
        self.assertEqual(r, -2)
        self.assertEqual(self.field('x', 'max_attempts'), 5)
        # The range's end.
        t = self.f('reserve', 1, 'NOW', 1010)[3][2]
        self.assertEqual(self.f('fail', 'x', t, 'e', 'ATTEMPTS', 1000, 'NOW', 1010), Status('delayed'))
        self.assertEqual(self.field('x', 'max_attempts'), 1000)

    def test_v10_07_own_ttr_tells_a_jobs_own_ttr_from_the_default(self):
        self.f('put', 'a', 'x', 'NOW', 1000)
        self.f('put', 'b', 'x', 'TTR', 30000, 'NOW', 1000)
        self.f('put', 'c', 'x', 'TTR', 5, 'NOW', 1000)
        self.f('put', 'd', 'x', 'TTR', 0, 'AT', 5000, 'NOW', 1000)
        want = {'a': (30000, 0), 'b': (30000, 1), 'c': (5, 1), 'd': (0, 1)}
        for id_, (ttr, own) in want.items():
            fl = self.fields(id_, 1000)
            self.assertEqual((dict(fl)[b'ttr'], fl[-1]), (ttr, (b'own_ttr', own)), id_)
        listed = self.f('list', 'ready', 0, 10, 'NOW', 1000)
        self.assertEqual([j[-2:] for j in listed[1:]], [[b'own_ttr', 0], [b'own_ttr', 1], [b'own_ttr', 1]])
        # Export, then import with TTR only where own_ttr says so: reserve's
        # TTR still applies to the job without one of its own.
        K2 = topic_keys('u')
        for j in listed[1:]:
            d = dict(zip(j[0::2], j[1::2]))
            args = [d[b'id'], d[b'body'], d[b'state'], d[b'created'], d[b'attempts'], 'AT', d[b'due']]
            if d[b'own_ttr']:
                args += ['TTR', d[b'ttr']]
            self.assertEqual(self.f('restore', *args, 'NOW', 1000, keys=K2), 1)
        for id_ in 'abc':
            self.assertEqual(self.f('get', id_, 'NOW', 1000, keys=K2), self.f('get', id_, 'NOW', 1000))
        r = self.f('reserve', 3, 'TTR', 7000, 'NOW', 1000, keys=K2)
        self.assertEqual([(j[0], j[8]) for j in r[3:]], [(b'a', 8000), (b'b', 31000), (b'c', 1005)])
        # own_ttr comes last in every state, after the state's own fields.
        r = self.f('reserve', 3, 'TTR', 7000, 'NOW', 1000)
        tokens = {j[0].decode(): j[2] for j in r[3:]}
        self.assertEqual(self.fields('a', 1000)[-4:],
                         [(b'token', tokens['a']), (b'reserved_at', 1000), (b'deadline', 8000),
                          (b'own_ttr', 0)])
        self.assertEqual(self.f('ack', 'b', tokens['b'], 'KEEP', 100, 'NOW', 1001), 1)
        self.assertEqual(self.fields('b', 1001)[-3:],
                         [(b'finished', 1001), (b'expires', 1101), (b'own_ttr', 1)])
        self.assertEqual(self.f('fail', 'c', tokens['c'], 'e', 'DEAD', 'NOW', 1002), Status('dead'))
        # (fields of later versions follow own_ttr: keep and result since
        # 12, the attempt history since 30)
        c = self.fields('c', 1002)
        self.assertEqual(c[:[f for f, _ in c].index(b'own_ttr') + 1][-3:],
                         [(b'error', b'e'), (b'died', 1002), (b'own_ttr', 1)])


# ---------------------------------------------------------------- upgrade

def with_own_ttr(job, own=None):
    """A job array of version 8 or 9 as version 10 reports it: own_ttr last,
    1 when the job has a TTR of its own (own: the ids that have one; without
    it, for version 8, which kept no TTR equal to the default, its ttr says)."""
    d = dict(zip(job[0::2], job[1::2]))
    has = d[b'id'] in own if own is not None else d[b'ttr'] != 30000
    return job + [b'own_ttr', int(has)]


class Version34(Case):
    """The topic's history, a twelfth key a call may name (issue 35): it
    changes nothing else."""

    def test_v34_01_a_call_that_names_the_history_changes_the_same_as_one_that_does_not(self):
        K11, K12 = topic_keys('t'), topic_keys('u', count=12)
        outcomes = []
        for keys in (K11, K12):
            def f(op, *args):
                return self.f(op, *args, keys=keys)
            out = [f('put', 'a', 'x', 'NOW', 1000), f('put', 'b', 'x', 'PRIORITY', 5, 'NOW', 1000),
                   f('put', 'c', 'x', 'DELAY', 50, 'NOW', 1000),
                   f('putmany', 2, 'd', 'x', 0, 'a', 'x', 0, 'NOW', 1001)]
            r = f('reserve', 3, 'TTR', 100, 'NOW', 61000)
            jobs = r[3:]
            out += [[j[0] for j in jobs],
                    f('ack', jobs[0][0], jobs[0][2], 'NOW', 61010),
                    f('fail', jobs[1][0], jobs[1][2], 'e', 'NOW', 61020),
                    f('requeue', 'NOW', 200000), f('stats', 'NOW', 200000)[:22]]
            outcomes.append(out)
        self.assertEqual(outcomes[0], outcomes[1])
        self.assertEqual(dump(self.c, K11), dump(self.c, K12[:11]))
        self.assertEqual(self.c.call('EXISTS', b'redisched:{t}:history'), 0)
        total = self.f('history', 'total', keys=K12)[1]
        # put 4 (d, and a again: exists), started 3, done 1, failed 1, lapsed 1
        self.assertEqual(total[1:7], [4, 3, 1, 1, 0, 1])


class Version23(Case):
    """Every key a call touches is one of its KEYS: the eleven keys, and
    the eight of older callers still accepted (issue 33)."""

    def test_v23_01_eleven_keys_are_checked_by_name_and_count(self):
        K = topic_keys('t')
        self.assertEqual(self.f('put', 'a', 'b', 'NOW', 1000, keys=K), 1)
        for i in (8, 9, 10):
            wrong = list(K)
            wrong[i] = K[i] + b'x'
            r = self.unchanged(lambda: self.f('put', 'c', 'b', 'NOW', 1000, keys=wrong))
            self.assertIsInstance(r, Error)
            self.assertIn('BADKEYS key %d must be' % (i + 1), r.message)
        # (12: the history's, version 34, checked by name as the others)
        for n in (7, 9, 10, 13):
            keys = (topic_keys('t', count=12) + [K[0] + b'x'])[:n]
            r = self.unchanged(lambda: self.f('put', 'c', 'b', 'NOW', 1000, keys=keys))
            self.assertIsInstance(r, Error)
            self.assertIn("expected the topic's 11 keys", r.message)
        r = self.unchanged(lambda: self.f('put', 'c', 'b', 'NOW', 1000, keys=K + [K[0] + b'x']))
        self.assertIn('BADKEYS key 12 must be', r.message)

    def test_v23_02_eight_and_eleven_keys_reach_the_same_topic(self):
        # Calls of both forms, one after another (the library remembers the
        # keys it checked: a form must not pass on the other's check).
        K, K8 = topic_keys('t'), topic_keys('t')[:8]
        self.assertEqual(self.f('put', 'a', 'b', 'NOW', 1000, keys=K8), 1)
        self.assertEqual(self.f('put', 'later', 'b', 'DELAY', 10, 'NOW', 1000, keys=K), 1)
        self.assertEqual(self.c.call('LLEN', K[8]), 1, 'the ready list is key 9')
        self.assertEqual(self.c.call('LLEN', K[9]), 1, 'the delayed list is key 10')
        r = self.f('reserve', 2, 'NOW', 1010, keys=K)
        self.assertEqual(self.ids(r), ['a', 'later'])
        self.assertEqual(self.f('ack', 'a', r[3][2], 'NOW', 1011, keys=K8), 1)
        self.assertEqual(self.f('ack', 'later', r[4][2], 'NOW', 1011, keys=K), 1)
        self.assertEqual(self.c.call('ZCARD', K[10]), 2, 'the retry window is key 11')
        self.assertEqual(self.f('put', 'a', 'b', 'NOW', 1012, keys=K), -1)
        self.assertEqual(self.f('put', 'later', 'b', 'NOW', 1012, keys=K8), -1)
        wrong = list(K)
        wrong[10] = K[10] + b'x'
        r = self.unchanged(lambda: self.f('stats', keys=wrong))
        self.assertIsInstance(r, Error)
        self.assertIn('BADKEYS key 11 must be', r.message)


class Upgrade(Case):
    """Keys written by library versions 8 (stored format 1) and 9 (format 2,
    as this version writes it), read and moved by this version after
    FUNCTION LOAD REPLACE."""

    def test_a_version_8_member_in_front_is_refused_until_migrated(self):
        # A version 8 member at the front of ready sends reserve past its
        # plain take to its checked path, which refuses it before it
        # writes; once migrated, the jobs go out in order and the pin
        # stays in place.
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        f('put', 'old', 'b1', 'PRIORITY', 5, 'NOW', 1000)
        self.load(LUA)
        f('put', 'new', 'b2', 'NOW', 1000)
        self.assertEqual(c.call('ZRANGE', K[2], -1, -1), [harness.READY_PIN])
        self.older(lambda: f('reserve', 10, 'NOW', 1001))
        self.older(lambda: f('reserve', 1, 'NOW', 1001))
        # (read: the records, then the members of delayed and ready, pin included)
        self.assertEqual(f('migrate'), [1, 1, 2 + c.call('ZCARD', K[1]) + c.call('ZCARD', K[2])])
        r = f('reserve', 10, 'NOW', 1001)
        self.assertEqual(self.ids(r), ['old', 'new'])
        self.assertEqual(c.call('ZRANGE', K[2], 0, -1), [harness.READY_PIN])
        self.assertEqual(f('ackmany', 2, *[x for j in r[3:] for x in (j[0], j[2])]), [1, 1])
        self.assertEqual(f('pull', 10, 'NOW', 1002)[3:], [])
        check_invariants(read_raw(c, K), K)

    def test_state_of_version_9_is_read_and_settled(self):
        c, K, f = self.c, self.K, self.f
        self.load(OLD[9])
        f('put', 'late', 'b1', 'AT', 50000, 'PRIORITY', 3, 'NOW', 1000)
        f('put', 'own', 'b2', 'TTR', 30000, 'NOW', 1000)
        f('put', 'short', 'b3', 'TTR', 40, 'ATTEMPTS', 2, 'NOW', 1000)
        f('put', 'plain', 'b4', 'NOW', 1000)
        f('put', 'held', 'b5', 'PRIORITY', 9, 'NOW', 1000)
        held = f('reserve', 1, 'TTR', 5000, 'NOW', 1001)[3]
        f('put', 'dies', 'b6', 'PRIORITY', 9, 'ATTEMPTS', 1, 'NOW', 1002)
        dies = f('reserve', 1, 'NOW', 1002)[3]
        f('fail', 'dies', dies[2], 'kaput', 'NOW', 1003)
        f('put', 'kept', 'b7', 'PRIORITY', 9, 'TTR', 700, 'NOW', 1004)
        kept = f('reserve', 1, 'NOW', 1004)[3]
        f('ack', 'kept', kept[2], 'KEEP', 100000, 'NOW', 1005)
        ids = ['late', 'own', 'short', 'plain', 'held', 'dies', 'kept']
        own = {b'own', b'short', b'kept'}
        before = {i: f('get', i, 'NOW', 1010) for i in ids}
        lists = {s: f('list', s, 0, 100, 'NOW', 1010) for s in
                 ['delayed', 'ready', 'reserved', 'dead', 'done']}

        self.load(LUA)
        for i in ids:
            self.assertEqual(f('get', i, 'NOW', 1010), with_own_ttr(before[i], own), i)
        for s, want in lists.items():
            self.assertEqual(f('list', s, 0, 100, 'NOW', 1010),
                             want[:1] + [with_own_ttr(j, own) for j in want[1:]], s)
        # The reservation made by version 9, settled with the handler's attempts.
        self.assertEqual(f('fail', 'held', held[2], 'boom', 'ATTEMPTS', 1, 'NOW', 1011), Status('dead'))
        self.assertEqual(self.field('held', 'max_attempts'), 1)
        r = f('reserve', 5, 'TTR', 7000, 'NOW', 1012)
        self.assertEqual([(j[0], j[8]) for j in r[3:]],
                         [(b'own', 31012), (b'short', 1052), (b'plain', 8012)])
        self.assertEqual(f('ackmany', 3, *[x for j in r[3:] for x in (j[0], j[2])]), [1, 1, 1])
        self.assertEqual(f('kickall', 'NOW', 1013), 2)
        check_invariants(read_raw(c, K), K)

    def test_state_of_version_8_is_refused_until_migrated_then_moved(self):
        # (Version 25: the calls that would read version 8 data refuse it,
        # OLDFORMAT, with nothing changed; redisched_migrate, one call,
        # rewrites it, the jobs due together in their version 8 order.)
        self.check_version_8()

    def test_version_8_migrates_a_part_a_call_beside_other_calls(self):
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        for i in range(30):  # bodies over 64 bytes: the jobs hash is a hash table
            f('put', 'j%02d' % i, 'b' * 100, 'AT', 5000 + i % 3, 'PRIORITY', i % 4, 'NOW', 1000 + i)
        held = f('reserve', 2, 'TTR', 60000, 'NOW', 6000)
        before = {('j%02d' % i): f('get', 'j%02d' % i, 'NOW', 4000) for i in range(30)}
        self.load(LUA)
        seq = int(c.call('HGET', K[6], 'seq'))
        calls, rewritten = 0, 0
        while True:
            r = f('migrate', 'LIMIT', 1)
            calls, rewritten = calls + 1, rewritten + r[1]
            # A job reads as before once rewritten, and refuses until then.
            for i, want in before.items():
                got = f('get', i, 'NOW', 4000)
                if isinstance(got, Error):
                    self.assertTrue(got.message.startswith('OLDFORMAT'), got.message)
                else:
                    self.assertEqual(got, with_own_ttr(want), i)
            if r[0] == 1:
                break
            self.assertLess(calls, 100)
        check_invariants(read_raw(c, K), K)
        self.assertGreater(calls, 2, 'the migration went in parts')
        self.assertEqual(rewritten, 30)
        self.assertEqual(int(c.call('HGET', K[6], 'seq')), seq + 30)
        self.assertEqual(c.call('HMGET', K[6], 'migrated', 'migrate_cursor'), [b'26', None])
        for rec in c.call('HVALS', K[0]):
            self.assertEqual(decode_record(rec)['format'], 2)
        for key in (K[1], K[2]):
            for m in c.call('ZRANGE', key, 0, -1):
                self.assertTrue(m[0] < 32, 'a version 8 member is left: %r' % m)
        self.assertEqual(f('migrate'), [1, 0, 0])
        # Jobs reserved by version 8 are settled by their tokens; the rest
        # go out by priority, then due time.
        self.assertEqual(f('ackmany', 2, *[x for j in held[3:] for x in (j[0], j[2])]), [1, 1])
        r = f('reserve', 30, 'NOW', 6001)
        got = [(int(j[5]), int(j[7])) for j in r[3:]]
        self.assertEqual(got, sorted(got, key=lambda pd: (-pd[0], pd[1])))
        self.assertEqual(len(got), 28)

    def test_migrate_removes_version_8_members_without_a_record(self):
        # A member of delayed or ready that is an id alone with no record
        # (no job holds it) is refused by the calls that meet it, and
        # removed by the migration.
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        f('put', 'gone', 'b', 'NOW', 1000)
        f('put', 'later', 'b', 'DELAY', 5000, 'NOW', 1000)
        c.check('HDEL', K[0], 'gone', 'later')
        self.load(LUA)
        self.older(lambda: f('reserve', 1, 'NOW', 1001))
        self.older(lambda: f('reserve', 1, 'NOW', 7000))
        r = f('migrate')
        self.assertEqual(r[:2], [1, 2])
        self.assertEqual(f('reserve', 1, 'NOW', 7000)[3:], [])
        self.assertEqual(c.call('ZRANGE', K[1], 0, -1), [])
        self.assertEqual(c.call('ZRANGE', K[2], 0, -1), [])  # (version 8 had no pin)

    def test_migrate_restarts_a_pass_whose_cursor_is_another_servers(self):
        # A scan's cursor is one server's own (its hash order): a cursor
        # left by another run (a failover, a restart) starts the pass again.
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        for i in range(40):
            f('put', 'j%02d' % i, 'b' * 100, 'NOW', 1000 + i)
        self.load(LUA)
        c.check('HSET', K[6], 'migrate_cursor', 'deadbeef:3:12345')
        rewritten = 0
        for _ in range(100):
            r = f('migrate', 'LIMIT', 7)
            rewritten += r[1]
            if r[0] == 1:
                break
        self.assertEqual(rewritten, 40)
        for rec in c.call('HVALS', K[0]):
            self.assertEqual(decode_record(rec)['format'], 2)
        check_invariants(read_raw(c, K), K)

    def test_migrate_rewrites_a_thousand_jobs_in_one_call_and_refuses_a_larger_limit(self):
        # (The HSET goes in parts: Lua unpacks at most ~8000 values; a
        # refusal after the first write would be WRITEORDER here.)
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        for start in range(0, 1200, 400):
            args = []
            for i in range(start, start + 400):
                args += ['j%04d' % i, 'b', 0]
            f('putmany', 400, *args, 'NOW', 1000)
        self.load(LUA)
        r = self.unchanged(lambda: f('migrate', 'LIMIT', 1001))
        self.assertIsInstance(r, Error)
        rewritten = 0
        while True:
            r = f('migrate', 'LIMIT', 1000)
            rewritten += r[1]
            if r[0] == 1:
                break
        self.assertEqual(rewritten, 1200)
        self.assertEqual(len(self.f('reserve', 1000, 'NOW', 2000)[3:]), 1000)

    def older(self, call):
        """call() refuses with OLDFORMAT and changes nothing."""
        r = self.unchanged(call)
        self.assertIsInstance(r, Error)
        self.assertTrue(r.message.startswith('OLDFORMAT'), r.message)

    def check_version_8(self):
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        f('put', 'late', 'b1', 'AT', 50000, 'PRIORITY', 3, 'NOW', 1000)
        f('put', 'due2', 'b2', 'AT', 3000, 'NOW', 1000)
        f('put', 'due1', 'b3', 'AT', 3000, 'NOW', 1001)
        f('put', 'opts', 'b4', 'PRIORITY', 9, 'TTR', 1234, 'ATTEMPTS', 3,
          'BACKOFF', 'fixed', 77, 0, 'NOW', 1002)
        f('put', 'plain', 'b5', 'NOW', 1003)
        f('put', 'held', 'b6', 'PRIORITY', 1000, 'NOW', 1004)
        held = f('reserve', 1, 'TTR', 60000, 'NOW', 1005)[3]
        f('put', 'dies', 'b7', 'PRIORITY', 1000, 'ATTEMPTS', 1, 'NOW', 1006)
        dies = f('reserve', 1, 'NOW', 1006)[3]
        f('fail', 'dies', dies[2], 'kaput', 'NOW', 1007)
        f('put', 'kept', 'b8', 'PRIORITY', 1000, 'NOW', 1008)
        kept = f('reserve', 1, 'NOW', 1008)[3]
        f('ack', 'kept', kept[2], 'KEEP', 100000, 'NOW', 1009)
        # Reserved under version 8, settled under version 9 (below).
        held8 = {}
        for id_ in ('failing', 'lapsing', 'keeping'):
            f('put', id_, 'b', 'PRIORITY', 1000, 'ATTEMPTS', 1, 'NOW', 1009)
            held8[id_] = f('reserve', 1, 'TTR', 1000, 'NOW', 1009)[3][2]
        # A record of format 1 written by hand: flags 1 (priority), the stamp
        # created * 4096 + sequence mod 4096, priority 7, the body.
        stamp = (1700000000000 * 4096 + 5).to_bytes(7, 'big')
        c.check('HSET', K[0], 'raw', b'\x01' + stamp + (7).to_bytes(2, 'big') + b'hello')
        c.check('ZADD', K[2], (1000 - 7) * 2 ** 43 + 900, 'raw')
        ids = ['late', 'due2', 'due1', 'opts', 'plain', 'held', 'dies', 'kept', 'raw',
               'failing', 'lapsing', 'keeping']
        before = {i: f('get', i) for i in ids}
        lists = {s: f('list', s, 0, 100, 'NOW', 1010) for s in
                 ['delayed', 'ready', 'reserved', 'dead', 'done']}

        self.load(LUA)
        for i in ids:
            self.older(lambda: f('get', i, 'NOW', 1010))
        for s in lists:
            self.older(lambda: f('list', s, 0, 100, 'NOW', 1010))
        self.older(lambda: f('reserve', 10, 'NOW', 1010))
        self.older(lambda: f('pull', 10, 'NOW', 1010))
        self.older(lambda: f('release', 'held', held[2], 'NOW', 1010))
        self.older(lambda: f('fail', 'held', held[2], 'e', 'NOW', 1010))
        self.older(lambda: f('ack', 'held', held[2], 'KEEP', 10, 'NOW', 1010))
        self.older(lambda: f('kick', 'dies'))
        self.older(lambda: f('delete', 'plain'))
        self.older(lambda: f('put', 'plain', 'b', 'UPSERT', 'NOW', 1010))
        self.older(lambda: f('requeue', 'NOW', 2009))
        members = c.call('ZCARD', K[1]) + c.call('ZCARD', K[2])
        self.assertEqual(f('migrate'), [1, len(ids), len(ids) + members])
        for i in ids:
            self.assertEqual(decode_record(c.call('HGET', K[0], i))['format'], 2, i)
            self.assertEqual(f('get', i, 'NOW', 1010), with_own_ttr(before[i]), i)
        # The same jobs; version 8 listed its delayed jobs due together
        # by id, and handed them out by put order, as they now list.
        for s, want in lists.items():
            got = f('list', s, 0, 100, 'NOW', 1010)
            self.assertEqual(sorted(got[1:]), sorted(with_own_ttr(j) for j in want[1:]), s)
        self.assertEqual(self.listed('delayed', 1010), ['due2', 'due1', 'late'])
        self.assertEqual((self.field('opts', 'own_ttr'), self.field('plain', 'own_ttr')), (1, 0))
        self.assertEqual(self.field('raw', 'created'), 1700000000000)
        self.assertEqual(self.field('raw', 'priority'), 7)
        s = dict(zip(*[iter(f('stats', 'NOW', 1010))] * 2))
        self.assertEqual((s[b'ready'], s[b'delayed'], s[b'reserved'], s[b'dead'], s[b'done']),
                         (3, 3, 4, 1, 1))
        # Version 8 reservations settled (their records rewritten by the
        # migration, each with a put sequence of its own).
        self.assertEqual(f('fail', 'failing', held8['failing'], 'boom', 'NOW', 1500), Status('dead'))
        self.assertEqual(f('ack', 'keeping', held8['keeping'], 'KEEP', 100000, 'NOW', 1500), 1)
        self.assertEqual(f('requeue', 'NOW', 2009), [0, 1, 61005])
        for id_ in ('failing', 'lapsing', 'keeping'):
            rec = decode_record(c.call('HGET', K[0], id_))
            self.assertEqual(rec['format'], 2, id_)
        self.assertEqual(self.field('lapsing', 'error'), b'time-to-run lapsed')
        self.assertEqual(f('kick', 'failing', 'lapsing'), 2)
        self.assertEqual(f('delete', 'failing', 'lapsing', 'keeping'), 3)
        # The reservation made by version 8 is still held by its token.
        self.assertEqual(f('touch', 'held', held[2], 'NOW', 1011), 61011)
        # Ready jobs of version 8 go first, in their order; then the due ones.
        r = f('reserve', 10, 'NOW', 3000)
        self.assertEqual(self.ids(r), ['opts', 'raw', 'plain', 'due2', 'due1'])
        tokens = {j[0]: j[2] for j in r[3:]}
        self.assertEqual(r[3][8] - 3000, 1234, 'the job\'s own TTR')
        self.assertEqual(f('release', 'opts', tokens[b'opts'], 'NOW', 3001), 1)
        rec = decode_record(c.call('HGET', K[0], 'opts'))
        self.assertEqual((rec['format'], rec['prio'], rec['ttr'], rec['max'], rec['backoff']),
                         (2, 9, 1234, 3, (1, 77, 0)))
        self.assertEqual(f('ackmany', 4, 'raw', tokens[b'raw'], 'plain', tokens[b'plain'],
                           'due2', tokens[b'due2'], 'due1', tokens[b'due1']), [1, 1, 1, 1])
        self.assertEqual(f('ack', 'held', held[2], 'NOW', 3002), 1)
        self.assertEqual(f('kick', 'dies'), 1)
        self.assertEqual(self.field('dies', 'error'), b'kaput')
        self.assertEqual(f('delete', 'kept'), 1)
        r = f('reserve', 10, 'NOW', 60000)
        self.assertEqual(sorted(self.ids(r)), ['dies', 'late', 'opts'])
        self.assertEqual(f('ackmany', 3, *[x for j in r[3:] for x in (j[0], j[2])]), [1, 1, 1])
        check_invariants(read_raw(c, K), K)
        self.assertEqual(c.call('HLEN', K[0]), 0)

    def test_a_version_8_lease_with_a_time_in_e_notation_is_read(self):
        c, K, f = self.c, self.K, self.f
        self.load(OLD[8])
        f('put', 'x', 'b', 'NOW', 100000000000000)
        r = f('reserve', 1, 'NOW', 100000000000000)
        self.assertEqual(c.call('HGET', K[7], 'x')[:8], b'1:1e+14:')
        self.load(LUA)
        self.older(lambda: f('get', 'x'))
        self.assertEqual(f('migrate'), [1, 1, 1])
        self.assertEqual(self.field('x', 'reserved_at'), 100000000000000)
        self.assertEqual(f('delete', 'x'), 1)
        self.assertEqual(c.call('KEYS', '*'), [K[6]])
        del r


# The issue's cases, each of which fails on version 8 (--expect-fail).
ISSUE_CASES = [n for cls in (Ordering, Limits) for n in dir(cls)
               if n.startswith('test_') and n not in (
                   'test_06b_in_a_backlog_no_job_goes_ahead_of_an_older_due_one',
                   'test_06c_in_a_backlog_a_wide_priority_is_held_by_its_exact_due_time')] + [
    'test_put_of_an_existing_id', 'test_replace_of_a_missing_job_even_on_a_new_topic',
    'test_putmany_with_every_job_refused', 'test_putmany_takes_no_number_for_a_refused_job',
    'test_ack_of_a_missing_job_trims_nothing', 'test_keys_are_checked_by_name_before_anything_is_written',
    'test_restore_with_too_few_arguments', 'test_resume_takes_now', 'test_ackmany_with_a_repeated_id',
    'test_reserve_next_counts_this_calls_reservation',
]

# The version that made each case pass: --expect-fail runs, against a library
# of version v, every case fixed in a later version, and each must fail there.
FIXED_IN = {
    30: ['test_v30_01_failed_and_lapsed_attempts_keep_when_who_and_why_the_last_ten',
         'test_v30_02_a_bad_worker_is_refused_before_anything_moves',
         'test_v30_03_restore_takes_the_history_back_and_checks_it'],
    27: ['test_v27_01_a_batch_against_its_own_order_lists_what_follows_the_end'],
    9: ISSUE_CASES,
    10: ['test_v10_01_a_job_of_ttr_0_is_delivered_at_most_once',
         'test_v10_02_a_job_of_ttr_0_leaves_in_its_place',
         'test_v10_03_ttr_0_through_putmany_restore_get_and_list',
         'test_v10_05_fails_attempts_overrides_the_jobs_and_get_shows_it',
         'test_v10_06_fails_attempts_is_checked_and_a_refused_fail_stores_nothing',
         'test_v10_07_own_ttr_tells_a_jobs_own_ttr_from_the_default'],
    19: ['test_v19_01_dead_or_deleted_jobs_are_published_kept_or_not'],
    21: ['test_v21_01_a_capped_pull_looks_again_when_the_first_reservation_still_to_lapse_does'],
    22: ['test_v22_01_reserve_and_pull_refuse_with_nothing_moved_and_hand_the_jobs_out_once_readable',
         'test_v22_05_list_refuses_every_state_with_nothing_promoted',
         'test_v22_07_a_generated_id_that_is_taken_at_the_counters_end_refuses_before_any_write'],
    23: ['test_v23_01_eleven_keys_are_checked_by_name_and_count',
         'test_v23_02_eight_and_eleven_keys_reach_the_same_topic'],
    20: ['test_v20_01_a_put_retried_after_its_job_finished_answers_exists',
         'test_v20_02_the_window_is_the_topics_and_0_turns_it_off',
         'test_v20_03_a_job_acked_with_keep_is_refused_for_its_keep_not_the_window'],
}
CLASSES = (Ordering, Limits, RefusedCallsChangeNothing, Settled, Version10, Version19, Version20,
           Version21, Version22, Version23, Version27, Version30, Upgrade)


def expect_fail(libraries):
    """Every case fixed after a library's version must fail on it."""
    global LUA, EXPECT_FAIL
    EXPECT_FAIL = True
    held = []
    for lib in libraries:
        LUA = lib
        c = Conn(SERVER.port)
        harness.load(c, harness.library_source(lib))
        version = c.check('FCALL', 'redisched_version', 0)
        c.close()
        names = {n for v, ns in FIXED_IN.items() if v > version for n in ns}
        assert names, '%s (version %d) predates no change here' % (lib, version)
        for cls in CLASSES:
            for name in unittest.defaultTestLoader.getTestCaseNames(cls):
                if name in names:
                    r = unittest.TestResult()
                    cls(name).run(r)
                    if r.wasSuccessful():
                        held.append((lib, name))
                    print('%-8s %s' % ('passes' if r.wasSuccessful() else 'fails', name))
                    names.discard(name)
        assert not names, 'no such case: %r' % sorted(names)
        n = len({x for v, ns in FIXED_IN.items() if v > version for x in ns})
        print('%d of %d cases fail on %s (version %d)'
              % (n - sum(1 for h in held if h[0] == lib), n, lib, version))
    return 1 if held else 0


def main():
    global LUA, SERVER
    ap = argparse.ArgumentParser()
    ap.add_argument('--lua', required=True, nargs='+',
                    help='the library; with --expect-fail, one or more older ones')
    ap.add_argument('--expect-fail', action='store_true')
    ap.add_argument('-v', action='store_true')
    a = ap.parse_args()
    if not a.expect_fail and len(a.lua) != 1:
        ap.error('give one --lua library (several only with --expect-fail)')
    LUA = a.lua[0]
    SERVER = RedisServer()
    try:
        loader = unittest.defaultTestLoader
        if a.expect_fail:
            return expect_fail(a.lua)
        suite = loader.loadTestsFromModule(sys.modules[__name__])
        r = unittest.TextTestRunner(verbosity=2 if a.v else 1).run(suite)
        if r.skipped:
            print('skipped tests count as failures')
            return 1
        return 0 if r.wasSuccessful() else 1
    finally:
        SERVER.stop()


if __name__ == '__main__':
    sys.exit(main())
