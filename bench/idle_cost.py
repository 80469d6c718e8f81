#!/usr/bin/env python3
"""What an idle serve costs Redis, by the number of topics: Redis commands a
second and the CPU of redis-server and of each serve (% of one core), while
nothing is reserved and nothing is due (every topic holds one job delayed by
an hour: the multi-tenant shape of issue 35, one topic per tenant).

    python3 bench/idle_cost.py              # build/redisched; 10^3, 10^4, 10^5 topics
    python3 bench/idle_cost.py --redisched /tmp/old/redisched --topics 1000,10000

For each count: a scratch redis-server; a serve that loads the library and
goes; the topics, put by FCALL on a pipeline; then a serve started with the
topics present: its start (its first pass over the topics and its paced
migration checks, until Redis has run fewer than 100 commands a second for
3 s), then --window seconds idle; then a second serve beside it, once its
own start is over, and both over another window. Commands are Redis's
total_commands_processed, which counts the commands a function runs as well
as the calls (less this script's own INFO calls); CPU is /proc's utime +
stime. Run it with /usr/bin/python3 (Debian's python3-redis).
"""

import argparse
import os
import subprocess
import tempfile
import time

from scratch_redis import scratch_redis, topic_keys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def redis_pid(r):
    return int(r.info("server")["process_id"])


class Serve:
    def __init__(self, binary, port, log):
        self.proc = subprocess.Popen(
            [binary, "serve", "--redis", f"redis://127.0.0.1:{port}", "--listen", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure(r, pids, seconds):
    """Commands a second and each pid's CPU (% of a core) over seconds."""
    start_cmds = r.info("stats")["total_commands_processed"]
    start_cpu = [cpu_seconds(p) for p in pids]
    start = time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - start
    cmds = r.info("stats")["total_commands_processed"] - start_cmds - 1  # the first INFO
    cpu = [100 * (cpu_seconds(p) - c) / took for p, c in zip(pids, start_cpu)]
    return cmds / took, cpu


def startup(r):
    """Until Redis has run fewer than 100 commands a second for 3 s (sampled
    each half second, for at most 300 s): the time and the commands before
    that quiet, as text."""
    start = time.monotonic()
    first = last = r.info("stats")["total_commands_processed"]
    quiet_since, quiet_count = None, None
    while time.monotonic() - start < 300:
        time.sleep(0.5)
        n = r.info("stats")["total_commands_processed"]
        if n - last >= 50:
            quiet_since = None
        elif quiet_since is None:
            quiet_since, quiet_count = time.monotonic(), last
        elif time.monotonic() - quiet_since >= 3:
            return f"{quiet_since - start:.1f} s, {quiet_count - first:,}"
        last = n
    return "never (300 s)"


def fill(r, topics):
    pipe = r.pipeline(transaction=False)
    for i in range(topics):
        keys = topic_keys(f"tenant{i}", 11)
        pipe.execute_command("FCALL", "redisched_put", len(keys), *keys, "j", "x",
                             "DELAY", "3600000")
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def wait_for_library(r):
    for _ in range(200):
        if r.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "redisched"):
            return
        time.sleep(0.05)
    raise RuntimeError("serve did not load the library")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redisched", default=os.path.join(ROOT, "build", "redisched"))
    ap.add_argument("--topics", default="1000,10000,100000")
    ap.add_argument("--window", type=float, default=10, help="seconds of each idle measure")
    a = ap.parse_args()

    print(f"serve: {a.redisched}")
    print("| topics | start: s, commands | idle, 1 serve: commands/s | Redis CPU | serve CPU "
          "| 2nd serve's start | idle, 2 serves: commands/s | Redis CPU | serves' CPU |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryFile() as log:
        for topics in (int(t) for t in a.topics.split(",")):
            with scratch_redis() as r:
                port = r.connection_pool.connection_kwargs["port"]
                loader = Serve(a.redisched, port, log)
                wait_for_library(r)
                loader.stop()
                fill(r, topics)
                rpid = redis_pid(r)
                first = Serve(a.redisched, port, log)
                took = startup(r)
                one, (redis_cpu, serve_cpu) = measure(r, [rpid, first.proc.pid], a.window)
                second = Serve(a.redisched, port, log)
                took2 = startup(r)
                two, (redis_cpu2, *serves) = measure(
                    r, [rpid, first.proc.pid, second.proc.pid], a.window)
                second.stop()
                first.stop()
                print(f"| {topics:,} | {took} | {one:,.1f} | {redis_cpu:.1f} % "
                      f"| {serve_cpu:.1f} % | {took2} | {two:,.1f} "
                      f"| {redis_cpu2:.1f} % "
                      f"| {' + '.join(f'{c:.1f} %' for c in serves)} |", flush=True)


if __name__ == "__main__":
    main()
