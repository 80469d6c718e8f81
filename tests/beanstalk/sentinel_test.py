"""serve's beanstalkd face on Redis Sentinel (tests/sentinel/sentinel_env.py:
a primary, two replicas, three sentinels), with --replicas 1: jobs put over
beanstalkd before and after the primary is killed are all reserved
afterwards, each answered INSERTED put exactly once.

A put answered INTERNAL_ERROR while the failover runs is put again (a new
id): its first try may have been made too, so a body may come twice; no
INSERTED id may be missing or come twice.

    sentinel_test.py BINARY
"""

import os
import sys
import time

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
            w = worker(server.port, TUBE)
            seen = {}
            while True:
                line, body = w.with_data("reserve-with-timeout 3", timeout=20)
                if line == "TIMED_OUT":
                    break
                jid = int(line.split()[1])
                assert jid not in seen, "job %d handed out twice" % jid
                seen[jid] = body.decode()
                eq(w.cmd("delete %d" % jid), "DELETED")
            missing = sorted(set(inserted) - set(seen))
            assert not missing, "INSERTED and lost: %s" % [(j, inserted[j]) for j in missing[:10]]
            for jid, body in seen.items():
                if jid not in inserted:
                    assert body in retried, "job %d (%s) was never put" % (jid, body)
            print("ok: %d jobs INSERTED, all reserved once across the failover (%d puts "
                  "retried, %d extra jobs from retries)"
                  % (len(inserted), len(retried), len(seen) - len(inserted)))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
