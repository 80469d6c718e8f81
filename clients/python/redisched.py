"""redisched from Python: the Functions library (lua/redisched.lua) called
with redis-py (Debian's python3-redis), the keys built as docs/redis-api.md
says. A thin client: put, get, reserve, ack, release, fail, stats, wait (for
a job's result), and a worker loop that sleeps on the topic's wake-up
channel, not by polling. A topic spread over shards (docs/redis-api.md, "A
topic over many shards") is followed: each call on a job goes to the shard
its id leads to, reserve asks the shards in turn, stats sums them.

    import redis, redisched
    r = redis.Redis()
    redisched.load_library(r, "/usr/local/share/redisched/redisched.lua")
    emails = redisched.Topic(r, "emails")
    emails.put("welcome_42", b"Hello", priority=5)
    redisched.work(emails, lambda job: print(job.id, job.body))
"""

import binascii
import time
from dataclasses import dataclass

import redis as _redis

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
        self.prefix = prefix
        self.keys = [f"{base}:{k}" for k in KEY_NAMES]
        self.channel = f"{base}:ready"  # the wake-up signal (SPUBLISH)
        self.finished_channel = f"{base}:done"  # ids of finished jobs, for waiters
        self._shards = None  # the shards it is spread over ([] if none), once read
        self._turn = 0

    def _call(self, op, *args):
        return self.redis.execute_command("FCALL", f"redisched_{op}", len(self.keys),
                                          *self.keys, *args)

    # ---- a topic spread over shards

    def shards(self, fresh=False):
        """The Topics of its shards, [] when it holds its own jobs."""
        if self._shards is None or fresh:
            names = [_text(v) for v in self._call("shards")]
            self._shards = [] if names in ([], ["*"]) else [
                Topic(self.redis, f"{self.name}~{v}", self.prefix) for v in names]
        return self._shards

    def _at(self, job_id):
        """The topic that holds job_id: a shard by CRC-16/XMODEM of the id mod n."""
        shards = self.shards()
        if not shards:
            return self
        data = job_id.encode() if isinstance(job_id, str) else job_id
        return shards[binascii.crc_hqx(data, 0) % len(shards)]

    def _routed(self, fn):
        """fn(topic) where the job is; once more after SHARDED (spread since)."""
        try:
            return fn()
        except _redis.ResponseError as e:
            if not str(e).startswith("SHARDED"):
                raise
            self.shards(fresh=True)
            return fn()

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
        return self._routed(lambda: self._at(job_id)._call("put", *args))

    def get(self, job_id):
        """The job's fields as a dict (state, body, ...), or None."""
        reply = self._routed(lambda: self._at(job_id)._call("get", job_id))
        if reply is None:
            return None
        return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}

    def reserve(self, count=1, ttr_ms=None):
        """From a spread topic: its shards in turn, starting one further each
        call, until count jobs came or each was asked."""
        return self._routed(lambda: self._reserve(count, ttr_ms))

    def _reserve(self, count, ttr_ms):
        shards = self.shards()
        if not shards:
            args = [count] + (["TTR", ttr_ms] if ttr_ms is not None else [])
            now, nxt, paused, *jobs = self._call("reserve", *args)
            return Reserved(now, nxt, bool(paused), [
                Job(_text(j[0]), *j[1:9], *j[9:10]) for j in jobs])
        self._turn += 1
        out = Reserved(0, -1, True, [])
        for k in range(len(shards)):
            part = shards[(self._turn + k) % len(shards)]._reserve(count - len(out.jobs), ttr_ms)
            out.now = max(out.now, part.now)
            out.next = part.next if out.next < 0 else (out.next if part.next < 0 else min(out.next, part.next))
            out.paused = out.paused and part.paused
            out.jobs += part.jobs
            if len(out.jobs) >= count:
                if k < len(shards) - 1:
                    out.next = 0  # shards not asked may hold more
                break
        return out

    def ack(self, job, keep_ms=None, result=None):
        """keep_ms defaults to the keep the job was put with; a result needs one."""
        keep_ms = keep_ms if keep_ms is not None else job.keep
        args = ["KEEP", keep_ms] if keep_ms else []
        if result is not None:
            args += ["RESULT", result]
        return self._at(job.id)._call("ack", job.id, job.token, *args)

    def wait(self, job_id, timeout_s):
        """The job once it has finished (state done, with its result, or
        dead), None once it is gone, or at the timeout as it is
        (docs/redis-api.md, "Waiting for a job")."""
        sub = self.redis.connection_pool.get_connection("SSUBSCRIBE")
        try:
            sub.send_command("SSUBSCRIBE", self._at(job_id).finished_channel)
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
        return self._at(job.id)._call("release", job.id, job.token, "DELAY", delay_ms)

    def fail(self, job, error):
        """"delayed" or "ready" (it runs again), "dead"; or a code (0, -2, -3)."""
        return _text(self._at(job.id)._call("fail", job.id, job.token, error))

    def stats(self):
        """The counts; of a spread topic, summed over its shards."""
        shards = self.shards(fresh=True)
        parts = [t._call("stats") for t in shards or [self]]
        out = {}
        for reply in parts:
            for i in range(0, len(reply), 2):
                name, value = _text(reply[i]), reply[i + 1]
                if name not in out:
                    out[name] = value
                elif name == "paused":  # paused: every shard is
                    out[name] = min(out[name], value)
                elif name == "next_due":  # the earliest, -1: none
                    out[name] = value if out[name] < 0 else (
                        out[name] if value < 0 else min(out[name], value))
                else:
                    out[name] += value
        if shards:
            out["shards"] = len(shards)
        return out


def work(topic, handler, stop=lambda: False, batch=10, ttr_ms=30000):
    """Runs handler(job) on the topic's jobs until stop() is true: a return
    acks the job, an exception fails it with its text. Between jobs it
    sleeps on the wake-up channel until the next due time Redis gave, or a
    signal of an earlier one; no polling."""
    sub = topic.redis.connection_pool.get_connection("SSUBSCRIBE")
    try:
        # Subscribed before the first reserve: nothing falls between (to
        # each shard's channel for a spread topic; a change of its shards
        # is not followed here: restart the loop).
        for t in topic.shards(fresh=True) or [topic]:
            sub.send_command("SSUBSCRIBE", t.channel)
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
