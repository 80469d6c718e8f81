#!/usr/bin/env python3
"""What an open dashboard overview costs Redis, by the number of topics:
Redis commands a second and the CPU of redis-server and of the serve (% of
one core), with every topic idle (one job delayed by an hour each, as in
bench/idle_cost.py).

    python3 bench/dashboard_load.py                  # 1000 and 10000 topics
    python3 bench/dashboard_load.py --topics 100000 --window 20
    python3 bench/dashboard_load.py --topics 10000 --jobs 1000000

For each count, three windows on one serve:
  - nothing open;
  - the overview's page: what the overview does now, GET
    /v1/topics?count=50 every 5 s (a SCAN of the names, the counts of 50)
    and GET /v1/events?topics=<those 50>;
  - the whole feed: one GET /v1/events without topics= (what the overview
    followed before it paged: the server's census, every topic's counts
    each second).
With --jobs N, one more topic, "big", holds N jobs (half ready, half
delayed an hour), and a fourth window opens its page as web/app.js does:
its feed (topics=big), the first page of its ready jobs each second (the
page reloads it whenever the counts change: here, as if they changed every
second), its last page once, its 24 h history once, and a find by id prefix
(up to 20 calls of 50). "slowest" is the longest Redis command in the
window (its SLOWLOG, over 1 ms).
"feed, KB" is what the feed sent, from its opening (3 s before the window).
Commands are Redis's total_commands_processed (a function's commands
counted too). Run it with /usr/bin/python3 (Debian's python3-redis).
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from idle_cost import ROOT, fill, measure, redis_pid, startup, wait_for_library
from scratch_redis import KEY_NAMES, scratch_redis, topic_keys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, binary, redis_port, log):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "serve", "--redis", f"redis://127.0.0.1:{redis_port}",
             "--listen", f"127.0.0.1:{self.port}"], stdout=log, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                self.get("/healthz")
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("serve did not start")

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return json.loads(body) if r.status == 200 else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Feed:
    """A /v1/events stream read to its end in a thread; counts its bytes."""

    def __init__(self, port, query=""):
        self.bytes = 0
        self.sock = socket.create_connection(("127.0.0.1", port))
        path = "/v1/events" + (f"?{query}" if query else "")
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                self.bytes += len(chunk)
        except OSError:
            return

    def close(self):
        self.sock.close()
        self.thread.join(timeout=5)


class Overview:
    """The overview's first page, as web/app.js follows it."""

    def __init__(self, serve):
        self.serve, self.stopping = serve, threading.Event()
        page = serve.get("/v1/topics?count=50")
        names = [t["topic"] for t in page["topics"]]
        self.feed = Feed(serve.port, "topics=" + urllib.parse.quote(",".join(names)))
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.stopping.wait(5):
            self.serve.get("/v1/topics?count=50")

    def close(self):
        self.stopping.set()
        self.thread.join(timeout=30)
        self.feed.close()


class TopicPage:
    """A topic's page, as web/app.js follows it (see the module's text)."""

    def __init__(self, serve, topic, jobs):
        self.serve, self.topic, self.stopping = serve, topic, threading.Event()
        self.feed = Feed(serve.port, "topics=" + topic)
        base = f"/v1/topics/{topic}"
        serve.get(f"{base}/jobs?state=ready&offset={max(0, jobs // 2 - 50)}&count=50")
        serve.get(f"{base}/history?range=24h")
        cursor = ""
        for _ in range(20):
            page = serve.get(f"{base}/ids?prefix=j12&count=50" + (f"&cursor={cursor}" if cursor else ""))
            cursor = page.get("cursor") if page else None
            if not cursor:
                break
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.stopping.wait(1):
            self.serve.get(f"/v1/topics/{self.topic}")
            self.serve.get(f"/v1/topics/{self.topic}/jobs?state=ready&offset=0&count=50")

    def close(self):
        self.stopping.set()
        self.thread.join(timeout=30)
        self.feed.close()


def fill_big(r, topic, jobs):
    """jobs jobs in topic, the even ones ready and the odd ones delayed an
    hour, 1000 a call."""
    keys = topic_keys(topic, len(KEY_NAMES))
    pipe = r.pipeline(transaction=False)
    for first in range(0, jobs, 1000):
        n = min(1000, jobs - first)
        args = [n]
        for i in range(first, first + n):
            args += [f"j{i}", "x" * 100] + ([0] if i % 2 == 0 else [2, "DELAY", 3600000])
        pipe.execute_command("FCALL", "redisched_putmany", len(keys), *keys, *args)
        if first % 50000 == 49000:
            pipe.execute()
    pipe.execute()


def slowest(r):
    """The longest command (µs, name) SLOWLOG kept since its reset, or (0, "")."""
    entries = r.slowlog_get(1024)
    if not entries:
        return 0, ""
    e = max(entries, key=lambda e: e["duration"])
    name = e["command"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return e["duration"], " ".join(name.split()[:2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redisched", default=os.path.join(ROOT, "build", "redisched"))
    ap.add_argument("--topics", default="1000,10000")
    ap.add_argument("--window", type=float, default=10, help="seconds of each measure")
    ap.add_argument("--jobs", type=int, default=0, help="jobs in one more topic, and its page")
    a = ap.parse_args()

    print(f"serve: {a.redisched}")
    print("| topics | open | commands/s | Redis CPU | serve CPU | feed, KB | slowest, ms |")
    print("|---:|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryFile() as log:
        for topics in (int(t) for t in a.topics.split(",")):
            with scratch_redis() as r:
                port = r.connection_pool.connection_kwargs["port"]
                serve = Serve(a.redisched, port, log)
                wait_for_library(r)
                fill(r, topics)
                if a.jobs:
                    fill_big(r, "big", a.jobs)
                startup(r)
                pids = [redis_pid(r), serve.proc.pid]
                r.config_set("slowlog-log-slower-than", 1000)
                r.config_set("slowlog-max-len", 1024)

                def row(what, opened):
                    if opened is not None:
                        time.sleep(3)  # (its start: the first reading)
                    r.slowlog_reset()
                    cmds, (rcpu, scpu) = measure(r, pids, a.window)
                    us, name = slowest(r)
                    feed = getattr(opened, "feed", opened)
                    got = f"{feed.bytes / 1024:,.0f}" if feed is not None else ""
                    slow = f"{us / 1000:.1f} ({name})" if us else "< 1"
                    print(f"| {topics:,}{f' + {a.jobs:,} jobs' if a.jobs else ''} | {what} "
                          f"| {cmds:,.0f} | {rcpu:.1f} % | {scpu:.1f} % | {got} | {slow} |", flush=True)
                    if opened is not None:
                        opened.close()

                row("nothing", None)
                # (the page first: a census reading of many topics outlasts its feed)
                row("the overview's page", Overview(serve))
                if a.jobs:
                    row(f"the page of a topic of {a.jobs:,} jobs", TopicPage(serve, "big", a.jobs))
                row("the whole feed (before)", Feed(serve.port))
                serve.stop()


if __name__ == "__main__":
    main()
