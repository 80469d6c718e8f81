#!/usr/bin/env python3
"""Two versions of the library in one Redis: what each costs Redis per
single call, whole and split. Per call, the redis-server process's CPU time
(utime + stime from /proc: parsing, replies and the socket included) and
its time inside FCALL (INFO commandstats); "outside" is the difference.
Blocks of the same calls alternate between the libraries, the order
flipped every round; the figures are medians over rounds.

    python3 bench/redis_cpu_ab.py OLD.lua lua/redisched.lua [--keys-a 8] [--rounds 6]

Rows: single puts and single reserves driven by redis-benchmark (-c 50,
as uncoalesced clients send them), then reserve+ack pairs pipelined 100 at
a time (their tokens need a reply read). --keys-a/--keys-b: the keys each
library is called with (8 before library 23, 11 since). Starts its own
redis-server (scratch_redis); needs Debian's python3-redis and
redis-tools. bench/HISTORY.md, "Issue 33 as a whole", has a run.
"""

import argparse
import os
import statistics
import subprocess

from library_ab import load_as
from scratch_redis import KEY_NAMES, scratch_redis

BODY = "x" * 100


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--keys-a", type=int, default=11)
    ap.add_argument("--keys-b", type=int, default=11)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--block", type=int, default=60000, help="single calls a block")
    ap.add_argument("--pairs", type=int, default=10000, help="reserve+ack pairs a block")
    a = ap.parse_args()
    with scratch_redis() as r:
        port = r.connection_pool.connection_kwargs["port"]
        pid = int(r.info("server")["process_id"])
        load_as(r, a.a, "a")
        load_as(r, a.b, "b")
        nkeys = {"a": a.keys_a, "b": a.keys_b}

        def keys(lib, topic):
            return [f"redisched:{{{topic}}}:{k}" for k in KEY_NAMES[: nkeys[lib]]]

        def cpu_s():
            f = open(f"/proc/{pid}/stat", encoding="ascii").read().split()
            return (int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")

        def fcalls():
            s = r.info("commandstats").get("cmdstat_fcall", {"calls": 0, "usec": 0})
            return s["calls"], s["usec"]

        def measure(run, per_call):
            c0, (n0, u0) = cpu_s(), fcalls()
            run()
            c1, (n1, u1) = cpu_s(), fcalls()
            n = (n1 - n0) / per_call
            return (c1 - c0) * 1e6 / n, (u1 - u0) / n

        def single(lib, fn, words):
            k = keys(lib, "single_" + lib)
            cmd = ["FCALL", f"{lib}_{fn}", str(len(k)), *k, *words]
            subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(a.block),
                            "-r", "1000000000", "-q", *cmd], stdout=subprocess.DEVNULL, check=True)

        def pairs(lib):
            k = keys(lib, "pairs_" + lib)
            for _ in range(0, a.pairs, 100):
                p = r.pipeline(transaction=False)
                for _ in range(100):
                    p.execute_command("FCALL", f"{lib}_reserve", len(k), *k, 1, "TTR", 3600000)
                jobs = [rep[3] for rep in p.execute()]
                p = r.pipeline(transaction=False)
                for job in jobs:
                    p.execute_command("FCALL", f"{lib}_ack", len(k), *k, job[0], job[2])
                if any(code != 1 for code in p.execute()):
                    raise SystemExit("an ack was refused")

        for lib in "ab":  # the pairs' jobs, listed (putmany in order)
            k = keys(lib, "pairs_" + lib)
            for start in range(0, a.rounds * a.pairs, 100):
                words = []
                for i in range(start, start + 100):
                    words += [f"j{i}", BODY, 0]
                r.execute_command("FCALL", f"{lib}_putmany", len(k), *k, 100, *words)

        rows = {
            "single put": (lambda lib: single(lib, "put", ["id:__rand_int__", BODY]), 1),
            "single reserve": (lambda lib: single(lib, "reserve", ["1", "TTR", "3600000"]), 1),
            "reserve+ack pair": (pairs, 2),
        }
        got = {(row, lib): [] for row in rows for lib in "ab"}
        for rnd in range(a.rounds):
            for row, (run, per_call) in rows.items():
                for lib in ("a", "b") if rnd % 2 == 0 else ("b", "a"):
                    got[(row, lib)].append(measure(lambda: run(lib), per_call))
        print(f"{'µs per call':18} {'A whole':>8} {'in FCALL':>9} {'outside':>8}"
              f" {'B whole':>8} {'in FCALL':>9} {'outside':>8}")
        for row in rows:
            line = f"{row:18}"
            for lib in "ab":
                m = got[(row, lib)]
                whole = statistics.median(w for w, _ in m)
                inside = statistics.median(f for _, f in m)
                outside = statistics.median(w - f for w, f in m)
                line += f" {whole:8.2f} {inside:9.2f} {outside:8.2f}"
            print(line)


if __name__ == "__main__":
    main()
