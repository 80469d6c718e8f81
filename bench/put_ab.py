#!/usr/bin/env python3
"""Two versions of the library, side by side in one Redis: what a change of
lua/redisched.lua costs a single put, as Redis's own time per FCALL (INFO
commandstats), so that the client and the loopback fall out. Each library
is loaded under a name of its own (library_ab.load_as); blocks of single
puts, plain, with DELAY and with options, alternate between the two, the
order flipped every round; the figure is each kind's median over rounds.

    python3 bench/put_ab.py OLD.lua lua/redisched.lua [--rounds 10] [--block 4000] [--many N]
    python3 bench/put_ab.py OLD.lua NEW.lua --keys-a 11 --keys-b 12   # the history's cost

With --many N the puts go N to a putmany, and the figure is per job.

Run A against A first: on this machine the columns agree to about half a
microsecond (the size of a difference worth reading). Starts its own
redis-server (scratch_redis); needs Debian's python3-redis.
"""

import argparse
import statistics

from library_ab import load_as
from scratch_redis import fcall_usec, scratch_redis, topic_keys

KINDS = {"plain": [], "delayed": ["DELAY", 5000], "options": ["PRIORITY", 3, "TTR", 1000]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=4000, help="puts of each kind a block")
    ap.add_argument("--many", type=int, default=1, help="jobs a putmany (1: single puts)")
    ap.add_argument("--keys-a", type=int, default=8, help="keys a's calls name (12: its history)")
    ap.add_argument("--keys-b", type=int, default=8, help="keys b's calls name")
    a = ap.parse_args()
    with scratch_redis() as r:
        load_as(r, a.a, "a")
        load_as(r, a.b, "b")
        us = {lib: {kind: [] for kind in KINDS} for lib in ("a", "b")}
        for rnd in range(a.rounds):
            for lib in (("a", "b") if rnd % 2 else ("b", "a")):
                for kind, opts in KINDS.items():
                    keys = topic_keys(lib + kind, a.keys_a if lib == "a" else a.keys_b)
                    p = r.pipeline(transaction=False)
                    if a.many == 1:
                        for i in range(a.block):
                            p.execute_command("FCALL", lib + "_put", len(keys), *keys,
                                              "%d-%d" % (rnd, i), "x" * 100, *opts, "NOW", 1000)
                    else:
                        for c in range(a.block // a.many):
                            jobs = []
                            for i in range(c * a.many, (c + 1) * a.many):
                                jobs += ["%d-%d" % (rnd, i), "x" * 100, len(opts), *opts]
                            p.execute_command("FCALL", lib + "_putmany", len(keys), *keys,
                                              a.many, *jobs, "NOW", 1000)
                    before = fcall_usec(r)
                    replies = p.execute()
                    if any((x if a.many == 1 else min(x)) != 1 for x in replies):
                        raise SystemExit("%s: a put answered %r" % (lib, replies[0]))
                    us[lib][kind].append((fcall_usec(r) - before) / (a.block // a.many * a.many))
        print("%s, Redis's time per job (median of %d blocks of %d), µs"
              % ("single put" if a.many == 1 else "putmany of %d" % a.many, a.rounds, a.block))
        for kind in KINDS:
            print("  %-8s %-24s %6.2f   %-24s %6.2f" % (kind, a.a[-24:], statistics.median(us["a"][kind]),
                                                     a.b[-24:], statistics.median(us["b"][kind])))


if __name__ == "__main__":
    main()
