#!/usr/bin/env python3
"""What a delete or a debounce of one waiting job costs inside Redis, by the
job's place among the topic's waiting jobs: since library versions 17 and
18 a job put in order is a list entry, which delete and updates take out
with LREM (a scan from the nearer end); before, a sorted set member.

    python3 bench/update_costs.py                        # 10^6 delayed, debounce
    python3 bench/update_costs.py --ready --op delete
    python3 bench/update_costs.py --library old.lua      # another library

Fills the topic as redisched_bench does (putmany of 1,000 jobs with
100-byte bodies; delayed ones an hour and i ms), then deletes or debounces
the jobs at a few places, two neighbours each, and prints each FCALL's time
from INFO commandstats. Starts its own redis-server (scratch_redis.py);
needs Debian's python3-redis.
"""

import argparse

from scratch_redis import LIBRARY, fcall_usec, load_library, scratch_redis, topic_keys
NOW = 10 ** 12



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--ready", action="store_true", help="jobs put ready (default: delayed)")
    ap.add_argument("--op", choices=("debounce", "delete"), default="debounce")
    ap.add_argument("--library", default=LIBRARY)
    a = ap.parse_args()
    if a.jobs < 10:
        ap.error("--jobs must be at least 10")

    with scratch_redis() as r:
        load_library(r, a.library)
        keys = topic_keys("update")
        body = b"x" * 100
        pipe = r.pipeline(transaction=False)
        for b in range(0, a.jobs, 1000):
            args, n = [], 0
            for i in range(b, min(b + 1000, a.jobs)):
                opts = [0] if a.ready else [2, "DELAY", 3600000 + i]
                args += [f"job-{i:07d}", body, *opts]
                n += 1
            pipe.execute_command("FCALL", "redisched_putmany", 8, *keys, n, *args, "NOW", NOW)
            if b % 20000 == 19000:
                pipe.execute()
        pipe.execute()

        print(f"{a.op} of one of {a.jobs} {'ready' if a.ready else 'delayed'} jobs, "
              f"us inside Redis by its place")
        for frac in (0.001, 0.25, 0.5, 0.75, 0.999):
            first = min(int(a.jobs * frac), a.jobs - 2)
            times = []
            for i in (first, first + 1):
                before = fcall_usec(r)
                if a.op == "delete":
                    got = r.execute_command("FCALL", "redisched_delete", 8, *keys, f"job-{i:07d}")
                else:
                    got = r.execute_command("FCALL", "redisched_put", 8, *keys, f"job-{i:07d}",
                                            "new", "DEBOUNCE", "DELAY", 3600000 + a.jobs,
                                            "NOW", NOW + 5)
                if got != (1 if a.op == "delete" else 2):
                    raise SystemExit(f"{a.op} of job-{i:07d} answered {got!r}")
                times.append(fcall_usec(r) - before)
            print(f"  job {first:>9} and the next   {times[0]:>8} {times[1]:>8}")


if __name__ == "__main__":
    main()
