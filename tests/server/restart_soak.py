#!/usr/bin/python3
"""Shutdown and restart of `redisched serve` under load (issue 31).

Each cycle starts serve on one data dir (its embedded Redis), loads it, and
then stops it, either with SIGTERM (a deploy) or with SIGKILL (a crash), and
at once starts the next cycle's serve on the same dir. The load, all at once:
  - 200 long-poll reserves (wait_ms 15000) on a topic that stays empty;
  - 8 putters over keep-alive connections, each putting jobs in a loop;
  - 4 reservers that reserve and ack the putters' jobs;
  - 5 webhooks (their topics get jobs too), answered by a receiver here;
  - 50 server-sent event streams (the dashboard's /v1/events).

What it checks, over every cycle:
  - SIGTERM: serve exits with status 0, and how long it takes (figures
    printed: p50, p99, max; --max-exit-ms bounds the p99);
  - each restart answers /healthz, and how long it takes (--max-start-ms
    bounds the slowest);
  - no acknowledged job is lost: every put answered 201 whose job was not
    acked is still there at the end; no acked job comes back;
  - no memory error: the serve logs hold no sanitizer report.

Standard library and Debian's python3 only. Every request goes to 127.0.0.1.
Usage: restart_soak.py --binary build/redisched [--cycles 20] [--mode term]
"""

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from serve_process import StartError, start_serve  # noqa: E402
SANITIZER = re.compile(rb"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|"
                       rb"runtime error:|corrupted size|double free)")

LONG_POLLS = 200
PUTTERS = 8
RESERVERS = 4
WEBHOOKS = 5
STREAMS = 50


# --------------------------------------------------------------------------
# The webhooks' receiver: 200 to every POST.


def receive(received, port):
    """Answers 200 to each request, one per connection (as the pusher sends)."""

    async def answer(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            m = re.search(rb"(?i)content-length:\s*(\d+)", head)
            await reader.readexactly(int(m.group(1)) if m else 0)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            with received.get_lock():
                received.value += 1
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=1024)
        port.value = server.sockets[0].getsockname()[1]
        await server.serve_forever()

    asyncio.run(main())


def start_receiver():
    """In a process of its own: the load's event loop must not slow the
    webhooks' answers (a slow receiver holds a drain up by design)."""
    received = multiprocessing.Value("l", 0)
    port = multiprocessing.Value("i", 0)
    proc = multiprocessing.Process(target=receive, args=(received, port), daemon=True)
    proc.start()
    while port.value == 0:
        time.sleep(0.01)
    return proc, port.value, received


# --------------------------------------------------------------------------
# A minimal HTTP/1.1 client on asyncio streams (keep-alive, Content-Length).


class Closed(Exception):
    pass


class Conn:
    def __init__(self, port):
        self.port = port
        self.reader = None
        self.writer = None
        self.closing = False  # the server said Connection: close

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def request(self, method, target, body=None):
        if self.writer is None or self.closing:
            raise Closed()
        data = b"" if body is None else json.dumps(body).encode()
        head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % (
            method, target, len(data))
        try:
            self.writer.write(head.encode() + data)
            await self.writer.drain()
            status_line = await self.reader.readline()
            if not status_line:
                raise Closed()
            status = int(status_line.split()[1])
            length = 0
            while True:
                line = await self.reader.readline()
                if not line:
                    raise Closed()
                if line == b"\r\n":
                    break
                name, _, value = line.decode("latin-1").partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "connection" and value.strip().lower() == "close":
                    self.closing = True
            payload = await self.reader.readexactly(length) if length else b""
        except (ConnectionError, asyncio.IncompleteReadError, OSError) as e:
            raise Closed() from e
        return status, payload

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


# --------------------------------------------------------------------------
# The load on one serve, until it goes away.


class Ledger:
    """What the server acknowledged, over all cycles."""

    def __init__(self):
        self.put = set()     # ids answered 201
        self.acked = set()   # ids whose ack was answered 200
        # ids whose ack was sent: one the server may have done without
        # answering (killed in between) is neither lost nor back
        self.ack_sent = set()
        self.stream_events = 0
        self.long_polls_answered = 0


async def on_connection(port, stop, step):
    """Runs step(conn) on one keep-alive connection until stop is set or the
    server closes it (it says Connection: close, or goes away)."""
    conn = Conn(port)
    try:
        await conn.open()
        while not stop.is_set():
            await step(conn)
    except (Closed, ConnectionError, OSError):
        pass
    finally:
        conn.close()


def putter(ledger, cycle, n):
    count = itertools.count(1)

    async def step(conn):
        i = next(count)
        topic = "work" if i % 4 else "hook%d" % (i % WEBHOOKS)
        job = "c%d_p%d_%d" % (cycle, n, i)
        status, _ = await conn.request("PUT", "/v1/topics/%s/jobs/%s" % (topic, job),
                                       {"body": "x" * 32})
        if status == 201 and topic == "work":
            ledger.put.add(job)
    return step


def reserver(ledger):
    async def step(conn):
        status, payload = await conn.request("POST", "/v1/topics/work/reserve",
                                             {"count": 5, "ttr_ms": 60000, "wait_ms": 500})
        if status != 200:
            return
        for j in json.loads(payload)["jobs"]:
            ledger.ack_sent.add(j["id"])
            s, _ = await conn.request("POST", "/v1/topics/work/jobs/%s/ack" % j["id"],
                                      {"token": j["token"]})
            if s == 200:
                ledger.acked.add(j["id"])
    return step


def long_poll(ledger):
    async def step(conn):
        await conn.request("POST", "/v1/topics/idle/reserve", {"wait_ms": 15000})
        ledger.long_polls_answered += 1
    return step


async def event_stream(port, ledger):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(b"GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            ledger.stream_events += chunk.count(b"\ndata: ")
    except (ConnectionError, OSError):
        return
    finally:
        writer.close()


async def load(port, ledger, cycle, seconds, stop):
    """Runs the load for `seconds`, then returns while it goes on (the tasks
    end when the server closes their connections, or at stop)."""
    steps = [long_poll(ledger) for _ in range(LONG_POLLS)]
    steps += [putter(ledger, cycle, n) for n in range(PUTTERS)]
    steps += [reserver(ledger) for _ in range(RESERVERS)]
    tasks = [asyncio.create_task(on_connection(port, stop, step)) for step in steps]
    tasks += [asyncio.create_task(event_stream(port, ledger)) for _ in range(STREAMS)]
    await asyncio.sleep(seconds)
    return tasks


# --------------------------------------------------------------------------
# serve


class Serve:
    def __init__(self, binary, data_dir, log_dir, fsync, webhooks):
        self.binary = binary
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.fsync = fsync
        self.webhooks = webhooks
        self.proc = None
        self.port = None
        self.starts = 0

    def start(self, timeout=20.0):
        """Starts serve; returns seconds until /healthz answered 200."""
        self.starts += 1
        log_path = os.path.join(self.log_dir, "serve-%03d.log" % self.starts)
        argv = [self.binary, "--data-dir", self.data_dir, "serve", "--listen", "127.0.0.1:0",
                "--fsync", self.fsync, "--max-connections", "4096"]
        for w in self.webhooks:
            argv += ["--webhook", w]
        t0 = time.monotonic()
        self.log_path = log_path
        try:
            self.proc, self.port = start_serve(argv, log_path, timeout)
        except StartError as e:
            raise SystemExit(str(e)) from e
        while time.monotonic() - t0 < timeout:
            if healthy(self.port):
                return time.monotonic() - t0
            time.sleep(0.005)
        raise SystemExit("serve did not answer /healthz within %.0f s" % timeout)

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read()


def healthy(port):
    import http.client
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/healthz")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k]


def final_check(binary, data_dir, ledger):
    """On a last serve: every job put and not acked is there; none acked is."""
    serve = Serve(binary, data_dir, tempfile.mkdtemp(prefix="redisched-soak-check-"),
                  "everysec", [])
    serve.start()
    lost, back = [], []

    async def check():
        conn = Conn(serve.port)
        await conn.open()
        for job in sorted(ledger.put | ledger.acked):
            status, _ = await conn.request("GET", "/v1/topics/work/jobs/%s" % job)
            if job in ledger.acked and status != 404:
                back.append(job)
            elif job not in ledger.ack_sent and status != 200:
                lost.append(job)
        conn.close()

    asyncio.run(check())
    serve.proc.send_signal(signal.SIGTERM)
    serve.proc.wait(30)
    shutil.rmtree(serve.log_dir, ignore_errors=True)
    return lost, back


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--mode", choices=["term", "kill"], default="term")
    ap.add_argument("--fsync", choices=["always", "everysec", "no"], default="everysec")
    ap.add_argument("--load-seconds", type=float, default=1.5)
    ap.add_argument("--max-exit-ms", type=float, default=None,
                    help="fail when the p99 of SIGTERM-to-exit is above this")
    ap.add_argument("--max-start-ms", type=float, default=None,
                    help="fail when a restart takes longer than this to answer /healthz")
    args = ap.parse_args()

    receiver, receiver_port, received = start_receiver()
    hook_url = "http://127.0.0.1:%d/" % receiver_port
    webhooks = ["hook%d=%s" % (i, hook_url) for i in range(WEBHOOKS)]
    root = tempfile.mkdtemp(prefix="redisched-soak-")
    data_dir = os.path.join(root, "data")
    serve = Serve(args.binary, data_dir, root, args.fsync, webhooks)
    ledger = Ledger()
    exits, starts, failures = [], [], []

    starts.append(serve.start())
    for cycle in range(1, args.cycles + 1):
        stop = asyncio.Event()

        async def one_cycle():
            tasks = await load(serve.port, ledger, cycle, args.load_seconds, stop)
            t0 = time.monotonic()
            serve.proc.send_signal(signal.SIGTERM if args.mode == "term" else signal.SIGKILL)
            while serve.proc.poll() is None and time.monotonic() - t0 < 60:
                await asyncio.sleep(0.001)
            elapsed = time.monotonic() - t0
            stop.set()
            await asyncio.wait(tasks, timeout=20)
            for t in tasks:
                t.cancel()
            return elapsed

        elapsed = asyncio.run(one_cycle())
        rc = serve.proc.wait()
        text = serve.log_text()
        if args.mode == "term":
            exits.append(elapsed * 1000)
            if rc != 0:
                failures.append("cycle %d: serve exited with %d after SIGTERM" % (cycle, rc))
        if SANITIZER.search(text):
            failures.append("cycle %d: a sanitizer report in %s" % (cycle, serve.log_path))
        # At once on the same dir, as systemd's Restart= would.
        starts.append(serve.start())

    serve.proc.send_signal(signal.SIGTERM)
    rc = serve.proc.wait(60)
    if rc != 0:
        failures.append("the last serve exited with %d" % rc)
    if SANITIZER.search(serve.log_text()):
        failures.append("a sanitizer report in %s" % serve.log_path)
    lost, back = final_check(args.binary, data_dir, ledger)
    receiver.terminate()

    print("restart soak: %d cycles of %s (fsync %s), load %.1f s each" % (
        args.cycles, "SIGTERM" if args.mode == "term" else "SIGKILL", args.fsync,
        args.load_seconds))
    print("  load: %d long-polls, %d putters, %d reservers, %d webhooks, %d event streams" % (
        LONG_POLLS, PUTTERS, RESERVERS, WEBHOOKS, STREAMS))
    print("  acknowledged puts %d, acked %d, webhook deliveries %d, events %d, long-polls "
          "answered %d" % (len(ledger.put), len(ledger.acked), received.value,
                           ledger.stream_events, ledger.long_polls_answered))
    if exits:
        print("  SIGTERM to exit, ms: p50 %.0f  p99 %.0f  max %.0f" % (
            statistics.median(exits), percentile(exits, 99), max(exits)))
    print("  start to /healthz, ms: p50 %.0f  p99 %.0f  max %.0f" % (
        statistics.median(starts) * 1000, percentile(starts, 99) * 1000, max(starts) * 1000))
    print("  acknowledged jobs lost: %d; acked jobs back: %d" % (len(lost), len(back)))
    if lost:
        failures.append("lost: %s" % ", ".join(lost[:20]))
    if back:
        failures.append("acked but back: %s" % ", ".join(back[:20]))
    if not ledger.put or not ledger.acked:
        failures.append("the load put or acked nothing: the figures mean nothing")
    if args.max_exit_ms is not None and exits and percentile(exits, 99) > args.max_exit_ms:
        failures.append("p99 of SIGTERM to exit %.0f ms > %.0f" % (
            percentile(exits, 99), args.max_exit_ms))
    if args.max_start_ms is not None and max(starts) * 1000 > args.max_start_ms:
        failures.append("a start took %.0f ms > %.0f" % (max(starts) * 1000, args.max_start_ms))
    for f in failures:
        print("FAIL: " + f)
    if not failures and not os.environ.get("SOAK_KEEP"):
        shutil.rmtree(root, ignore_errors=True)
        print("restart soak: passed")
    else:
        print("logs kept in " + root)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
