"""The machinery of the hostile-input suite: a `redisched serve` process with
its embedded Redis, a raw-socket HTTP client that sends exact bytes and parses
the answers strictly, and a dump of the whole keyspace.

Standard library and Debian's python3-redis only (run with /usr/bin/python3).
"""

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from serve_process import StartError, start_serve  # noqa: E402  (StartError: for the cases)



# --------------------------------------------------------------------------
# The server process


class Serve:
    """`redisched --data-dir DIR serve --listen 127.0.0.1:0 ARGS...`.

    --data-dir is a global option of redisched: it goes before `serve`. The
    port is read from the line "redisched serve listening on http://..."
    (the first line the server itself prints on stdout; spdlog's lifecycle
    lines share stdout, so the output is searched for it)."""

    def __init__(self, binary, name, args=(), token=None):
        self.binary = binary
        self.name = name
        self.args = list(args)
        self.token = token
        self.dir = tempfile.mkdtemp(prefix="redisched-hostile-%s-" % name)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.dir, "serve.log")
        self.exit_statuses = []  # of every stop, for the final check

    @property
    def data_dir(self):
        return os.path.join(self.dir, "data")

    @property
    def socket_path(self):
        return os.path.join(self.data_dir, "redis.sock")

    def start(self, timeout=20.0):
        argv = [self.binary, "--data-dir", self.data_dir, "serve", "--listen", "127.0.0.1:0"]
        argv += self.args
        try:
            self.proc, self.port = start_serve(argv, self.log_path, timeout)
        except StartError as e:
            self.proc = None
            raise StartError("%s: %s" % (self.name, e)) from e
        self._wait_redis()

    def _wait_redis(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.redis().ping()
                return
            except Exception:
                time.sleep(0.05)
        raise StartError("%s: no Redis on %s" % (self.name, self.socket_path))

    def redis(self):
        if getattr(self, "_redis", None) is None or self._redis_sock != self.socket_path:
            self._redis = redis.Redis(unix_socket_path=self.socket_path, socket_timeout=10)
            self._redis_sock = self.socket_path
        return self._redis

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pid(self):
        return self.proc.pid if self.proc else None

    def reset_hwm(self):
        """Resets VmHWM to the current RSS (Linux clear_refs 5), so a case
        measures its own peak, not one an earlier case left behind."""
        try:
            with open("/proc/%d/clear_refs" % self.proc.pid, "w") as f:
                f.write("5")
        except OSError:
            pass

    def vm_hwm_kb(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def died_how(self):
        """A description of how the process ended (after alive() is False)."""
        if self.proc is None:
            return "not running"
        rc = self.proc.returncode
        if rc is None:
            return "running"
        if rc < 0:
            return "killed by signal %d (%s)" % (-rc, signal.Signals(-rc).name)
        return "exited with status %d" % rc

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, timeout=15.0):
        """SIGTERM, wait; returns the exit status (negative: a signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                rc = "did not stop within %.0f s of SIGTERM (killed)" % timeout
                self.exit_statuses.append(rc)
                self.proc = None
                return rc
        rc = self.proc.returncode
        self.exit_statuses.append(rc)
        self.proc = None
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self):
        """After a crash: its embedded Redis got SIGTERM when it died; start
        again on the same data directory."""
        if self.proc is not None:
            self.proc.poll()
            self.exit_statuses.append(self.proc.returncode)
            self.proc = None
        self._redis = None
        # The embedded Redis of the dead process may still be writing its
        # append-only file; wait for its socket to stop answering.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and os.path.exists(self.socket_path):
            try:
                redis.Redis(unix_socket_path=self.socket_path, socket_timeout=0.5).ping()
                time.sleep(0.1)
            except Exception:
                break
        self.start()

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------
# Raw HTTP


class Malformed(Exception):
    pass


class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] as sent, bytes decoded latin-1
        self.body = body
        self.raw_head = raw_head

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def wants_close(self):
        c = (self.header("connection") or "").lower()
        return "close" in [t.strip() for t in c.split(",")] or self.version == "HTTP/1.0" and \
            "keep-alive" not in c


TOKEN_RE = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class Conn:
    """One TCP connection, non-blocking, with its own receive buffer."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buf = b""
        self.eof = False      # the server closed (FIN)
        self.reset = False    # the server reset the connection
        self.send_error = None
        self.sent = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def shutdown_write(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _recv_some(self):
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return 0
        except (ConnectionResetError, ConnectionAbortedError):
            self.reset = True
            self.eof = True
            return 0
        except OSError:
            self.reset = True
            self.eof = True
            return 0
        if not data:
            self.eof = True
            return 0
        self.buf += data
        return len(data)

    def send(self, data, stall=2.0, piece=1 << 16, until=None):
        """Sends data, reading whatever comes back meanwhile. Stops when all
        is sent, the peer stops reading for `stall` seconds, the connection
        breaks, or until(self) is true. Returns the number of bytes sent."""
        view = memoryview(data)
        pos = 0
        last = time.monotonic()
        while pos < len(view) and not self.eof:
            if until is not None and until(self):
                break
            r, w, _ = select.select([self.sock], [self.sock], [], 0.05)
            if r:
                self._recv_some()
                last = time.monotonic()
            if w:
                try:
                    n = self.sock.send(view[pos:pos + piece])
                    pos += n
                    last = time.monotonic()
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError, OSError) as e:
                    self.send_error = e
                    break
            if time.monotonic() - last > stall:
                self.send_error = "peer stopped reading"
                break
        self.sent += pos
        return pos

    def fill(self, deadline):
        """Reads once (waiting until deadline); returns False on timeout or EOF."""
        if self.eof:
            return False
        t = deadline - time.monotonic()
        if t <= 0:
            return False
        r, _, _ = select.select([self.sock], [], [], t)
        if not r:
            return False
        n = self._recv_some()
        return n > 0

    def wait_close(self, timeout):
        """After the expected answers: 'eof' (closed or reset), 'data' (more
        bytes came: a second answer), or 'open' (still open at the timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.buf:
                return "data"
            if self.eof:
                return "eof"
            if time.monotonic() >= deadline:
                return "open"
            self.fill(deadline)

    def read_response(self, method="GET", timeout=5.0, head_only=False):
        """Reads and strictly parses one answer. Returns None when the
        connection closed (or timed out) before any byte of it; raises
        Malformed for bytes that are not a well-formed HTTP/1.1 answer."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 1 << 17:
                raise Malformed("answer head over 128 KiB")
            if not self.fill(deadline):
                if self.eof or time.monotonic() >= deadline:
                    if not self.buf:
                        return None
                    raise Malformed("incomplete answer head (%s): %r" % (
                        "closed" if self.eof else "timed out", self.buf[:200]))
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        m = re.match(rb"^(HTTP/1\.[01]) ([1-5][0-9][0-9]) ([\t \x21-\x7e\x80-\xff]*)$", lines[0])
        if not m:
            raise Malformed("bad status line %r" % lines[0][:200])
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1")
        headers = []
        for line in lines[1:]:
            if b"\n" in line or b"\r" in line:
                raise Malformed("bare CR or LF in the answer head: %r" % line[:200])
            name, sep, value = line.partition(b":")
            if not sep or not TOKEN_RE.match(name):
                raise Malformed("bad header line %r" % line[:200])
            if re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", value):
                raise Malformed("control character in header %r" % line[:200])
            headers.append((name.decode(), value.strip(b" \t").decode("latin-1")))
        self.buf = rest
        resp = Response(version, status, reason, headers, b"", head + b"\r\n\r\n")
        if head_only:
            return resp
        lengths = resp.header_all("content-length")
        te = resp.header("transfer-encoding")
        if len(lengths) > 1:
            raise Malformed("%d Content-Length headers" % len(lengths))
        if lengths and te:
            raise Malformed("both Content-Length and Transfer-Encoding in the answer")
        if method == "HEAD" or status < 200 or status in (204, 304):
            return resp
        if te:
            if te.lower() != "chunked":
                raise Malformed("answer Transfer-Encoding %r" % te)
            resp.body = self._read_chunked(deadline)
        elif lengths:
            if not re.match(r"^[0-9]+$", lengths[0]):
                raise Malformed("bad answer Content-Length %r" % lengths[0])
            n = int(lengths[0])
            while len(self.buf) < n:
                if not self.fill(deadline):
                    raise Malformed("answer body cut short: %d of %d bytes (%s)" % (
                        len(self.buf), n, "closed" if self.eof else "timed out"))
            resp.body, self.buf = self.buf[:n], self.buf[n:]
        else:
            # No length: the body runs to the close.
            while not self.eof and self.fill(deadline):
                pass
            if not self.eof:
                raise Malformed("answer without length and not closed")
            resp.body, self.buf = self.buf, b""
        return resp

    def _read_chunked(self, deadline):
        body = b""
        while True:
            while b"\r\n" not in self.buf:
                if not self.fill(deadline):
                    raise Malformed("chunked answer cut short")
            line, _, self.buf = self.buf.partition(b"\r\n")
            try:
                size = int(line.split(b";")[0], 16)
            except ValueError:
                raise Malformed("bad chunk size %r" % line[:50])
            if size == 0:
                while b"\r\n" not in self.buf:
                    if not self.fill(deadline):
                        raise Malformed("chunked answer trailer cut short")
                # No trailers expected from this server.
                trailer, _, self.buf = self.buf.partition(b"\r\n")
                if trailer:
                    raise Malformed("unexpected trailer %r" % trailer[:50])
                return body
            while len(self.buf) < size + 2:
                if not self.fill(deadline):
                    raise Malformed("chunk cut short")
            body += self.buf[:size]
            if self.buf[size:size + 2] != b"\r\n":
                raise Malformed("chunk not followed by CRLF")
            self.buf = self.buf[size + 2:]


def request(method, target, body=None, headers=(), version="HTTP/1.1", host=True,
            content_length=True):
    """The bytes of an ordinary request. body and target may be str or bytes."""
    if isinstance(target, str):
        target = target.encode("utf-8")
    if isinstance(body, str):
        body = body.encode("utf-8")
    out = method.encode() + b" " + target + b" " + version.encode() + b"\r\n"
    if host:
        out += b"Host: 127.0.0.1\r\n"
    for h in headers:
        out += (h.encode("latin-1") if isinstance(h, str) else h) + b"\r\n"
    if body is not None and content_length:
        out += b"Content-Length: %d\r\n" % len(body)
    out += b"\r\n"
    if body is not None:
        out += body
    return out


def chunked(data, size=None):
    """data in HTTP/1.1 chunked coding (in pieces of `size` bytes)."""
    if isinstance(data, str):
        data = data.encode()
    size = size or max(len(data), 1)
    out = b""
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def simple(port, method, target, body=None, headers=(), timeout=10.0):
    """One ordinary request on a fresh connection: (Response, body JSON or None)."""
    c = Conn(port)
    try:
        c.send(request(method, target, body, headers))
        r = c.read_response(method, timeout)
        if r is None:
            raise Malformed("no answer to %s %s" % (method, target))
        try:
            j = json.loads(r.body) if r.body else None
        except ValueError:
            j = None
        return r, j
    finally:
        c.close()


# --------------------------------------------------------------------------
# JSON, strictly


def _no_constants(name):
    raise ValueError("non-JSON constant " + name)


def strict_json(body):
    """Parses an answer body: valid UTF-8, valid JSON (no NaN/Infinity), and
    every string valid Unicode (no lone surrogates from \\u escapes).
    Raises ValueError with the reason."""
    try:
        text = body.decode("utf-8", "strict")
    except UnicodeDecodeError as e:
        raise ValueError("body is not valid UTF-8 (%s) %r" % (e.reason, body[max(0, e.start - 20):e.end + 20]))
    v = json.loads(text, parse_constant=_no_constants)

    def walk(x):
        if isinstance(x, str):
            try:
                x.encode("utf-8", "strict")
            except UnicodeEncodeError:
                raise ValueError("a JSON string holds a lone surrogate: %r" % x[:80])
        elif isinstance(x, dict):
            for k, val in x.items():
                walk(k)
                walk(val)
        elif isinstance(x, list):
            for val in x:
                walk(val)

    walk(v)
    return v


# --------------------------------------------------------------------------
# The keyspace


def dump_keyspace(r):
    """Every key with its type, full content and expiry time, canonically.
    Expiry is PEXPIRETIME (an absolute time, so it does not drift while the
    suite runs): -1 none."""
    out = []
    keys = sorted(r.scan_iter(match="*", count=1000))
    for k in keys:
        t = r.type(k)
        if t == b"hash":
            v = sorted(r.hgetall(k).items())
        elif t == b"zset":
            v = r.zrange(k, 0, -1, withscores=True)
            v = [(m, repr(s)) for m, s in v]
        elif t == b"list":
            v = r.lrange(k, 0, -1)
        elif t == b"set":
            v = sorted(r.smembers(k))
        elif t == b"string":
            v = r.get(k)
        elif t == b"stream":
            v = r.xrange(k)
        elif t == b"none":
            continue  # gone between SCAN and TYPE
        else:
            v = "<%s>" % t
        exp = r.execute_command("PEXPIRETIME", k)
        out.append((k, t, exp, v))
    return out


def diff_dumps(before, after, limit=6):
    """A short description of how two dumps differ."""
    b = {k: (t, e, v) for k, t, e, v in before}
    a = {k: (t, e, v) for k, t, e, v in after}
    notes = []
    for k in sorted(set(b) | set(a)):
        name = k.decode("utf-8", "backslashreplace")
        if k not in b:
            notes.append("+%s" % name)
        elif k not in a:
            notes.append("-%s" % name)
        elif b[k] != a[k]:
            bt, be, bv = b[k]
            at, ae, av = a[k]
            what = []
            if bt != at:
                what.append("type")
            if be != ae:
                what.append("expiry")
            if bv != av:
                if isinstance(bv, list) and isinstance(av, list):
                    gone = [x for x in bv if x not in av]
                    new = [x for x in av if x not in bv]
                    what.append("content(-%s +%s)" % (_short(gone), _short(new)))
                else:
                    what.append("content")
            notes.append("~%s %s" % (name, " ".join(what)))
    more = "" if len(notes) <= limit else " (+%d more)" % (len(notes) - limit)
    return ", ".join(notes[:limit]) + more


def _short(items):
    s = []
    for x in items[:3]:
        if isinstance(x, tuple):
            x = x[0]
        if isinstance(x, bytes):
            x = x.decode("utf-8", "backslashreplace")
        s.append(str(x)[:30])
    return "[" + ",".join(s) + ("..." if len(items) > 3 else "") + "]"
