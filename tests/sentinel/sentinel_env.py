"""A real Redis Sentinel deployment on localhost, for tests: one primary, two
replicas and three sentinels (redis-server and redis-sentinel of the
machine), each on a free TCP port, their files in a temporary directory.
The sentinels watch the primary as "mymaster" (quorum 2, down after 1 s,
failover timeout 5 s, one replica resynced at a time); the data nodes keep
an AOF (appendfsync everysec) and no RDB snapshots.

    from sentinel_env import SentinelEnv
    with SentinelEnv(password="secret") as env:   # start() waits until ready
        url = env.url()       # redis+sentinel://:secret@127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/mymaster
        old = env.primary()   # (host, port), as the sentinels say
        env.kill_primary()    # SIGKILL
        new = env.wait_failover(old)  # a replica promoted, the sentinels agree
        env.restart_killed()  # the old primary back, as a replica of the new

password: every data node asks for it (requirepass, masterauth) and the
sentinels use it (auth-pass); sentinel_password: the sentinels ask for it
too (the URL carries it as ?sentinel_password=).

From a shell or a C++ test, the same as a process:

    python3 tests/sentinel/sentinel_env.py --print-url [--password PW]
                                           [--sentinel-password PW]

It starts the deployment, prints its URL on one line of stdout (flushed)
once it is ready, and keeps it up until SIGTERM, SIGINT or SIGHUP, or until
its stdin reaches EOF when stdin is a pipe or socket (a terminal or
/dev/null is not watched); it also ends when the process that started it
dies. Either way everything it started is killed and its directory removed.

No redis process outlives its SentinelEnv: each is started with
PR_SET_PDEATHSIG, so even a SIGKILL of this Python process takes them
along. That signal follows the thread that forked them: call start() and
restart_killed() from a thread that lives as long as the deployment (the
main thread, normally).
"""

import argparse
import ctypes
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.parse

import redis

MASTER_NAME = "mymaster"
HOST = "127.0.0.1"

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # looked up here: the forked child only calls it


def _dies_with(parent_pid, sig=signal.SIGKILL):
    """A preexec_fn: the child gets sig once the forking thread is gone; and
    at once if the parent went before the request was made."""
    def arm():
        _libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)
    return arm


def _free_ports(n):
    """n ports free now (bound to 0, then let go together so no two match)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class _Exited(RuntimeError):
    """A process ended while starting."""


def _quoted(text):
    """text as one argument of a Redis config line (a password may hold spaces)."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else
                         ("\\" + c if c in '"\\' else f"\\x{ord(c):02x}")
                         for c in text) + '"'


def _poll(what, check, timeout, describe=lambda: ""):
    """check() until it returns something true, every 20 ms; TimeoutError
    (with describe() to say why) after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
            if got:
                return got
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            pass  # not up yet, or between roles
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout} s. {describe()}")
        time.sleep(0.02)


class SentinelEnv:
    """The deployment; replicas and sentinels: how many (the quorum is a
    majority of the sentinels)."""

    def __init__(self, password=None, sentinel_password=None, replicas=2, sentinels=3,
                 redis_server="redis-server", redis_sentinel=None):
        self.password = password
        self.sentinel_password = sentinel_password
        self.n_replicas = replicas
        self.n_sentinels = sentinels
        self.redis_server = redis_server
        self.redis_sentinel = redis_sentinel or (
            "redis-sentinel" if shutil.which("redis-sentinel") else None)
        self.dir = None
        self.data = {}       # port -> Popen of a data node
        self.sentinels = {}  # port -> Popen of a sentinel
        self.killed = None   # (host, port) of the primary kill_primary() took

    # ---- starting and stopping

    def start(self, timeout=30, tries=3):
        """Up and ready; again on other ports when one was taken meanwhile
        (by a test beside this one) before its process could bind it."""
        for left in reversed(range(tries)):
            try:
                return self._start(timeout)
            except _Exited as e:
                if not left or "Address already in use" not in str(e):
                    raise

    def _start(self, timeout):
        self.dir = tempfile.mkdtemp(prefix="redisched-sentinel-")
        try:
            ports = _free_ports(1 + self.n_replicas + self.n_sentinels)
            primary, replicas = ports[0], ports[1:1 + self.n_replicas]
            sentinels = ports[1 + self.n_replicas:]
            self._start_data(primary)
            for port in replicas:
                self._start_data(port, replica_of=primary)
            deadline = time.monotonic() + timeout
            # Replicas in sync before the sentinels come: a sentinel learns
            # of replicas from the primary's INFO, which it asks at its
            # first contact and then only every 10 s.
            _poll("replicas in sync", lambda: self._online_replicas(primary) == len(replicas),
                  deadline - time.monotonic(), lambda: self._log_tails())
            for port in sentinels:
                self._start_sentinel(port, primary)
            _poll("sentinels see each other and every replica", self._sentinels_ready,
                  deadline - time.monotonic(), lambda: self._sentinel_views())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Kill everything (SIGKILL: nothing here is worth a clean shutdown)
        and remove the directory. Safe to call twice."""
        for proc in [*self.data.values(), *self.sentinels.values()]:
            if proc.poll() is None:
                proc.kill()
        for proc in [*self.data.values(), *self.sentinels.values()]:
            proc.wait()
        self.data, self.sentinels = {}, {}
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _spawn(self, name, argv):
        log = open(os.path.join(self.dir, f"{name}.out"), "wb")
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    preexec_fn=_dies_with(os.getpid()))
        finally:
            log.close()  # the child holds its own copy

    def _start_data(self, port, replica_of=None):
        node_dir = os.path.join(self.dir, f"node-{port}")
        os.makedirs(node_dir, exist_ok=True)
        argv = [self.redis_server, "--port", str(port), "--bind", HOST, "--dir", node_dir,
                "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                "--logfile", os.path.join(node_dir, "redis.log"),
                # The first sync at once, not after the default 5 s gathering of replicas.
                "--repl-diskless-sync-delay", "0"]
        if self.password:
            argv += ["--requirepass", self.password, "--masterauth", self.password]
        if replica_of:
            argv += ["--replicaof", HOST, str(replica_of)]
        self.data[port] = self._spawn(f"node-{port}", argv)
        self._wait_up(f"redis-server on {port}", self.data[port], self._node(port))

    def _start_sentinel(self, port, primary):
        conf = os.path.join(self.dir, f"sentinel-{port}.conf")  # Sentinel rewrites it: its own file
        lines = [f"port {port}", f"bind {HOST}", "protected-mode no", f"dir {_quoted(self.dir)}",
                 f'logfile {_quoted(os.path.join(self.dir, f"sentinel-{port}.log"))}',
                 f"sentinel monitor {MASTER_NAME} {HOST} {primary} {self.n_sentinels // 2 + 1}",
                 f"sentinel down-after-milliseconds {MASTER_NAME} 1000",
                 f"sentinel failover-timeout {MASTER_NAME} 5000",
                 f"sentinel parallel-syncs {MASTER_NAME} 1"]
        if self.password:
            lines.append(f"sentinel auth-pass {MASTER_NAME} {_quoted(self.password)}")
        if self.sentinel_password:
            # Asked of clients, and given to the other sentinels.
            lines += [f"requirepass {_quoted(self.sentinel_password)}",
                      f"sentinel sentinel-pass {_quoted(self.sentinel_password)}"]
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        argv = ([self.redis_sentinel, conf] if self.redis_sentinel
                else [self.redis_server, conf, "--sentinel"])
        self.sentinels[port] = self._spawn(f"sentinel-{port}", argv)
        self._wait_up(f"redis-sentinel on {port}", self.sentinels[port], self._sentinel(port))

    def _wait_up(self, what, proc, client):
        def up():
            if proc.poll() is not None:
                raise _Exited(f"{what} exited ({proc.returncode}): {self._log_tails()}")
            return client.ping()
        _poll(what, up, 10, lambda: self._log_tails())

    # ---- clients of the nodes

    def _node(self, port):
        return redis.Redis(HOST, port, password=self.password, socket_timeout=2,
                           socket_connect_timeout=2)

    def _sentinel(self, port):
        return redis.Redis(HOST, port, password=self.sentinel_password, socket_timeout=2,
                           socket_connect_timeout=2, decode_responses=True)

    def _online_replicas(self, port):
        info = self._node(port).info("replication")
        return sum(1 for k, v in info.items()
                   if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online")

    def _sentinels_ready(self):
        for port in self.sentinels:
            m = self._sentinel(port).sentinel_master(MASTER_NAME)
            if (m["flags"] != "master" or m["num-slaves"] != self.n_replicas
                    or m["num-other-sentinels"] != self.n_sentinels - 1):
                return False
            for r in self._sentinel(port).sentinel_slaves(MASTER_NAME):
                if r["flags"] != "slave" or r["master-link-status"] != "ok":
                    return False
        return True

    def _sentinel_views(self):
        views = []
        for port in self.sentinels:
            try:
                m = self._sentinel(port).sentinel_master(MASTER_NAME)
                views.append(f"sentinel {port}: {m['ip']}:{m['port']} {m['flags']}, "
                             f"{m['num-slaves']} replicas, {m['num-other-sentinels']} other sentinels")
            except redis.RedisError as e:
                views.append(f"sentinel {port}: {e}")
        return "; ".join(views) + " " + self._log_tails()

    def _log_tails(self, lines=5):
        out = []
        for root, _, files in os.walk(self.dir or "."):
            for name in sorted(files):
                if name.endswith((".log", ".out")):
                    with open(os.path.join(root, name), errors="replace") as f:
                        tail = f.read().splitlines()[-lines:]
                    if tail:
                        out.append(f"[{name}] " + " | ".join(tail))
        return "\n".join(out)

    # ---- what the tests use

    def url(self):
        """redis+sentinel://[:password@]h:p,h:p,h:p/mymaster[?sentinel_password=..]"""
        auth = f":{urllib.parse.quote(self.password, safe='')}@" if self.password else ""
        hosts = ",".join(f"{HOST}:{p}" for p in self.sentinels)
        query = ("?sentinel_password=" + urllib.parse.quote(self.sentinel_password, safe="")
                 if self.sentinel_password else "")
        return f"redis+sentinel://{auth}{hosts}/{MASTER_NAME}{query}"

    def sentinel_addresses(self):
        return [(HOST, p) for p in self.sentinels]

    def primary(self):
        """(host, port) of the primary, as the first sentinel that answers says."""
        for port in self.sentinels:
            try:
                host, p = self._sentinel(port).sentinel_get_master_addr_by_name(MASTER_NAME)
                return host, int(p)
            except (redis.ConnectionError, redis.TimeoutError):
                continue
        raise redis.ConnectionError("no sentinel answers")

    def kill_primary(self):
        """SIGKILL the primary; its address."""
        old = self.primary()
        proc = self.data[old[1]]
        proc.kill()
        proc.wait()
        self.killed = old
        return old

    def wait_failover(self, old, timeout=30):
        """The new primary's (host, port) once every sentinel names one
        other than old and that node says it is a primary."""
        def agreed():
            seen = set()
            for port, proc in self.sentinels.items():
                if proc.poll() is None:
                    host, p = self._sentinel(port).sentinel_get_master_addr_by_name(MASTER_NAME)
                    seen.add((host, int(p)))
            if len(seen) != 1:
                return None
            (new,) = seen
            if new == tuple(old) or self._node(new[1]).info("replication")["role"] != "master":
                return None
            return new
        return _poll("failover", agreed, timeout, lambda: self._sentinel_views())

    def failovers(self):
        """How many failovers the sentinels ran: the highest config epoch
        any live one reports. More than one after one kill_primary() means
        a sentinel took the new primary for down too (a slow machine) and
        failed it over again: writes it took meanwhile may be undone."""
        epochs = [0]
        for port, proc in self.sentinels.items():
            if proc.poll() is None:
                epochs.append(int(self._sentinel(port).sentinel_master(MASTER_NAME)["config-epoch"]))
        return max(epochs)

    def wait_settled(self, timeout=30):
        """Back once every sentinel names one primary and every other live
        node is its replica in sync (after a failover, before a step that
        needs the replicas where the sentinels say they are)."""
        _poll("the deployment settled", self._settled, timeout, self._sentinel_views)

    def _settled(self):
        # Every sentinel names one primary, which says it is one, and every
        # other live node is its replica in sync, seen so by every sentinel.
        # (On a loaded machine a sentinel may fail over once more while a
        # node syncs, to it or to another: the node is then the primary, or
        # a replica of the new one.)
        named = {self._sentinel(port).sentinel_get_master_addr_by_name(MASTER_NAME)
                 for port in self.sentinels}
        if len(named) != 1 or None in named:
            return False
        named = {int(addr[1]) for addr in named}
        (primary_port,) = named
        if self._node(primary_port).info("replication")["role"] != "master":
            return False
        for node, proc in self.data.items():
            if node == primary_port or proc.poll() is not None:
                continue
            info = self._node(node).info("replication")
            if info["role"] != "slave" or info["master_link_status"] != "up":
                return False
            for port in self.sentinels:
                replicas = self._sentinel(port).sentinel_slaves(MASTER_NAME)
                if not any(int(r["port"]) == node and r["flags"] == "slave"
                           and r["master-link-status"] == "ok" for r in replicas):
                    return False
        return True

    def restart_killed(self, timeout=30):
        """The node kill_primary() took, started again (its AOF kept) as a
        replica of the current primary; back once every node is in sync and
        every sentinel sees the same primary and healthy replicas."""
        old = self.killed
        if old is None:
            raise RuntimeError("no node was killed")
        primary = self.primary()
        self._start_data(old[1], replica_of=primary[1])
        self.killed = None

        def views():
            # (what _settled() looked at, for a timeout's message: the node's
            # own link, and each sentinel's flags for it)
            try:
                info = self._node(old[1]).info("replication")
                own = "node %d: role %s, link %s" % (old[1], info.get("role"),
                                                     info.get("master_link_status"))
            except Exception as e:  # noqa: BLE001 (a message, not a check)
                own = "node %d: %s" % (old[1], e)
            seen = []
            for port in self.sentinels:
                try:
                    for r in self._sentinel(port).sentinel_slaves(MASTER_NAME):
                        if int(r["port"]) == old[1]:
                            seen.append("sentinel %d: flags %s, link %s"
                                        % (port, r["flags"], r["master-link-status"]))
                except Exception as e:  # noqa: BLE001
                    seen.append("sentinel %d: %s" % (port, e))
            return "; ".join([own] + seen) + " | " + self._sentinel_views()
        _poll("the restarted node in sync", self._settled, timeout, views)
        return old


def _main():
    parser = argparse.ArgumentParser(description="A Redis Sentinel deployment for tests.")
    parser.add_argument("--print-url", action="store_true", required=True,
                        help="print its redis+sentinel:// URL once ready")
    parser.add_argument("--password")
    parser.add_argument("--sentinel-password")
    args = parser.parse_args()

    starter = os.getppid()
    # A signal writes to this pipe (set_wakeup_fd): the wait below ends at once.
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    # Our starter's death ends us too (SIGTERM: so we clean up).
    _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != starter:
        return 1

    env = SentinelEnv(password=args.password, sentinel_password=args.sentinel_password)
    try:
        env.start()
        print(env.url(), flush=True)
        stdin = sys.stdin.fileno()
        mode = os.fstat(stdin).st_mode
        watched = [woken] + ([stdin] if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else [])
        while True:
            ready, _, _ = select.select(watched, [], [])
            if woken in ready or not os.read(stdin, 4096):
                break
    finally:
        env.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
