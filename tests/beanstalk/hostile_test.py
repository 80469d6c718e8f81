"""Hostile input on serve's beanstalkd port: what must never crash serve, and
refusals that must change nothing.

 - every refused line, JOB_TOO_BIG and EXPECTED_CRLF leave Redis's keyspace
   as it was;
 - a body cut short by a close puts nothing;
 - 10,000 connections at once, some mid-command: serve stays up, answers a
   new connection, and gives back the connections' descriptors;
 - the same refused bytes as a flood in one send;
 - a tube paused by a serve that is killed resumes on time for another.

Standard library and Debian's python3-redis.

    hostile_test.py BINARY
"""

import os
import resource
import signal
import socket
import sys
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conformance_test import Conn, Redisched, eq, worker  # noqa: E402

CONNECTIONS = 10000


def keyspace(r):
    """Every key with its type and contents (the embedded Redis is ours alone)."""
    out = {}
    for key in r.scan_iter(count=1000):
        t = r.type(key).decode()
        if t == "string":
            v = r.get(key)
        elif t == "hash":
            v = sorted(r.hgetall(key).items())
        elif t == "zset":
            v = r.zrange(key, 0, -1, withscores=True)
        elif t == "list":
            v = r.lrange(key, 0, -1)
        elif t == "set":
            v = sorted(r.smembers(key))
        else:
            v = t
        out[key] = v
    return out


REFUSED = [
    b"bogus\r\n", b"use -x\r\n", b"use a+b\r\n", b"use " + b"a" * 129 + b"\r\n",
    b"put 0 0 1\r\n", b"put 4294967296 0 1 1\r\nx\r\n", b"put 0 315576001 1 1\r\nx\r\n",
    b"put 0 0 604801 1\r\nx\r\n", b"put 0 0 1 65536\r\n" + b"z" * 65536 + b"\r\n",
    b"put 0 0 1 3\r\nabcd\r\n", b"x" * 5000 + b"\r\n", b"delete 99999999999999999999\r\n",
    # ids of no job: of a block never taken, and below the first block
    b"delete 409600000000\r\n", b"release 409600000000 0 0\r\n", b"bury 409600000000 0\r\n",
    b"touch 409600000000\r\n", b"kick-job 409600000000\r\n", b"peek 0\r\n", b"delete 17\r\n", b"stats-tube nothing-here\r\n",
    b"pause-tube nothing-here 5\r\n", b"ignore default\r\n", b"\x00\xff\r\n", b"\r\n",
]


def refusals_change_nothing(server, r):
    c = Conn(server.port)
    eq(c.cmd("use hostile"), "USING hostile")
    c.put("keep")  # a tube and a job that must stay as they are
    before = keyspace(r)
    for raw in REFUSED:
        c.send(raw)
        # One answer or more (a refused put's body is read as commands).
        answers = [c.line().decode()]
        while True:
            try:
                answers.append(c.line(timeout=0.2).decode())
            except socket.timeout:
                break
        for line in answers:
            assert line in ("BAD_FORMAT", "UNKNOWN_COMMAND", "JOB_TOO_BIG", "EXPECTED_CRLF",
                            "NOT_FOUND", "NOT_IGNORED"), (raw[:40], line)
    eq(keyspace(r), before, "the keyspace after refusals")
    # All of it again in one send, and a close.
    flood = Conn(server.port)
    flood.send(b"".join(REFUSED) * 5)
    flood.close()
    time.sleep(0.3)
    eq(keyspace(r), before, "the keyspace after a flood of refusals")


def a_cut_body_puts_nothing(server, r):
    before = keyspace(r)
    for cut in (b"put 0 0 1 10\r\n", b"put 0 0 1 10\r\nabc", b"put 0 0 1 10\r\n0123456789",
                b"put 0 0 1 10\r\n0123456789\r", b"use cut\r\nput 0 0"):
        c = Conn(server.port)
        c.send(cut)
        time.sleep(0.05)
        c.close()
    time.sleep(0.3)
    after = keyspace(r)
    eq(after, before, "the keyspace after bodies cut short")


def many_connections(server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * CONNECTIONS), hard))
    socks = []
    began = time.monotonic()
    for i in range(CONNECTIONS):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        # some idle, some mid-line, some mid-body
        if i % 3 == 1:
            s.sendall(b"put 0 0 1")
        elif i % 3 == 2:
            s.sendall(b"put 0 0 1 100\r\nabc")
        socks.append(s)
    opened = time.monotonic() - began
    assert server.proc.poll() is None, "serve died with %d connections" % len(socks)
    # A new connection is still served (up to the cap, 10,000 of them are
    # open: the new one may be turned away; then one closes and it is not).
    socks.pop().close()
    time.sleep(0.2)
    c = Conn(server.port)
    eq(c.cmd("list-tube-used"), "USING default")
    c.close()
    for s in socks:
        s.close()
    # (Serve reads each close as it comes: under a sanitizer, on a loaded
    # machine, 10,000 of them took over a second.)
    deadline = time.monotonic() + 30
    while True:
        fds = len(os.listdir("/proc/%d/fd" % server.proc.pid))
        if fds < 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert fds < 200, "serve holds %d descriptors 30 s after the connections closed" % fds
    c = Conn(server.port)
    eq(c.cmd("use many"), "USING many")
    jid = c.put("after")
    eq(c.cmd("watch many"), "WATCHING 2")
    eq(c.cmd("reserve-with-timeout 1"), "RESERVED %d 5" % jid)
    print("%d connections opened in %.1f s; serve up, descriptors back (%d)"
          % (CONNECTIONS, opened, fds))


def a_pause_outlives_its_serve(server):
    """pause-tube through a second serve on the same Redis, which is then
    killed: the pause is Redis's, and ends on time for the first serve's
    workers (a serve's own timer would have died with it)."""
    other = Redisched(server.path, redis_url="unix://" + os.path.join(server.dir, "data", "redis.sock"))
    other.start()
    producer = Conn(server.port)
    eq(producer.cmd("use paused"), "USING paused")
    jid = producer.put("later")
    eq(Conn(other.port).cmd("pause-tube paused 3"), "PAUSED")
    began = time.monotonic()
    other.proc.send_signal(signal.SIGKILL)
    other.proc.wait(5)
    other.proc = None
    other.stop()
    w = worker(server.port, "paused")
    eq(w.cmd("reserve-with-timeout 0"), "TIMED_OUT")
    left = int(dict(line.split(": ", 1) for line in w.with_data("stats-tube paused")[1].decode().splitlines()
                    if ": " in line)["pause-time-left"])
    assert 0 <= left <= 3, "pause-time-left %d" % left
    eq(w.with_data("reserve-with-timeout 10")[0], "RESERVED %d 5" % jid)
    took = time.monotonic() - began
    assert 2.5 < took < 6, "the pause ended after %.2f s" % took
    eq(w.cmd("delete %d" % jid), "DELETED")
    print("the pause ended after %.2f s" % took)


def drain(server):
    """SIGTERM under work: a waiting reserve ends and an idle connection
    closes; a connection holding a job is answered DRAINING to a put, may
    still delete its job, and serve exits at once after that delete, not at
    the drain's timeout (10 s)."""
    holder = worker(server.port, "drain")
    producer = Conn(server.port)
    eq(producer.cmd("use drain"), "USING drain")
    jid = producer.put("held")
    eq(holder.cmd("reserve-with-timeout 1").split()[:2], ["RESERVED", str(jid)])
    holder.line()
    waiter = Conn(server.port)
    waiter.send(b"reserve\r\n")
    time.sleep(0.3)
    began = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    waiter.sock.settimeout(5)
    eq(waiter.sock.recv(100), b"", "the waiting reserve's connection closed")
    # An idle connection is closed; one that holds a job stays for its delete.
    producer.sock.settimeout(5)
    eq(producer.sock.recv(100), b"", "an idle connection closed")
    holder.send(b"put 0 0 5 1\r\nx\r\n")
    eq(holder.line().decode(), "DRAINING")
    eq(holder.cmd("delete %d" % jid), "DELETED")
    rc = server.proc.wait(8)
    took = time.monotonic() - began
    eq(rc, 0, "serve's exit status")
    assert took < 5, "serve took %.1f s to drain" % took
    print("drained in %.2f s" % took)


def main():
    server = Redisched(sys.argv[1])
    server.start()
    try:
        r = redis.Redis(unix_socket_path=os.path.join(server.dir, "data", "redis.sock"))
        refusals_change_nothing(server, r)
        print("ok refusals change nothing")
        a_cut_body_puts_nothing(server, r)
        print("ok a body cut short puts nothing")
        many_connections(server)
        print("ok many connections")
        a_pause_outlives_its_serve(server)
        print("ok a pause outlives its serve")
        drain(server)
        print("ok drain")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
