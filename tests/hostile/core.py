"""Cases, the fixture and the runner of the hostile-input suite."""

import json
import time

from harness import (Conn, Malformed, diff_dumps, dump_keyspace, request, simple, strict_json)

# A token in a case's body or target is written as this number and replaced,
# when the case is sent, by the token of the fixture's reserved job s1 (it
# changes whenever the fixture is seeded again).
TOK = 987654321987
TOKB = b"987654321987"
TOK_WRONG = 987654321986  # replaced by s1's token + 1000 (a wrong one)
TOK_WRONGB = b"987654321986"

AUTH_HEADER = "Authorization: Bearer s3cret"


class Case:
    """One hostile request and what the server must do with it.

    expect: the acceptable statuses (an int or a set).
    send:   the exact bytes (or a function of the context returning them).
    method: the request's method, for reading the answer (HEAD: no body).
    shape:  what the answer body must be: "error" ({"error":{"code","message"}}),
            "json", "dq_ok"/"dq_fail" (the delay queue's {code,message,data}),
            "orig_ok"/"orig_fail" (the original redisched's routes), "none"
            (not checked beyond the framing), "stream" (only the head is read);
            a tuple: any of them. Default: "error" for 4xx/5xx, else "json".
    close:  the connection must be closed after the (first) answer.
    answers: how many answers come back (pipelining); later ones' statuses in
            `then`.
    allow:  405: the Allow header must list exactly these methods (plus those in
            allow_optional, which it may list).
    www_auth: a WWW-Authenticate: Bearer header is required.
    unchanged: the keyspace must be byte-for-byte the same after the case
            (default: for every refused case).
    garbage: an error answer or a closed connection are both fine.
    run:    a function (ctx, serve) -> (observed, [failures]) replacing the
            standard send/read/check; the keyspace and liveness checks still run.
    check:  extra checks, (ctx, response, json) -> [failures].
    after:  clean-up (ctx, serve) after the case.
    """

    def __init__(self, name, expect=None, send=None, method="GET", server="main", shape=None,
                 close=False, answers=1, then=None, allow=None, allow_optional=(),
                 www_auth=False, unchanged=None, garbage=False, run=None, check=None,
                 after=None, timeout=5.0, half_close=False, note=None):
        self.name = name
        if isinstance(expect, int):
            expect = {expect}
        self.expect = set(expect) if expect is not None else None
        self.send = send
        self.method = method
        self.server = server
        if shape is None and self.expect:
            shape = "error" if min(self.expect) >= 400 else "json"
        self.shape = shape
        self.close = close
        self.answers = answers
        self.then = then or []
        self.allow = set(allow) if allow is not None else None
        self.allow_optional = set(allow_optional)
        self.www_auth = www_auth
        refused = (self.expect is not None and min(self.expect) >= 400) or \
            shape in ("dq_fail", "orig_fail")
        self.refused = refused
        self.unchanged = refused if unchanged is None else unchanged
        self.garbage = garbage
        self.run = run
        self.check = check
        self.after = after
        self.timeout = timeout
        self.half_close = half_close
        self.note = note

    def expected_text(self):
        if self.expect is None:
            return "see case"
        e = "|".join(str(s) for s in sorted(self.expect))
        if self.garbage:
            e += " or closed"
        if self.shape in ("dq_ok", "dq_fail", "orig_ok", "orig_fail"):
            e += " " + self.shape
        return e


def R(name, method, target, body=None, headers=(), expect=400, **kw):
    """A case made of one ordinary request (with Host and Content-Length)."""

    def build(ctx, srv, method=method, target=target, body=body, headers=headers):
        # The token goes in before Content-Length is counted.
        t = ctx.fill(srv, target.encode() if isinstance(target, str) else target)
        b = None if body is None else ctx.fill(srv, body.encode() if isinstance(body, str) else body)
        return request(method, t, b, headers)

    kw.setdefault("method", method)
    return Case(name, expect, send=build, **kw)


def J(name, method, target, obj, expect=400, **kw):
    """A case whose body is obj serialised as JSON."""
    return R(name, method, target, json.dumps(obj, separators=(",", ":")), expect=expect, **kw)


def RAW(name, data, expect, **kw):
    return Case(name, expect, send=data, **kw)


# --------------------------------------------------------------------------
# Shapes of answer bodies


def shape_problems(shape, resp):
    if isinstance(shape, tuple):
        results = [shape_problems(s, resp) for s in shape]
        if any(not r for r in results):
            return []
        return ["matches none of %s: %s" % ("/".join(shape), "; ".join(results[0]))]
    if shape in ("none", "stream", None):
        return []
    try:
        v = strict_json(resp.body)
    except ValueError as e:
        return ["body not valid JSON (%s): %r" % (str(e)[:120], resp.body[:120])]
    ct = (resp.header("content-type") or "").lower()
    problems = []
    if not ct.startswith("application/json"):
        problems.append("Content-Type %r, not application/json" % ct)
    if shape == "error":
        # The stricter reading: exactly {"error": {"code", "message"}}, both
        # non-empty strings.
        if not (isinstance(v, dict) and set(v) == {"error"} and isinstance(v["error"], dict)):
            problems.append("not {\"error\":{...}}: %s" % json.dumps(v)[:150])
        else:
            e = v["error"]
            if set(e) != {"code", "message"} or not isinstance(e.get("code"), str) or \
                    not e.get("code") or not isinstance(e.get("message"), str) or not e.get("message"):
                problems.append("error object is not {code, message} strings: %s" % json.dumps(e)[:150])
    elif shape == "json":
        pass
    elif shape in ("dq_ok", "dq_fail"):
        # The Redis delay queue (seeds/001): always HTTP 200 with
        # {"code":200,"message":"","data":...} or {"code":500,"message":"<error>","data":null}.
        if resp.status != 200:
            problems.append("HTTP %d, the delay queue answers 200 always" % resp.status)
        if not (isinstance(v, dict) and {"code", "message", "data"} <= set(v)):
            problems.append("not {code, message, data}: %s" % json.dumps(v)[:150])
        elif shape == "dq_ok":
            if v["code"] != 200 or v["message"] != "":
                problems.append("success must be code 200, message \"\": got code %r message %r"
                                % (v["code"], v["message"]))
        else:
            if v["code"] != 500 or not isinstance(v["message"], str) or not v["message"] or \
                    v["data"] is not None:
                problems.append("failure must be code 500, a message, data null: got %s"
                                % json.dumps(v)[:150])
    elif shape == "orig_ok":
        if not (isinstance(v, dict) and v.get("success") is True):
            problems.append("the original's success needs \"success\":true: %s" % json.dumps(v)[:150])
    elif shape == "orig_fail":
        # Stricter reading: the error object is {code, message} as everywhere.
        if not (isinstance(v, dict) and v.get("success") is False and isinstance(v.get("error"), dict)
                and isinstance(v["error"].get("code"), str) and isinstance(v["error"].get("message"), str)):
            problems.append("the original's failure needs \"success\":false and an error "
                            "{code, message}: %s" % json.dumps(v)[:150])
    return problems


def json_of(resp):
    try:
        return strict_json(resp.body)
    except Exception:
        return None


def describe(resp):
    if resp is None:
        return "no answer"
    s = str(resp.status)
    v = json_of(resp) if resp.body else None
    if isinstance(v, dict):
        if isinstance(v.get("error"), dict) and isinstance(v["error"].get("code"), str):
            s += " " + v["error"]["code"]
        elif "code" in v and "message" in v:
            s += " code=%s" % v.get("code")
    return s


# --------------------------------------------------------------------------
# The fixture


class SeedError(Exception):
    pass


def seed(srv, soon_ms, headers=()):
    """Jobs in every state in topic alpha, and a second topic beta; returns
    s1's token. Everything through the API. soon_ms None: `soon` is put
    ready (when the server itself promotes due jobs in the background, the
    trap cannot work)."""
    r = srv.redis()
    r.flushall()
    port = srv.port
    h = list(headers)

    def call(method, target, obj=None, want=(200, 201)):
        body = None if obj is None else json.dumps(obj)
        resp, j = simple(port, method, target, body, h)
        if resp.status not in want:
            raise SeedError("%s %s -> %d %r" % (method, target, resp.status, resp.body[:200]))
        return j

    def reserve_one(expect_id):
        j = call("POST", "/v1/topics/alpha/reserve", {"count": 1, "ttr_ms": 3600000})
        jobs = j.get("jobs") if isinstance(j, dict) else None
        if not jobs or jobs[0].get("id") != expect_id:
            raise SeedError("reserve for %s got %r" % (expect_id, j))
        return jobs[0]["token"]

    call("PUT", "/v1/topics/alpha/jobs/s1", {"body": "reserved one"})
    token = reserve_one("s1")
    call("PUT", "/v1/topics/alpha/jobs/x1", {"body": "dead one", "attempts": 3})
    t = reserve_one("x1")
    call("POST", "/v1/topics/alpha/jobs/x1/fail", {"token": t, "error": "boom", "dead": True})
    call("PUT", "/v1/topics/alpha/jobs/k1", {"body": "done one"})
    t = reserve_one("k1")
    call("POST", "/v1/topics/alpha/jobs/k1/ack", {"token": t, "keep_ms": 3600000})
    call("PUT", "/v1/topics/alpha/jobs/r1", {"body": "ready one", "priority": 5})
    call("PUT", "/v1/topics/alpha/jobs/d1", {"body": "far away", "delay_ms": 31536000000})
    if soon_ms is None:
        call("PUT", "/v1/topics/alpha/jobs/soon", {"body": "due soon"})
    else:
        call("PUT", "/v1/topics/alpha/jobs/soon", {"body": "due soon", "delay_ms": soon_ms})
    call("PUT", "/v1/topics/beta/jobs/b1", {"body": "beta ready"})
    call("PUT", "/v1/topics/beta/jobs/b2", {"body": "beta later", "delay_ms": 31536000000})
    return token


def in_set(r, key, job_id):
    """Whether job_id is a member of the delayed or ready set: its member
    there is the put sequence (7 bytes) and priority (2 bytes) before the id
    (library version 9; docs/redis-api.md, Keyspace), or the id alone
    (version 8). Also an entry of the ready list (version 17) or the
    delayed list (version 18): the due time (6 bytes) before such a member."""
    want = job_id.encode()
    if any(m == want or m[9:] == want for m in r.zrange(key, 0, -1)):
        return True
    base, _, state = key.rpartition(":")
    lst = base + (":queue" if state == "ready" else ":later")
    return any(e[15:] == want for e in r.lrange(lst, 0, -1))


def fixture_intact(srv, token, trap=True):
    """Checked in Redis itself: is every fixture job where it was put, and is
    `soon` due but not yet made ready (so that a refused request that wrongly
    runs a promotion changes the keyspace)?"""
    r = srv.redis()
    p = "redisched:{alpha}:"
    try:
        return (in_set(r, p + "ready", "r1")
                and in_set(r, p + "delayed", "d1")
                and in_set(r, p + ("delayed" if trap else "ready"), "soon")
                and r.zscore(p + "reserved", b"s1\x00" + str(token).encode()) is not None
                and r.zscore(p + "dead", "x1") is not None
                and r.zscore(p + "done", "k1") is not None
                and in_set(r, "redisched:{beta}:ready", "b1"))
    except Exception:
        return False


# --------------------------------------------------------------------------
# The runner


class Ctx:
    def __init__(self, servers, verbose=False, soon_ms=2000):
        self.servers = servers          # name -> Serve
        self.verbose = verbose
        self.token = {}                 # server name -> s1's token
        self.soon_due = {}              # server name -> monotonic time soon is due
        self.dumps = {}                 # server name -> the last dump
        self.dirty = set()              # servers whose fixture must be seeded again
        self.soon_ms = soon_ms
        self.results = []               # (case, ok, observed, failures)
        self.trap = {}                  # server name -> False: `soon` is put ready

    def headers_for(self, name):
        return [AUTH_HEADER] if self.servers[name].token else []

    def fill(self, srv, data):
        tok = self.token.get(srv.name)
        if tok is not None:
            data = data.replace(TOKB, str(tok).encode()).replace(TOK_WRONGB, str(tok + 1000).encode())
        return data

    def seed(self, name, soon_ms=None):
        srv = self.servers[name]
        ms = self.soon_ms if soon_ms is None else soon_ms
        if not self.trap.get(name, True):
            ms = None
        self.token[name] = seed(srv, ms, self.headers_for(name))
        self.soon_due[name] = time.monotonic() + (ms or 0) / 1000.0 + 0.05
        self.dumps.pop(name, None)
        self.dirty.discard(name)
        self.seeds = getattr(self, "seeds", 0) + 1

    def ready(self, name):
        """The server runs and its fixture is intact, with `soon` due."""
        srv = self.servers[name]
        if not srv.alive():
            srv.restart()
            self.dirty.add(name)
        if name in self.dirty:
            self.seed(name, soon_ms=150)
        wait = self.soon_due.get(name, 0) - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if name not in self.dumps:
            self.dumps[name] = dump_keyspace(srv.redis())
        return srv

    def run(self, case):
        t0 = time.monotonic()
        srv = self.ready(case.server)
        t1 = time.monotonic()
        before = self.dumps[case.server]
        failures = []
        observed = ""
        try:
            if case.run is not None:
                observed, failures = case.run(self, srv)
            else:
                observed, failures = standard(self, srv, case)
        except Exception as e:  # a bug of the case, or a broken connection
            failures.append("case raised %s: %s" % (type(e).__name__, e))
            observed = observed or "exception"
        time.sleep(0.01)
        if not srv.alive():
            failures.append("SERVER DIED: %s; log: %s" % (srv.died_how(), srv.log_tail(600)))
            observed += " [server died]"
            self.dirty.add(case.server)
            self.dumps.pop(case.server, None)
        else:
            try:
                after = dump_keyspace(srv.redis())
            except Exception as e:
                failures.append("cannot dump the keyspace: %s" % e)
                after = None
            if after is not None:
                if case.unchanged and after != before:
                    failures.append("keyspace changed by a refused request: " + diff_dumps(before, after))
                self.dumps[case.server] = after
                if after != before and not fixture_intact(srv, self.token.get(case.server),
                                                          self.trap.get(case.server, True)):
                    self.dirty.add(case.server)
        if case.after is not None:
            try:
                case.after(self, srv)
            except Exception as e:
                failures.append("clean-up raised %s: %s" % (type(e).__name__, e))
            self.dumps.pop(case.server, None)
        ok = not failures
        case.took = (t1 - t0, time.monotonic() - t1)  # (setting up, the case)
        self.results.append((case, ok, observed, failures))
        if not ok:
            print("FAIL %s: expected %s, got %s -- %s" % (
                case.name, case.expected_text(), observed, "; ".join(failures)[:700]), flush=True)
        elif self.verbose:
            print("ok   %s: %s" % (case.name, observed), flush=True)
        return ok


def check_answer(case, resp, status_set=None, shape=None, method=None):
    """The checks of one answer: status, body shape, Allow, WWW-Authenticate."""
    failures = []
    status_set = case.expect if status_set is None else status_set
    shape = case.shape if shape is None else shape
    method = case.method if method is None else method
    if status_set is not None and resp.status not in status_set:
        failures.append("status %d" % resp.status)
    if method != "HEAD" and shape != "stream":
        failures += shape_problems(shape if resp.status >= 400 or shape != "error" else "json", resp)
        ct = (resp.header("content-type") or "").lower()
        if ct.startswith("application/json") and shape in ("none",):
            try:
                strict_json(resp.body)
            except ValueError as e:
                failures.append("JSON answer not valid: %s" % e)
    if resp.status == 405 and case.allow is not None:
        allow = resp.header("allow")
        if allow is None:
            failures.append("405 without an Allow header")
        else:
            got = {m.strip() for m in allow.split(",") if m.strip()}
            if not (case.allow <= got <= case.allow | case.allow_optional):
                failures.append("Allow: %s (want %s)" % (
                    allow, ", ".join(sorted(case.allow)) +
                    (" [+ maybe %s]" % ", ".join(sorted(case.allow_optional)) if case.allow_optional else "")))
    if case.www_auth:
        w = resp.header("www-authenticate") or ""
        if not w.lower().startswith("bearer"):
            failures.append("no WWW-Authenticate: Bearer (got %r)" % w)
    return failures


def standard(ctx, srv, case):
    data = case.send(ctx, srv) if callable(case.send) else case.send
    c = Conn(srv.port)
    failures = []
    try:
        c.send(data)
        if case.half_close:
            c.shutdown_write()
        try:
            resp = c.read_response(case.method, case.timeout if not case.garbage else 1.5,
                                   head_only=case.shape == "stream")
            if resp is None and case.garbage and not c.eof:
                # Maybe a valid-looking prefix: the server waits for more.
                # End our side; it must then answer or close.
                c.shutdown_write()
                resp = c.read_response(case.method, 3.0)
        except Malformed as e:
            return "malformed answer", ["malformed answer: %s" % e]
        if resp is None:
            if case.garbage and c.eof:
                return "closed", []
            return ("closed without an answer" if c.eof else "no answer in %.1f s" % case.timeout), \
                ["no answer"]
        observed = describe(resp)
        if case.garbage:
            if resp.status < 400:
                failures.append("garbage answered %d" % resp.status)
            else:
                failures += shape_problems("error", resp)
            return observed, failures
        failures += check_answer(case, resp)
        if case.check is not None:
            failures += case.check(ctx, resp, json_of(resp))
        # Pipelined answers.
        for i in range(1, case.answers):
            try:
                nxt = c.read_response("GET", case.timeout)
            except Malformed as e:
                failures.append("answer %d malformed: %s" % (i + 1, e))
                break
            if nxt is None:
                failures.append("answer %d missing" % (i + 1))
                break
            observed += ", " + describe(nxt)
            want = case.then[i - 1] if i - 1 < len(case.then) else None
            if want is not None:
                failures += ["answer %d: %s" % (i + 1, f) for f in
                             check_answer(case, nxt, status_set=set(want) if not isinstance(want, int)
                                          else {want}, shape="error" if (want if isinstance(want, int)
                                                                        else min(want)) >= 400 else "json",
                                          method="GET")]
        if case.method == "HEAD":
            # The next bytes must not be a body.
            if c.wait_close(0.3) == "data":
                failures.append("bytes after the HEAD answer (a body?): %r" % c.buf[:80])
        if case.close:
            state = c.wait_close(2.5)
            if state == "data":
                extra = c.buf[:120]
                try:
                    nxt = c.read_response("GET", 1.0)
                    extra = describe(nxt)
                except Malformed:
                    pass
                failures.append("a second answer came after it (smuggled request run?): %s" % (extra,))
                observed += " + second answer"
            elif state == "open":
                failures.append("connection left open after the answer")
                observed += " (left open)"
            else:
                observed += ", closed"
        return observed, failures
    finally:
        c.close()


def check_background(ctx):
    """Before the cases: an idle server writes nothing. Waits until every
    fixture's `soon` is due, dumps, waits past the server's background period
    (a census of every topic at most 5 s old), dumps again. Where the server promoted `soon` itself, the trap is
    off for the rest of the run (the fixture puts it ready), so that the
    server's own writes do not show up as every later case's fault."""
    wait = max(ctx.soon_due.values()) - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    first = {n: dump_keyspace(s.redis()) for n, s in ctx.servers.items()}
    # Longer than the server's background census age (5 s); ends early once
    # every server has promoted `soon` by itself.
    end = time.monotonic() + 6.0
    while time.monotonic() < end:
        if all(not fixture_intact(s, ctx.token[n]) for n, s in ctx.servers.items()):
            break
        time.sleep(0.1)
    for name, srv in ctx.servers.items():
        second = dump_keyspace(srv.redis())
        failures = []
        if second != first[name]:
            failures.append("the idle server changed the keyspace: " + diff_dumps(first[name], second))
        if not fixture_intact(srv, ctx.token[name]):
            failures.append("the due job `soon` was promoted with no request (a background stats/list?)")
            ctx.trap[name] = False
            ctx.dirty.add(name)
        case = Case("background/%s-idle-writes-nothing" % name, None)
        ctx.results.append((case, not failures, "changed" if failures else "unchanged", failures))
        if failures:
            print("FAIL %s: expected no writes, got -- %s" % (case.name, "; ".join(failures)), flush=True)
        ctx.dumps[name] = second
