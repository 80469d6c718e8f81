#!/usr/bin/env python3
"""Two versions of the library, side by side in one Redis: what a change of
lua/redisched.lua costs reserve, measured so that the machine's drift falls
on both alike. Each library is loaded under a name of its own (its
functions renamed a_... and b_...), each gets a topic of the same jobs
(putmany), and then reserves (and acks) alternate between the two, the
order flipped every round; the figure is the round trip of each reserve as
the client sees it, median and quartiles.

    python3 bench/library_ab.py OLD.lua lua/redisched.lua            # ready set
    python3 bench/library_ab.py OLD.lua NEW.lua --layout list        # ready list
    python3 bench/library_ab.py OLD.lua NEW.lua --layout delayed --count 100
    python3 bench/library_ab.py NEW.lua NEW.lua --worker-b host:4711:9f3a01bc  # WORKER's cost
    python3 bench/library_ab.py OLD.lua NEW.lua --keys-a 11 --keys-b 12       # the history's

Layouts: set (priorities mixed, so the jobs go to the ready set), list
(plain putmany: the ready list), delayed (due in order an hour on, made
ready by reserve). Run A against A first: the two columns agree to a few
tenths of a microsecond, the size of a difference worth reading.
Starts its own redis-server (scratch_redis); needs Debian's python3-redis.
"""

import argparse
import os
import time

from scratch_redis import scratch_redis, topic_keys

HOUR = 3600000


def load_as(r, path, name):
    with open(path, encoding="utf-8") as f:
        code = f.read()
    head, register = "#!lua name=redisched", "function_name = 'redisched_' .. name"
    if not code.startswith(head) or code.count(register) != 1:
        raise SystemExit("%s: cannot rename its functions (register() changed?)" % path)
    renamed = (code.replace(head, "#!lua name=" + name, 1)
               .replace(register, "function_name = '%s_' .. name" % name))
    r.execute_command("FUNCTION", "LOAD", "REPLACE", renamed)


def fill(r, lib, keys, jobs, layout):
    body = b"x" * 100
    for start in range(0, jobs, 100):
        args, end = [], min(start + 100, jobs)
        for i in range(start, end):
            if layout == "delayed":
                args += ["j%d" % i, body, 2, "DELAY", HOUR + i]
            elif layout == "set":
                args += ["j%d" % i, body, 2, "PRIORITY", (i * 7919) % 1000]
            else:
                args += ["j%d" % i, body, 0]
        r.execute_command("FCALL", lib + "_putmany", len(keys), *keys, end - start, *args, "NOW", 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--layout", choices=("set", "list", "delayed"), default="set")
    ap.add_argument("--jobs", type=int, default=20000, help="jobs per library")
    ap.add_argument("--count", type=int, default=1, help="jobs per reserve")
    ap.add_argument("--worker-b", help="b's reserves name this worker (WORKER, library 30)")
    ap.add_argument("--keys-a", type=int, default=8, help="keys a's calls name (12: its history)")
    ap.add_argument("--keys-b", type=int, default=8, help="keys b's calls name")
    a = ap.parse_args()
    libs = [("a", topic_keys("a", a.keys_a)), ("b", topic_keys("b", a.keys_b))]
    with scratch_redis() as r:
        load_as(r, a.a, "a")
        load_as(r, a.b, "b")
        for lib, keys in libs:
            fill(r, lib, keys, a.jobs, a.layout)
        now = 1000 + (HOUR + a.jobs + 1 if a.layout == "delayed" else 0)
        times = {"a": [], "b": []}
        extra = {"a": [], "b": ["WORKER", a.worker_b] if a.worker_b else []}
        for n in range(a.jobs // a.count):
            for lib, keys in (libs if n % 2 else libs[::-1]):
                t0 = time.perf_counter_ns()
                rep = r.execute_command("FCALL", lib + "_reserve", len(keys), *keys, a.count, *extra[lib],
                                        "NOW", now)
                times[lib].append(time.perf_counter_ns() - t0)
                pairs = [x for j in rep[3:] for x in (j[0], j[2])]
                r.execute_command("FCALL", lib + "_ackmany", len(keys), *keys, len(pairs) // 2, *pairs, "NOW", now)
    print("reserve of %d, %s layout, %d calls each: round trip, us" % (a.count, a.layout, len(times["a"])))
    for lib, path in (("a", a.a), ("b", a.b)):
        t = sorted(times[lib])
        q = lambda f: t[int(f * (len(t) - 1))] / 1000
        print("  %-28s median %7.1f   p25 %7.1f   p75 %7.1f" % (os.path.basename(path), q(0.5), q(0.25), q(0.75)))


if __name__ == "__main__":
    main()
