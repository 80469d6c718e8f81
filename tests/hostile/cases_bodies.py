"""Bodies and numbers on every /v1 route that takes a body; tokens; puts."""

import json

from core import TOK, TOK_WRONG, J, R

# Every route with a body: (method, target, a valid body). The bodies aim at
# the fixture so that a wrongly accepted request changes something visible:
# the put upserts r1, the token routes carry s1's real token.
ROUTES = {
    "put": ("PUT", "/v1/topics/alpha/jobs/r1", {"mode": "upsert", "body": "x"}),
    "post": ("POST", "/v1/topics/alpha/jobs", {"body": "x"}),
    "reserve": ("POST", "/v1/topics/alpha/reserve", {"count": 1}),
    "pull": ("POST", "/v1/topics/alpha/pull", {"count": 1}),
    "ack": ("POST", "/v1/topics/alpha/jobs/s1/ack", {"token": TOK}),
    "release": ("POST", "/v1/topics/alpha/jobs/s1/release", {"token": TOK}),
    "fail": ("POST", "/v1/topics/alpha/jobs/s1/fail", {"token": TOK, "error": "e"}),
    "touch": ("POST", "/v1/topics/alpha/jobs/s1/touch", {"token": TOK}),
    "kick": ("POST", "/v1/topics/alpha/kick", {"ids": ["x1"]}),
    "pause": ("POST", "/v1/topics/alpha/pause", {}),
    "resume": ("POST", "/v1/topics/alpha/resume", {}),
    "webhook": ("PUT", "/v1/topics/hook/webhook", {"url": "http://127.0.0.1:9/hook"}),
}

# A field of each route to carry a bad value in the malformed-JSON cases.
NUM_FIELD = {"put": "priority", "post": "priority", "reserve": "count", "pull": "count", "ack": "keep_ms",
             "release": "delay_ms", "fail": "token", "touch": "ttr_ms", "kick": "limit", "pause": "x",
             "resume": "x", "webhook": "concurrency"}
STR_FIELD = {"put": "body", "post": "body", "fail": "error", "webhook": "url"}


def drop_webhook(ctx, srv):
    """After a webhook case: no subscription may stay (a wrongly accepted one
    would start delivering jobs)."""
    from harness import simple
    simple(srv.port, "DELETE", "/v1/topics/hook/webhook", None, ctx.headers_for(srv.name))


def enc(obj):
    return json.dumps(obj, separators=(",", ":"))


def body_case(name, route, text, expect=400, **kw):
    method, target, _ = ROUTES[route]
    if route == "webhook":
        kw.setdefault("after", drop_webhook)
    return R(name, method, target, text, expect=expect, **kw)


def malformed_cases():
    c = []
    for route, (method, target, base) in ROUTES.items():
        b = enc(base)
        f = NUM_FIELD[route]
        with_num = lambda v: enc(dict(base))[:-1] + ("," if base else "") + '"%s":%s}' % (f, v)
        variants = [
            ("truncated", b[:-1]),
            ("truncated-mid-string", b[:len(b) // 2] if len(b) > 4 else '{"a'),
            ("trailing-garbage", b + "x"),
            ("trailing-second-object", b + "{}"),
            ("trailing-nul", b + "\x00"),
            ("nan", with_num("NaN")),
            ("infinity", with_num("Infinity")),
            ("minus-infinity", with_num("-Infinity")),
            ("exponent-overflow", with_num("1E400")),
            ("block-comment", "/* c */" + b),
            ("line-comment", b[:-1] + "//c\n}"),
            ("single-quotes", b.replace('"', "'") if base else "{'a':1}"),
            ("unquoted-key", "{%s:1}" % f),
            ("trailing-comma", b[:-1] + ",}" if base else "{,}"),
            ("nested-100000-deep", b[:-1] + ("," if base else "") + '"%s":' % f + "[" * 100000 + "]" * 100000 + "}"),
            ("duplicate-key", "{" + (b[1:-1] + "," + b[1:-1] if base else '"a":1,"a":1') + "}"),
            ("top-level-array", "[" + b + "]"),
            ("top-level-string", '"x"'),
            ("top-level-number", "1"),
            ("top-level-null", "null"),
            ("whitespace-only", "   "),
            ("bom", "\ufeff" + b),
        ]
        for vname, text in variants:
            c.append(body_case("json/%s/%s" % (route, vname), route, text))
        # Invalid UTF-8 inside a string (raw bytes, not escapes).
        sf = STR_FIELD.get(route)
        if sf:
            o = dict(base)
            o[sf] = "@@"
            raw = enc(o).encode().replace(b"@@", b"ok\xff\xfe")
        else:
            raw = b[:-1].encode() + (b"," if base else b"") + b'"k\xc3\x28":1}'
        c.append(body_case("json/%s/invalid-utf8-in-string" % route, route, raw))
        if sf:
            o = dict(base)
            o[sf] = "@@"
            for vname, bad in (("overlong", b"\xc0\xaf"), ("surrogate-bytes", b"\xed\xa0\x80")):
                c.append(body_case("json/%s/%s-utf8-in-string" % (route, vname), route,
                                   enc(o).encode().replace(b"@@", bad)))
            o[sf] = "\ud800"
            c.append(body_case("json/%s/lone-surrogate-escape" % route, route, json.dumps(o)))
    return c


def unknown_field_cases():
    c = []
    for route, (method, target, base) in ROUTES.items():
        o = dict(base)
        o["bogus"] = 1
        c.append(body_case("fields/%s/unknown-field" % route, route, enc(o)))
    for route, key in (("put", "Priority"), ("reserve", "Count"), ("ack", "Token"), ("kick", "IDS")):
        o = dict(ROUTES[route][2])
        o[key] = 1
        c.append(body_case("fields/%s/field-name-case-%s" % (route, key), route, enc(o)))
    c.append(body_case("fields/put/backoff-unknown-field", "put",
                       enc({"mode": "upsert", "body": "x", "backoff": {"kind": "fixed", "bogus": 1}})))
    c.append(body_case("fields/put/body-and-body-base64", "put",
                       enc({"mode": "upsert", "body": "x", "body_base64": "QQ=="})))
    c.append(body_case("fields/put/delay-and-due-at", "put",
                       enc({"mode": "upsert", "body": "x", "delay_ms": 1, "due_at_ms": 1})))
    c.append(body_case("fields/put/backoff-cap-below-base", "put",
                       enc({"mode": "upsert", "body": "x", "backoff": {"base_ms": 5000, "cap_ms": 10}})))
    c.append(body_case("fields/put/backoff-kind-linear", "put",
                       enc({"mode": "upsert", "body": "x", "backoff": {"kind": "linear"}})))
    for m in ("CREATE", "", "upsert ", "delete"):
        c.append(body_case("fields/put/mode-%s" % (m.strip() or "empty"), "put", enc({"mode": m, "body": "x"})))
    c.append(body_case("fields/post/mode-upsert", "post", enc({"mode": "upsert", "body": "x"})))
    c.append(body_case("fields/kick/empty-ids", "kick", enc({"ids": []})))
    c.append(body_case("fields/kick/nothing", "kick", "{}"))
    c.append(body_case("fields/kick/all-false", "kick", enc({"all": False})))
    c.append(body_case("fields/kick/ids-and-all", "kick", enc({"ids": ["x1"], "all": True})))
    for name, url in (("ftp", "ftp://127.0.0.1/x"), ("empty", ""), ("no-host", "http://"),
                      ("javascript", "javascript:alert(1)"), ("crlf-injection", "http://127.0.0.1:9/a\r\nX-Evil: 1"),
                      ("space", "http://127.0.0.1:9/a b"), ("relative", "/hook"), ("https-no-host", "https://")):
        c.append(body_case("fields/webhook/url-%s" % name, "webhook", enc({"url": url})))
    c.append(body_case("fields/webhook/url-missing", "webhook", enc({"concurrency": 2})))
    return c


# Wrong types: field -> the route it is on, and a base body to add it to.
TYPED = [
    # (route, field, kind) kind: int | str | bool | obj | arr
    ("put", "body", "str"), ("put", "body_base64", "str"), ("put", "delay_ms", "int"),
    ("put", "due_at_ms", "int"), ("put", "priority", "int"), ("put", "ttr_ms", "int"),
    ("put", "attempts", "int"), ("put", "backoff", "obj"), ("put", "mode", "str"),
    ("post", "body", "str"), ("post", "priority", "int"),
    ("reserve", "count", "int"), ("reserve", "ttr_ms", "int"), ("reserve", "wait_ms", "int"),
    ("pull", "count", "int"),
    ("ack", "token", "int"), ("ack", "keep_ms", "int"),
    ("release", "token", "int"), ("release", "delay_ms", "int"), ("release", "priority", "int"),
    ("fail", "token", "int"), ("fail", "error", "str"), ("fail", "dead", "bool"),
    ("touch", "token", "int"), ("touch", "ttr_ms", "int"),
    ("kick", "ids", "arr"), ("kick", "all", "bool"), ("kick", "limit", "int"),
    ("webhook", "url", "str"), ("webhook", "concurrency", "int"), ("webhook", "timeout_ms", "int"),
]
WRONG = {
    "int": [("string", "5"), ("bool", True), ("array", [5]), ("object", {"n": 5})],
    "str": [("number", 42), ("bool", True), ("array", ["x"]), ("object", {"s": "x"})],
    "bool": [("string", "true"), ("number", 1), ("array", [True])],
    "obj": [("string", "fixed"), ("number", 1), ("array", [])],
    "arr": [("string", "x1"), ("number", 1), ("object", {"x1": 1}), ("array-of-numbers", [1]),
            ("array-of-null", [None]), ("array-of-arrays", [["x1"]])],
}
REQUIRED = {("ack", "token"), ("release", "token"), ("fail", "token"), ("touch", "token"),
            ("webhook", "url"), ("kick", "ids")}


def type_cases():
    c = []
    for route, field, kind in TYPED:
        base = dict(ROUTES[route][2])
        if route == "kick" and field in ("limit", "all"):
            base = {"all": True}
        values = list(WRONG[kind])
        if (route, field) in REQUIRED:
            values.append(("null", None))
        if route == "put" and field == "body_base64":
            base.pop("body", None)
        for vname, v in values:
            o = dict(base)
            o[field] = v
            c.append(body_case("types/%s/%s-%s" % (route, field, vname), route, enc(o)))
    for route in ("ack", "release", "fail", "touch"):
        c.append(body_case("types/%s/token-missing" % route, route, "{}"))
    return c


# Ranges (docs/http-api.md and the code's documented limits). The token has no
# documented maximum: stricter reading, it must be an exact integer Redis's
# Lua can hold, 1 .. 2^53-1 (so 1e18 is refused there as everywhere).
RANGES = [
    ("put", "delay_ms", 0, 315576000000), ("put", "due_at_ms", 0, 8796093022207),
    # a put's ttr_ms 0: delivered at most once (library 10)
    ("put", "priority", -4294966295, 1000), ("put", "ttr_ms", 0, 604800000), ("put", "attempts", 1, 1000),
    ("put", "backoff.base_ms", 0, 315576000000), ("put", "backoff.cap_ms", 0, 315576000000),
    ("post", "priority", -4294966295, 1000), ("post", "attempts", 1, 1000),
    ("reserve", "count", 1, 1000), ("reserve", "ttr_ms", 1, 604800000), ("reserve", "wait_ms", 0, 60000),
    ("pull", "count", 1, 1000),
    ("ack", "token", 1, 2 ** 53 - 1), ("ack", "keep_ms", 0, 315576000000),
    ("release", "token", 1, 2 ** 53 - 1), ("release", "delay_ms", 0, 315576000000),
    ("release", "priority", -4294966295, 1000),
    ("fail", "token", 1, 2 ** 53 - 1),
    ("touch", "token", 1, 2 ** 53 - 1), ("touch", "ttr_ms", 1, 604800000),
    ("kick", "limit", 1, 10000),
    # timeout_ms: the range of --webhook-timeout.
    ("webhook", "concurrency", 1, 1000), ("webhook", "timeout_ms", 1, 600000),
]
EXTREMES = ["1e400", "-0.5", "1.5", "18446744073709551615", "9223372036854775808",
            "-9223372036854775809", "1e18", "-1e400"]


def range_cases():
    c = []
    for route, field, lo, hi in RANGES:
        base = dict(ROUTES[route][2])
        if route == "kick":
            base = {"all": True}
        values = [("below-min", str(lo - 1)), ("above-max", str(hi + 1))]
        if lo > 0:
            values.append(("negative", "-1"))
        if hi < 4294967297:
            values.append(("4294967297", "4294967297"))  # wraps to 1 in 32 bits
        values += [(v, v) for v in EXTREMES]
        for vname, v in values:
            if field.startswith("backoff."):
                sub = field.split(".")[1]
                o = dict(base)
                o["backoff"] = {"kind": "exponential", sub: "@@"}
                if sub == "base_ms":
                    o["backoff"]["cap_ms"] = 315576000000
                text = enc(o).replace('"@@"', v)
            else:
                o = dict(base)
                o[field] = "@@"
                text = enc(o).replace('"@@"', v)
            c.append(body_case("range/%s/%s=%s" % (route, field, vname), route, text))
    # In range at the edges: accepted (on topics of their own).
    c.append(J("range/put/edges-accepted", "PUT", "/v1/topics/edges/jobs/e1",
               {"body": "x", "delay_ms": 315576000000, "priority": 1000, "ttr_ms": 604800000,
                "attempts": 1000, "backoff": {"kind": "fixed", "base_ms": 0, "cap_ms": 315576000000}},
               expect=201))
    c.append(J("range/put/zero-edges-accepted", "PUT", "/v1/topics/edges/jobs/e2",
               {"body": "x", "delay_ms": 0, "priority": 0, "ttr_ms": 1, "attempts": 1}, expect=201))
    return c


BASE64_BAD = [("pad-inside", "ab=c"), ("only-padding", "===="), ("unpadded-3", "abc"),
              ("data-after-padding", "ab==x"), ("triple-padding", "a==="), ("short-padding", "QQ="),
              ("space-inside", "QQ =="), ("newline-inside", "QQ\n=="), ("url-safe", "-_8="),
              ("padding-in-middle", "QQ==QQ=="), ("single-char", "Q"), ("non-alphabet", "QQ!="),
              ("tab-inside", "QU\tJD"),
              # Stricter reading of RFC 4648 3.5: non-zero pad bits are not canonical.
              ("non-canonical-pad-bits", "QR==")]


def base64_cases():
    c = []
    for name, v in BASE64_BAD:
        c.append(body_case("base64/%s" % name, "put", enc({"mode": "upsert", "body_base64": v})))
    for name, v in BASE64_BAD[:4]:
        c.append(body_case("base64/post-%s" % name, "post", enc({"body_base64": v})))
    c.append(J("base64/QQ==-accepted", "PUT", "/v1/topics/b64/jobs/a", {"body_base64": "QQ=="}, expect=201))
    c.append(J("base64/binary-accepted", "PUT", "/v1/topics/b64/jobs/b", {"body_base64": "AAEC/wA="},
               expect=201))
    return c


def token_cases():
    c = []
    s1 = "/v1/topics/alpha/jobs/s1/"
    extra = {"ack": {}, "release": {}, "fail": {"error": "e"}, "touch": {}}
    for action in ("ack", "release", "fail", "touch"):
        o = {"token": TOK_WRONG}
        o.update(extra[action])
        c.append(J("tokens/%s-wrong-token" % action, "POST", s1 + action, o, expect=409))
        for name, v in (("zero", 0), ("negative", -1), ("string", str(TOK)), ("float", 1.5), ("bool", True)):
            o = {"token": v}
            o.update(extra[action])
            c.append(J("tokens/%s-token-%s" % (action, name), "POST", s1 + action, o, expect=400))
    # A job that does not exist: 404, and nothing changes (this ack used to
    # delete a done job).
    c.append(J("tokens/ack-nosuch-keep", "POST", "/v1/topics/alpha/jobs/nosuch/ack",
               {"token": 1, "keep_ms": 1000}, expect=404))
    c.append(J("tokens/release-nosuch", "POST", "/v1/topics/alpha/jobs/nosuch/release", {"token": 1},
               expect=404))
    c.append(J("tokens/fail-nosuch", "POST", "/v1/topics/alpha/jobs/nosuch/fail", {"token": 1}, expect=404))
    c.append(J("tokens/touch-nosuch", "POST", "/v1/topics/alpha/jobs/nosuch/touch", {"token": 1}, expect=404))
    c.append(J("tokens/ack-nosuch-new-topic", "POST", "/v1/topics/fresh/jobs/nosuch/ack",
               {"token": 1, "keep_ms": 1000}, expect=404))
    # Jobs in other states: 409 wrong_state, nothing changes.
    for jid, state in (("r1", "ready"), ("d1", "delayed"), ("x1", "dead"), ("k1", "done")):
        c.append(J("tokens/ack-%s-job" % state, "POST", "/v1/topics/alpha/jobs/%s/ack" % jid,
                   {"token": 1, "keep_ms": 1000}, expect=409))
        c.append(J("tokens/release-%s-job" % state, "POST", "/v1/topics/alpha/jobs/%s/release" % jid,
                   {"token": 1}, expect=409))
    c.append(J("tokens/ack-s1-token-of-other-job", "POST", "/v1/topics/beta/jobs/s1/ack", {"token": TOK},
               expect=404))
    return c


def put_cases():
    c = []
    c.append(J("put/existing-r1-create", "PUT", "/v1/topics/alpha/jobs/r1", {"body": "other"}, expect=409))
    c.append(J("put/existing-r1-create-explicit", "PUT", "/v1/topics/alpha/jobs/r1",
               {"body": "other", "mode": "create", "priority": 9}, expect=409))
    c.append(J("put/existing-reserved-s1-create", "PUT", "/v1/topics/alpha/jobs/s1", {"body": "o"}, expect=409))
    c.append(J("put/existing-dead-x1-create", "PUT", "/v1/topics/alpha/jobs/x1", {"body": "o"}, expect=409))
    c.append(J("put/existing-done-k1-create", "PUT", "/v1/topics/alpha/jobs/k1", {"body": "o"}, expect=409))
    c.append(J("put/existing-delayed-d1-create", "PUT", "/v1/topics/alpha/jobs/d1", {"body": "o"}, expect=409))
    c.append(J("put/replace-nosuch", "PUT", "/v1/topics/alpha/jobs/nosuch", {"mode": "replace"}, expect=404))
    c.append(J("put/replace-nosuch-with-body", "PUT", "/v1/topics/alpha/jobs/nosuch",
               {"mode": "replace", "body": "x", "delay_ms": 5}, expect=404))
    c.append(J("put/replace-nosuch-new-topic", "PUT", "/v1/topics/brandnew/jobs/x", {"mode": "replace"},
               expect=404))
    c.append(R("put/delete-nosuch", "DELETE", "/v1/topics/alpha/jobs/nosuch", expect=404))
    c.append(R("put/delete-nosuch-new-topic", "DELETE", "/v1/topics/brandnew2/jobs/x", expect=404))
    c.append(R("put/get-nosuch", "GET", "/v1/topics/alpha/jobs/nosuch", expect=404))
    c.append(R("put/list-bad-state", "GET", "/v1/topics/alpha/jobs?state=bogus", expect=400))
    for name, q in (("count-0", "count=0"), ("count-1001", "count=1001"), ("count-hex", "count=0x10"),
                    ("count-plus", "count=%2B5"), ("offset-negative", "offset=-1"),
                    ("offset-huge", "offset=99999999999999999999"), ("count-empty", "count=")):
        c.append(R("put/list-%s" % name, "GET", "/v1/topics/alpha/jobs?state=ready&" + q, expect=400))
    return c


def cases():
    return (malformed_cases() + unknown_field_cases() + type_cases() + range_cases() + base64_cases() +
            token_cases() + put_cases())
