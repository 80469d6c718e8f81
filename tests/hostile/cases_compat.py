"""The original interfaces (/push, /pop, /finish; /schedule, /cancel),
/metrics and /healthz."""

import json
import subprocess

from core import Case, J, R, describe, shape_problems
from harness import Conn, dump_keyspace, request, simple


def dq_cases():
    c = []

    def push(name, text, shape="dq_fail", **kw):
        c.append(R("dq/push-%s" % name, "POST", "/push", text, expect=200, shape=shape, **kw))

    for name, text in (("malformed", "{oops"), ("truncated", '{"topic":"dq1","body":"x"'),
                       ("trailing-garbage", '{"topic":"dq1","body":"x"}x'), ("empty-body", ""),
                       ("array", '[{"topic":"dq1"}]'), ("string", '"dq1"'), ("number", "1"),
                       ("nested-deep", '{"topic":"dq1","body":' + "[" * 100000 + "]" * 100000 + "}"),
                       ("invalid-utf8", b'{"topic":"dq1","body":"\xff"}'), ("nan", '{"topic":"dq1","delay":NaN}')):
        push(name, text)
    for name, obj in (("missing-topic", {"body": "x"}), ("empty-topic", {"topic": "", "body": "x"}),
                      ("null-topic", {"topic": None, "body": "x"}), ("number-topic", {"topic": 5, "body": "x"}),
                      ("topic-with-brace", {"topic": "a{b}", "body": "x"}),
                      ("topic-129", {"topic": "t" * 129, "body": "x"}),
                      ("topic-space", {"topic": "a b", "body": "x"}),
                      ("delay-overflows-ms", {"topic": "dq1", "delay": 18446744073709552}),
                      ("delay-u64-max", {"topic": "dq1", "delay": 18446744073709551615}),
                      ("delay-i64-over", {"topic": "dq1", "delay": 9223372036854775808}),
                      ("delay-i64-max-seconds", {"topic": "dq1", "delay": 9223372036854775807}),
                      ("ttr-u64-max", {"topic": "dq1", "ttr": 18446744073709551615}),
                      ("ttr-overflows-ms", {"topic": "dq1", "ttr": 18446744073709552}),
                      ("delay-1e300", {"topic": "dq1", "delay": 1e300}),
                      # The original decoded into Go int64: a fraction or a string was an error.
                      ("delay-fraction", {"topic": "dq1", "delay": 1.5}),
                      ("delay-string", {"topic": "dq1", "delay": "10"}),
                      ("ttr-bool", {"topic": "dq1", "ttr": True}),
                      ("body-number", {"topic": "dq1", "body": 42}),
                      ("body-over-1MiB", {"topic": "dq1", "body": "b" * ((1 << 20) + 10)}),
                      ):
        push(name, json.dumps(obj))
    # Negative delay and ttr clamp to 0: a success, and the job is ready at once.
    c.append(Case("dq/push-negative-delay-clamped", None, run=run_push_negative, unchanged=False))
    for name, target in (("pop-no-query", "/pop"), ("pop-empty-topic", "/pop?topic="),
                         ("pop-bad-topic", "/pop?topic=a%20b"), ("pop-brace-topic", "/pop?topic=a%7Bb"),
                         ("pop-129-topic", "/pop?topic=" + "t" * 129),
                         ("finish-no-query", "/finish"), ("finish-empty", "/finish?job_id="),
                         ("finish-garbage", "/finish?job_id=%FF%FE%00garbage"),
                         ("finish-nosuch", "/finish?job_id=nosuch"),
                         ("finish-ready-job", "/finish?job_id=r1"),
                         ("finish-dead-job", "/finish?job_id=x1"),
                         ("finish-done-job", "/finish?job_id=k1"),
                         ("finish-257", "/finish?job_id=" + "i" * 257)):
        c.append(R("dq/%s" % name, "GET", target, expect=200, shape="dq_fail"))
    return c


def run_push_negative(ctx, srv):
    failures = []
    r, v = simple(srv.port, "POST", "/push", json.dumps({"topic": "dqneg", "delay": -5, "ttr": -1,
                                                         "body": "clamped"}))
    failures += shape_problems("dq_ok", r)
    p, pv = simple(srv.port, "GET", "/pop?topic=dqneg")
    failures += ["pop: " + f for f in shape_problems("dq_ok", p)]
    # The original's /pop answers the body itself as data.
    if not (isinstance(pv, dict) and pv.get("data") == "clamped"):
        failures.append("pop right after a push with delay -5 did not give data \"clamped\": %s"
                        % json.dumps(pv)[:150])
    return "push %s, pop %s" % (describe(r), json.dumps(pv)[:80]), failures


def orig_cases():
    c = []

    def sched(name, obj, topic="alpha", **kw):
        text = obj if isinstance(obj, (str, bytes)) else json.dumps(obj)
        c.append(R("orig/schedule-%s" % name, "POST", "/schedule/%s" % topic, text, expect=400,
                   shape="orig_fail", **kw))

    sched("malformed", "{oops")
    sched("empty-body", "")
    sched("array", '[{"id":"o1"}]')
    sched("missing-id", {"contents": {"a": 1}, "delay": 1})
    sched("empty-id", {"id": "", "delay": 1})
    sched("null-id", {"id": None, "delay": 1})
    sched("delay-abc", {"id": "o1", "delay": "abc"})
    sched("delay-1e300", {"id": "o1", "delay": 1e300})
    sched("delay-u64-max", {"id": "o1", "delay": 18446744073709551615})
    sched("delay-overflows-ms", {"id": "o1", "delay": 18446744073709552})
    sched("delay-bool", {"id": "o1", "delay": True})
    sched("delay-object", {"id": "o1", "delay": {}})
    # An existing job's id: bad input must not touch it.
    sched("r1-bad-delay", {"id": "r1", "contents": "new", "delay": "abc"})
    sched("contents-over-1MiB", {"id": "o1", "contents": "c" * ((1 << 20) + 10), "delay": 1})

    def cancel(name, obj, **kw):
        text = obj if isinstance(obj, (str, bytes)) else json.dumps(obj)
        c.append(R("orig/cancel-%s" % name, "POST", "/cancel/alpha", text, expect=400, shape="orig_fail", **kw))

    cancel("malformed", "{oops")
    cancel("empty-body", "")
    cancel("missing-id", {})
    cancel("empty-id", {"id": ""})
    cancel("id-with-nul", {"id": "a\u0000b"})
    cancel("array", '["r1"]')
    # Successes: 2xx with "success": true. Its Node server took numbers as ids
    # and ran a negative delay at once (delay * 1000 in the past): so do we.
    c.append(J("orig/schedule-number-id", "POST", "/schedule/orig", {"id": 5, "delay": 3600},
               expect={200, 201}, shape="orig_ok"))
    c.append(J("orig/schedule-delay-negative", "POST", "/schedule/orig", {"id": "neg1", "delay": -1},
               expect={200, 201}, shape="orig_ok"))
    c.append(J("orig/schedule-delay-fraction-negative", "POST", "/schedule/orig",
               {"id": "neg2", "delay": -0.5}, expect={200, 201}, shape="orig_ok"))
    c.append(J("orig/cancel-number-id", "POST", "/cancel/orig", {"id": 5},
               expect={200, 201}, shape="orig_ok"))
    c.append(J("orig/schedule-ok", "POST", "/schedule/orig", {"id": "e1", "contents": {"u": 1}, "delay": 3600},
               expect={200, 201}, shape="orig_ok"))
    # Its browser frontend sends form fields as strings, and its Node server coerced them (PRODUCT.md).
    c.append(J("orig/schedule-delay-as-string-ok", "POST", "/schedule/orig", {"id": "e2", "contents": "x",
                                                                              "delay": "3600"},
               expect={200, 201}, shape="orig_ok"))
    c.append(J("orig/cancel-ok", "POST", "/cancel/orig", {"id": "e1"}, expect=200, shape="orig_ok"))
    c.append(J("orig/cancel-absent-ok", "POST", "/cancel/orig", {"id": "never"}, expect=200, shape="orig_ok",
               unchanged=True))
    return c


# --------------------------------------------------------------------------
# /metrics and /healthz


def get_metrics(srv, ctx):
    r, _ = simple(srv.port, "GET", "/metrics", None, ctx.headers_for(srv.name))
    return r


def run_metrics_cardinality(ctx, srv):
    before = get_metrics(srv, ctx)
    paths = ["/zq%03dunknown" % i for i in range(300)]
    c = Conn(srv.port)
    try:
        # Pipelined, 30 at a time, on one connection.
        for i in range(0, 300, 30):
            c.send(b"".join(request("GET", p) for p in paths[i:i + 30]))
            for _ in range(30):
                c.read_response("GET", 5.0)
    finally:
        c.close()
    after = get_metrics(srv, ctx)
    failures = []
    grew = len(after.body) - len(before.body)
    if grew > 4096:
        failures.append("/metrics grew by %d bytes after 300 unknown paths" % grew)
    found = [p for p in paths if p[1:].encode() in after.body]
    if found:
        failures.append("/metrics names %d of the unknown paths (e.g. %s)" % (len(found), found[0]))
    return "grew %d bytes" % grew, failures


INJECT = "/a%22%2C%7D%0Ainjected_metric%7Bx%3D%221%22%7D%201%0A%23"


def run_metrics_injection(ctx, srv):
    simple(srv.port, "GET", INJECT)
    simple(srv.port, "PUT", "/v1/topics/alpha/jobs/" + INJECT[1:], '{"body":"x"}')
    simple(srv.port, "POST", "/schedule/alpha", json.dumps({"id": "a\"}\ninjected_metric{x=\"1\"} 1", "delay": 1}))
    m = get_metrics(srv, ctx)
    lines = m.body.split(b"\n")
    failures = []
    if any(line.strip() == b'injected_metric{x="1"} 1' for line in lines):
        failures.append("a request path became a metrics line: injected_metric{x=\"1\"} 1")
    return describe(m), failures


def run_promtool(ctx, srv):
    # Something in every family first: a put, a reserve, an unknown path.
    simple(srv.port, "PUT", "/v1/topics/prom/jobs/p1", '{"body":"x"}')
    simple(srv.port, "POST", "/v1/topics/prom/reserve", '{"count":1,"ttr_ms":3600000}')
    m = get_metrics(srv, ctx)
    if m.status != 200:
        return describe(m), ["/metrics answered %d" % m.status]
    ct = m.header("content-type") or ""
    failures = []
    if not ct.startswith("text/plain"):
        failures.append("Content-Type %r" % ct)
    p = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=m.body, capture_output=True,
                       timeout=30)
    if p.returncode != 0:
        failures.append("promtool check metrics exit %d: %s" % (
            p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace").strip().replace("\n", " | ")[:400]))
    return "promtool exit %d" % p.returncode, failures


def run_healthz(ctx, srv):
    before = dump_keyspace(srv.redis())
    failures = []
    for _ in range(3):
        r, v = simple(srv.port, "GET", "/healthz")
        if r.status != 200 or not isinstance(v, dict) or v.get("status") != "ok":
            failures.append("healthz answered %s %r" % (r.status, r.body[:100]))
    after = dump_keyspace(srv.redis())
    if after != before:
        failures.append("healthz changed the keyspace")
    keys = [k for k in srv.redis().scan_iter(match="*healthz*")]
    if keys:
        failures.append("keys named like healthz: %s" % keys[:3])
    return "200" if not failures else "see failures", failures


def metric_cases():
    return [
        Case("metrics/300-unknown-paths-bounded", None, run=run_metrics_cardinality, unchanged=False),
        Case("metrics/path-injection", None, run=run_metrics_injection, unchanged=False),
        Case("metrics/promtool-check", None, run=run_promtool, unchanged=False),
        Case("healthz/writes-nothing", None, run=run_healthz, unchanged=True),
    ]


def cases():
    return dq_cases() + orig_cases() + metric_cases()
