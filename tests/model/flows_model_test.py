#!/usr/bin/env python3
"""Flows (library version 35) against a model, through movers that fail.

Random runs over three topics: parents put with AFTER (their dependencies
in two other topics, each with a policy), children put before or after
them, reserved and acked (with a result), failed for good, or deleted;
and movers that carry the outboxes out the way a mover may go wrong: a
call made twice, a mover stopped before it deletes the entry (the next
one makes the call again), an entry carried out long after a later one,
an old entry replayed after it was deleted. After every step, and at the
end, the library must agree with the model:

  - a parent is blocked while a dependency it needs is pending, and is
    never handed out before; released (ready), it is handed out once;
  - a failed dependency of policy fail kills it; ignore and drop settle it
    as failed and dropped, with the error;
  - each dependency's outcome and value are the model's (a child acked
    before its parent named it: done with no value, being in the retry
    window; dead before: failed; deleted before: never found, pending);
  - the write-order and key checkers of tests/model hold for every call.

Batches (version 36) in the parents' topic gather children as members,
added and sealed at random: a batch never counts a member ahead of the
model, never finishes before it is sealed with every member finished,
and at the end counts each member as the model allows.

Planted bugs that it must catch (--mutants): a parent released one
settlement early, a settlement applied twice, news for an earlier job of
the same id applied to a later one, a batch finished one member early, a
batch member counted twice, a result that no job waits for yet dropped.

    python3 flows_model_test.py --lua ../../lua/redisched.lua [--runs 40] [--mutants]
"""

import argparse
import random
import sys

import harness

NOW = 1_800_000_000_000  # every call's clock: the retry window never ends
TOPICS = ('fp', 'fa', 'fb')  # parents, and two topics of children
# A topic of children with a retry window of 0: an acked job leaves no trace
# there, and a result is kept only by the tombstones of jobs waited for.
WINDOWLESS = 'fb'
POLICIES = ('fail', 'ignore', 'drop')

# Each a name and its edits of the library.
MUTANTS = [
    ('a parent released one settlement early', [
        ("if redis.call('HINCRBY', k.flow, left_field(pid), -n) > 0 then return 1 end",
         "if redis.call('HINCRBY', k.flow, left_field(pid), -n) > 1 then return 1 end"),
        ("local left = tonumber(redis.call('HGET', k.flow, left_field(pid)) or 0) - n",
         "local left = tonumber(redis.call('HGET', k.flow, left_field(pid)) or 0) - n - 1")]),
    ('a settlement applied twice', [
        ('if s and PENDING[s] and not seen[fields[i]] then', 'if s and not seen[fields[i]] then')]),
    ('news for an earlier job of the same id applies to a later one', [
        ("return DEP .. id .. SEP .. gen .. SEP .. topic .. SEP .. dep",
         "return DEP .. id .. SEP .. topic .. SEP .. dep")]),
    ('a batch finished one member early', [
        ("if redis.call('HINCRBY', k.flow, left_field(id), change) > 0 then",
         "if redis.call('HINCRBY', k.flow, left_field(id), change) > 1 then")]),
    ('a batch member counted twice', [
        ("    redis.call('HDEL', k.flow, unpack(del))\n    let_go(k, pid, gen, let)",
         "    let_go(k, pid, gen, let)")]),
    # (versions 35 to 37: a result that no job waited for yet was refused,
    # or with FORWARD dropped, though a depend could be on its way)
    ('a result that no job waits for yet is dropped', [
        ("      if keep < window then keep = window end\n", "      window = nil\n")]),
    # (No longer planted: a finished job that keeps no tombstone, the first
    # design, which forgot its dependents at once. Its harm was a depend
    # carried again, ahead of the resolve, telling what the trace said, done
    # without the result. Since version 38 a job acked with a result is kept
    # with it for the retry window, so the trace says the same. What the
    # tombstone still decides (what a dependent named after the kept record
    # went is told) this model allows either way.)
]


class Failed(Exception):
    pass


def keys(topic):
    return harness.topic_keys(topic, count=15)


class Run:
    """One random run. The model keeps, per child, what happened to it and
    when (a step number), and per parent, its dependencies and when each
    was asked for (its depend carried out); what the library must show
    follows from those (expect), whatever order the movers took."""

    def __init__(self, conn, rng, steps):
        self.c, self.rng, self.steps = conn, rng, steps
        self.log = []
        self.t = 0  # the step number
        # (topic, id) -> {'state': absent|waiting|done|dead|deleted, 'at': step it
        # finished, 'value': its result or error, 'dead_deleted': deleted once dead}
        self.children = {}
        # id -> {'deps': [(topic, id, policy)], 'gen', 'asked': {dep: step}, 'state':
        # live|deleted|taken}
        self.parents = {}
        self.next_parent = 0
        # id -> {'members': [(topic, id)], 'gen', 'asked': {member: step}, 'sealed'}
        self.batches = {}
        self.applied = []  # entries carried out: (fn, topic, args), for replays

    def call(self, topic, op, *args):
        now = () if op in ('outbox', 'moved') else ('NOW', NOW)  # (they read no clock)
        r = self.c.call('FCALL', 'redisched_' + op, 15, *keys(topic), *args, *now)
        self.log.append(f'{self.t}: {op} {topic} {[str(a)[:20] for a in args[:6]]} -> {str(r)[:80]}')
        if isinstance(r, harness.Error):
            raise Failed(f'{op} on {topic}: {r.message}')
        return r

    def child(self, d):
        return self.children.setdefault(d, {'state': 'absent', 'at': None, 'value': None})

    # ---- what the library must show

    def allowed(self, pid, d):
        """The (outcome, value)s dependency d of parent pid may end with,
        once every outbox is carried out: [('pending', '')] while it can
        still come. Named before the job finished: what it told its
        dependents. Named after: what its tombstone says (when it had
        dependents then, and not all have forgotten it yet), or what its
        trace says (acked with a result: kept done with it, until deleted;
        acked: done, no value, its id in the retry window, or never found
        where the window is 0; dead: its error; deleted: never found)."""
        m, ch = self.parents.get(pid) or self.batches[pid], self.child(d)
        policy = 'ignore' if pid in self.batches else [x[2] for x in m['deps'] if x[:2] == d][0]
        asked = m['asked'].get(d)
        if asked is None or ch['at'] is None:
            return [('pending', '')]

        def failed(value):
            return ({'fail': 'failed', 'ignore': 'failed', 'drop': 'dropped'}[policy], value)

        told = ('done', ch['value']) if ch['how'] == 'done' else failed(ch['value'])
        if asked <= ch['at']:
            return [told]
        gone_before = lambda step: step is not None and step < asked  # noqa: E731
        trace = ((('done', '') if gone_before(ch['kept_deleted']) else ('done', ch['value']))
                 if ch['how'] == 'done' and ch['kept']
                 else ('pending', '') if ch['how'] == 'done' and d[0] == WINDOWLESS
                 else ('done', '') if ch['how'] == 'done'
                 else failed(ch['value']) if ch['how'] == 'dead' and not (
                     ch['dead_deleted'] is not None and ch['dead_deleted'] < asked)
                 else ('pending', ''))
        return [told, trace] if ch['had'] else [trace]

    # ---- the steps

    # ---- the steps

    def put_parent(self):
        # Now and then under the id of one deleted: news meant for that one
        # (its gen) must not reach this one.
        deleted = [p for p, m in self.parents.items() if m['state'] == 'deleted']
        if deleted and self.rng.random() < 0.3:
            pid = self.rng.choice(deleted)
        else:
            pid = f'p{self.next_parent}'
            self.next_parent += 1
        deps = []
        for _ in range(self.rng.randint(1, 4)):
            d = (self.rng.choice(TOPICS[1:]), f'c{self.rng.randint(0, 9)}')
            if d not in [x[:2] for x in deps]:
                deps.append(d + (self.rng.choice(POLICIES),))
        words = ['AFTER', len(deps)]
        for d in deps:
            words += list(d)
        if self.call('fp', 'put', pid, 'body', *words) != 1:
            raise Failed(f'put of {pid} refused')
        gen = int(self.c.call('HGET', keys('fp')[6], 'seq'))
        self.parents[pid] = {'deps': deps, 'gen': gen, 'asked': {}, 'state': 'live'}

    def put_child(self):
        absent = [(t, f'c{i}') for t in TOPICS[1:] for i in range(10)
                  if self.child((t, f'c{i}'))['state'] == 'absent']
        if not absent:
            return
        d = self.rng.choice(absent)
        if self.call(d[0], 'put', d[1], 'x') != 1:
            raise Failed(f'put of {d} refused')
        self.child(d)['state'] = 'waiting'

    def finish_child(self):
        topic = self.rng.choice(TOPICS[1:])
        r = self.call(topic, 'reserve', 1, 'TTR', 600000)
        if len(r) < 4:
            return
        cid, token = r[3][0].decode(), r[3][2]
        ch = self.child((topic, cid))
        # (whether it has dependents: a result goes with the ack of such a
        # job, and they keep what it told them until they forget it)
        asked = asked_at_finish = self.c.call('HEXISTS', keys(topic)[13], cid) == 1
        if self.rng.random() < 0.7:
            # (a result, always for a job waited for; with one, the job is
            # kept done for the retry window, for a depend on its way)
            # (where no window is, a result nobody waits for is refused)
            windowless = topic == WINDOWLESS
            value = ('' if windowless and not asked else f'result of {cid}'
                     if asked or self.rng.random() < 0.75 else '')
            args = [cid, token] + (['RESULT', value] if value else [])
            if self.call(topic, 'ack', *args) != 1:
                raise Failed(f'ack of {topic}/{cid} refused')
            ch.update(state='done', how='done', value=value, kept=bool(value) and not windowless,
                      kept_deleted=None)
        else:
            self.call(topic, 'fail', cid, token, f'{cid} broke', 'DEAD')
            ch.update(state='dead', how='dead', value=f'{cid} broke')
        ch['at'], ch['dead_deleted'], ch['had'] = self.t, None, asked_at_finish

    def delete_child(self):
        d = (self.rng.choice(TOPICS[1:]), f'c{self.rng.randint(0, 9)}')
        ch = self.child(d)
        had = self.c.call('HEXISTS', keys(d[0])[13], d[1]) == 1
        self.call(d[0], 'delete', d[1])
        if ch['state'] == 'waiting':
            ch.update(state='deleted', how='deleted', value='deleted', at=self.t, dead_deleted=None,
                      had=had)
        elif ch['state'] == 'dead' and ch['dead_deleted'] is None:
            ch['dead_deleted'] = self.t  # (it told its dependents when it died)
        elif ch['state'] == 'done' and ch['kept'] and ch['kept_deleted'] is None:
            ch['kept_deleted'] = self.t  # (its record goes; its id stays in the window)

    def change_batch(self):
        """Adds members to a batch (made by the first), or seals it."""
        bid = f'b{self.rng.randint(0, 2)}'
        b = self.batches.get(bid)
        if b and b['sealed']:
            return
        if b and self.rng.random() < 0.25:
            self.call('fp', 'batch', bid, 'SEAL')
            b['sealed'] = True
            return
        # (each member once: named again after it finished, it would count again)
        named = b['members'] if b else []
        fresh = [(t, f'c{i}') for t in TOPICS[1:] for i in range(10) if (t, f'c{i}') not in named]
        add = self.rng.sample(fresh, min(len(fresh), self.rng.randint(1, 3)))
        if not add:
            return
        words = ['ADD', len(add)] + [w for m in add for w in m]
        self.call('fp', 'batch', bid, *words)
        if not b:
            gen = int(self.c.call('HGET', keys('fp')[6], 'seq'))
            b = self.batches[bid] = {'members': [], 'gen': gen, 'asked': {}, 'sealed': False}
        b['members'] += add

    def delete_parent(self):
        live = [p for p, m in self.parents.items() if m['state'] == 'live']
        if live:
            pid = self.rng.choice(live)
            self.call('fp', 'delete', pid)
            self.parents[pid]['state'] = 'deleted'

    # ---- movers

    def move(self):
        topic = self.rng.choice(TOPICS)
        entries = self.call(topic, 'outbox', 1000)
        if not entries:
            return
        self.rng.shuffle(entries)  # (in any order)
        for e in entries[:self.rng.randint(1, len(entries))]:
            eid, fn, target, args = e[0], e[1].decode(), e[2].decode(), e[3:]
            for _ in range(self.rng.choice((1, 1, 2))):  # a call made twice
                self.carry(fn, target, args)
            if self.rng.random() < 0.2:
                continue  # the mover stopped before it deleted the entry
            if self.call(topic, 'moved', eid) != 1:
                raise Failed(f'moved {eid} deleted nothing')
            self.applied.append((fn, target, args))
        if self.applied and self.rng.random() < 0.2:  # an old entry, replayed
            self.carry(*self.rng.choice(self.applied))

    def carry(self, fn, target, args):
        self.call(target, fn, *args)
        if fn != 'depend':
            return
        pid = args[1].decode()
        m = self.parents.get(pid) or self.batches.get(pid)
        if m and m['gen'] == int(args[2]):
            for i in args[4:]:
                m['asked'].setdefault((target, i.decode()), self.t)

    # ---- checks

    def check_batches(self, final):
        for bid, b in self.batches.items():
            g = self.c.call('FCALL', 'redisched_get', 15, *keys('fp'), bid, 'NOW', NOW)
            f = {g[i].decode(): g[i + 1] for i in range(0, len(g), 2)}
            state, done, failed = f['state'].decode(), f['batch_done'], f['batch_failed']
            if f['batch_total'] != len(b['members']):
                raise Failed(f'{bid} counts {f["batch_total"]} members, the model {len(b["members"])}')
            kinds = {m: {o[0] for o in self.allowed(bid, m)} for m in b['members']}
            finished = [m for m in b['members'] if self.child(m)['at'] is not None]
            if done + failed > len(finished):
                raise Failed(f'{bid} counts {done} done, {failed} failed of {len(finished)} finished')
            if done > sum(1 for m in finished if 'done' in kinds[m]):
                raise Failed(f'{bid} counts {done} done, ahead of {kinds}')
            can_finish = b['sealed'] and all('pending' not in k for k in kinds.values())
            if state == 'done' and not (b['sealed'] and done + failed == len(b['members'])):
                raise Failed(f'{bid} finished early: {done} done, {failed} failed, {kinds}')
            if final and can_finish and all(len(k) == 1 for k in kinds.values()):
                want = sum(1 for k in kinds.values() if k == {'done'})
                if state != 'done' or done != want or failed != len(b['members']) - want:
                    raise Failed(f'{bid} is {state}, {done} done, {failed} failed; the model: {kinds}')

    def check(self, final=False):
        self.check_batches(final)
        for pid, m in self.parents.items():
            g = self.c.call('FCALL', 'redisched_get', 15, *keys('fp'), pid, 'DEPS', 'NOW', NOW)
            if m['state'] in ('deleted', 'taken'):
                if g is not None:
                    raise Failed(f'{pid} should be gone, is {g[3]}')
                continue
            f = {g[i].decode(): g[i + 1] for i in range(0, len(g), 2)}
            state = f['state'].decode()
            m['shown'] = state
            policy = {x[:2]: x[2] for x in m['deps']}
            deps = {(x[1].decode(), x[3].decode()): (x[7].decode(), x[9].decode()) for x in f['deps']}
            for d, got in deps.items():
                allowed = self.allowed(pid, d)
                # Never ahead of the model (a settlement may still be in an
                # outbox: pending meanwhile); at the end, as it allows.
                if got[0] != 'pending' and got not in allowed:
                    raise Failed(f'{pid}: {d} is {got}, the model allows {allowed}')
                if final and state != 'dead' and got not in allowed:
                    raise Failed(f'{pid}: {d} is {got} at the end, the model allows {allowed}')
            killed = any(o[0] == 'failed' and policy[d] == 'fail' for d, o in deps.items())
            pending = [d for d, o in deps.items() if o[0] == 'pending']
            if state in ('ready', 'delayed') and (pending or killed):
                raise Failed(f'{pid} is {state} with {deps}')
            if state == 'dead' and not killed:
                raise Failed(f'{pid} died with {deps}')
            if state == 'blocked' and (killed or not pending):
                raise Failed(f'{pid} is blocked with {deps}')

    def drain(self):
        for _ in range(50):
            moved = 0
            for topic in TOPICS:
                for e in self.call(topic, 'outbox', 1000):
                    self.carry(e[1].decode(), e[2].decode(), e[3:])
                    self.call(topic, 'moved', e[0])
                    moved += 1
            if not moved:
                return
        raise Failed('the outboxes never emptied')

    def take_parents(self):
        """Every released parent is handed out once, and no other."""
        while True:
            r = self.call('fp', 'reserve', 100, 'TTR', 600000)
            if len(r) < 4:
                break
            for j in r[3:]:
                pid = j[0].decode()
                m = self.parents[pid]
                if m['state'] != 'live' or m.get('shown') != 'ready':
                    raise Failed(f'{pid} handed out, shown {m.get("shown")}')
                m['state'] = 'taken'
                self.call('fp', 'ack', pid, j[2])
        for pid, m in self.parents.items():
            if m['state'] == 'live' and m.get('shown') == 'ready':
                raise Failed(f'{pid} released but never handed out')

    def run(self):
        self.c.call('FCALL', 'redisched_retrywindow', 15, *keys(WINDOWLESS), 0)
        steps = [self.put_parent, self.put_child, self.finish_child, self.delete_child,
                 self.delete_parent, self.change_batch, self.move]
        for self.t in range(1, self.steps + 1):
            self.rng.choices(steps, [3, 4, 4, 1, 1, 2, 6])[0]()
            self.check()
        self.t += 1
        self.drain()
        self.check(final=True)
        self.take_parents()


def run_all(lua, runs, steps, seed, mutation=None):
    server = harness.RedisServer()
    try:
        conn = harness.Conn(server.port)
        harness.load(conn, harness.library_source(lua, mutation=mutation, write_order=True))
        for k in range(runs):
            conn.check('FLUSHALL')
            run = Run(conn, random.Random(seed + k), steps)
            try:
                run.run()
            except Failed as e:
                return f'seed {seed + k}: {e}', run.log
        return None, None
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--lua', required=True)
    ap.add_argument('--runs', type=int, default=40)
    ap.add_argument('--steps', type=int, default=120)
    ap.add_argument('--seed', type=int, default=35)
    ap.add_argument('--mutants', action='store_true', help='also check that each planted bug is caught')
    a = ap.parse_args()
    failure, log = run_all(a.lua, a.runs, a.steps, a.seed)
    if failure:
        print('FAIL:', failure)
        print('\n'.join(log[-30:]))
        return 1
    print(f'{a.runs} runs of {a.steps} steps agree with the model')
    if not a.mutants:
        return 0
    missed = 0
    for name, edits in MUTANTS:
        caught, _ = run_all(a.lua, a.runs, a.steps, a.seed, mutation=edits)
        print(('caught  ' if caught else 'MISSED  ') + name + (f'  ({caught[:90]})' if caught else ''))
        missed += 0 if caught else 1
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main())
