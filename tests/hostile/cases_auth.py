"""The --token s3cret instance: every route but /healthz and the dashboard
files needs the bearer token; refusals change nothing."""

import time

from core import TOK, Case, R, describe
from harness import Conn, Malformed, request

ROUTES = [
    ("topics", "GET", "/v1/topics", None),
    ("stats", "GET", "/v1/topics/alpha", None),
    ("list", "GET", "/v1/topics/alpha/jobs?state=ready", None),
    ("get", "GET", "/v1/topics/alpha/jobs/r1", None),
    ("head-job", "HEAD", "/v1/topics/alpha/jobs/r1", None),
    ("put", "PUT", "/v1/topics/alpha/jobs/new1", '{"body":"x"}'),
    ("post", "POST", "/v1/topics/alpha/jobs", '{"body":"x"}'),
    ("delete", "DELETE", "/v1/topics/alpha/jobs/r1", None),
    ("reserve", "POST", "/v1/topics/alpha/reserve", '{"count":1}'),
    ("pull", "POST", "/v1/topics/alpha/pull", '{"count":1}'),
    ("ack", "POST", "/v1/topics/alpha/jobs/s1/ack", '{"token":%d}' % TOK),
    ("kick", "POST", "/v1/topics/alpha/kick", '{"all":true}'),
    ("pause", "POST", "/v1/topics/alpha/pause", None),
    ("webhook-put", "PUT", "/v1/topics/alpha/webhook", '{"url":"http://127.0.0.1:9/"}'),
    ("webhook-get", "GET", "/v1/topics/alpha/webhook", None),
    ("metrics", "GET", "/metrics", None),
    ("push", "POST", "/push", '{"topic":"alpha","body":"x"}'),
    ("pop", "GET", "/pop?topic=alpha", None),
    ("finish", "GET", "/finish?job_id=s1", None),
    ("schedule", "POST", "/schedule/alpha", '{"id":"r1","delay":0}'),
    ("cancel", "POST", "/cancel/alpha", '{"id":"r1"}'),
    ("events", "GET", "/v1/events", None),
    ("unknown-path", "GET", "/nowhere", None),
]

BAD_CREDENTIALS = [
    ("none", []),
    ("wrong", ["Authorization: Bearer wrong"]),
    ("prefix", ["Authorization: Bearer s3cre"]),
    ("suffix", ["Authorization: Bearer s3cretX"]),
    ("basic", ["Authorization: Basic czNjcmV0"]),
    ("no-scheme", ["Authorization: s3cret"]),
    ("scheme-only", ["Authorization: Bearer"]),
    ("empty", ["Authorization:"]),
    ("token-in-query", []),  # ?token= works only for /v1/events
    ("nul-suffix", [b"Authorization: Bearer s3cret\x00"]),
    ("case-of-token", ["Authorization: Bearer S3CRET"]),
]


def auth_cases():
    c = []
    for rname, method, target, body in ROUTES:
        for cname, headers in BAD_CREDENTIALS:
            t = target
            if cname == "token-in-query":
                t += ("&" if "?" in t else "?") + "token=s3cret"
                if rname == "events":
                    continue
            # A NUL in a header is refused by the HTTP layer (400) or as a bad token (401).
            want = {400, 401} if cname == "nul-suffix" else {401}
            c.append(R("auth/%s/%s" % (rname, cname), method, t, body, headers=headers, expect=want,
                       server="auth", www_auth=cname != "nul-suffix"))
    # Two Authorization headers, one of them right: refused (stricter reading).
    c.append(R("auth/topics/two-headers", "GET", "/v1/topics",
               headers=["Authorization: Bearer wrong", "Authorization: Bearer s3cret"],
               expect={400, 401}, server="auth"))
    c.append(R("auth/topics/two-headers-right-first", "GET", "/v1/topics",
               headers=["Authorization: Bearer s3cret", "Authorization: Bearer wrong"],
               expect={400, 401}, server="auth"))
    # The event stream's query token.
    for name, q in (("wrong", "wrong"), ("prefix", "s3cre"), ("suffix", "s3cretX"), ("empty", ""),
                    ("encoded-nul", "s3cret%00"), ("two-params-wrong-first", "wrong&token=s3cret")):
        c.append(R("auth/events-query/%s" % name, "GET", "/v1/events?token=" + q, expect=401, server="auth",
                   www_auth=True))
    # Needs no token.
    for name, target in (("healthz", "/healthz"), ("root", "/"), ("index", "/index.html"),
                         ("app-js", "/app.js"), ("style-css", "/style.css")):
        c.append(R("auth/open/%s" % name, "GET", target, expect=200, server="auth",
                   shape="json" if name == "healthz" else "none", unchanged=name == "healthz"))
    # The right token works, the scheme in any case (RFC 9110 11.1: case-insensitive).
    for name, h in (("bearer", "Authorization: Bearer s3cret"), ("lowercase-scheme", "Authorization: bearer s3cret"),
                    ("uppercase-scheme", "Authorization: BEARER s3cret"),
                    ("lowercase-header-name", "authorization: Bearer s3cret")):
        c.append(R("auth/ok/topics-%s" % name, "GET", "/v1/topics", headers=[h], expect=200, server="auth"))
        c.append(R("auth/ok/get-%s" % name, "GET", "/v1/topics/alpha/jobs/r1", headers=[h], expect=200,
                   server="auth"))
    c.append(R("auth/ok/put", "PUT", "/v1/topics/authok/jobs/a", '{"body":"x"}',
               headers=["Authorization: bearer s3cret"], expect=201, server="auth"))
    c.append(R("auth/ok/metrics", "GET", "/metrics", headers=["Authorization: Bearer s3cret"], expect=200,
               server="auth", shape="none"))
    c.append(Case("auth/ok/events-query-token", None, run=events_runner("/v1/events?token=s3cret", []),
                  server="auth", unchanged=False, after=settle))
    c.append(Case("auth/ok/events-lowercase-scheme", None,
                  run=events_runner("/v1/events", ["Authorization: bearer s3cret"]),
                  server="auth", unchanged=False, after=settle))
    return c


def events_runner(target, headers):
    def run(ctx, srv):
        c = Conn(srv.port)
        try:
            c.send(request("GET", target, None, headers))
            try:
                r = c.read_response("GET", 5.0, head_only=True)
            except Malformed as e:
                return "malformed", ["malformed answer: %s" % e]
            if r is None:
                return "no answer", ["no answer"]
            f = []
            if r.status != 200:
                f.append("status %d" % r.status)
            elif not (r.header("content-type") or "").startswith("text/event-stream"):
                f.append("Content-Type %r" % r.header("content-type"))
            return describe(r), f
        finally:
            c.close()
    return run


def settle(ctx, srv):
    # The stream's next tick (1 s) reads every topic's stats after we closed;
    # let it pass so that it does not change a later case's keyspace.
    time.sleep(1.3)
    ctx.dirty.add(srv.name)


def cases():
    return auth_cases()
