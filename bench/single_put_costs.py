#!/usr/bin/env python3
"""Redis's own time per single FCALL redisched_put (INFO commandstats), for
two versions of the library side by side: rounds of puts on a fresh topic,
each library in turn, the same redis-server. Prints each round's
microseconds per put, and the median and minimum of each library.

    python3 bench/single_put_costs.py --a OLD.lua --b lua/redisched.lua
    python3 bench/single_put_costs.py --a OLD.lua --b NEW.lua --rounds 10 --puts 50000

Starts its own redis-server (default settings, no persistence) on a free
port in a temp dir; needs Debian's python3-redis.
"""

import argparse
import statistics

from scratch_redis import load_library, scratch_redis, topic_keys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="one library (say, the older)")
    ap.add_argument("--b", required=True, help="the other")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--puts", type=int, default=50000, help="puts per round")
    a = ap.parse_args()
    libs = {"a": a.a, "b": a.b}
    usec = {name: [] for name in libs}
    with scratch_redis() as r:
        for rnd in range(a.rounds):
            for name, path in libs.items():
                load_library(r, path)
                keys = topic_keys("p%s_%d" % (name, rnd))
                r.config_resetstat()
                p = r.pipeline(transaction=False)
                for i in range(a.puts):
                    p.execute_command("FCALL", "redisched_put", 8, *keys, "j%d" % i, "x" * 100)
                    if i % 1000 == 999:
                        p.execute()
                p.execute()
                st = r.info("commandstats")["cmdstat_fcall"]
                usec[name].append(st["usec"] / st["calls"])
                r.flushall()
    for name, path in libs.items():
        v = usec[name]
        print("%s %s: %s; median %.2f, min %.2f us per put"
              % (name, path, " ".join("%.2f" % x for x in v), statistics.median(v), min(v)))


if __name__ == "__main__":
    main()
