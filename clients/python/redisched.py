"""redisched from Python: the Functions library (lua/redisched.lua) called
with redis-py (Debian's python3-redis), the keys built as docs/redis-api.md
says. A thin client: put, get, reserve, ack, release, fail, stats, wait (for
a job's result), and a worker loop that sleeps on the topic's wake-up
channel, not by polling.

    import redis, redisched
    r = redis.Redis()
    redisched.load_library(r, "/usr/local/share/redisched/redisched.lua")
    emails = redisched.Topic(r, "emails")
    emails.put("welcome_42", b"Hello", priority=5)
    redisched.work(emails, lambda job: print(job.id, job.body))
"""

import time
from dataclasses import dataclass

KEY_NAMES = ("jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases")

# Per-job outcome codes (docs/redis-api.md, "Conventions").
OK, UPDATED, NOT_FOUND, EXISTS, WRONG_STATE, STALE_TOKEN = 1, 2, 0, -1, -2, -3


def load_library(r, path):
    """FUNCTION LOAD REPLACE of the library at path (once per server)."""
    with open(path, encoding="utf-8") as f:
        return r.execute_command("FUNCTION", "LOAD", "REPLACE", f.read())


@dataclass
class Job:
    id: str
    body: bytes
    token: int
    attempt: int
    max_attempts: int
    priority: int
    created: int
    due: int
    deadline: int
    keep: int = 0  # the retention it was put with (library version 12): its ack keeps it


@dataclass
class Reserved:
    now: int      # Redis's clock, ms
    next: int     # 0: call again at once; -1: nothing scheduled; else when (ms)
    paused: bool
    jobs: list


class Topic:
    """One topic: its eight keys, in the order every function takes them."""

    def __init__(self, r, name, prefix="redisched"):
        base = f"{prefix}:{{{name}}}"
        self.redis = r
        self.name = name
        self.keys = [f"{base}:{k}" for k in KEY_NAMES]
        self.channel = f"{base}:ready"  # the wake-up signal (SPUBLISH)
        self.finished_channel = f"{base}:done"  # ids of finished jobs, for waiters

    def _call(self, op, *args):
        return self.redis.execute_command("FCALL", f"redisched_{op}", len(self.keys),
                                          *self.keys, *args)

    def put(self, job_id, body, delay_ms=None, priority=None, ttr_ms=None, attempts=None,
            replace=False, keep_ms=None):
        """1 created, -1 exists (2 updated, 0 no such job with replace).
        keep_ms: once acked, keep the job and its result that long (for wait)."""
        args = [job_id, body]
        for word, value in (("DELAY", delay_ms), ("PRIORITY", priority), ("TTR", ttr_ms),
                            ("ATTEMPTS", attempts), ("KEEP", keep_ms)):
            if value is not None:
                args += [word, value]
        if replace:
            args.append("REPLACE")
        return self._call("put", *args)

    def get(self, job_id):
        """The job's fields as a dict (state, body, ...), or None."""
        reply = self._call("get", job_id)
        if reply is None:
            return None
        return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}

    def reserve(self, count=1, ttr_ms=None):
        args = [count] + (["TTR", ttr_ms] if ttr_ms is not None else [])
        now, nxt, paused, *jobs = self._call("reserve", *args)
        return Reserved(now, nxt, bool(paused), [
            Job(_text(j[0]), *j[1:9], *j[9:10]) for j in jobs])

    def ack(self, job, keep_ms=None, result=None):
        """keep_ms defaults to the keep the job was put with; a result needs one."""
        keep_ms = keep_ms if keep_ms is not None else job.keep
        args = ["KEEP", keep_ms] if keep_ms else []
        if result is not None:
            args += ["RESULT", result]
        return self._call("ack", job.id, job.token, *args)

    def wait(self, job_id, timeout_s):
        """The job once it has finished (state done, with its result, or
        dead), None once it is gone, or at the timeout as it is
        (docs/redis-api.md, "Waiting for a job")."""
        sub = self.redis.connection_pool.get_connection("SSUBSCRIBE")
        try:
            sub.send_command("SSUBSCRIBE", self.finished_channel)
            sub.read_response()  # subscribed before the first read: nothing falls between
            deadline = time.monotonic() + timeout_s
            while True:
                job = self.get(job_id)
                if job is None or job["state"] in (b"done", b"dead"):
                    return job
                named = False
                while not named:
                    left = deadline - time.monotonic()
                    if left <= 0 or not sub.can_read(timeout=left):
                        return self.get(job_id)
                    msg = sub.read_response()  # ["smessage", channel, "id\nid..."]
                    named = job_id.encode() in msg[2].split(b"\n")
        finally:
            sub.disconnect()
            self.redis.connection_pool.release(sub)

    def release(self, job, delay_ms=0):
        return self._call("release", job.id, job.token, "DELAY", delay_ms)

    def fail(self, job, error):
        """"delayed" or "ready" (it runs again), "dead"; or a code (0, -2, -3)."""
        return _text(self._call("fail", job.id, job.token, error))

    def stats(self):
        reply = self._call("stats")
        return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def work(topic, handler, stop=lambda: False, batch=10, ttr_ms=30000):
    """Runs handler(job) on the topic's jobs until stop() is true: a return
    acks the job, an exception fails it with its text. Between jobs it
    sleeps on the wake-up channel until the next due time Redis gave, or a
    signal of an earlier one; no polling."""
    sub = topic.redis.connection_pool.get_connection("SSUBSCRIBE")
    try:
        # Subscribed before the first reserve: nothing falls between.
        sub.send_command("SSUBSCRIBE", topic.channel)
        sub.read_response()
        while not stop():
            r = topic.reserve(batch, ttr_ms)
            for job in r.jobs:
                try:
                    handler(job)
                    topic.ack(job)
                except Exception as e:  # the job's failure, not the worker's
                    topic.fail(job, str(e) or type(e).__name__)
            if r.next == 0:
                continue
            # Redis's time to wait for, translated by its own clock.
            wait_s = 1.0 if r.next < 0 else max(0.0, (r.next - r.now) / 1000)
            deadline = time.monotonic() + min(wait_s, 1.0)  # and look at stop() now and then
            while not stop() and time.monotonic() < deadline:
                if sub.can_read(timeout=deadline - time.monotonic()):
                    sub.read_response()  # ["smessage", channel, due ms]: look now
                    break
    finally:
        sub.disconnect()  # still subscribed: no other command may use it
        topic.redis.connection_pool.release(sub)


def _text(b):
    return b.decode() if isinstance(b, bytes) else b
