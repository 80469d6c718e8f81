"""serve's beanstalkd face on Redis Sentinel (tests/sentinel/sentinel_env.py:
a primary, two replicas, three sentinels), with --replicas 1: jobs put over
beanstalkd before and after the primary is killed are all reserved
afterwards: no INSERTED job is lost.

A put answered INTERNAL_ERROR while the failover runs is put again (a new
id): its first try may have been made too, so a body may come twice; no
INSERTED id may be missing, and none may come twice unless the sentinels
failed over twice (a deposed primary's deletes are undone).

Then, with the replicas stopped (SIGSTOP), a put is answered INTERNAL_ERROR
(made on the primary only, it could be lost), while release, bury and
delete are answered as made: undone by a failover, they would only hand the
job out again.

    sentinel_test.py BINARY
"""

import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sentinel"))
from conformance_test import Conn, Redisched, eq, worker  # noqa: E402
from sentinel_env import SentinelEnv  # noqa: E402

TUBE = "failover"


def put_all(server, bodies, inserted, retried):
    c = Conn(server.port)
    eq(c.cmd("use " + TUBE), "USING " + TUBE)
    for body in bodies:
        deadline = time.monotonic() + 60
        while True:
            try:
                c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body.encode()))
                line = c.line(timeout=20).decode()
            except (OSError, EOFError):
                line = "(connection lost)"
            if line.startswith("INSERTED "):
                inserted[int(line.split()[1])] = body
                break
            retried.add(body)
            assert time.monotonic() < deadline, "no put of %s for 60 s: %s" % (body, line)
            time.sleep(0.2)
            try:
                c.close()
            except OSError:
                pass
            c = Conn(server.port)
            c.cmd("use " + TUBE)


def main():
    binary = sys.argv[1]
    with SentinelEnv() as env:
        server = Redisched(binary, env.url(), extra=["--replicas", "1"])
        server.start()
        try:
            inserted, retried = {}, set()
            put_all(server, ["before-%d" % i for i in range(300)], inserted, retried)
            old = env.primary()
            env.kill_primary()
            put_all(server, ["during-%d" % i for i in range(300)], inserted, retried)
            env.wait_failover(old)
            put_all(server, ["after-%d" % i for i in range(100)], inserted, retried)
            seen, again = reserve_all(server)
            missing = sorted(set(inserted) - set(seen))
            assert not missing, "INSERTED and lost: %s" % [(j, inserted[j]) for j in missing[:10]]
            if again:
                # Deletes a deposed primary took are undone when it turns
                # replica: those jobs come again (at least once, not lost).
                assert env.failovers() > 1, "handed out again after one failover: %s" % again[:10]
                print("the sentinels failed over %d times: %d jobs handed out again"
                      % (env.failovers(), len(again)))
            for jid, body in seen.items():
                if jid not in inserted:
                    assert body in retried, "job %d (%s) was never put" % (jid, body)
            print("ok: %d jobs INSERTED, all reserved across the failover (%d puts "
                  "retried, %d extra jobs from retries)"
                  % (len(inserted), len(retried), len(seen) - len(inserted)))
            short_of_replicas(env, server)
        except BaseException:
            traceback.print_exc()
            print("serve's log ends:\n" + server.log_tail())
            raise
        finally:
            server.stop()
    return 0


def reserve_all(server):
    """Reserves and deletes until nothing comes for 3 s: ({id: body}, [ids
    handed out again or whose delete was NOT_FOUND]). A reserve answered
    INTERNAL_ERROR (Redis unreachable for now) is tried again, as
    beanstalkd's clients do."""
    w = worker(server.port, TUBE)
    seen, again = {}, []
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "reserving for 120 s"
        line, body = w.with_data("reserve-with-timeout 3", timeout=20)
        if line == "TIMED_OUT":
            return seen, again
        if line == "INTERNAL_ERROR":
            time.sleep(0.2)
            continue
        assert line.startswith("RESERVED "), line
        jid = int(line.split()[1])
        if jid in seen:
            again.append(jid)
        seen[jid] = body.decode()
        answer = w.cmd("delete %d" % jid, timeout=20)
        if answer == "NOT_FOUND":
            again.append(jid)
        else:
            eq(answer, "DELETED", "delete %d" % jid)


def short_of_replicas(env, server):
    env.wait_settled()
    primary = env.primary()
    stopped = [p for port, p in env.data.items() if port != primary[1] and p.poll() is None]
    assert stopped, "no replica to stop"
    for p in stopped:
        p.send_signal(signal.SIGSTOP)
    try:
        c = Conn(server.port)
        eq(c.cmd("use short"), "USING short")
        eq(c.cmd("watch short"), "WATCHING 2")
        eq(c.cmd("ignore default"), "WATCHING 1")
        # The primary has it, but no replica: not INSERTED.
        c.send(b"put 0 0 60 5\r\nshort\r\n")
        eq(c.line(timeout=20).decode(), "INTERNAL_ERROR", "a put no replica confirmed")
        line, body = c.with_data("reserve-with-timeout 0", timeout=20)
        assert line.startswith("RESERVED ") and body == b"short", (line, body)
        jid = int(line.split()[1])
        eq(c.cmd("release %d 0 0" % jid, timeout=20), "RELEASED", "release")
        eq(c.with_data("reserve-with-timeout 0", timeout=20)[0], line, "reserved again")
        eq(c.cmd("bury %d 0" % jid, timeout=20), "BURIED", "bury")
        eq(c.cmd("kick 1", timeout=20), "KICKED 1")
        eq(c.with_data("reserve-with-timeout 0", timeout=20)[0], line, "kicked and reserved")
        eq(c.cmd("delete %d" % jid, timeout=20), "DELETED", "delete")
        eq(c.cmd("peek %d" % jid), "NOT_FOUND", "deleted on the primary")
        c.close()
    finally:
        for p in stopped:
            p.send_signal(signal.SIGCONT)
    print("ok: with the replicas stopped, a put is INTERNAL_ERROR; release, bury and delete "
          "are answered as made")


if __name__ == "__main__":
    sys.exit(main())
