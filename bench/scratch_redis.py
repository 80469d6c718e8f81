"""A throwaway redis-server for the Python benchmarks: no persistence, on a
free port, in a temp dir that goes with it. Needs Debian's python3-redis.

    with scratch_redis("--hash-max-listpack-value", "128") as r:
        r.ping()
"""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def scratch_redis(*settings):
    """Starts redis-server with these extra settings; yields a client of it
    once it answers, and stops it afterwards."""
    port, d = free_port(), tempfile.mkdtemp()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", d, *settings],
                              stdout=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield r
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(d, ignore_errors=True)


# What the library's benchmarks share: the library's source and a topic's
# keys (docs/redis-api.md, "Keyspace"), and the time Redis spent in FCALLs.
LIBRARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lua",
                       "redisched.lua")
KEY_NAMES = ("jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases",
             "queue", "later", "gone", "history", "blocked", "flow", "outbox")


def load_library(r, path=LIBRARY):
    """FUNCTION LOAD REPLACE of the library at path; returns its version."""
    with open(path, encoding="utf-8") as f:
        r.execute_command("FUNCTION", "LOAD", "REPLACE", f.read())
    return r.execute_command("FCALL", "redisched_version", 0)


def topic_keys(topic, count=8):
    """The topic's first count keys: eight by default, which every library
    version takes (version 23 takes all eleven too; version 34 a twelfth,
    the history, where it counts the calls), so that a benchmark can
    compare an older library with this one."""
    return [f"redisched:{{{topic}}}:{k}" for k in KEY_NAMES[:count]]


def put_jobs(r, keys, prefix, n, body=b"x" * 100):
    """Puts n jobs, ids prefix-0000000 on, due now, with putmany (100 a
    call, one pipeline)."""
    pipe = r.pipeline(transaction=False)
    for b in range(0, n, 100):
        args = []
        for i in range(b, min(b + 100, n)):
            args += [f"{prefix}-{i:07d}", body, 0]
        pipe.execute_command("FCALL", "redisched_putmany", len(keys), *keys, len(args) // 3, *args)
    pipe.execute()


def fcall_usec(r):
    """Microseconds Redis spent in FCALLs since its stats were reset."""
    return r.info("commandstats").get("cmdstat_fcall", {"usec": 0})["usec"]
