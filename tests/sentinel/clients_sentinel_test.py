"""The Python and Node clients through a Sentinel failover, on a real
deployment (sentinel_env.py, with passwords on the data nodes and on the
sentinels): jobs are put with replicas=1 (each put waits until a replica
has it) while the primary is SIGKILLed; every put that was answered is
handled by a worker, some perhaps twice (at least once), none lost.

    python3 tests/sentinel/clients_sentinel_test.py <lua/redisched.lua> [--no-node]

The Node side is tests/sentinel/clients_sentinel_test.mjs, run against the
same deployment after the Python side (the killed node back as a replica).
Exits non-zero on a failure; prints what it measured.
"""

import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "clients", "python")]

import redis  # noqa: E402

import redisched  # noqa: E402
from sentinel_env import SentinelEnv  # noqa: E402

FIRST_JOBS = 200         # put before the worker starts
PUTS_BEFORE_KILL = 50    # more, from the putting thread, before the primary dies
PUT_AFTER_S = 0.5        # and it goes on that long once the sentinels agree
DRAIN_S = 20             # every accepted job handled within that
HANDLE_S = 0.005         # a job's work: slower than the puts, so jobs wait at the kill


def check(ok, what):
    if not ok:
        raise AssertionError(what)


def auth_is_needed(env):
    """Without the passwords, neither the data nodes nor the sentinels answer."""
    host, port = env.primary()
    for address, what in (((host, port), "the primary"), (env.sentinel_addresses()[0], "a sentinel")):
        try:
            redis.Redis(*address, socket_timeout=2).ping()
        except redis.AuthenticationError:
            continue
        raise AssertionError(f"{what} answered without a password")


class Putter:
    """Puts ids until each is answered and on a replica (OK; or EXISTS: a
    try before it, or one made again inside the client, had done it)."""

    def __init__(self, topic):
        self.topic = topic
        self.accepted = set()
        self.not_replicated = 0  # tries answered but not on a replica in time
        self.exists = 0
        self.longest_s = 0.0     # the slowest put, retries included: the outage it saw

    def put(self, job_id):
        t0 = time.monotonic()
        while True:
            try:
                got = self.topic.put(job_id, b"payload")
            except redisched.NotReplicated:
                self.not_replicated += 1
                continue
            check(got in (redisched.OK, redisched.EXISTS), f"put {job_id}: {got}")
            self.exists += got == redisched.EXISTS
            self.accepted.add(job_id)
            self.longest_s = max(self.longest_s, time.monotonic() - t0)
            return


def python_through_failover(env, lua):
    r = redisched.connect(env.url())
    redisched.load_library(r, lua)
    topic = redisched.Topic(r, "py-failover", replicas=1, replica_timeout_ms=1000)
    putter = Putter(topic)
    for i in range(FIRST_JOBS):
        putter.put(f"j{i}")
    # A find by id prefix begun before the kill and read to its end after.
    found_topic = redisched.Topic(r, "py-find", replicas=1, replica_timeout_ms=1000)
    for i in range(200):
        found_topic.put(f"f{i}", b"x", delay_ms=3600000)
    finding = found_topic.find_ids("f", count=10)
    found = {next(finding) for _ in range(5)}

    handled = collections.Counter()
    lock = threading.Lock()
    gap = [0.0, None]  # the longest time between two jobs handled: the worker's outage; the last

    def handler(job):
        time.sleep(HANDLE_S)
        with lock:
            handled[job.id] += 1
            now = time.monotonic()
            if gap[1] is not None:
                gap[0] = max(gap[0], now - gap[1])
            gap[1] = now

    done = threading.Event()
    worker_error = []

    def worker():
        try:
            # A short ttr: a reservation lost with the primary comes back soon.
            redisched.work(redisched.Topic(r, "py-failover", replicas=1), handler,
                           stop=done.is_set, ttr_ms=2000)
        except BaseException as e:  # noqa: BLE001 (reported below)
            worker_error.append(e)

    stop_putting = threading.Event()
    put_count = [0]
    putter_error = []

    def keep_putting():
        try:
            i = FIRST_JOBS
            while not stop_putting.is_set():
                putter.put(f"j{i}")
                i += 1
                put_count[0] += 1
                time.sleep(0.002)
        except BaseException as e:  # noqa: BLE001
            putter_error.append(e)

    threads = [threading.Thread(target=worker), threading.Thread(target=keep_putting)]
    for t in threads:
        t.start()
    try:
        while put_count[0] < PUTS_BEFORE_KILL and not putter_error:
            time.sleep(0.01)
        check(not putter_error, f"putting: {putter_error}")
        with lock:
            waiting = len(putter.accepted - handled.keys())
        killed_at = time.monotonic()
        old = env.kill_primary()
        new = env.wait_failover(old)
        agreed_s = time.monotonic() - killed_at
        found |= set(finding)
        check(found == {f"f{i}" for i in range(200)},
              f"python: find_ids through the failover found {len(found)} of 200")
        time.sleep(PUT_AFTER_S)  # puts go on against the new primary
        stop_putting.set()
        threads[1].join()
        check(not putter_error, f"putting: {putter_error}")

        # A primary without the library: the next calls load it again.
        r.function_delete("redisched")
        check(topic.stats()["ready"] >= 0, "stats after FUNCTION DELETE")

        drain_from = time.monotonic()
        deadline = drain_from + DRAIN_S
        while time.monotonic() < deadline and not worker_error:
            with lock:
                if putter.accepted <= handled.keys():
                    break
            time.sleep(0.02)
        drained_s = time.monotonic() - drain_from
        woken_s = woken_by_the_signal(r, topic, putter, lambda: handled.keys(), lock)
    finally:
        stop_putting.set()
        done.set()
        for t in threads:
            t.join()
    check(not worker_error, f"worker: {worker_error}")
    lost = putter.accepted - handled.keys()
    twice = sum(n - 1 for n in handled.values())
    print(f"python: {len(putter.accepted)} jobs accepted ({put_count[0]} by the putting thread, "
          f"{waiting} not yet handled at the kill), "
          f"primary {old[1]} -> {new[1]}: sentinels agreed {agreed_s:.2f} s after the kill; "
          f"slowest put {putter.longest_s:.2f} s; longest wait between jobs handled {gap[0]:.2f} s; "
          f"not replicated in time {putter.not_replicated}, EXISTS on a retry {putter.exists}; "
          f"all handled {drained_s:.2f} s after the putting stopped; "
          f"lost {len(lost)}, handled twice {twice}; "
          f"a job put then handled in {woken_s * 1000:.0f} ms", flush=True)
    check(not lost, f"python: lost {sorted(lost)[:20]}")
    check(woken_s < 0.5, "python: the worker, subscribed again, is woken by the signal")
    r.close()


def woken_by_the_signal(r, topic, putter, handled, lock):
    """Once the worker is subscribed again (on the new primary), a job put
    is handled at once: the seconds it took."""
    deadline = time.monotonic() + 5
    while r.execute_command("PUBSUB", "SHARDNUMSUB", topic.channel)[1] < 1:
        check(time.monotonic() < deadline, "python: the worker did not subscribe again")
        time.sleep(0.01)
    t0 = time.monotonic()
    putter.put("after")
    while True:
        with lock:
            if "after" in handled():
                return time.monotonic() - t0
        check(time.monotonic() - t0 < 5, "python: the job put after the failover was not handled")
        time.sleep(0.002)


class Lines:
    """A child's stdout, line by line, with a deadline."""

    def __init__(self, stream):
        self.q = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream):
        for line in stream:
            self.q.put(line)
        self.q.put(None)

    def next(self, deadline):
        try:
            return self.q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("node: no word in time") from None


def node_through_failover(env, lua):
    script = os.path.join(HERE, "clients_sentinel_test.mjs")
    proc = subprocess.Popen(["node", script, lua, env.url()], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    lines = Lines(proc.stdout)
    deadline = time.monotonic() + 45
    result = None
    try:
        while True:
            line = lines.next(deadline)
            if line is None:
                break
            try:
                said = json.loads(line)
            except ValueError:
                print(f"node: {line.rstrip()}")
                continue
            if said.get("event") == "kill":
                t0 = time.monotonic()
                old = env.kill_primary()
                new = env.wait_failover(old)
                print(f"node: primary {old[1]} -> {new[1]}: sentinels agreed "
                      f"{time.monotonic() - t0:.2f} s after the kill", flush=True)
                proc.stdin.write("failed-over\n")
                proc.stdin.flush()
            elif said.get("event") == "result":
                result = said
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    check(result is not None, f"node: no result (exit {proc.returncode})")
    print(f"node: {result['accepted']} jobs accepted ({result['putting']} while the worker ran, "
          f"{result['waitingAtKill']} not yet handled at the kill); slowest put {result['longestPutMs'] / 1000:.2f} s; "
          f"longest wait between jobs handled {result['longestGapMs'] / 1000:.2f} s; "
          f"not replicated in time {result['notReplicated']}, EXISTS on a retry {result['exists']}; "
          f"all handled {result['drainMs'] / 1000:.2f} s after the putting stopped; "
          f"lost {result['lost']}, handled twice {result['twice']}; "
          f"a job put then handled in {result['wokenMs']} ms", flush=True)
    check(result["lost"] == 0, f"node: lost {result['lostIds']}")
    check(result["wokenMs"] < 500, "node: the worker, subscribed again, is woken by the signal")
    check(rc == 0, f"node: exit {rc}")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    lua = os.path.abspath(args[0])
    t0 = time.monotonic()
    env = SentinelEnv(password="job s3cret:@", sentinel_password="sentinel s3cret")
    env.start()
    try:
        print(f"env: 1 primary, 2 replicas, 3 sentinels up in {time.monotonic() - t0:.2f} s", flush=True)
        auth_is_needed(env)
        python_through_failover(env, lua)
        if "--no-node" not in args:
            t1 = time.monotonic()
            env.restart_killed()
            print(f"env: the killed node back as a replica in {time.monotonic() - t1:.2f} s", flush=True)
            node_through_failover(env, lua)
    finally:
        env.stop()
    print(f"ok: {time.monotonic() - t0:.1f} s in all")


if __name__ == "__main__":
    main()
