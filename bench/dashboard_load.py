#!/usr/bin/env python3
"""What an open dashboard overview costs Redis, by the number of topics:
Redis commands a second and the CPU of redis-server and of the serve (% of
one core), with every topic idle (one job delayed by an hour each, as in
bench/idle_cost.py).

    python3 bench/dashboard_load.py                  # 1000 and 10000 topics
    python3 bench/dashboard_load.py --topics 100000 --window 20

For each count, three windows on one serve:
  - nothing open;
  - the overview's page: what the overview does now, GET
    /v1/topics?count=50 every 5 s (a SCAN of the names, the counts of 50)
    and GET /v1/events?topics=<those 50>;
  - the whole feed: one GET /v1/events without topics= (what the overview
    followed before it paged: the server's census, every topic's counts
    each second).
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
from scratch_redis import scratch_redis


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redisched", default=os.path.join(ROOT, "build", "redisched"))
    ap.add_argument("--topics", default="1000,10000")
    ap.add_argument("--window", type=float, default=10, help="seconds of each measure")
    a = ap.parse_args()

    print(f"serve: {a.redisched}")
    print("| topics | open | commands/s | Redis CPU | serve CPU | feed, KB |")
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryFile() as log:
        for topics in (int(t) for t in a.topics.split(",")):
            with scratch_redis() as r:
                port = r.connection_pool.connection_kwargs["port"]
                serve = Serve(a.redisched, port, log)
                wait_for_library(r)
                fill(r, topics)
                startup(r)
                pids = [redis_pid(r), serve.proc.pid]

                def row(what, opened):
                    if opened is not None:
                        time.sleep(3)  # (its start: the first reading)
                    cmds, (rcpu, scpu) = measure(r, pids, a.window)
                    feed = getattr(opened, "feed", opened)
                    got = f"{feed.bytes / 1024:,.0f}" if feed is not None else ""
                    print(f"| {topics:,} | {what} | {cmds:,.0f} | {rcpu:.1f} % | {scpu:.1f} % "
                          f"| {got} |", flush=True)
                    if opened is not None:
                        opened.close()

                row("nothing", None)
                # (the page first: a census reading of many topics outlasts its feed)
                row("the overview's page", Overview(serve))
                row("the whole feed (before)", Feed(serve.port))
                serve.stop()


if __name__ == "__main__":
    main()
