#!/usr/bin/env python3
"""What passing all eleven keys (library 23) costs Redis against the eight
older callers pass: the same library, single puts and single acks with
eight keys and with eleven, in alternating blocks on two topics, each
block's FCALL time read from INFO commandstats (Redis's own time per call,
so the client's share and the loopback fall out).

    python3 bench/key_count_ab.py [--rounds 12] [--block 5000]

Starts its own redis-server (scratch_redis); needs Debian's python3-redis.
"""

import argparse
import statistics

from scratch_redis import fcall_usec, load_library, scratch_redis, topic_keys


def timed(r, cmds):
    """Redis's µs per call of cmds, sent in one pipeline."""
    p = r.pipeline(transaction=False)
    for c in cmds:
        p.execute_command(*c)
    before = fcall_usec(r)
    replies = p.execute()
    return (fcall_usec(r) - before) / len(cmds), replies


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--block", type=int, default=5000, help="calls of each kind a block")
    a = ap.parse_args()
    with scratch_redis() as r:
        load_library(r)
        figures = {8: [], 11: []}
        for rnd in range(a.rounds):
            for n in ((8, 11) if rnd % 2 else (11, 8)):
                keys = topic_keys("t%d" % n, n)
                put, _ = timed(r, [("FCALL", "redisched_put", n, *keys, "%d-%d" % (rnd, i),
                                    "x" * 100, "NOW", 1000) for i in range(a.block)])
                _, got = timed(r, [("FCALL", "redisched_reserve", n, *keys, 100, "NOW", 1001)
                                   for _ in range(a.block // 100)])
                ack, _ = timed(r, [("FCALL", "redisched_ack", n, *keys, j[0], j[2], "NOW", 1002)
                                   for rep in got for j in rep[3:]])
                figures[n].append((put, ack))
        for n in (8, 11):
            print("%2d keys: put %.2f µs, ack %.2f µs (Redis's time per call, median of %d blocks)"
                  % (n, statistics.median(x[0] for x in figures[n]),
                     statistics.median(x[1] for x in figures[n]), a.rounds))


if __name__ == "__main__":
    main()
