"""redisched from Python: the Functions library (lua/redisched.lua) called
with redis-py (Debian's python3-redis), the keys built as docs/redis-api.md
says. A thin client: put, get, reserve (or reserve_job, one job by its
id), ack, release, fail, pause and resume, stats, wait (for a job's
result), and a worker loop that sleeps on the topic's wake-up channel, not
by polling. A topic spread over shards (docs/redis-api.md, "A
topic over many shards") is followed: each call on a job goes to the shard
its id leads to, reserve asks the shards in turn, stats sums them.

    import redisched
    r = redisched.connect("redis://localhost:6379")  # or redis.Redis(...)
    redisched.load_library(r, "/usr/local/share/redisched/redisched.lua")
    emails = redisched.Topic(r, "emails")
    emails.put("welcome_42", b"Hello", priority=5)
    redisched.work(emails, lambda job: print(job.id, job.body))

Behind Redis Sentinel, the same with the sentinels' URL (see connect()):

    r = redisched.connect("redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/mymaster")
    emails = redisched.Topic(r, "emails", replicas=1)  # a put answers once a replica has it

A failover is waited out: a call that meets a lost connection or a demoted
primary (READONLY) is made again, after a pause growing to 0.5 s, for up to
failover_s (30 s), the primary asked of the sentinels anew; work() and wait()
subscribe again. A call may so run twice: put then answers EXISTS, ack
NOT_FOUND, and a reservation whose answer was lost comes back after its
ttr (jobs run at least once). A primary without the library (it answers
"Function not found") gets it again from the path load_library was given.
Without replicas=, a put the old primary answered but had not passed on to
a replica is lost with it: replicas=N has each call that changes a job wait
(WAIT) until N replicas have it, else raise NotReplicated.
"""

import binascii
import os
import re
import socket
import threading
import time
import urllib.parse
import uuid
import weakref
from dataclasses import dataclass

import redis as _redis
import redis.sentinel as _sentinel

# (history, the twelfth, since library version 34: the calls are counted in
# the topic's history; the flows' three since version 35)
KEY_NAMES = ("jobs", "delayed", "ready", "reserved", "dead", "done", "meta", "leases",
             "queue", "later", "gone", "history", "blocked", "flow", "outbox")
HISTORY_FIELDS = ("at", "put", "started", "done", "failed", "dead", "lapsed", "wait_ms")

# Per-job outcome codes (docs/redis-api.md, "Conventions").
OK, UPDATED, NOT_FOUND, EXISTS, WRONG_STATE, STALE_TOKEN = 1, 2, 0, -1, -2, -3


# What a failover looks like from here: the connection lost, or still to
# the old primary, now a replica.
_FAILOVER_ERRORS = (_redis.ConnectionError, _redis.TimeoutError, _redis.exceptions.ReadOnlyError)

# client -> the path load_library read, to load it again where it is missing.
_libraries = weakref.WeakKeyDictionary()


class NotReplicated(_redis.RedisError):
    """The call was made, but fewer replicas than asked had it in time."""

    def __init__(self, reply, acked, wanted):
        super().__init__(f"{acked} of {wanted} replicas acknowledged the write")
        self.reply = reply  # what the call answered
        self.acked = acked


def connect(url, **kw):
    """A redis-py client for url; kw go to its connections.

    redis://[[user]:password@]host[:port][/db], rediss://...,
    unix://[[user]:password@]/path/to.sock[?db=N]:
        as redis.Redis.from_url takes them.
    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/name
                     [?db=N&sentinel_user=U&sentinel_password=P]:
        the primary the sentinels (port 26379 unless given) name for the
        service name, found again after a failover. user and password are
        the data nodes' (AUTH), sentinel_user and sentinel_password the
        sentinels' own; percent-encode what the URL would misread.
    """
    scheme, _, _ = url.partition("://")
    if scheme.lower() != "redis+sentinel":
        return _redis.Redis.from_url(url, **kw)
    parts = urllib.parse.urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    name = urllib.parse.unquote(parts.path.strip("/"))
    if not hosts or not name or "/" in name:
        raise ValueError(f"{url!r}: redis+sentinel://[auth@]host:port[,host:port...]/name")
    sentinels = [_host_port(h, 26379) for h in hosts.split(",")]
    query = dict(urllib.parse.parse_qsl(parts.query, strict_parsing=bool(parts.query)))
    unknown = set(query) - {"db", "sentinel_user", "sentinel_password"}
    if unknown:
        raise ValueError(f"{url!r}: unknown parameter(s) {', '.join(sorted(unknown))}")

    node_kw = dict(kw)
    if userinfo:
        user, has_password, password = userinfo.partition(":")
        if user:
            node_kw.setdefault("username", urllib.parse.unquote(user))
        if has_password:
            node_kw.setdefault("password", urllib.parse.unquote(password))
    if "db" in query:
        node_kw.setdefault("db", int(query["db"]))
    # A sentinel answers at once or is gone: a short timeout, so a dead one
    # does not hold up the search for the primary.
    sentinel_kw = {k: v for k, v in kw.items() if k.startswith("socket_")}
    sentinel_kw.setdefault("socket_timeout", 1.0)
    sentinel_kw.setdefault("socket_connect_timeout", 1.0)
    if "sentinel_user" in query:
        sentinel_kw["username"] = query["sentinel_user"]
    if "sentinel_password" in query:
        sentinel_kw["password"] = query["sentinel_password"]
    return _sentinel.Sentinel(sentinels, sentinel_kwargs=sentinel_kw).master_for(name, **node_kw)


def _host_port(text, default_port):
    """("h", p) of "h:p", "h", "[v6]:p" or "[v6]"."""
    host, port = text, default_port
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = int(rest.lstrip(":"))
    elif ":" in text:
        host, _, p = text.rpartition(":")
        port = int(p)
    if not host:
        raise ValueError(f"no host in {text!r}")
    return host, port


def load_library(r, path):
    """FUNCTION LOAD REPLACE of the library at path (once per server). The
    path is kept for r: a primary found without it gets it again."""
    _libraries[r] = path
    with open(path, encoding="utf-8") as f:
        return r.execute_command("FUNCTION", "LOAD", "REPLACE", f.read())


def _surviving(r, fn, for_s):
    """fn(), made again through a failover for up to for_s seconds; once
    more after loading the library again where Redis says it has none."""
    deadline = time.monotonic() + for_s
    pause, reloaded = 0.05, False
    while True:
        try:
            return fn()
        except _FAILOVER_ERRORS as e:
            if isinstance(e, _redis.AuthenticationError) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(2 * pause, 0.5)
        except _redis.ResponseError as e:
            path = _libraries.get(r)
            if reloaded or path is None or "Function not found" not in str(e):
                raise
            reloaded = True
            _surviving(r, lambda: load_library(r, path), deadline - time.monotonic())


def _refused(op, reply):
    """A refusal (0, -1, -2, -3; each of a batch) changed nothing: it is
    answered as it is, whatever the replicas had. A put's -1 (exists) is
    none: its producer takes it for "my job is in", so it waits for the
    replicas as the put that made the job would have."""
    def no(x):
        return x == 0 if op == "put" else isinstance(x, int) and x <= 0
    if isinstance(reply, list):
        return all(no(x) for x in reply)
    return no(reply)


def _ask_for_the_primary(r):
    """A primary demoted while still up (SENTINEL FAILOVER) loses its
    replicas first, and stays a primary for seconds: ask the sentinels now;
    if they name another, the pool drops its idle connections to this one."""
    pool = r.connection_pool
    if isinstance(pool, _sentinel.SentinelConnectionPool):
        try:
            pool.get_master_address()
        except _FAILOVER_ERRORS:
            pass


def _subscribed(r, channels, for_s):
    """A connection of r's pool subscribed (SSUBSCRIBE) to channels."""
    pool = r.connection_pool

    def attempt():
        sub = pool.get_connection("SSUBSCRIBE")
        try:
            for channel in channels:
                sub.send_command("SSUBSCRIBE", channel)
                sub.read_response()
            return sub
        except BaseException:
            _let_go(r, sub)
            raise
    return _surviving(r, attempt, for_s)


def _let_go(r, sub):
    sub.disconnect()  # still subscribed: no other command may use it
    r.connection_pool.release(sub)


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

    @classmethod
    def reserved(cls, j):
        """The job as reserve and reservejob answer it."""
        return cls(_text(j[0]), *j[1:9], *j[9:10])


@dataclass
class Reserved:
    now: int      # Redis's clock, ms
    next: int     # 0: call again at once; -1: nothing scheduled; else when (ms)
    paused: bool
    jobs: list


class Topic:
    """One topic: its fifteen keys, in the order every function takes them.

    replicas: put, ack, release and fail return once that many replicas
    have the write (WAIT, up to replica_timeout_ms), else raise
    NotReplicated; reserve does not wait (a reservation lost in a failover
    only brings the job back after its ttr). failover_s: how long a call
    keeps trying through a failover (0: it does not)."""

    def __init__(self, r, name, prefix="redisched", replicas=0, replica_timeout_ms=1000,
                 failover_s=30):
        base = f"{prefix}:{{{name}}}"
        self.redis = r
        self.name = name
        self.prefix = prefix
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self.failover_s = failover_s
        self.keys = [f"{base}:{k}" for k in KEY_NAMES]
        self.channel = f"{base}:ready"  # the wake-up signal (SPUBLISH)
        self.finished_channel = f"{base}:done"  # ids of finished jobs, for waiters
        self._shards = None  # the shards it is spread over ([] if none), once read
        self._turn = 0

    def _send(self, op, fcall, changes_job):
        if changes_job and self.replicas:
            return _surviving(self.redis, lambda: self._replicated(op, fcall), self.failover_s)
        return _surviving(self.redis, lambda: self.redis.execute_command(*fcall), self.failover_s)

    def _call(self, op, *args, changes_job=False):
        fcall = ("FCALL", f"redisched_{op}", len(self.keys), *self.keys, *args)
        try:
            return self._send(op, fcall, changes_job)
        except _redis.ResponseError as e:
            # Data of an older stored format (OLDFORMAT: nothing changed):
            # the topic is migrated, and the call made once more.
            if op == "migrate" or not str(e).startswith("OLDFORMAT"):
                raise
            self.migrate()
            return self._send(op, fcall, changes_job)

    def migrate(self, limit=1000):
        """Rewrites what the topic (each shard, when spread) holds in an
        older stored format, in calls of limit records and members, until
        done (docs/redis-api.md, "Migrations"); returns (rewritten, read,
        calls)."""
        rewritten = read = calls = 0
        for t in [self] + self.shards():
            while True:
                done, n, m = t._call("migrate", "LIMIT", limit)
                rewritten, read, calls = rewritten + n, read + m, calls + 1
                if done == 1:
                    break
        return rewritten, read, calls

    def _replicated(self, op, fcall):
        """fcall, then WAIT on the same connection (one pipeline): WAIT
        counts the replicas that have that connection's writes."""
        with self.redis.pipeline(transaction=False) as p:
            p.execute_command(*fcall)
            p.execute_command("WAIT", self.replicas, self.replica_timeout_ms)
            reply, acked = p.execute(raise_on_error=False)  # errors as Redis said them (SHARDED...)
        for answer in (reply, acked):
            if isinstance(answer, Exception):
                raise answer
        if acked < self.replicas and not _refused(op, reply):
            _ask_for_the_primary(self.redis)
            raise NotReplicated(reply, acked, self.replicas)
        return reply

    # ---- a topic spread over shards

    def shards(self, fresh=False):
        """The Topics of its shards, [] when it holds its own jobs."""
        if self._shards is None or fresh:
            names = [_text(v) for v in self._call("shards")]
            self._shards = [] if names in ([], ["*"]) else [
                Topic(self.redis, f"{self.name}~{v}", self.prefix, self.replicas,
                      self.replica_timeout_ms, self.failover_s) for v in names]
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
            replace=False, keep_ms=None, after=None):
        """1 created, -1 exists (2 updated, 0 no such job with replace).
        keep_ms: once acked, keep the job and its result that long (for wait).
        after: jobs to wait for first (library version 35, docs/flows.md),
        each (topic, id) or (topic, id, policy), policy "fail" (the
        default), "ignore" or "drop": what its failure does."""
        args = [job_id, body]
        for word, value in (("DELAY", delay_ms), ("PRIORITY", priority), ("TTR", ttr_ms),
                            ("ATTEMPTS", attempts), ("KEEP", keep_ms)):
            if value is not None:
                args += [word, value]
        if replace:
            args.append("REPLACE")
        if after:
            args += ["AFTER", len(after)]
            for dep in after:
                args += [dep[0], dep[1], dep[2] if len(dep) > 2 else "fail"]
        if self.replicas:
            # (CONFIRM, library version 37: answered -1, the put writes all
            # the same, so that WAIT covers the job whichever connection put it)
            args.append("CONFIRM")
        return self._routed(lambda: self._at(job_id)._call("put", *args, changes_job=True))

    def get(self, job_id, body=True, deps=False):
        """The job's fields as a dict (state, body, ...), or None. Its
        "history" (library version 30), when it has one, is a list of dicts
        (attempt, outcome, started, ended, worker, error, error_cut), oldest
        first; its "log" (library version 31) a list of dicts (at, attempt,
        line, cut), oldest first, beside "progress" (JSON text),
        "progress_attempt", "progress_at" and "log_total". body=False: its
        "body" empty (NOBODY, library version 33). deps=True (library
        version 35): a job put with after has "deps", a list of dicts
        (topic, id, policy, outcome, value), beside "deps_total" and
        "deps_left"."""
        args = [job_id] if body else [job_id, "NOBODY"]
        if deps:
            args.append("DEPS")
        reply = self._routed(lambda: self._at(job_id)._call("get", *args))
        if reply is None:
            return None
        job = {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
        for name in ("history", "log", "deps"):
            if name in job:
                job[name] = [{_text(e[i]): e[i + 1] for i in range(0, len(e), 2)}
                             for e in job[name]]
        return job

    def batch(self, batch_id, add=None, seal=False, keep_ms=None):
        """Makes batch batch_id of this topic (the first call on the id),
        adds members to it, seals it (library version 36, docs/flows.md,
        "Batches"); the batch after the call, as get's dict, with
        batch_sealed, batch_total, batch_done and batch_failed. add: jobs,
        each (topic, id), of any topic (add each before its put). A job put
        with after=[(this topic, batch_id, "fail")] runs once it is sealed
        and every member was done; with "ignore", once they all finished."""
        args = [batch_id]
        if add:
            args += ["ADD", len(add)]
            for topic, member in add:
                args += [topic, member]
        if seal:
            args.append("SEAL")
        if keep_ms is not None:
            args += ["KEEP", keep_ms]
        reply = self._routed(lambda: self._at(batch_id)._call("batch", *args, changes_job=True))
        return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}

    def move_outbox(self):
        """Carries out the topic's outbox (its shards' too): the calls that
        hand flows over to other topics (docs/redis-api.md, "Flows"), each
        made, then its entry deleted. Returns how many entries it carried
        out. Any number of movers may run at once."""
        moved = 0
        for t in [self] + self.shards():
            while True:
                entries = t._call("outbox", 1000)
                done = []
                # The resolves of one job (topic, id, gen) merged into calls of
                # up to 1000 settlements, as the C++ mover does: a flow's
                # children each add one as they finish.
                calls, merged = [], {}
                for eid, fn, topic, *args in entries:
                    if _text(fn) == "resolve":
                        key = (topic, args[0], args[1])
                        c = merged.get(key)
                        if c is not None and int(c[2][2]) + int(args[2]) <= 1000:
                            c[2][2] = int(c[2][2]) + int(args[2])
                            c[2].extend(args[3:])
                            c[3].append(eid)
                            continue
                        merged[key] = c = [fn, topic, list(args), [eid]]
                        calls.append(c)
                    else:
                        calls.append([fn, topic, args, [eid]])
                for fn, topic, args, carried in calls:
                    target = Topic(self.redis, _text(topic), self.prefix, self.replicas,
                                   self.replica_timeout_ms, self.failover_s)
                    if _text(fn) == "resolve":
                        target._routed(lambda target=target, args=args: target._at(args[0])._call(
                            "resolve", *args, changes_job=True))
                    elif _text(fn) in ("depend", "forget"):
                        head, ids = args[:3], args[4:]

                        def depend(target=target, head=head, ids=ids, fn=_text(fn)):
                            by_shard = {}
                            for i in ids:
                                by_shard.setdefault(id(target._at(i)), (target._at(i), []))[1].append(i)
                            for where, part in by_shard.values():
                                where._call(fn, *head, len(part), *part, changes_job=True)
                        target._routed(depend)
                    else:
                        continue  # a later version's call: left for its mover
                    done.extend(carried)
                if done:
                    t._call("moved", *done)
                    moved += len(done)
                if not done:  # (empty, or no call answered: again later)
                    break
        return moved

    def reschedule(self, job_id, priority=None, delay_ms=None, at_ms=None):
        """A waiting job's priority and/or due time (delay_ms from now, or
        at_ms), changed in place: its attempts and history stay (library
        version 33). 1, 0 (no such job) or -2 (reserved, dead or done)."""
        args = [job_id]
        for word, value in (("PRIORITY", priority), ("DELAY", delay_ms), ("AT", at_ms)):
            if value is not None:
                args += [word, value]
        return self._routed(lambda: self._at(job_id)._call("reschedule", *args, changes_job=True))

    def reserve(self, count=1, ttr_ms=None, worker=None):
        """worker: who reserves (1..128 bytes without control characters),
        which get shows on the reservation and the job's history on an
        attempt that fails or lapses. From a spread topic: its shards in
        turn, starting one further each call, until count jobs came or each
        was asked."""
        return self._routed(lambda: self._reserve(count, ttr_ms, worker))

    def _reserve(self, count, ttr_ms, worker=None):
        shards = self.shards()
        if not shards:
            args = [count] + (["TTR", ttr_ms] if ttr_ms is not None else [])
            args += ["WORKER", worker] if worker is not None else []
            now, nxt, paused, *jobs = self._call("reserve", *args)
            return Reserved(now, nxt, bool(paused), [Job.reserved(j) for j in jobs])
        self._turn += 1
        out = Reserved(0, -1, True, [])
        for k in range(len(shards)):
            part = shards[(self._turn + k) % len(shards)]._reserve(count - len(out.jobs), ttr_ms, worker)
            out.now = max(out.now, part.now)
            out.next = part.next if out.next < 0 else (out.next if part.next < 0 else min(out.next, part.next))
            out.paused = out.paused and part.paused
            out.jobs += part.jobs
            if len(out.jobs) >= count:
                if k < len(shards) - 1:
                    out.next = 0  # shards not asked may hold more
                break
        return out

    def reserve_job(self, job_id, ttr_ms=None, worker=None):
        """The job named, ready, delayed or dead, reserved ahead of the rest
        and whatever the topic's pause and limits (library version 38;
        beanstalkd's reserve-job). (OK, Job), or (NOT_FOUND or WRONG_STATE:
        reserved, blocked or finished, None)."""
        args = [job_id] + (["TTR", ttr_ms] if ttr_ms is not None else [])
        args += ["WORKER", worker] if worker is not None else []
        reply = self._routed(lambda: self._at(job_id)._call("reservejob", *args))
        if reply[0] != OK:
            return reply[0], None
        return OK, Job.reserved(reply[2])

    def pause(self, for_ms=None):
        """Reserve and pull hand out nothing while paused (put and the rest
        go on), on every shard of a spread topic. for_ms: a pause that ends
        by itself after that long (library version 38), kept in Redis
        whoever paused it; None or 0: until resume. True when any shard's
        state changed."""
        return self._every_shard("pause", *(["FOR", for_ms] if for_ms else []))

    def resume(self):
        """Ends a pause, timed or not. True when any shard's state changed."""
        return self._every_shard("resume")

    def _every_shard(self, op, *args):
        return any([t._call(op, *args) == 1 for t in self.shards(fresh=True) or [self]])

    def ack(self, job, keep_ms=None, result=None):
        """keep_ms defaults to the keep the job was put with. A result goes
        to the jobs waiting for this one and stays with the job at least for
        the topic's retry window (library 38), for one still on its way."""
        keep_ms = keep_ms if keep_ms is not None else job.keep
        args = ["KEEP", keep_ms] if keep_ms else []
        if result is not None:
            args += ["RESULT", result]
        return self._at(job.id)._call("ack", job.id, job.token, *args, changes_job=True)

    def wait(self, job_id, timeout_s):
        """The job once it has finished (state done, with its result, or
        dead), None once it is gone, or at the timeout as it is
        (docs/redis-api.md, "Waiting for a job")."""
        channel = self._at(job_id).finished_channel
        deadline = time.monotonic() + timeout_s
        sub = None
        try:
            while True:
                if sub is None:  # subscribed before the read: nothing falls between
                    sub = _subscribed(self.redis, [channel], self.failover_s)
                job = self.get(job_id)
                if job is None or job["state"] in (b"done", b"dead"):
                    return job
                try:
                    named = False
                    while not named:
                        left = deadline - time.monotonic()
                        if left <= 0 or not sub.can_read(timeout=left):
                            return self.get(job_id)
                        msg = sub.read_response()  # ["smessage", channel, "id\nid..."]
                        named = job_id.encode() in msg[2].split(b"\n")
                except _FAILOVER_ERRORS:
                    _let_go(self.redis, sub)  # subscribe again, then read again
                    sub = None
        finally:
            if sub is not None:
                _let_go(self.redis, sub)

    def release(self, job, delay_ms=0):
        return self._at(job.id)._call("release", job.id, job.token, "DELAY", delay_ms,
                                      changes_job=True)

    def report(self, job, progress=None, lines=()):
        """A reserved job's progress (JSON text, e.g. '{"percent":40}') and
        log lines (up to 100), kept with the job (get shows them): 1, or a
        code (0, -2, -3). Each call rewrites the job's record: a few a
        second at most."""
        args = [job.id, job.token, len(lines), *lines]
        if progress is not None:
            args += ["PROGRESS", progress]
        return self._at(job.id)._call("progress", *args)

    def fail(self, job, error):
        """"delayed" or "ready" (it runs again), "dead"; or a code (0, -2, -3)."""
        return _text(self._at(job.id)._call("fail", job.id, job.token, error, changes_job=True))

    def find_ids(self, prefix="", count=100):
        """The ids of the topic's jobs, of any state, that start with prefix
        (compared byte by byte; glob characters are themselves), one by one:
        an HSCAN MATCH of the jobs hash, a spread topic's shards in turn,
        count a step. Each job there from the first id to the last is
        listed once or more (HSCAN's guarantee); one put or deleted meanwhile
        may be or not. A step that meets a failover starts that topic's scan
        again on the new primary, whose cursors are not the old one's (it
        hashes with a seed of its own): ids already given may come again."""
        data = prefix.encode() if isinstance(prefix, str) else prefix
        pattern = re.sub(rb"([*?\[\]\\])", rb"\\\1", data) + b"*"
        for t in self.shards(fresh=True) or [self]:
            def step(c, t=t):
                return t.redis.hscan(t.keys[0], c, match=pattern, count=count)
            cursor = 0
            while True:
                try:
                    cursor, page = step(cursor)
                except _FAILOVER_ERRORS as e:
                    if isinstance(e, _redis.AuthenticationError):
                        raise
                    cursor, page = _surviving(t.redis, lambda: step(0), t.failover_s)
                for job_id in page:
                    yield _text(job_id)
                if cursor == 0:
                    break

    def history(self, step="total", from_ms=0, to_ms=0):
        """The topic's history (library version 34): dicts of HISTORY_FIELDS,
        one per minute or hour (step "minute" or "hour") from from_ms to
        to_ms that counted anything, in time order; step "total": one, of
        everything since it began. Of a spread topic, summed over its
        shards and what it counted itself before it was spread."""
        args = ["total"] if step == "total" else [step, from_ms, to_ms]
        shards = self.shards(fresh=True)
        # A spread topic: its shards, and itself for what it counted before
        # it was spread (SPREAD; without, it answers SHARDED).
        parts = [(t, args) for t in shards] + [(self, args + ["SPREAD"])] if shards else [(self, args)]
        rows = {}
        for t, a in parts:
            for row in t._call("history", *a)[1:]:
                have = rows.setdefault(row[0], [row[0]] + [0] * 7)
                for i in range(1, 8):
                    have[i] += row[i]
        return [dict(zip(HISTORY_FIELDS, rows[t])) for t in sorted(rows)]

    def stats(self):
        """The counts; of a spread topic, summed over its shards, with the
        totals it counted itself before it was spread."""
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
                elif name in ("next_due", "pause_end"):  # the earliest, -1: none
                    out[name] = value if out[name] < 0 else (
                        out[name] if value < 0 else min(out[name], value))
                else:
                    out[name] += value
        if shards:
            out["shards"] = len(shards)
            if not out.get("paused", 1):
                out["pause_end"] = -1  # (paused while every shard is)
            own = self._call("stats")
            for i in range(0, len(own), 2):
                name = _text(own[i])
                if name.endswith("_total"):
                    out[name] = out.get(name, 0) + own[i + 1]
        return out


VERSION = "python-0.1.0"  # what a worker loop's registry entry says it runs
BEAT_S = 5.0  # a worker loop's beat; its entry lives three of them


def _registry_keys(prefix):
    return (f"{prefix}:{{~workers}}:alive", f"{prefix}:{{~workers}}:entries")


@dataclass
class WorkerEntry:
    """A worker of the registry (docs/redis-api.md, "the worker registry")."""
    id: str
    host: str
    pid: int
    version: str
    started: int  # ms, the worker host's clock
    beat: int  # its last beat, ms (Redis's clock)
    expires: int  # when its entry expires without another, ms
    topics: list  # [(topic, concurrency)]
    running: list  # [(topic, job id, started ms)]


def workers(r, prefix="redisched"):
    """The workers alive, in id order: [WorkerEntry]."""
    reply = r.execute_command("FCALL_RO", "redisched_workers", 2, *_registry_keys(prefix))
    out = []
    for w in reply[1:]:
        t, run = w[7], w[8]
        out.append(WorkerEntry(_text(w[0]), _text(w[1]), w[2], _text(w[3]), w[4], w[5], w[6],
                               [(_text(t[i]), t[i + 1]) for i in range(0, len(t), 2)],
                               [(_text(run[i]), _text(run[i + 1]), run[i + 2])
                                for i in range(0, len(run), 3)]))
    return out


class _Registration:
    """work()'s entry in the worker registry: beaten every BEAT_S by a
    thread of its own, with the job the loop runs then; deleted when the
    loop ends. A refused or lost beat costs the loop nothing: it is listed
    again at the next."""

    def __init__(self, topic, concurrency=1):
        self.r = topic.redis
        self.keys = _registry_keys(topic.prefix)
        self.host = socket.gethostname()
        self.id = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.words = [self.host, os.getpid(), VERSION, int(time.time() * 1000),
                      1, topic.name, concurrency]
        self.topic = topic.name
        self.running = None  # (job id, started ms): set by the loop
        self._ended = threading.Event()
        self._beat()
        self._thread = threading.Thread(target=self._beats, daemon=True)
        self._thread.start()

    def _beats(self):
        while not self._ended.wait(BEAT_S):
            self._beat()

    def _beat(self):
        running = self.running
        jobs = [] if running is None else [self.topic, *running]
        try:
            self.r.execute_command("FCALL", "redisched_beat", 2, *self.keys, self.id,
                                   int(BEAT_S * 3000), *self.words, len(jobs) // 3, *jobs)
        except _redis.RedisError:
            pass

    def leave(self):
        self._ended.set()
        self._thread.join(BEAT_S)  # (a beat stuck on a lost connection is not waited out)
        try:
            self.r.execute_command("FCALL", "redisched_leave", 2, *self.keys, self.id)
        except _redis.RedisError:
            pass


def work(topic, handler, stop=lambda: False, batch=10, ttr_ms=30000):
    """Runs handler(job) on the topic's jobs until stop() is true: a return
    acks the job, an exception fails it with its text. Between jobs it
    sleeps on the wake-up channel until the next due time Redis gave, or a
    signal of an earlier one; no polling. Through a failover it subscribes
    again (the signals sent meanwhile are lost; the reserve that follows
    finds their jobs). It keeps an entry in the worker registry (workers())
    while it runs, and names its reserves with the entry's id (the jobs'
    history shows it). The handler may report its job's progress and log
    lines with topic.report(job, ...) while it runs."""
    sub = None
    entry = _Registration(topic)
    try:
        while not stop():
            if sub is None:
                # Subscribed before the reserve: nothing falls between (to
                # each shard's channel for a spread topic; a change of its
                # shards is not followed here: restart the loop).
                channels = [t.channel for t in topic.shards(fresh=True) or [topic]]
                sub = _subscribed(topic.redis, channels, topic.failover_s)
            r = topic.reserve(batch, ttr_ms, worker=entry.id)
            for job in r.jobs:
                entry.running = (_text(job.id), int(time.time() * 1000))
                try:
                    handler(job)
                    failure = None
                except Exception as e:  # the job's failure, not the worker's
                    failure = str(e) or type(e).__name__
                entry.running = None
                try:
                    if failure is None:
                        topic.ack(job)
                    else:
                        topic.fail(job, failure)
                except NotReplicated:
                    pass  # done here, only not yet on a replica: lost, the job runs again
            if r.next == 0:
                continue
            # Redis's time to wait for, translated by its own clock.
            wait_s = 1.0 if r.next < 0 else max(0.0, (r.next - r.now) / 1000)
            deadline = time.monotonic() + min(wait_s, 1.0)  # and look at stop() now and then
            try:
                while not stop() and time.monotonic() < deadline:
                    if sub.can_read(timeout=deadline - time.monotonic()):
                        sub.read_response()  # ["smessage", channel, due ms]: look now
                        break
            except _FAILOVER_ERRORS:
                _let_go(topic.redis, sub)  # subscribe again, then reserve at once
                sub = None
    finally:
        try:
            if sub is not None:
                _let_go(topic.redis, sub)
        finally:
            entry.leave()


def _text(b):
    return b.decode() if isinstance(b, bytes) else b
