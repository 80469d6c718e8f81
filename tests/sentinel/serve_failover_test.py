#!/usr/bin/env python3
"""redisched serve and the CLI on Redis Sentinel, the primary SIGKILLed under
load (issue 31, point 5). A real deployment (sentinel_env.py: 1 primary, 2
replicas, 3 sentinels, with passwords); serve given only its
redis+sentinel:// URL; 4 putters (each retries a put whose answer it did
not get, until 201 or 409) into two topics; 2 reservers acking one over
HTTP, and a C++ Worker process (worker_proc, given the same URL) handling
the other. Then:

  - every put answered 201 (or 409 on a retry: the first one landed) is
    handed out in the end (to a reserver or the Worker's handler): lost
    jobs are counted and printed; with --assert-no-loss any loss fails
    the test. serve --replicas 1 (a put is answered once a replica has it)
    must lose nothing: the sentinels promote the replica that holds the
    most of the primary's writes. Without waiting, a write the replicas
    had not got may be lost;
  - serve followed the failover with nothing but its URL;
  - the CLI reads the topic through the same URL, before and after.

    python3 tests/sentinel/serve_failover_test.py <build/redisched> <build/tests/worker_proc>
                                                  [--replicas N] [--assert-no-loss]

The killed primary comes back as a replica after the failover, as an
operator would bring it back (with --replicas 2 a write could not be
answered again otherwise).
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
from sentinel_env import SentinelEnv  # noqa: E402
from serve_process import start_serve  # noqa: E402
TOPIC = "failover"  # reserved and acked over HTTP
WORKER_TOPIC = "failover-worker"  # handled by worker_proc


def request(port, method, path, body=None, timeout=15):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Ledger:
    def __init__(self):
        self.mu = threading.Lock()
        self.accepted = set()
        self.handled = set()
        self.twice = 0
        self.put_errors = 0
        self.slowest_put = 0.0
        self.stop_putting = threading.Event()
        self.stop_all = threading.Event()


def putter(port, ledger, who):
    n = 0
    while not ledger.stop_putting.is_set():
        n += 1
        job = "p%d-%d" % (who, n)
        topic = WORKER_TOPIC if n % 2 else TOPIC
        t0, tries = time.monotonic(), 0
        while True:  # a producer that retries until it hears an answer
            tries += 1
            try:
                status, _ = request(port, "PUT", "/v1/topics/%s/jobs/%s" % (topic, job),
                                    {"body": "x"})
            except OSError:
                status = None
            if status == 201 or (status == 409 and tries > 1):
                with ledger.mu:
                    ledger.accepted.add(job)
                    ledger.slowest_put = max(ledger.slowest_put, time.monotonic() - t0)
                break
            if status == 409:
                raise SystemExit("a first put of %s answered 409" % job)
            with ledger.mu:
                ledger.put_errors += 1
            time.sleep(0.05)
        time.sleep(0.002)


def reserver(port, ledger):
    while not ledger.stop_all.is_set():
        try:
            status, payload = request(port, "POST", "/v1/topics/%s/reserve" % TOPIC,
                                      {"count": 10, "ttr_ms": 5000, "wait_ms": 500})
        except OSError:
            time.sleep(0.05)
            continue
        if status != 200:
            time.sleep(0.05)
            continue
        for j in json.loads(payload)["jobs"]:
            # Handed out is handled (as the Worker's handler writes its id
            # before the ack): an ack whose answer the kill took may have
            # ended the job for good.
            with ledger.mu:
                if j["id"] in ledger.handled:
                    ledger.twice += 1
                ledger.handled.add(j["id"])
            try:
                request(port, "POST", "/v1/topics/%s/jobs/%s/ack" % (TOPIC, j["id"]),
                        {"token": j["token"]})
            except OSError:
                pass  # unanswered: done, or its reservation lapses and it comes again


def cli(binary, url, *args):
    return subprocess.run([binary, "--redis", url, *args], capture_output=True, text=True,
                          timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("worker_proc")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--assert-no-loss", action="store_true",
                    help="fail on any accepted job lost (else the loss is printed)")
    a = ap.parse_args()
    logdir = tempfile.mkdtemp(prefix="redisched-sentinel-")
    with SentinelEnv(password="s3cret", sentinel_password="watch") as env:
        url = env.url()
        before = cli(a.binary, url, "stats", TOPIC)
        if before.returncode != 0:
            raise SystemExit("the CLI on %s failed: %s" % (url, before.stderr))
        log_path = os.path.join(logdir, "serve.log")
        serve, port = start_serve([a.binary, "--redis", url, "--replicas", str(a.replicas),
                                   "serve", "--listen", "127.0.0.1:0"], log_path)
        handled_path = os.path.join(logdir, "worker.handled")
        worker = subprocess.Popen([a.worker_proc, url, WORKER_TOPIC, "8", "0", handled_path],
                                  stdout=subprocess.DEVNULL, stderr=open(
                                      os.path.join(logdir, "worker.log"), "wb"))

        def worker_handled():
            try:
                with open(handled_path) as f:
                    return set(f.read().split())
            except FileNotFoundError:
                return set()

        ledger = Ledger()
        threads = [threading.Thread(target=putter, args=(port, ledger, i)) for i in range(4)]
        threads += [threading.Thread(target=reserver, args=(port, ledger)) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            time.sleep(1.5)
            with ledger.mu:
                at_kill = len(ledger.accepted)
            old = env.primary()
            killed = time.monotonic()
            env.kill_primary()
            new = env.wait_failover(old)
            agreed = time.monotonic() - killed
            # The old primary comes back as a replica (as an operator or
            # systemd brings it back): writes that wait for 2 replicas
            # can be answered again.
            env.restart_killed()
            # Served again: the first put answered after the failover.
            with ledger.mu:
                seen = len(ledger.accepted)
            while time.monotonic() - killed < 30:
                with ledger.mu:
                    if len(ledger.accepted) > seen:
                        break
                time.sleep(0.01)
            back = time.monotonic() - killed
            time.sleep(2.0)
            ledger.stop_putting.set()
            for t in threads[:4]:
                t.join()
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                with ledger.mu:
                    if ledger.accepted <= ledger.handled | worker_handled():
                        break
                time.sleep(0.05)
        finally:
            ledger.stop_putting.set()
            ledger.stop_all.set()
            for t in threads:
                t.join()
        after = cli(a.binary, url, "--json", "stats", TOPIC)
        # GET /v1/redis: the mode, the primary the sentinels name now (the
        # failover's, or a later one's: the old primary, back, may trigger
        # another), and its replicas as it lists them (one online at least,
        # within 15 s).
        redis_page, deadline = None, time.monotonic() + 15
        while time.monotonic() < deadline:
            status, payload = request(port, "GET", "/v1/redis")
            redis_page = json.loads(payload) if status == 200 else None
            named = env.primary()
            if redis_page and redis_page["nodes"][0]["address"].endswith(":%d" % named[1]) and any(
                    r["state"] == "online" for r in redis_page["nodes"][0]["replica_nodes"]):
                break
            time.sleep(0.2)
        # Where each lost job is now, for the report.
        missing = sorted(ledger.accepted - ledger.handled - worker_handled())[:5]
        where = {job: cli(a.binary, url, "--json", "get",
                          WORKER_TOPIC if int(job.split("-")[1]) % 2 else TOPIC, job)
                 .stdout.strip() or "(no such job)" for job in missing}
        serve.terminate()
        code = serve.wait(timeout=30)
        worker.terminate()
        worker_code = worker.wait(timeout=30)
    by_worker = worker_handled()
    lost = sorted(ledger.accepted - ledger.handled - by_worker)
    print("serve --replicas %d on %s" % (a.replicas, "redis+sentinel (3 sentinels, 2 replicas)"))
    print("primary %s:%d killed; sentinels agreed on %s:%d after %.2f s; serve answered puts "
          "again after %.2f s" % (old[0], old[1], new[0], new[1], agreed, back))
    print("puts accepted %d (%d before the kill), put attempts that failed %d, slowest put "
          "%.2f s" % (len(ledger.accepted), at_kill, ledger.put_errors, ledger.slowest_put))
    print("handed out over HTTP %d (twice %d), handled by the Worker %d; LOST %d%s" % (
        len(ledger.handled), ledger.twice, len(by_worker), len(lost),
        (": " + " ".join(lost[:10])) if lost else ""))
    failures = []
    if after.returncode != 0:
        failures.append("the CLI after the failover: " + after.stderr)
    print("GET /v1/redis: %s" % json.dumps(redis_page)[:600])
    if not redis_page or redis_page["mode"] != "sentinel" or len(redis_page["nodes"]) != 1:
        failures.append("GET /v1/redis did not show one node in mode sentinel")
    else:
        node = redis_page["nodes"][0]
        if not node["address"].endswith(":%d" % named[1]) or node["role"] != "master":
            failures.append("GET /v1/redis showed %s, not the primary the sentinels name (%s:%d)"
                            % (node["address"], named[0], named[1]))
        if not any(r["state"] == "online" for r in node["replica_nodes"]):
            failures.append("GET /v1/redis listed no replica online")
    if code != 0:
        failures.append("serve exited %d on SIGTERM" % code)
    if worker_code != 0:
        failures.append("worker_proc exited %d on SIGTERM" % worker_code)
    if not by_worker:
        failures.append("the Worker handled nothing")
    if back >= 30:
        failures.append("serve did not answer puts within 30 s of the kill")
    if lost and a.assert_no_loss:
        failures.append("%d accepted jobs lost with --replicas %d" % (len(lost), a.replicas))
    for job, state in where.items():
        print("  lost %s: %s" % (job, state[:300]))
    if failures:
        print("serve log: " + log_path)
        raise SystemExit("FAILED: " + "; ".join(failures))
    print("ok")


if __name__ == "__main__":
    main()
