#!/usr/bin/env python3
"""What flows cost inside Redis (library version 35, docs/flows.md): a flow
of 1 parent and --jobs children, beside as many plain jobs in the same run.

    python3 bench/flow_costs.py [--jobs 10000] [--rounds 3]

Per child, in microseconds of Redis's time in FCALLs (INFO commandstats):
  put        a plain put of one job; a child's put plus its share of the
             parent's put (which names every child, and the depend that
             records the parent under each: one call per 1000 children)
  completion a plain job's ack; a child's ack (which finds its dependent,
             adds a resolve to its outbox and keeps a tombstone) plus its
             share of the mover's calls (outbox, resolve on the parent,
             moved; then the parent's forget, which drops the tombstones);
             the last resolve releases the parent
  ratio      completion / a plain ack: issue 36 asks for 1.5 at most
The mover reads 1000 entries a call and merges a job's resolves into calls
of up to 1000 settlements, as Client::move_outbox does (its calls go out
at once, pipelined here).
Also: plain acks of a library that has no flows (--library-before, e.g.
version 34 from git) against this one's, the hot path's added read.
Starts its own redis-server (scratch_redis.py); needs Debian's python3-redis.
"""

import argparse
import statistics

from scratch_redis import LIBRARY, fcall_usec, load_library, scratch_redis

NAMES = ('jobs', 'delayed', 'ready', 'reserved', 'dead', 'done', 'meta', 'leases', 'queue',
         'later', 'gone', 'history', 'blocked', 'flow', 'outbox')


def keys(topic, n=15):
    return [f"redisched:{{{topic}}}:{k}" for k in NAMES[:n]]


def call(r, topic, op, *args, n=15):
    return r.execute_command("FCALL", f"redisched_{op}", n, *keys(topic, n), *args)


def put_all(r, topic, ids, n=15):
    pipe = r.pipeline(transaction=False)
    for i in ids:
        pipe.execute_command("FCALL", "redisched_put", n, *keys(topic, n), i, b"x" * 100)
    assert all(x == 1 for x in pipe.execute())


def reserve_all(r, topic, count, n=15):
    held = []
    while len(held) < count:
        got = call(r, topic, "reserve", 1000, "TTR", 600000, n=n)[3:]
        assert got, "fewer jobs than put"
        held += got
    return held


def ack_all(r, topic, held, n=15):
    pipe = r.pipeline(transaction=False)
    for j in held:
        pipe.execute_command("FCALL", "redisched_ack", n, *keys(topic, n), j[0], j[2])
    assert all(x == 1 for x in pipe.execute())


def move(r, topic):
    """Carries the topic's outbox out as a mover does; returns the entries."""
    total = 0
    while True:
        entries = call(r, topic, "outbox", 1000)
        if not entries:
            return total
        # (a job's resolves merged into calls of up to 1000 settlements)
        calls, open_ = [], {}
        for e in entries:
            fn, target, args = e[1].decode(), e[2].decode(), list(e[3:])
            key = (target, args[0], args[1]) if fn == "resolve" else None
            c = open_.get(key) if key else None
            if c is not None and int(c[2][2]) + int(args[2]) <= 1000:
                c[2][2] = int(c[2][2]) + int(args[2])
                c[2] += args[3:]
                continue
            calls.append([fn, target, args])
            if key:
                open_[key] = calls[-1]
        pipe = r.pipeline(transaction=False)
        for fn, target, args in calls:
            pipe.execute_command("FCALL", f"redisched_{fn}", 15, *keys(target), *args)
        pipe.execute()
        call(r, topic, "moved", *[e[0] for e in entries])
        total += len(entries)


def one_round(r, n, rnd):
    plain, parents, kids = f"plain{rnd}", f"parents{rnd}", f"kids{rnd}"
    ids = [f"c{i:06d}" for i in range(n)]
    out = {}

    r.config_resetstat()
    put_all(r, plain, ids)
    out["plain put"] = fcall_usec(r) / n

    r.config_resetstat()
    after = ["AFTER", n]
    for i in ids:
        after += [kids, i, "fail"]
    assert call(r, parents, "put", "invoice", b"x" * 100, *after) == 1
    assert move(r, parents) == (n + 999) // 1000
    put_all(r, kids, ids)
    out["child put"] = fcall_usec(r) / n

    held = reserve_all(r, plain, n)
    r.config_resetstat()
    ack_all(r, plain, held)
    out["plain ack"] = fcall_usec(r) / n

    held = reserve_all(r, kids, n)
    r.config_resetstat()
    ack_all(r, kids, held)
    out["child ack"] = fcall_usec(r) / n
    assert move(r, kids) == n
    move(r, parents)  # (released, the parent has each child forget it: forget)
    assert r.hlen(keys(kids)[13]) == 0, "every tombstone forgotten"
    out["child completion"] = fcall_usec(r) / n
    assert call(r, parents, "stats")[call(r, parents, "stats").index(b"blocked") + 1] == 0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--library", default=LIBRARY)
    ap.add_argument("--library-before", help="a library without flows, for its plain acks")
    a = ap.parse_args()

    with scratch_redis() as r:
        version = load_library(r, a.library)
        rows = [one_round(r, a.jobs, i) for i in range(a.rounds)]
        print(f"library {version}, {a.jobs} children of one parent, {a.rounds} rounds "
              "(median; min..max), us of Redis per job")
        for name in ("plain put", "child put", "plain ack", "child ack", "child completion"):
            v = [row[name] for row in rows]
            print(f"  {name:18} {statistics.median(v):7.2f}  ({min(v):.2f}..{max(v):.2f})")
        ratio = [row["child completion"] / row["plain ack"] for row in rows]
        print(f"  completion / plain ack: {statistics.median(ratio):.2f} "
              f"({min(ratio):.2f}..{max(ratio):.2f})")
        if a.library_before:
            for path in (a.library_before, a.library, a.library_before, a.library):
                v = load_library(r, path)
                topic = f"ab{v}-{path.__hash__() & 0xffff}"
                n_keys = 15 if v >= 35 else 12
                put_all(r, topic, [f"j{i}" for i in range(a.jobs)], n=n_keys)
                held = reserve_all(r, topic, a.jobs, n=n_keys)
                r.config_resetstat()
                ack_all(r, topic, held, n=n_keys)
                print(f"  plain ack, library {v}: {fcall_usec(r) / a.jobs:.2f} us")
                r.execute_command("FLUSHALL")


if __name__ == "__main__":
    main()
