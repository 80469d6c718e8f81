#!/usr/bin/env python3
"""What the calls that finish a job without an ack cost inside Redis: a
delete of a waiting job, and a fail that makes a reserved job dead, one job
per call, for jobs put without KEEP. Since library version 19 both publish
the job's id on the finished channel (a waiter wakes at once), which costs
them one SPUBLISH; run it with --library on the version before to compare.

    python3 bench/finish_costs.py
    python3 bench/finish_costs.py --library /tmp/redisched_v18.lua

Deletes take the jobs in put order (each from the front of the ready list,
so no scan). Prints the microseconds per call from INFO commandstats.
Starts its own redis-server (scratch_redis.py); needs Debian's python3-redis.
"""

import argparse

from scratch_redis import LIBRARY, fcall_usec, load_library, put_jobs, scratch_redis, topic_keys


def spublish_usec(r):
    return r.info("commandstats").get("cmdstat_spublish", {"usec": 0})["usec"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--library", default=LIBRARY)
    a = ap.parse_args()

    with scratch_redis() as r:
        version = load_library(r, a.library)

        keys = topic_keys("deletes")
        put_jobs(r, keys, "d", a.jobs)
        r.config_resetstat()
        pipe = r.pipeline(transaction=False)
        for i in range(a.jobs):
            pipe.execute_command("FCALL", "redisched_delete", 8, *keys, f"d-{i:07d}")
        assert all(x == 1 for x in pipe.execute())
        delete = fcall_usec(r) / a.jobs
        delete_publish = spublish_usec(r) / a.jobs

        keys = topic_keys("failures")
        put_jobs(r, keys, "f", a.jobs)
        held = []
        for _ in range(0, a.jobs, 100):
            held += r.execute_command("FCALL", "redisched_reserve", 8, *keys, 100, "TTR",
                                      600000)[3:]
        r.config_resetstat()
        pipe = r.pipeline(transaction=False)
        for j in held:
            pipe.execute_command("FCALL", "redisched_fail", 8, *keys, j[0], j[2], "boom", "DEAD")
        assert all(x == b"dead" for x in pipe.execute())
        dead = fcall_usec(r) / len(held)
        dead_publish = spublish_usec(r) / len(held)

        print(f"library {version}, {a.jobs} jobs of 100 bytes, one job per call, "
              "us inside Redis per call")
        print(f"  delete of a ready job        {delete:6.2f}   of which SPUBLISH {delete_publish:5.2f}")
        print(f"  fail DEAD of a reserved job  {dead:6.2f}   of which SPUBLISH {dead_publish:5.2f}")


if __name__ == "__main__":
    main()
