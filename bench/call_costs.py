#!/usr/bin/env python3
"""Where a batch's time goes inside Redis: microseconds per job spent in
putmany, reserve and ackmany, and in the commands they make, from Redis's
own INFO commandstats (which times each FCALL, and each command a function
calls, on the server). The time outside the commands is the Lua code, the
arguments and replies converted between Redis and Lua, and the commands'
call overhead.

    python3 bench/call_costs.py                 # batches of 100, 8 in flight
    python3 bench/call_costs.py --batch 25 --jobs 100000
    python3 bench/call_costs.py --delayed       # jobs put delayed, made ready by reserve

Starts its own redis-server (default settings, no persistence) on a free
port in a temp dir; needs Debian's python3-redis.
"""

import argparse
import time

from scratch_redis import LIBRARY, fcall_usec, load_library, scratch_redis, topic_keys



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200000)
    ap.add_argument("--batch", type=int, default=100, help="jobs per reserve and ackmany")
    ap.add_argument("--window", type=int, default=8, help="reserves held before the first ack")
    ap.add_argument("--library", default=LIBRARY)
    ap.add_argument("--delayed", action="store_true",
                    help="put every job delayed (an hour and i ms: in due order), and reserve and "
                         "ack an hour and more later, so that reserve makes them ready")
    a = ap.parse_args()

    with scratch_redis() as r:
        load_library(r, a.library)
        keys = topic_keys("bench")
        body = b"x" * 100
        total = (a.jobs // a.batch + a.window) * a.batch
        # With --delayed, puts name one time and reserves a later one (NOW),
        # when every job is due; acks take the server's clock (an option
        # would leave ackmany's plain path), before every deadline.
        now = int(time.time() * 1000)
        put_now = ["NOW", now] if a.delayed else []
        take_now = ["NOW", now + 3600000 + total] if a.delayed else []

        r.config_resetstat()
        pipe = r.pipeline(transaction=False)
        for b in range(0, total, 100):
            args = []
            n = 0
            for i in range(b, min(b + 100, total)):
                args += [f"job-{i:07d}", body] + ([2, "DELAY", 3600000 + i] if a.delayed else [0])
                n += 1
            pipe.execute_command("FCALL", "redisched_putmany", 8, *keys, n, *args, *put_now)
            if b % 5000 == 4900:
                pipe.execute()
        pipe.execute()
        put = fcall_usec(r) / total

        def reserve():
            out = r.execute_command("FCALL", "redisched_reserve", 8, *keys, a.batch, "TTR", 60000,
                                    *take_now)
            return out[3:]

        held = [reserve() for _ in range(a.window)]
        r.config_resetstat()
        in_reserve = in_ack = 0
        n = (a.jobs // a.batch) * a.batch
        for _ in range(a.jobs // a.batch):
            jobs = held.pop(0)
            args = []
            for j in jobs:
                args += [j[0], j[2]]
            t0 = fcall_usec(r)
            r.execute_command("FCALL", "redisched_ackmany", 8, *keys, len(jobs), *args)
            t1 = fcall_usec(r)
            held.append(reserve())
            in_ack, in_reserve = in_ack + t1 - t0, in_reserve + fcall_usec(r) - t1
        stats = r.info("commandstats")
        inner = {k[8:]: v["usec"] for k, v in stats.items()
                 if k not in ("cmdstat_fcall", "cmdstat_info", "cmdstat_config|resetstat")}
        print(f"us per job inside Redis, batches of {a.batch}, {a.window} reserves held, "
              f"{a.jobs} jobs{', put delayed' if a.delayed else ''}")
        print(f"  putmany (100 per call)   {put:6.2f}")
        print(f"  reserve                  {in_reserve / n:6.2f}")
        print(f"  ackmany                  {in_ack / n:6.2f}")
        print("  commands of reserve and ackmany:")
        for name, usec in sorted(inner.items(), key=lambda kv: -kv[1]):
            print(f"    {name:22s} {usec / n:6.2f}")
        print(f"    {'(outside commands)':22s} {(in_reserve + in_ack - sum(inner.values())) / n:6.2f}")


if __name__ == "__main__":
    main()
