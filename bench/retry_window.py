#!/usr/bin/env python3
"""What the retry window (library version 20) costs: the memory of the ids
it holds, and the time inside Redis of a single ack, an ackmany of 100 and
a put, with the window on (the default, 60 s) and off (retrywindow 0), back
to back on the same server. Times are INFO commandstats' (the server's own
time in each FCALL), the median of --rounds rounds.

    python3 bench/retry_window.py
    python3 bench/retry_window.py --jobs 20000 --rounds 7

Starts its own redis-server (no persistence) on a free port in a temp dir;
needs Debian's python3-redis.
"""

import argparse
import statistics

from scratch_redis import LIBRARY, fcall_usec, load_library, scratch_redis, topic_keys


def fcall(r, keys, op, *args):
    return r.execute_command("FCALL", "redisched_" + op, len(keys), *keys, *args)


def one_round(r, topic, jobs, window):
    """µs per call inside Redis: put, single ack, and per job of ackmany 100."""
    keys = topic_keys(topic)
    r.delete(*keys, f"redisched:{{{topic}}}:gone", f"redisched:{{{topic}}}:queue")
    fcall(r, keys, "retrywindow", window)
    ids = [f"order-{topic}-{i:012d}" for i in range(jobs)]  # 24 bytes and more
    out = {}
    r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for i in ids:
        pipe.execute_command("FCALL", "redisched_put", 8, *keys, i, b"x" * 100)
    pipe.execute()
    out["put"] = fcall_usec(r) / jobs
    half = jobs // 2
    # Single acks: reserve one at a time (not timed), ack each alone.
    held = []
    for _ in range(half):
        j = fcall(r, keys, "reserve", 1)[3]
        held.append((j[0], j[2]))
    r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for id_, token in held:
        pipe.execute_command("FCALL", "redisched_ack", 8, *keys, id_, token)
    assert all(x == 1 for x in pipe.execute())
    out["ack"] = fcall_usec(r) / half
    # ackmany of 100.
    batches = []
    while True:
        got = fcall(r, keys, "reserve", 100)[3:]
        if not got:
            break
        batches.append([x for j in got for x in (j[0], j[2])])
    r.config_resetstat()
    n = 0
    for b in batches:
        fcall(r, keys, "ackmany", len(b) // 2, *b)
        n += len(b) // 2
    out["ackmany"] = fcall_usec(r) / n
    gone = f"redisched:{{{topic}}}:gone"
    out["held"] = r.zcard(gone)
    out["bytes"] = (r.memory_usage(gone, samples=0) or 0) / max(out["held"], 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--library", default=LIBRARY)
    a = ap.parse_args()
    with scratch_redis() as r:
        load_library(r, a.library)
        rows = {60000: [], 0: []}
        for k in range(a.rounds):
            for window in (60000, 0):  # interleaved: drift hits both alike
                rows[window].append(one_round(r, f"rw{k}-{window}", a.jobs, window))
        print(f"{a.jobs} jobs a round, {a.rounds} rounds, median (min..max), µs inside Redis")
        print(f"{'':14}{'window 60 s':>26}{'window off':>26}")
        for what in ("put", "ack", "ackmany"):
            cells = []
            for window in (60000, 0):
                xs = [x[what] for x in rows[window]]
                cells.append(f"{statistics.median(xs):.2f} ({min(xs):.2f}..{max(xs):.2f})")
            print(f"{what + ' / job':14}{cells[0]:>26}{cells[1]:>26}")
        on = rows[60000][-1]
        print(f"ids held with the window on: {on['held']}, {on['bytes']:.0f} bytes per id "
              f"(MEMORY USAGE); 1,000 acks/s for 60 s: {on['bytes'] * 60000 / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
