"""The scoped instance: --token s3cret (admin) and --tokens with a token of
each role and one limited to topics starting with "al", --webhook-allow
127.0.0.1:9. Every route refuses each token whose role does not cover it,
and a limited token outside its topics, with 403 and an unchanged keyspace;
the tokens whose role covers it get past the check."""

from core import TOK, R

TOKENS = {
    "read": "read-token-0123456789",
    "produce": "produce-token-0123456789",
    "consume": "consume-token-0123456789",
    "admin": "admin-token-0123456789",
    "al-produce": "al-producer-token-0123456789",
}

TOKENS_FILE = """# role token [topic prefix]
read     read-token-0123456789
produce  produce-token-0123456789
consume  consume-token-0123456789
admin    admin-token-0123456789
produce  al-producer-token-0123456789  al
"""

WEBHOOK_ALLOW = ["127.0.0.1:9"]

# name, method, target, body, the role it needs, whether its path names a topic
ROUTES = [
    ("topics", "GET", "/v1/topics", None, "read", False),
    ("stats", "GET", "/v1/topics/alpha", None, "read", True),
    ("list", "GET", "/v1/topics/alpha/jobs?state=ready", None, "read", True),
    ("get", "GET", "/v1/topics/alpha/jobs/r1", None, "read", True),
    ("head-job", "HEAD", "/v1/topics/alpha/jobs/r1", None, "read", True),
    ("metrics", "GET", "/metrics", None, "read", False),
    ("events", "GET", "/v1/events", None, "read", False),
    ("limits-get", "GET", "/v1/topics/alpha/limits", None, "read", True),
    ("shards-get", "GET", "/v1/topics/alpha/shards", None, "read", True),
    ("retry-window-get", "GET", "/v1/topics/alpha/retry-window", None, "read", True),
    ("schedules", "GET", "/v1/topics/alpha/schedules", None, "read", True),
    ("schedule-get", "GET", "/v1/topics/alpha/schedules/nightly", None, "read", True),
    ("webhook-get", "GET", "/v1/topics/alpha/webhook", None, "read", True),
    ("put", "PUT", "/v1/topics/alpha/jobs/new1", '{"body":"x"}', "produce", True),
    ("post", "POST", "/v1/topics/alpha/jobs", '{"body":"x"}', "produce", True),
    ("delete", "DELETE", "/v1/topics/alpha/jobs/r1", None, "produce", True),
    ("orig-schedule", "POST", "/schedule/alpha", '{"id":"r1","delay":0}', "produce", True),
    ("orig-cancel", "POST", "/cancel/alpha", '{"id":"r1"}', "produce", True),
    ("push", "POST", "/push", '{"topic":"alpha","body":"x"}', "produce", False),
    ("reserve", "POST", "/v1/topics/alpha/reserve", '{"count":1}', "consume", True),
    ("pull", "POST", "/v1/topics/alpha/pull", '{"count":1}', "consume", True),
    ("ack", "POST", "/v1/topics/alpha/jobs/s1/ack", '{"token":%d}' % TOK, "consume", True),
    ("release", "POST", "/v1/topics/alpha/jobs/s1/release", '{"token":%d}' % TOK, "consume",
     True),
    ("fail", "POST", "/v1/topics/alpha/jobs/s1/fail", '{"token":%d,"error":"x"}' % TOK,
     "consume", True),
    ("touch", "POST", "/v1/topics/alpha/jobs/s1/touch", '{"token":%d}' % TOK, "consume", True),
    ("pop", "GET", "/pop?topic=alpha", None, "consume", False),
    ("finish", "GET", "/finish?job_id=s1", None, "consume", False),
    ("kick", "POST", "/v1/topics/alpha/kick", '{"all":true}', "admin", True),
    ("pause", "POST", "/v1/topics/alpha/pause", None, "admin", True),
    ("resume", "POST", "/v1/topics/alpha/resume", None, "admin", True),
    ("limits-put", "PUT", "/v1/topics/alpha/limits", '{"concurrency":1}', "admin", True),
    ("limits-delete", "DELETE", "/v1/topics/alpha/limits", None, "admin", True),
    ("shards-put", "PUT", "/v1/topics/alpha/shards", '{"shards":2}', "admin", True),
    ("retry-window-put", "PUT", "/v1/topics/alpha/retry-window", '{"retry_window_ms":0}',
     "admin", True),
    ("schedule-put", "PUT", "/v1/topics/alpha/schedules/nightly",
     '{"every_ms":60000,"job":{"body":"x"}}', "admin", True),
    ("schedule-delete", "DELETE", "/v1/topics/alpha/schedules/nightly", None, "admin", True),
    ("schedule-pause", "POST", "/v1/topics/alpha/schedules/nightly/pause", None, "admin", True),
    ("schedule-resume", "POST", "/v1/topics/alpha/schedules/nightly/resume", None, "admin",
     True),
    ("webhook-put", "PUT", "/v1/topics/alpha/webhook", '{"url":"http://127.0.0.1:9/"}', "admin",
     True),
    ("webhook-delete", "DELETE", "/v1/topics/alpha/webhook", None, "admin", True),
]


def covers(role, need):
    return role == "admin" or need == "read" or role == need


def header(name):
    return ["Authorization: Bearer " + TOKENS[name]]


def scoped_cases():
    c = []
    for rname, method, target, body, need, names_topic in ROUTES:
        for role in ("read", "produce", "consume"):
            if covers(role, need):
                continue
            c.append(R("scoped/%s/%s-refused" % (rname, role), method, target, body,
                       headers=header(role), expect=403, server="scoped",
                       shape="none" if method == "HEAD" else "error"))
        # The token limited to "al...": refused outside its topics (beta) where
        # its role covers the call, and on every route that names no topic in
        # its path.
        if names_topic and covers("produce", need):
            c.append(R("scoped/%s/al-token-on-beta" % rname, method,
                       target.replace("/alpha", "/beta"), body, headers=header("al-produce"),
                       expect=403, server="scoped", shape="none" if method == "HEAD" else "error"))
        elif not names_topic:
            c.append(R("scoped/%s/al-token-no-topic" % rname, method, target, body,
                       headers=header("al-produce"), expect=403, server="scoped",
                       shape="none" if method == "HEAD" else "error"))
    # Tokens whose role covers the call get past the check.
    c.append(R("scoped/ok/read-topics", "GET", "/v1/topics", headers=header("read"), expect=200,
               server="scoped"))
    c.append(R("scoped/ok/read-get", "GET", "/v1/topics/alpha/jobs/r1", headers=header("read"),
               expect=200, server="scoped"))
    c.append(R("scoped/ok/consume-reserve-empty", "POST", "/v1/topics/scopedempty/reserve",
               '{"count":1}', headers=header("consume"), expect=200, server="scoped",
               unchanged=False))
    c.append(R("scoped/ok/produce-put", "PUT", "/v1/topics/scopedput/jobs/a", '{"body":"x"}',
               headers=header("produce"), expect=201, server="scoped", unchanged=False))
    c.append(R("scoped/ok/al-token-put-alpha", "PUT", "/v1/topics/alscoped/jobs/a",
               '{"body":"x"}', headers=header("al-produce"), expect=201, server="scoped",
               unchanged=False))
    c.append(R("scoped/ok/admin-limits-get", "GET", "/v1/topics/alpha/limits",
               headers=header("admin"), expect=200, server="scoped"))
    c.append(R("scoped/ok/single-token-is-admin", "GET", "/v1/topics/alpha/limits",
               headers=["Authorization: Bearer s3cret"], expect=200, server="scoped"))
    c.append(R("scoped/unknown-token", "GET", "/v1/topics", headers=["Authorization: Bearer "
                                                                     "nobody-token-0123456789"],
               expect=401, server="scoped", www_auth=True))
    # --webhook-allow: a destination outside it is refused, 403, even for admin.
    for name, url in (("other-port", "http://127.0.0.1:10/"), ("other-host", "http://localhost:9/"),
                      ("name", "http://example.com/")):
        c.append(R("scoped/webhook-allow/%s" % name, "PUT", "/v1/topics/hookless/webhook",
                   '{"url":"%s"}' % url, headers=header("admin"), expect=403, server="scoped"))
    return c


def cases():
    return scoped_cases()
