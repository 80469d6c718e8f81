"""Methods, unknown paths, topic names and ids."""

from core import J, R

GET_ONLY = {"GET", "HEAD"}  # HEAD works wherever GET does, so Allow lists it


def method_cases():
    c = []

    def m(name, method, target, allow, optional=(), body=None, **kw):
        c.append(R("method/" + name, method, target, body, expect=405, allow=allow,
                   allow_optional=optional, **kw))

    m("delete-root", "DELETE", "/", GET_ONLY)
    m("post-app-js", "POST", "/app.js", GET_ONLY, body="x")
    m("put-style-css", "PUT", "/style.css", GET_ONLY, body="x")
    m("post-index-html", "POST", "/index.html", GET_ONLY, body="x")
    # The event stream: GET; HEAD may be listed.
    m("post-events", "POST", "/v1/events", {"GET"}, {"HEAD"}, body="{}")
    m("patch-job", "PATCH", "/v1/topics/alpha/jobs/r1", {"GET", "HEAD", "PUT", "DELETE"}, body="{}")
    m("post-job", "POST", "/v1/topics/alpha/jobs/r1", {"GET", "HEAD", "PUT", "DELETE"}, body="{}")
    m("options-job", "OPTIONS", "/v1/topics/alpha/jobs/r1", {"GET", "HEAD", "PUT", "DELETE"}, {"OPTIONS"})
    m("custom-method-job", "PURGE", "/v1/topics/alpha/jobs/r1", {"GET", "HEAD", "PUT", "DELETE"})
    m("get-reserve", "GET", "/v1/topics/alpha/reserve", {"POST"})
    m("head-reserve", "HEAD", "/v1/topics/alpha/reserve", {"POST"})
    m("delete-reserve", "DELETE", "/v1/topics/alpha/reserve", {"POST"})
    m("get-pull", "GET", "/v1/topics/alpha/pull", {"POST"})
    m("get-kick", "GET", "/v1/topics/alpha/kick", {"POST"})
    m("get-pause", "GET", "/v1/topics/alpha/pause", {"POST"})
    m("put-resume", "PUT", "/v1/topics/alpha/resume", {"POST"}, body="{}")
    m("get-ack", "GET", "/v1/topics/alpha/jobs/s1/ack", {"POST"})
    m("delete-release", "DELETE", "/v1/topics/alpha/jobs/s1/release", {"POST"})
    m("put-topics", "PUT", "/v1/topics", GET_ONLY, body="{}")
    m("delete-topic", "DELETE", "/v1/topics/alpha", GET_ONLY)
    m("put-jobs-collection", "PUT", "/v1/topics/alpha/jobs", {"GET", "HEAD", "POST"}, body="{}")
    m("delete-jobs-collection", "DELETE", "/v1/topics/alpha/jobs", {"GET", "HEAD", "POST"})
    m("post-webhook", "POST", "/v1/topics/hook/webhook", {"GET", "HEAD", "PUT", "DELETE"},
      body='{"url":"http://127.0.0.1:9/"}')
    m("post-healthz", "POST", "/healthz", GET_ONLY, body="{}")
    m("delete-metrics", "DELETE", "/metrics", GET_ONLY)
    m("get-schedule", "GET", "/schedule/alpha", {"POST"}, shape=("error", "orig_fail"))
    m("get-cancel", "GET", "/cancel/alpha", {"POST"}, shape=("error", "orig_fail"))
    # The delay queue's routes: HTTP 405 here (the brief); the body may keep its own shape.
    m("get-push", "GET", "/push", {"POST"}, shape=("error", "dq_fail"))
    m("post-pop", "POST", "/pop?topic=alpha", {"GET"}, {"HEAD"}, body="{}", shape=("error", "dq_fail"))
    m("delete-finish", "DELETE", "/finish?job_id=s1", {"GET"}, {"HEAD"}, shape=("error", "dq_fail"))
    return c


def path_cases():
    c = []

    def p(name, method, target, body=None, **kw):
        c.append(R("path/" + name, method, target, body, expect=404, **kw))

    p("topic-bogus", "GET", "/v1/topics/alpha/bogus")
    p("topic-bogus-post", "POST", "/v1/topics/alpha/bogus", "{}")
    p("job-bogus", "GET", "/v1/topics/alpha/jobs/r1/bogus")
    p("job-nope-post", "POST", "/v1/topics/alpha/jobs/r1/nope", "{}")
    p("job-ack-extra", "POST", "/v1/topics/alpha/jobs/s1/ack/extra", '{"token":%d}' % 987654321987)
    p("job-ack-trailing-slash", "POST", "/v1/topics/alpha/jobs/s1/ack/", '{"token":%d}' % 987654321987)
    p("v1-nope", "GET", "/v1/nope")
    p("v1", "GET", "/v1")
    p("v1-slash", "GET", "/v1/")
    p("nowhere", "GET", "/nowhere")
    p("favicon", "GET", "/favicon.ico")
    p("app-js-uppercase", "GET", "/APP.JS")
    p("index-html-slash", "GET", "/index.html/")
    p("healthz-sub", "GET", "/healthz/x")
    p("metrics-slash", "GET", "/metrics/")
    p("push-sub", "POST", "/push/x", '{"topic":"t"}')
    p("schedule-no-topic", "POST", "/schedule", '{"id":"x"}')
    p("schedule-extra", "POST", "/schedule/alpha/x", '{"id":"x"}')
    p("dot-dot", "GET", "/v1/topics/alpha/jobs/../../../metrics/x")
    p("encoded-dot-dot", "GET", "/%2e%2e/%2e%2e/etc/passwd")
    p("double-slash", "GET", "//v1/topics")
    p("webhook-sub", "GET", "/v1/topics/hook/webhook/x")
    p("reserve-sub", "POST", "/v1/topics/alpha/reserve/x", "{}")
    p("job-deep", "GET", "/v1/topics/alpha/jobs/r1/ack/a/b/c")
    return c


BAD_TOPICS = [
    ("empty", ""),
    ("129-chars", "t" * 129),
    ("nul", "a%00b"),
    ("ff", "a%FFb"),
    ("space", "a%20b"),
    ("brace-open", "a%7Bb"),
    ("brace-close", "a%7Db"),
    ("encoded-slash", "a%2Fb"),
    ("unicode-e-acute", "caf%C3%A9"),
    ("unicode-euro", "%E2%82%AC"),
    ("tab", "a%09b"),
    ("newline", "a%0Ab"),
    ("colon", "a:b"),
    ("star", "a*b"),
    ("hash-tag-breakout", "a%7D%3Ax%7Bb"),
]


def topic_cases():
    c = []
    for name, t in BAD_TOPICS:
        c.append(R("topic/%s/stats" % name, "GET", "/v1/topics/%s" % t, expect=400)
                 if t else R("topic/%s/stats" % name, "GET", "/v1/topics/%s/jobs" % t, expect=400))
        c.append(J("topic/%s/put" % name, "PUT", "/v1/topics/%s/jobs/x" % t, {"body": "x"}, expect=400))
        c.append(J("topic/%s/reserve" % name, "POST", "/v1/topics/%s/reserve" % t, {}, expect=400))
    for name, t in (("129-chars", "t" * 129), ("brace-open", "a%7Bb"), ("nul", "a%00b"), ("ff", "a%FFb")):
        c.append(J("topic/%s/schedule" % name, "POST", "/schedule/%s" % t, {"id": "x", "delay": 1},
                   expect=400, shape="orig_fail"))
    # The limits themselves are fine (a read of a topic that does not exist creates nothing).
    c.append(R("topic/128-chars-ok", "GET", "/v1/topics/" + "t" * 128, expect=200, unchanged=True))
    c.append(R("topic/every-allowed-char-ok", "GET", "/v1/topics/AZaz09_-.", expect=200, unchanged=True))
    return c


BAD_IDS = [
    ("ff", "%FF"),
    ("overlong-nul", "%C0%80"),
    ("overlong-slash", "%C0%AF"),
    ("surrogate", "%ED%A0%80"),
    ("beyond-10ffff", "%F4%90%80%80"),
    ("lone-continuation", "a%80b"),
    ("truncated-4-byte", "%F0%9F"),
    ("truncated-3-byte", "%E2%82"),
    ("nul", "a%00b"),
    ("newline", "a%0Ab"),
    ("carriage-return", "a%0Db"),
    ("escape", "a%1Bb"),
    # Stricter reading of "control characters": Unicode Cc, so DEL and C1 too.
    ("del", "a%7Fb"),
    ("c1-nel", "a%C2%85b"),
    ("257-bytes", "i" * 257),
    ("258-bytes-multibyte", "%E2%82%AC" * 86),
]


def id_cases():
    c = []
    # Every error answer's body is decoded as strict UTF-8 (no echoed invalid
    # bytes, no lone surrogates from \u escapes) by the generic checks.
    for name, i in BAD_IDS:
        c.append(J("id/%s/put" % name, "PUT", "/v1/topics/alpha/jobs/%s" % i, {"body": "x"}, expect=400))
        c.append(R("id/%s/get" % name, "GET", "/v1/topics/alpha/jobs/%s" % i, expect=400))
    for name, i in BAD_IDS[:10:3] + [BAD_IDS[14]]:
        c.append(R("id/%s/delete" % name, "DELETE", "/v1/topics/alpha/jobs/%s" % i, expect=400))
        c.append(J("id/%s/ack" % name, "POST", "/v1/topics/alpha/jobs/%s/ack" % i, {"token": 1}, expect=400))
    for name, i in (("nul", "a\u0000b"), ("newline", "a\nb"), ("257-bytes", "i" * 257),
                    ("lone-surrogate-escape", "\ud800")):
        c.append(J("id/%s/kick-ids" % name, "POST", "/v1/topics/alpha/kick", {"ids": [i]}, expect=400))
        c.append(J("id/%s/schedule" % name, "POST", "/schedule/alpha", {"id": i, "delay": 1},
                   expect=400, shape="orig_fail"))
    # Valid ids: a missing job is 404, not 400.
    for name, i in (("256-bytes", "i" * 256), ("256-bytes-multibyte", "%C3%A9" * 128),
                    ("space", "a%20b"), ("emoji", "%F0%9F%98%80"), ("u10ffff", "%F4%8F%BF%BF")):
        c.append(R("id/%s/get-404" % name, "GET", "/v1/topics/alpha/jobs/%s" % i, expect=404))
    return c


def cases():
    return method_cases() + path_cases() + topic_cases() + id_cases()
