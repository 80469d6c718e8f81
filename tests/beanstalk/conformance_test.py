"""beanstalkd's protocol (doc/protocol.txt of beanstalkd 1.12), case by case,
byte for byte, against a server: Debian's beanstalkd itself (--beanstalkd
PATH), which must pass so that the test is known to say what beanstalkd
does, and redisched serve's beanstalkd face (--redisched PATH), with its
embedded Redis in a temp dir.

Each case runs on tubes of its own. Standard library only.

    conformance_test.py --beanstalkd /usr/bin/beanstalkd
    conformance_test.py --redisched build/redisched
    conformance_test.py --redisched build/redisched --clients   # and the npm clients' flows
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from serve_process import start_serve  # noqa: E402

MAX_JOB_SIZE = 65535  # both servers' default


# --------------------------------------------------------------------------
# The servers


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Beanstalkd:
    name = "beanstalkd"

    def __init__(self, path):
        self.path = path
        self.proc = None
        self.port = None

    def start(self):
        self.port = free_port()
        self.proc = subprocess.Popen([self.path, "-l", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)


class Redisched:
    name = "redisched"

    def __init__(self, path, redis_url=None, extra=()):
        self.path = path
        self.redis_url = redis_url  # None: serve's embedded Redis
        self.extra = list(extra)    # global options of redisched (before "serve")
        self.dir = tempfile.mkdtemp(prefix="redisched-beanstalk-")
        self.proc = None
        self.port = None
        self.log = os.path.join(self.dir, "serve.log")

    def start(self):
        where = (["--redis", self.redis_url] if self.redis_url
                 else ["--data-dir", os.path.join(self.dir, "data")])
        argv = [self.path] + where + self.extra + ["serve", "--listen", "127.0.0.1:0", "--beanstalk",
                                      "127.0.0.1:0"]
        self.proc, _ = start_serve(argv, self.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(self.log, "rb") as f:
                m = re.search(rb"beanstalkd's protocol on [^ ]*?:(\d+)", f.read())
            if m:
                self.port = int(m.group(1))
                wait_port(self.port, self.proc)
                return
            time.sleep(0.01)
        raise RuntimeError("serve did not say its beanstalkd port")

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(20)
            if rc != 0:
                raise RuntimeError("serve exited with %d: %s" % (rc, self.log_tail()))
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self):
        with open(self.log, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")


def wait_port(port, proc):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nothing listens on %d" % port)


# --------------------------------------------------------------------------
# A connection that sends exact bytes and reads exact answers


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, timeout):
        self.sock.settimeout(timeout)
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("the server closed the connection")
        self.buf += data

    def line(self, timeout=10):
        deadline = time.monotonic() + timeout
        while b"\r\n" not in self.buf:
            self._fill(max(deadline - time.monotonic(), 0.01))
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def data(self, n, timeout=10):
        deadline = time.monotonic() + timeout
        while len(self.buf) < n + 2:
            self._fill(max(deadline - time.monotonic(), 0.01))
        body, self.buf = self.buf[:n + 2], self.buf[n + 2:]
        assert body.endswith(b"\r\n"), body
        return body[:-2]

    def cmd(self, text, timeout=10):
        """Sends one command line; returns its answer line."""
        self.send(text.encode() + b"\r\n")
        return self.line(timeout).decode()

    def with_data(self, text, timeout=10):
        """A command answered "<WORD> ... <bytes>" and a chunk: (line, chunk)."""
        line = self.cmd(text, timeout)
        parts = line.split()
        if parts[0] in ("OK", "FOUND", "RESERVED"):
            return line, self.data(int(parts[-1]), timeout)
        return line, None

    def put(self, body, pri=0, delay=0, ttr=60):
        if isinstance(body, str):
            body = body.encode()
        self.send(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body))
        line = self.line().decode()
        assert line.startswith("INSERTED "), line
        return int(line.split()[1])

    def nothing_more(self, wait=0.3):
        """No further bytes within wait (and the connection still open)."""
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            return True
        raise AssertionError("unexpected bytes: %r" % data if data else "closed")


def yaml_dict(chunk):
    text = chunk.decode()
    assert text.startswith("---\n"), text
    out = {}
    for line in text[4:].splitlines():
        k, v = line.split(": ", 1)
        out[k] = v
    return out


def yaml_keys(chunk):
    return [line.split(": ", 1)[0] for line in chunk.decode()[4:].splitlines()]


def eq(got, want, what=""):
    assert got == want, "%s: got %r, want %r" % (what, got, want)


# --------------------------------------------------------------------------
# The cases: each takes (port, tube prefix)

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def worker(port, tube):
    c = Conn(port)
    eq(c.cmd("watch " + tube), "WATCHING 2")
    eq(c.cmd("ignore default"), "WATCHING 1")
    return c


def reserve_ids(w, n):
    """The ids of the next n jobs w reserves, in order (their bodies read)."""
    got = []
    for _ in range(n):
        line = w.cmd("reserve-with-timeout 1")
        got.append(int(line.split()[1]))
        w.line()
    return got


@case
def put_reserve_delete(port, t):
    p = Conn(port)
    eq(p.cmd("use " + t), "USING " + t)
    jid = p.put("hello", ttr=10)
    w = worker(port, t)
    line, body = w.with_data("reserve")
    eq(line, "RESERVED %d 5" % jid)
    eq(body, b"hello")
    eq(w.cmd("delete %d" % jid), "DELETED")
    eq(w.cmd("delete %d" % jid), "NOT_FOUND")
    eq(w.cmd("reserve-with-timeout 0"), "TIMED_OUT")


@case
def bodies_are_bytes(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    bodies = [b"", b"\r\n", b"\x00\xff binary \r\nput 0 0 1 1\r\n", os.urandom(MAX_JOB_SIZE)]
    ids = [p.put(b) for b in bodies]
    w = worker(port, t)
    for jid, b in zip(ids, bodies):
        line, got = w.with_data("reserve-with-timeout 5")
        eq(line, "RESERVED %d %d" % (jid, len(b)))
        assert got == b, "body of %d changed" % jid
        eq(w.cmd("delete %d" % jid), "DELETED")


@case
def ids_are_unique_and_rise(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    ids = [p.put("x") for _ in range(20)]
    eq(len(set(ids)), 20, "distinct ids")
    eq(ids, sorted(ids), "ids in put order")


@case
def priority_then_put_order(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jobs = [(p.put("a", pri=5), 5), (p.put("b", pri=1), 1), (p.put("c", pri=3), 3),
            (p.put("d", pri=1), 1), (p.put("e", pri=0), 0), (p.put("f", pri=1000), 1000)]
    want = [jid for jid, _ in sorted(jobs, key=lambda j: (j[1], j[0]))]
    w = worker(port, t)
    got = reserve_ids(w, len(jobs))  # the body
    eq(got, want, "reserve order")


@case
def priorities_across_32_bits(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    pris = [4294967295, 1024, 0, 2 ** 31, 1023, 4294967294, 1000, 1001, 2 ** 31, 1, 65536]
    jobs = [(p.put("p%d" % pri, pri=pri), pri) for pri in pris]
    for jid, pri in jobs:
        eq(yaml_dict(p.with_data("stats-job %d" % jid)[1])["pri"], str(pri), "pri of %d" % jid)
    want = [jid for jid, _ in sorted(jobs, key=lambda j: (j[1], j[0]))]
    w = worker(port, t)
    got = reserve_ids(w, len(jobs))
    eq(got, want, "reserve order")
    # release and bury keep the order of 32-bit priorities too
    eq(w.cmd("release %d 4294967295 0" % got[0]), "RELEASED")
    eq(w.cmd("release %d 3000000000 0" % got[1]), "RELEASED")
    eq(w.cmd("reserve-with-timeout 1").split()[1], str(got[1]))
    w.line()
    eq(yaml_dict(p.with_data("stats-job %d" % got[0])[1])["pri"], "4294967295")


@case
def reserve_picks_across_watched_tubes(port, t):
    p = Conn(port)
    p.cmd("use %s-a" % t)
    low = p.put("low", pri=10)
    p.cmd("use %s-b" % t)
    high = p.put("high", pri=2)
    w = Conn(port)
    eq(w.cmd("watch %s-a" % t), "WATCHING 2")
    eq(w.cmd("watch %s-b" % t), "WATCHING 3")
    line, body = w.with_data("reserve-with-timeout 1")
    eq(line, "RESERVED %d 4" % high)
    line, body = w.with_data("reserve-with-timeout 1")
    eq(line, "RESERVED %d 3" % low)


@case
def delayed_jobs(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("later", delay=1)
    w = worker(port, t)
    eq(w.cmd("reserve-with-timeout 0"), "TIMED_OUT")
    line, body = p.with_data("peek-delayed")
    eq(line, "FOUND %d 5" % jid)
    eq(p.with_data("peek-ready"), ("NOT_FOUND", None))
    stats = yaml_dict(p.with_data("stats-job %d" % jid)[1])
    eq(stats["state"], "delayed")
    eq(stats["delay"], "1")
    began = time.monotonic()
    line, body = w.with_data("reserve-with-timeout 5")
    eq(line, "RESERVED %d 5" % jid)
    assert time.monotonic() - began < 2.5, "reserved %.2f s later" % (time.monotonic() - began)


@case
def reserve_waits_for_a_put(port, t):
    w = worker(port, t)
    w.send(b"reserve\r\n")
    time.sleep(0.3)
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("now")
    eq(w.line().decode(), "RESERVED %d 3" % jid)
    eq(w.line(), b"now")


@case
def reserve_with_timeout_times_out(port, t):
    w = worker(port, t)
    began = time.monotonic()
    eq(w.cmd("reserve-with-timeout 1"), "TIMED_OUT")
    took = time.monotonic() - began
    assert 0.9 <= took < 2.5, "timed out after %.2f s" % took


@case
def ttr_deadline_soon_and_timeout(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("slow", ttr=2)
    w = worker(port, t)
    eq(w.with_data("reserve-with-timeout 0")[0], "RESERVED %d 4" % jid)
    stats = yaml_dict(p.with_data("stats-job %d" % jid)[1])
    eq(stats["state"], "reserved")
    eq(stats["ttr"], "2")
    # The last second of the TTR: a ready job is still handed out...
    other_job = p.put("other", ttr=30)
    time.sleep(1.1)
    eq(w.with_data("reserve-with-timeout 0"), ("RESERVED %d 5" % other_job, b"other"))
    eq(w.cmd("delete %d" % other_job), "DELETED")
    # ...and with none ready, a reserve is answered DEADLINE_SOON.
    began = time.monotonic()
    eq(w.cmd("reserve-with-timeout 5"), "DEADLINE_SOON")
    assert time.monotonic() - began < 1.8, "DEADLINE_SOON %.2f s late" % (
        time.monotonic() - began)
    # Once the TTR lapsed, the job is ready again, for anyone.
    other = worker(port, t)
    # (10 s: once, on a loaded machine, beanstalkd itself took over 5.)
    line, body = other.with_data("reserve-with-timeout 10", timeout=15)
    eq(line, "RESERVED %d 4" % jid)
    eq(w.cmd("delete %d" % jid), "NOT_FOUND")
    eq(other.cmd("delete %d" % jid), "DELETED")


@case
def ttr_zero_is_one(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("x", ttr=0)
    eq(yaml_dict(p.with_data("stats-job %d" % jid)[1])["ttr"], "1")


@case
def release(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("again", pri=9)
    w = worker(port, t)
    w.with_data("reserve-with-timeout 0")
    eq(p.cmd("release %d 7 0" % jid), "NOT_FOUND")  # not its reservation
    eq(w.cmd("release %d 7 0" % jid), "RELEASED")
    stats = yaml_dict(p.with_data("stats-job %d" % jid)[1])
    eq((stats["state"], stats["pri"]), ("ready", "7"))
    w.with_data("reserve-with-timeout 0")
    eq(w.cmd("release %d 7 1" % jid), "RELEASED")
    eq(yaml_dict(p.with_data("stats-job %d" % jid)[1])["state"], "delayed")
    eq(w.cmd("release %d 7 0" % jid), "NOT_FOUND")


@case
def bury_and_kick(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("bad")
    w = worker(port, t)
    w.with_data("reserve-with-timeout 0")
    eq(p.cmd("bury %d 0" % jid), "NOT_FOUND")
    eq(w.cmd("bury %d 2000000000" % jid), "BURIED")
    eq(w.cmd("bury %d 0" % jid), "NOT_FOUND")
    stats = yaml_dict(p.with_data("stats-job %d" % jid)[1])
    eq((stats["state"], stats["pri"]), ("buried", "2000000000"))
    eq(p.with_data("peek-buried"), ("FOUND %d 3" % jid, b"bad"))
    stats = yaml_dict(p.with_data("stats-tube " + t)[1])
    eq(stats["current-jobs-buried"], "1")
    eq(w.cmd("reserve-with-timeout 0"), "TIMED_OUT")
    eq(p.cmd("kick 10"), "KICKED 1")
    eq(p.cmd("kick 10"), "KICKED 0")
    eq(yaml_dict(p.with_data("stats-job %d" % jid)[1])["state"], "ready")
    eq(w.with_data("reserve-with-timeout 0")[0], "RESERVED %d 3" % jid)


@case
def kick_takes_delayed_when_none_is_buried(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    a = p.put("a", delay=100)
    b = p.put("b", delay=100)
    eq(p.cmd("kick 1"), "KICKED 1")
    eq(p.cmd("kick 5"), "KICKED 1")
    for jid in (a, b):
        eq(yaml_dict(p.with_data("stats-job %d" % jid)[1])["state"], "ready")


@case
def kick_job(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    ready = p.put("r")
    delayed = p.put("d", delay=100)
    eq(p.cmd("kick-job %d" % ready), "NOT_FOUND")
    eq(p.cmd("kick-job %d" % delayed), "KICKED")
    eq(yaml_dict(p.with_data("stats-job %d" % delayed)[1])["state"], "ready")
    w = worker(port, t)
    line = w.cmd("reserve-with-timeout 0")
    jid = int(line.split()[1])
    w.line()
    eq(w.cmd("bury %d 5" % jid), "BURIED")
    eq(p.cmd("kick-job %d" % jid), "KICKED")
    eq(p.cmd("kick-job 999999999999"), "NOT_FOUND")


@case
def touch(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jid = p.put("long", ttr=3)
    w = worker(port, t)
    w.with_data("reserve-with-timeout 0")
    eq(p.cmd("touch %d" % jid), "NOT_FOUND")
    time.sleep(1.5)
    eq(w.cmd("touch %d" % jid), "TOUCHED")
    time.sleep(1.8)  # past the first deadline, within the touched one
    eq(w.cmd("delete %d" % jid), "DELETED")


@case
def delete_by_anyone_but_not_another_reservation(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    ready = p.put("r")
    delayed = p.put("d", delay=100)
    eq(p.cmd("delete %d" % ready), "DELETED")
    eq(p.cmd("delete %d" % delayed), "DELETED")
    held = p.put("h")
    w = worker(port, t)
    w.with_data("reserve-with-timeout 0")
    eq(p.cmd("delete %d" % held), "NOT_FOUND")
    eq(w.cmd("delete %d" % held), "DELETED")


@case
def a_closed_connection_gives_its_jobs_back(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    jids = [p.put("orphan", ttr=100) for _ in range(3)]
    w = worker(port, t)
    for _ in jids:
        w.with_data("reserve-with-timeout 0")
    w.close()
    other = worker(port, t)
    back = sorted(other.with_data("reserve-with-timeout 3")[0] for _ in jids)
    eq(back, sorted("RESERVED %d 6" % jid for jid in jids), "all three back")


@case
def reserve_job(port, t):
    # By its id, ahead of the tube's order: behind a job of a higher
    # priority, delayed, buried; never one somebody holds.
    p = Conn(port)
    p.cmd("use " + t)
    first = p.put("first", pri=0)
    second = p.put("second", pri=100)
    third = p.put("third", delay=100)
    w = worker(port, t)
    eq(w.with_data("reserve-job %d" % second), ("RESERVED %d 6" % second, b"second"))
    eq(w.with_data("reserve-job %d" % third), ("RESERVED %d 5" % third, b"third"))
    eq(w.cmd("reserve-job %d" % second), "NOT_FOUND")
    eq(p.cmd("reserve-job %d" % second), "NOT_FOUND")
    eq(w.cmd("bury %d 7" % second), "BURIED")
    eq(p.with_data("reserve-job %d" % second), ("RESERVED %d 6" % second, b"second"))
    eq(yaml_dict(w.with_data("stats-job %d" % second)[1])["state"], "reserved")
    eq(p.cmd("delete %d" % second), "DELETED")
    eq(w.cmd("delete %d" % third), "DELETED")
    eq(p.cmd("reserve-job %d" % second), "NOT_FOUND")
    eq(yaml_dict(p.with_data("stats-job %d" % first)[1])["state"], "ready")


@case
def peeks(port, t):
    p = Conn(port)
    p.cmd("use " + t)
    eq(p.cmd("peek-ready"), "NOT_FOUND")
    eq(p.cmd("peek-delayed"), "NOT_FOUND")
    eq(p.cmd("peek-buried"), "NOT_FOUND")
    a = p.put("a", pri=5)
    b = p.put("b", pri=1)
    p.put("c", delay=200)
    d = p.put("d", delay=100)
    eq(p.with_data("peek-ready"), ("FOUND %d 1" % b, b"b"))
    eq(p.with_data("peek-delayed"), ("FOUND %d 1" % d, b"d"))
    eq(p.with_data("peek %d" % a), ("FOUND %d 1" % a, b"a"))
    eq(p.cmd("peek 999999999999"), "NOT_FOUND")
    # peek reads any tube's job, whatever the connection uses
    other = Conn(port)
    eq(other.with_data("peek %d" % a), ("FOUND %d 1" % a, b"a"))


@case
def tubes_used_and_watched(port, t):
    c = Conn(port)
    eq(c.cmd("list-tube-used"), "USING default")
    eq(c.with_data("list-tubes-watched"), ("OK 14", b"---\n- default\n"))
    eq(c.cmd("use " + t), "USING " + t)
    eq(c.cmd("list-tube-used"), "USING " + t)
    eq(c.cmd("watch %s-x" % t), "WATCHING 2")
    eq(c.cmd("watch %s-x" % t), "WATCHING 2")
    want = ("---\n- default\n- %s-x\n" % t).encode()
    eq(c.with_data("list-tubes-watched"), ("OK %d" % len(want), want))
    eq(c.cmd("ignore %s-nothing" % t), "WATCHING 2")
    eq(c.cmd("ignore default"), "WATCHING 1")
    eq(c.cmd("ignore %s-x" % t), "NOT_IGNORED")
    line, chunk = c.with_data("list-tubes")
    names = chunk.decode()[4:].splitlines()
    assert "- default" in names and "- %s-x" % t in names, names


@case
def stats_tube(port, t):
    c = Conn(port)
    eq(c.cmd("stats-tube %s-nothing" % t), "NOT_FOUND")
    c.cmd("use " + t)
    c.put("ready")
    c.put("delayed", delay=100)
    line, chunk = c.with_data("stats-tube " + t)
    eq(yaml_keys(chunk), ["name", "current-jobs-urgent", "current-jobs-ready",
                          "current-jobs-reserved", "current-jobs-delayed", "current-jobs-buried",
                          "total-jobs", "current-using", "current-watching", "current-waiting",
                          "cmd-delete", "cmd-pause-tube", "pause", "pause-time-left"])
    s = yaml_dict(chunk)
    eq((s["name"], s["current-jobs-ready"], s["current-jobs-delayed"], s["current-jobs-urgent"],
        s["current-using"], s["total-jobs"]), (t, "1", "1", "1", "1", "2"))


@case
def stats_job(port, t):
    c = Conn(port)
    c.cmd("use " + t)
    jid = c.put("x", pri=42, delay=10, ttr=30)
    line, chunk = c.with_data("stats-job %d" % jid)
    eq(yaml_keys(chunk), ["id", "tube", "state", "pri", "age", "delay", "ttr", "time-left",
                          "file", "reserves", "timeouts", "releases", "buries", "kicks"])
    s = yaml_dict(chunk)
    eq((s["id"], s["tube"], s["state"], s["pri"], s["delay"], s["ttr"]),
       (str(jid), t, "delayed", "42", "10", "30"))
    assert s["time-left"] in ("9", "10"), s["time-left"]
    eq(c.cmd("stats-job 999999999999"), "NOT_FOUND")


@case
def stats(port, t):
    c = Conn(port)
    line, chunk = c.with_data("stats")
    keys = yaml_keys(chunk)
    eq(keys, ["current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
              "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-peek",
              "cmd-peek-ready", "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve",
              "cmd-reserve-with-timeout", "cmd-delete", "cmd-release", "cmd-use", "cmd-watch",
              "cmd-ignore", "cmd-bury", "cmd-kick", "cmd-touch", "cmd-stats", "cmd-stats-job",
              "cmd-stats-tube", "cmd-list-tubes", "cmd-list-tube-used",
              "cmd-list-tubes-watched", "cmd-pause-tube", "job-timeouts", "total-jobs",
              "max-job-size", "current-tubes", "current-connections", "current-producers",
              "current-workers", "current-waiting", "total-connections", "pid", "version",
              "rusage-utime", "rusage-stime", "uptime", "binlog-oldest-index",
              "binlog-current-index", "binlog-records-migrated", "binlog-records-written",
              "binlog-max-size", "draining", "id", "hostname", "os", "platform"])
    s = yaml_dict(chunk)
    eq(s["max-job-size"], str(MAX_JOB_SIZE))
    eq(s["draining"], "false")
    before = int(s["cmd-put"])
    c.cmd("use " + t)
    c.put("x")
    eq(int(yaml_dict(c.with_data("stats")[1])["cmd-put"]), before + 1, "cmd-put counted")


@case
def pause_tube(port, t):
    c = Conn(port)
    eq(c.cmd("pause-tube %s-nothing 1" % t), "NOT_FOUND")
    c.cmd("use " + t)
    jid = c.put("x")
    eq(c.cmd("pause-tube %s 1" % t), "PAUSED")
    w = worker(port, t)
    eq(w.cmd("reserve-with-timeout 0"), "TIMED_OUT")
    eq(yaml_dict(c.with_data("stats-tube " + t)[1])["pause"], "1")
    began = time.monotonic()
    eq(w.with_data("reserve-with-timeout 5")[0], "RESERVED %d 1" % jid)
    took = time.monotonic() - began
    assert took < 2.5, "paused for %.2f s" % took


@case
def refused_lines(port, t):
    c = Conn(port)
    for line, want in [
            ("bogus", "UNKNOWN_COMMAND"), ("PUT 0 0 1 1", "UNKNOWN_COMMAND"),
            ("use", "UNKNOWN_COMMAND"), ("delete", "UNKNOWN_COMMAND"),
            ("use -foo", "BAD_FORMAT"), ("use foo bar", "BAD_FORMAT"), ("use  foo", "BAD_FORMAT"),
            ("use foo ", "BAD_FORMAT"), ("use " + "a" * 201, "BAD_FORMAT"),
            ("use foo\nbar", "BAD_FORMAT"), ("delete ", "BAD_FORMAT"), ("delete x", "BAD_FORMAT"),
            ("delete 1 ", "BAD_FORMAT"), ("delete 18446744073709551616", "BAD_FORMAT"),
            ("delete 18446744073709551615", "NOT_FOUND"), ("stats ", "BAD_FORMAT"),
            ("statsx", "BAD_FORMAT"), ("stats-tubes", "BAD_FORMAT"),
            ("reserve-with-timeout", "BAD_FORMAT"), ("peek-readyx", "BAD_FORMAT"),
            ("list-tubes ", "BAD_FORMAT"), ("release 1 0", "BAD_FORMAT"), ("bury 1", "BAD_FORMAT"),
            ("touch 1 2", "BAD_FORMAT"), ("pause-tube default", "BAD_FORMAT"),
            ("pause-tube default 4294967296", "BAD_FORMAT"), ("kick ", "BAD_FORMAT"),
            ("kick 18446744073709551616", "BAD_FORMAT"), ("put 0 0 1", "BAD_FORMAT"),
            ("put 0 0 1 1 ", "BAD_FORMAT"), ("put -1 0 1 1", "BAD_FORMAT"),
            ("put +1 0 1 1", "BAD_FORMAT"), ("put 4294967296 0 1 1", "BAD_FORMAT"),
            ("put 0 4294967296 1 0", "BAD_FORMAT"), ("put 0 0 4294967296 0", "BAD_FORMAT"),
            ("put 0 0 1 x", "BAD_FORMAT"), ("", "UNKNOWN_COMMAND")]:
        eq(c.cmd(line), want, repr(line))
    # A refused put line leaves its body to be read as a command.
    eq(c.cmd("put -1 0 1 4"), "BAD_FORMAT")
    eq(c.cmd("abcd"), "UNKNOWN_COMMAND")
    eq(c.cmd("use " + t), "USING " + t)  # still served


@case
def long_lines(port, t):
    c = Conn(port)
    # 224 bytes with the CRLF is the longest line.
    eq(c.cmd("delete " + "0" * 215), "NOT_FOUND")
    eq(c.cmd("x" * 222), "UNKNOWN_COMMAND")
    # Longer: BAD_FORMAT, and the rest of the line is skipped.
    c.send(b"x" * 300 + b"\r\nuse " + t.encode() + b"\r\n")
    eq(c.line(), b"BAD_FORMAT")
    eq(c.line().decode(), "USING " + t)
    c.send(b"x" * 224)
    time.sleep(0.2)
    c.send(b"y" * 10 + b"\r\nlist-tube-used\r\n")
    eq(c.line(), b"BAD_FORMAT")
    eq(c.line().decode(), "USING " + t)
    # The CR of a line's CRLF past the limit does not end the skip.
    c.send(b"x" * 223 + b"\r\nlist-tube-used\r\nlist-tube-used\r\n")
    eq(c.line(), b"BAD_FORMAT")
    eq(c.line().decode(), "USING " + t)
    assert c.nothing_more()


@case
def bodies_framed(port, t):
    c = Conn(port)
    c.cmd("use " + t)
    # A body in pieces.
    c.send(b"put 0 0 1 5\r\nab")
    time.sleep(0.1)
    c.send(b"c")
    time.sleep(0.1)
    c.send(b"de\r\n")
    jid = int(c.line().split()[1])
    eq(c.with_data("peek %d" % jid)[1], b"abcde")
    # Not followed by CRLF: EXPECTED_CRLF, the bytes+2 consumed.
    c.send(b"put 0 0 1 2\r\nabXY\r\n")
    eq(c.line(), b"EXPECTED_CRLF")
    eq(c.line(), b"UNKNOWN_COMMAND")  # the CRLF left over, an empty line
    # Too big: JOB_TOO_BIG, and its bytes+2 skipped.
    big = MAX_JOB_SIZE + 1
    c.send(b"put 0 0 1 %d\r\n" % big + b"u" * big + b"\r\nlist-tube-used\r\n")
    eq(c.line(), b"JOB_TOO_BIG")
    eq(c.line().decode(), "USING " + t)
    eq(yaml_dict(c.with_data("stats-tube " + t)[1])["current-jobs-ready"], "1")


@case
def pipelined_commands(port, t):
    c = Conn(port)
    c.send(("use %s\r\nput 0 0 5 1\r\na\r\nput 0 0 5 1\r\nb\r\nlist-tube-used\r\n"
            "watch %s\r\nignore default\r\nreserve\r\nreserve\r\n" % (t, t)).encode())
    eq(c.line().decode(), "USING " + t)
    a = int(c.line().split()[1])
    b = int(c.line().split()[1])
    eq(c.line().decode(), "USING " + t)
    eq(c.line(), b"WATCHING 2")
    eq(c.line(), b"WATCHING 1")
    eq(c.line().decode(), "RESERVED %d 1" % a)
    eq(c.line(), b"a")
    eq(c.line().decode(), "RESERVED %d 1" % b)
    eq(c.line(), b"b")


def spread_tube(server, t):
    """On a Redis Cluster: a busy tube spread over its primaries (redisched
    shards), worked over beanstalkd by several connections, each job once."""
    subprocess.run([server.path, "--redis", server.redis_url, "shards", t, "6"], check=True,
                   stdout=subprocess.DEVNULL)
    p = Conn(server.port)
    p.cmd("use " + t)
    ids = {p.put("job-%d" % i, pri=i % 7): "job-%d" % i for i in range(600)}
    workers = [worker(server.port, t) for _ in range(4)]
    seen = {}
    for n in range(600):
        w = workers[n % len(workers)]
        line, body = w.with_data("reserve-with-timeout 5")
        jid = int(line.split()[1])
        assert jid not in seen, "job %d handed out twice" % jid
        seen[jid] = body.decode()
        eq(w.cmd("delete %d" % jid), "DELETED")
    eq(seen, ids, "every job once, with its body")
    eq(workers[0].cmd("reserve-with-timeout 0"), "TIMED_OUT")


@case
def pipelined_answers_over_64k(port, t):
    c = Conn(port)
    c.cmd("use " + t)
    body = os.urandom(60000)
    jid = c.put(body)
    # Answers of 180 KB to commands sent at once, and 2,000 small ones after.
    c.send(("peek %d\r\n" % jid).encode() * 3 + b"list-tube-used\r\n" * 2000)
    for _ in range(3):
        line = c.line().decode()
        eq(line, "FOUND %d %d" % (jid, len(body)))
        assert c.data(len(body)) == body
    for _ in range(2000):
        eq(c.line().decode(), "USING " + t)


@case
def quit_closes(port, t):
    c = Conn(port)
    c.send(b"quit\r\n")
    c.sock.settimeout(5)
    eq(c.sock.recv(10), b"", "closed")


# --------------------------------------------------------------------------


# Cases that beanstalkd itself fails now and then on a loaded machine, and
# so get two more tries against beanstalkd (never against redisched): with
# two busy loops beside it, ttr_deadline_soon_and_timeout failed 3 times in
# 8 against Debian's beanstalkd 1.12 (0 in 8 without them). beanstalkd then
# keeps the job reserved past its TTR while its holder stays silent after
# DEADLINE_SOON: the other worker waits 10 s for it in vain (and the holder
# is sent nothing either).
RACY_ON_BEANSTALKD = {"ttr_deadline_soon_and_timeout"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--beanstalkd")
    ap.add_argument("--redisched")
    ap.add_argument("--redis-from-env", action="store_true",
                    help="serve on the Redis of REDISCHED_TEST_REDIS (tools/with_cluster), "
                         "not its embedded one; on a cluster, also a tube spread over shards")
    ap.add_argument("--only", help="a case's name")
    ap.add_argument("--clients", action="store_true",
                    help="also run clients_test.mjs (npm's jackd and fivebeans; npm ci here first)")
    args = ap.parse_args()
    servers = []
    if args.beanstalkd:
        servers.append(Beanstalkd(args.beanstalkd))
    if args.redisched:
        servers.append(Redisched(args.redisched, os.environ["REDISCHED_TEST_REDIS"]
                                 if args.redis_from_env else None))
    if not servers:
        ap.error("name a server: --beanstalkd PATH and/or --redisched PATH")
    failed = 0
    run_id = "%x" % (int(time.time() * 1000) % (1 << 32))
    for server in servers:
        server.start()
        try:
            for fn in CASES:
                if args.only and fn.__name__ != args.only:
                    continue
                tube = "c%s-%s" % (run_id, fn.__name__.replace("_", "-"))
                began = time.monotonic()
                tries = 3 if server.name == "beanstalkd" and fn.__name__ in RACY_ON_BEANSTALKD else 1
                try:
                    for attempt in range(1, tries + 1):
                        try:
                            fn(server.port, "%s-%d" % (tube, attempt) if attempt > 1 else tube)
                            break
                        except AssertionError as e:
                            if attempt == tries:
                                raise
                            print("retry %-9s %s (beanstalkd's own race under load): %s"
                                  % (server.name, fn.__name__, e))
                    print("ok   %-10s %-45s %.2f s" % (server.name, fn.__name__,
                                                     time.monotonic() - began))
                except Exception:
                    failed += 1
                    print("FAIL %-10s %s" % (server.name, fn.__name__))
                    traceback.print_exc()
                    if server.proc.poll() is not None:
                        print("the server died: the cases after this one are not run")
                        break
            if getattr(server, "redis_url", None) and not args.only:
                try:
                    spread_tube(server, "c%s-spread" % run_id)
                    print("ok   %-10s spread_tube" % server.name)
                except Exception:
                    failed += 1
                    print("FAIL %-10s spread_tube" % server.name)
                    traceback.print_exc()
            if args.clients and server.proc.poll() is None:
                here = os.path.dirname(os.path.abspath(__file__))
                r = subprocess.run(["node", os.path.join(here, "clients_test.mjs"),
                                    str(server.port), "c%s" % run_id], timeout=120)
                print("%s   %-10s clients_test.mjs (jackd, fivebeans)"
                      % ("ok" if r.returncode == 0 else "FAIL", server.name))
                failed += r.returncode != 0
        finally:
            server.stop()
    if failed:
        print("%d case(s) failed" % failed)
        return 1
    print("all %d cases passed on %s" % (len(CASES) if not args.only else 1,
                                       ", ".join(s.name for s in servers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
