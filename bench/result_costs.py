#!/usr/bin/env python3
"""What an ack with a result costs inside Redis, and what it holds: a
Worker's set_result (RESULT with FORWARD, no KEEP, no job waiting), against
a plain ack, one job per call, for jobs put without KEEP. Since library
version 38 such an ack keeps the job, done with its result, for the retry
window (a depend may be on its way: docs/flows.md), where version 37 dropped
the result and the record. Run it with --library on the version before to
compare.

    python3 bench/result_costs.py
    python3 bench/result_costs.py --library /tmp/redisched_v37.lua

Prints the microseconds per call from INFO commandstats, and used_memory
after each round minus before it, per job.
Starts its own redis-server (scratch_redis.py); needs Debian's python3-redis.
"""

import argparse

from scratch_redis import LIBRARY, fcall_usec, load_library, put_jobs, scratch_redis, topic_keys


def round_(r, topic, n, body, result):
    keys = topic_keys(topic, count=15)
    put_jobs(r, keys, "j", n, body)
    held = []
    for _ in range(0, n, 100):
        held += r.execute_command("FCALL", "redisched_reserve", 15, *keys, 100, "TTR", 600000)[3:]
    before = r.info("memory")["used_memory"]
    r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for j in held:
        extra = ["RESULT", result, "FORWARD"] if result is not None else []
        pipe.execute_command("FCALL", "redisched_ack", 15, *keys, j[0], j[2], *extra)
    assert all(x == 1 for x in pipe.execute())
    usec = fcall_usec(r) / len(held)
    grown = (r.info("memory")["used_memory"] - before) / len(held)
    return usec, grown


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--body", type=int, default=100)
    ap.add_argument("--result", type=int, default=20)
    ap.add_argument("--library", default=LIBRARY)
    a = ap.parse_args()
    body, result = b"x" * a.body, b"r" * a.result
    with scratch_redis() as r:
        version = load_library(r, a.library)
        plain = round_(r, "plain", a.jobs, body, None)
        with_result = round_(r, "results", a.jobs, body, result)
        print(f"library {version}, {a.jobs} jobs of {a.body} bytes, results of {a.result} "
              "bytes, one ack per call: us inside Redis per call, memory held after per job")
        print(f"  ack                          {plain[0]:6.2f} us   {plain[1]:7.1f} B")
        print(f"  ack RESULT FORWARD, no keep  {with_result[0]:6.2f} us   {with_result[1]:7.1f} B")


if __name__ == "__main__":
    main()
