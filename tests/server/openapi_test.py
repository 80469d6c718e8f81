"""docs/openapi.yaml against the server it describes.

1. The routes: every path, method and query parameter of the document is a
   route of the server's table (printed by tests/tools/route_table.cpp) and
   the other way round; routes open without the token say `security: []`.
2. The answers: a real `redisched serve` (its embedded Redis, a token set)
   is sent the requests below; each answer's status must be documented for
   its operation, and its JSON must match the documented schema.

    openapi_test.py <docs/openapi.yaml> <route_table> <redisched>
"""

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import jsonschema
import yaml

SPEC, ROUTE_TABLE, BINARY = sys.argv[1:4]
with open(SPEC, encoding="utf-8") as f:
    DOC = yaml.safe_load(f)
METHODS = ("get", "put", "post", "delete")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from serve_process import start_serve  # noqa: E402

TOKEN = "openapi-test-token"


def operations():
    for path, item in DOC["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method], item.get("parameters", [])


def deref(node):
    """The node a {"$ref": "#/..."} points at (else the node)."""
    while isinstance(node, dict) and "$ref" in node:
        target = DOC
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


class Routes(unittest.TestCase):
    def test_the_document_and_the_route_table_agree(self):
        table = {}
        out = subprocess.run([ROUTE_TABLE], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            method, path, query, access = line.split(" ")
            table[(method.lower(), path)] = (query, access)
        documented = {}
        for path, method, op, shared in operations():
            params = [deref(p) for p in shared + op.get("parameters", [])]
            query = sorted(p["name"] for p in params if p["in"] == "query")
            open_route = op.get("security", DOC.get("security")) == []
            documented[(method, path)] = (query, open_route)
        self.assertEqual(sorted(documented), sorted(table),
                         "documented routes (left) against the server's (right)")
        # The table takes query parameters per path, whatever the method.
        doc_query_of_path = {}
        for (method, path), (query, _) in documented.items():
            doc_query_of_path.setdefault(path, set()).update(query)
        for key, (query, access) in table.items():
            if query != "*":
                self.assertEqual(sorted(doc_query_of_path[key[1]]),
                                 sorted(q for q in query.split(",") if q), key)
            self.assertEqual(documented[key][1], access == "open", f"{key}: security")


class Answers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.serve, cls.port = start_serve(
            [BINARY, "--data-dir", os.path.join(cls.dir, "data"), "serve", "--listen",
             "127.0.0.1:0", "--token", TOKEN], os.path.join(cls.dir, "serve.log"))
        cls.checked = set()

    @classmethod
    def tearDownClass(cls):
        cls.serve.send_signal(signal.SIGTERM)
        cls.serve.wait()
        shutil.rmtree(cls.dir)
        print(f"\n{len(cls.checked)} of {sum(1 for _ in operations())} operations checked "
              f"against their documented answers", file=sys.stderr)

    def call(self, method, target, body=None, token=True):
        """Sends the request; checks the answer against the operation that
        matches it in the document; returns (status, parsed JSON or text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
        data = json.dumps(body) if body is not None else None
        conn.request(method, target, body=data, headers=headers)
        res = conn.getresponse()
        raw = res.read()
        conn.close()
        path = target.split("?")[0]
        op = self.operation(method.lower(), path)
        self.assertIsNotNone(op, f"{method} {path} is not documented")
        responses = op["responses"]
        self.assertIn(str(res.status), responses,
                      f"{method} {target} answered {res.status}, not documented: {raw[:200]!r}")
        response = deref(responses[str(res.status)])
        content = response.get("content", {})
        ctype = res.getheader("Content-Type", "").split(";")[0]
        if "application/json" in content:
            self.assertEqual(ctype, "application/json", f"{method} {target}")
            answer = json.loads(raw)
            schema = dict(deref(content["application/json"]["schema"]))
            schema["components"] = DOC["components"]  # for the $refs inside
            jsonschema.validate(answer, schema)
        else:
            self.assertIn(ctype, content, f"{method} {target}: {ctype}")
            answer = raw.decode()
        self.checked.add((method.lower(), op["_path"]))
        return res.status, answer

    @staticmethod
    def operation(method, path):
        for template, item in DOC["paths"].items():
            pattern = "^" + re.sub(r"\\{[a-z_]+\\}", "[^/]+", re.escape(template)) + "$"
            if re.match(pattern, path) and method in item:
                return {**item[method], "_path": template}
        return None

    def test_1_jobs(self):
        t = "/v1/topics/api"
        self.assertEqual(self.call("PUT", f"{t}/jobs/a", {"body": "x", "priority": 3})[0], 201)
        self.assertEqual(self.call("PUT", f"{t}/jobs/a", {"body": "y", "mode": "upsert"})[0], 200)
        self.assertEqual(self.call("PUT", f"{t}/jobs/a", {"body": "z"})[0], 409)
        self.assertEqual(self.call("PUT", f"{t}/jobs/nope", {"mode": "replace"})[0], 404)
        self.assertEqual(self.call("PUT", f"{t}/jobs/b", {"body": 1})[0], 400)
        self.assertEqual(self.call("POST", f"{t}/jobs", {"body_base64": "//4=",  # not UTF-8
                                                         "delay_ms": 60000})[0], 201)
        self.assertEqual(self.call("GET", f"{t}/jobs/a")[0], 200)
        self.assertEqual(self.call("GET", f"{t}/jobs/missing")[0], 404)
        status, page = self.call("GET", f"{t}/jobs?state=delayed&count=10")
        self.assertEqual(page["total"], 1)
        self.assertIn("body_base64", page["jobs"][0])
        self.assertEqual(self.call("GET", f"{t}/jobs?state=sideways")[0], 400)
        self.call("PUT", f"{t}/jobs/a%2Fb%20c", {"body": "x"})
        status, found = self.call("GET", f"{t}/ids?prefix=a%2F&count=10")
        self.assertEqual(found, {"ids": ["a/b c"], "cursor": None})
        self.assertEqual(self.call("GET", f"{t}/ids?cursor=nonsense")[0], 400)
        self.assertEqual(self.call("GET", f"{t}/ids?count=0")[0], 400)
        self.assertEqual(self.call("POST", f"{t}/jobs/a%2Fb%20c/reschedule", {"priority": 9, "delay_ms": 60000})[1],
                         {"ok": True})
        self.assertEqual(self.call("GET", f"{t}/jobs/a%2Fb%20c")[1]["state"], "delayed")
        self.assertEqual(self.call("POST", f"{t}/jobs/nope/reschedule", {"priority": 1})[0], 404)
        self.assertEqual(self.call("POST", f"{t}/jobs/a%2Fb%20c/reschedule", {})[0], 400)
        self.assertEqual(self.call("DELETE", f"{t}/jobs/a")[0], 200)
        self.assertEqual(self.call("DELETE", f"{t}/jobs/a")[0], 404)
        self.assertEqual(self.call("GET", f"{t}/jobs/a", token=False)[0], 401)
        # A batch (library version 36): made with a member, then sealed.
        status, b = self.call("POST", f"{t}/batches/nightly", {"add": [{"topic": "api", "id": "m"}]})
        self.assertEqual((status, b["state"], b["batch"]["pending"]), (200, "blocked", 1))
        self.assertEqual(self.call("POST", f"{t}/batches/nightly", {"seal": True})[1]["batch"]["sealed"], True)
        self.assertEqual(self.call("GET", f"{t}/batches/nightly")[1]["batch"]["total"], 1)
        self.assertEqual(self.call("GET", f"{t}/batches/none")[0], 404)
        self.assertEqual(self.call("POST", f"{t}/batches/nightly", {"add": [{"id": "x"}]})[0], 400)

    def test_2_working(self):
        t = "/v1/topics/work"
        self.call("PUT", f"{t}/jobs/j", {"body": "x", "attempts": 2})
        self.call("PUT", f"{t}/jobs/k", {"body": "y", "ttr_ms": 0})
        status, r = self.call("POST", f"{t}/reserve", {"count": 2, "ttr_ms": 30000})
        self.assertEqual(len(r["jobs"]), 2)
        token = next(j["token"] for j in r["jobs"] if j["id"] == "j")
        j = f"{t}/jobs/j"
        self.assertEqual(self.call("GET", j)[1]["state"], "reserved")
        self.assertEqual(self.call("POST", f"{j}/touch", {"token": token, "ttr_ms": 60000})[0], 200)
        self.assertEqual(self.call("POST", f"{j}/ack", {"token": token + 1})[0], 409)
        self.assertEqual(self.call("POST", f"{j}/release", {"token": token})[0], 200)
        self.assertEqual(self.call("POST", f"{j}/release", {"token": token})[0], 409)
        token = self.call("POST", f"{t}/reserve", {})[1]["jobs"][0]["token"]
        self.assertEqual(self.call("POST", f"{j}/fail", {"token": token, "error": "e",
                                                         "dead": True})[1]["state"], "dead")
        # The failed attempt, in the job's history (library version 30).
        [attempt] = self.call("GET", j)[1]["history"]
        self.assertEqual((attempt["outcome"], attempt["error"]), ("failed", "e"))
        self.assertEqual(self.call("POST", f"{t}/kick", {"ids": ["j"]})[1]["kicked"], 1)
        token = self.call("POST", f"{t}/reserve", {"count": 1, "worker": "w-1"})[1]["jobs"][0]["token"]
        self.assertEqual(self.call("GET", j)[1]["worker"], "w-1")
        # One job by its id (library version 38): delayed, reserved at once.
        self.call("PUT", f"{t}/jobs/by_id", {"body": "z", "delay_ms": 600000})
        status, r = self.call("POST", f"{t}/jobs/by_id/reserve", {"ttr_ms": 30000, "worker": "w-2"})
        self.assertEqual((status, r["job"]["id"]), (200, "by_id"))
        self.assertEqual(self.call("POST", f"{t}/jobs/by_id/reserve", {})[0], 409)
        self.assertEqual(self.call("POST", f"{t}/jobs/none/reserve", {})[0], 404)
        self.assertEqual(self.call("POST", f"{t}/jobs/by_id/reserve", {"count": 1})[0], 400)
        self.assertEqual(self.call("POST", f"{t}/jobs/by_id/ack", {"token": r["job"]["token"]})[0], 200)
        # promote and purge (library version 32).
        self.call("PUT", "/v1/topics/promo/jobs/later", {"body": "l", "delay_ms": 600000})
        self.assertEqual(self.call("POST", "/v1/topics/promo/promote", {"ids": ["later"]})[1], {"promoted": 1})
        self.assertEqual(self.call("POST", "/v1/topics/promo/promote", {"all": True})[1], {"promoted": 0, "left": 0})
        self.assertEqual(self.call("POST", "/v1/topics/promo/promote", {})[0], 400)
        status, r = self.call("POST", "/v1/topics/promo/purge", {"older_than_ms": 3600000})
        self.assertEqual((status, r["deleted"], r["left"]), (200, 0, 0))
        self.assertEqual(self.call("POST", "/v1/topics/promo/purge", {"before": 1, "older_than_ms": 1})[0], 400)
        # A report (library version 31): progress and log, on the job.
        # Its numbers come back as sent (a decimal, an integer past 2^64).
        report = {"token": token, "progress": {"percent": 40, "f": 0.1, "big": 2**80 + 1},
                  "log": ["one", "two"]}
        self.assertEqual(self.call("POST", f"{j}/report", report)[0], 200)
        self.assertEqual(self.call("POST", f"{j}/report", {"token": token, "log": [1]})[0], 400)
        self.assertEqual(self.call("POST", f"{j}/report", {"token": token})[0], 400)
        self.assertEqual(self.call("POST", f"{j}/report", {"token": token + 1, "progress": 1})[0], 409)
        got = self.call("GET", j)[1]
        self.assertEqual((got["progress"], [line["line"] for line in got["log"]], got["log_total"]),
                         ({"percent": 40, "f": 0.1, "big": 2**80 + 1}, ["one", "two"], 2))
        self.assertEqual(self.call("POST", f"{j}/ack", {"token": token, "keep_ms": 60000})[0], 200)
        self.assertEqual(self.call("GET", j)[1]["state"], "done")
        self.assertEqual(self.call("POST", f"{t}/jobs/none/ack", {"token": 1})[0], 404)
        self.call("PUT", f"{t}/jobs/p", {"body": "p"})
        self.assertEqual(len(self.call("POST", f"{t}/pull", {"count": 5})[1]["jobs"]), 1)
        for q in ("q1", "q2"):
            self.call("PUT", f"{t}/jobs/{q}", {"body": q})
        self.assertEqual(self.call("POST", f"{t}/delete", {"ids": ["q1", "q2", "q3"]})[1], {"deleted": 2})
        self.assertEqual(self.call("POST", f"{t}/delete", {"ids": []})[0], 400)
        self.assertEqual(self.call("POST", f"{t}/reserve", {"count": 0})[0], 400)

    def test_2_working_many_at_once(self):
        b = "/v1/topics/many"
        # Each job's outcome, in order; an id given twice is two puts.
        status, r = self.call("POST", f"{b}/put", {"jobs": [
            {"id": "m1", "body": "x"}, {"id": "m2", "body": "y", "priority": 5},
            {"id": "m1", "body": "z"}, {"id": "m9", "mode": "replace"}]})
        self.assertEqual((status, [(j["id"], j["outcome"]) for j in r["jobs"]]),
                         (200, [("m1", "created"), ("m2", "created"), ("m1", "exists"),
                                ("m9", "not_found")]))
        self.assertEqual(self.call("GET", f"{b}/jobs/m1")[1]["body"], "x")
        # One bad job refuses them all, naming it; nothing is put.
        status, r = self.call("POST", f"{b}/put", {"jobs": [{"id": "m3"}, {"id": "m4", "priority": 5000}]})
        self.assertEqual(status, 400)
        self.assertTrue(r["error"]["message"].startswith("job 2: "), r)
        self.assertEqual(self.call("GET", f"{b}/jobs/m3")[0], 404)
        for bad in ({"jobs": []}, {"jobs": [{"body": "no id"}]}, {"jobs": [{"id": "*"}]},
                    {"jobs": [{"id": "a", "colour": "red"}]}, {"jobs": [7]}, {"jobs": {}},
                    {"jobs": [{"id": "a", "after": [{"topic": "t", "id": "x"}]}]},
                    {"jobs": [{"id": "x"}] * 1001}, {}):
            self.assertEqual(self.call("POST", f"{b}/put", bad)[0], 400, bad)
        held = self.call("POST", f"{b}/reserve", {"count": 2})[1]["jobs"]
        self.assertEqual([j["id"] for j in held], ["m2", "m1"])
        acks = [{"id": j["id"], "token": j["token"]} for j in held]
        status, r = self.call("POST", f"{b}/ack", {"jobs": acks + [{"id": "none", "token": 1}],
                                                   "keep_ms": 60000})
        self.assertEqual((status, [(j["id"], j["outcome"]) for j in r["jobs"]]),
                         (200, [("m2", "ok"), ("m1", "ok"), ("none", "not_found")]))
        self.assertEqual(self.call("GET", f"{b}/jobs/m1")[1]["state"], "done")
        status, r = self.call("POST", f"{b}/ack", {"jobs": acks})
        self.assertEqual([j["outcome"] for j in r["jobs"]], ["wrong_state", "wrong_state"])
        for bad in ({"jobs": [{"id": "m1"}]}, {"jobs": [{"id": "m1", "token": 0}]},
                    {"jobs": [{"id": "m1", "token": 1, "result": "r"}]}, {"jobs": []}):
            self.assertEqual(self.call("POST", f"{b}/ack", bad)[0], 400, bad)

    def test_3_topics_and_operations(self):
        t = "/v1/topics/ops"
        self.call("PUT", f"{t}/jobs/x", {"body": "x"})
        self.assertEqual(self.call("POST", f"{t}/pause")[1], {"paused": True, "changed": True})
        self.assertEqual(self.call("POST", f"{t}/resume")[1]["changed"], True)
        self.assertEqual(self.call("GET", t)[1]["ready"], 1)
        self.assertEqual(self.call("GET", "/v1/topics/bad%20topic")[0], 400)
        topics = self.call("GET", "/v1/topics")[1]["topics"]
        self.assertIn("ops", [x["topic"] for x in topics])
        # The history (library version 34): counted by the library's calls.
        h = "/v1/topics/hist"
        self.call("PUT", f"{h}/jobs/a", {"body": "a"})
        self.call("PUT", f"{h}/jobs/b", {"body": "b"})
        self.assertEqual(self.call("PUT", f"{h}/jobs/b", {"body": "b"})[0], 409)  # (not counted)
        time.sleep(0.05)  # (a wait to count)
        job = self.call("POST", f"{h}/reserve", {"count": 1})[1]["jobs"][0]
        self.call("POST", f"{h}/jobs/{job['id']}/ack", {"token": job["token"]})
        kinds = ("put", "started", "done", "failed", "dead", "lapsed")
        for r in ("1h", "24h", "30d"):
            status, got = self.call("GET", f"{h}/history?range={r}")
            self.assertEqual((status, got["range"], got["step"], got["topic"]),
                             (200, r, "hour" if r == "30d" else "minute", "hist"))
            self.assertEqual([sum(row[k] for row in got["rows"]) for k in kinds], [2, 1, 1, 0, 0, 0], r)
            self.assertGreaterEqual(sum(row["wait_ms"] for row in got["rows"]), 50)
        stats = self.call("GET", h)[1]
        self.assertEqual((stats["put_total"], stats["started_total"], stats["done_total"]), (2, 1, 1))
        self.assertEqual(self.call("GET", f"{h}/history?range=1w")[0], 400)
        self.assertEqual(self.call("GET", f"{h}/history?since=1")[0], 400)
        status, every = self.call("GET", "/v1/history?range=24h")
        self.assertEqual(status, 200)
        self.assertGreaterEqual(every["topics"], 3)
        self.assertGreaterEqual(sum(row["put"] for row in every["rows"]), 3)
        redis = self.call("GET", "/v1/redis")[1]
        self.assertEqual((redis["mode"], len(redis["nodes"])), ("single", 1))
        page = self.call("GET", "/v1/topics?prefix=op&count=1")[1]
        self.assertEqual(([x["topic"] for x in page["topics"]], page["next"], page["total"]),
                         (["ops"], None, 1))
        self.assertEqual(self.call("GET", "/v1/topics?contains=PS&count=5")[1]["total"], 1)
        self.assertEqual(self.call("GET", "/v1/topics?count=0")[0], 400)
        self.assertEqual(self.call("PUT", f"{t}/jobs/deb", {"body": "a", "delay_ms": 60000,
                                                             "mode": "debounce"})[0], 201)
        self.assertEqual(self.call("PUT", f"{t}/jobs/deb", {"body": "b", "delay_ms": 60000,
                                                             "mode": "debounce"})[1]["outcome"],
                         "updated")
        limits = {"rate": 10, "window_ms": 500, "concurrency": 3, "aging_ms": 200}
        self.assertEqual(self.call("PUT", f"{t}/limits", limits)[1], limits)
        self.assertEqual(self.call("GET", f"{t}/limits")[1], limits)
        self.assertEqual(self.call("GET", t)[1]["limits"], limits)
        self.assertEqual(self.call("PUT", f"{t}/limits", {"rate": -1})[0], 400)
        self.assertEqual(self.call("DELETE", f"{t}/limits")[1],
                         {"rate": 0, "window_ms": 0, "concurrency": 0, "aging_ms": 0})
        hot = "/v1/topics/ops-hot"
        spread = self.call("PUT", f"{hot}/shards", {"count": 2})[1]
        self.assertEqual((spread["topic"], spread["count"], len(spread["shards"])), ("ops-hot", 2, 2))
        self.assertEqual(self.call("GET", f"{hot}/shards")[1], spread)
        self.assertEqual(self.call("GET", hot)[1]["shards"], 2)
        self.assertEqual(self.call("PUT", f"{hot}/shards", {"count": 300})[0], 400)
        # A spread topic takes no limits; one that holds jobs, no new shards.
        status, body = self.call("PUT", f"{hot}/limits", {"concurrency": 2})
        self.assertEqual((status, body["error"]["code"]), (409, "conflict"))
        self.assertEqual(self.call("PUT", f"{hot}/jobs/a", {"body": "x"})[0], 201)
        status, body = self.call("PUT", f"{hot}/shards", {"count": 3})
        self.assertEqual((status, body["error"]["code"]), (409, "conflict"))
        # The retry window: a put retried after its job ran answers 409.
        rw = "/v1/topics/ops-retry"
        self.assertEqual(self.call("GET", f"{rw}/retry-window")[1],
                         {"topic": "ops-retry", "retry_window_ms": 60000, "remembered": 0})
        self.assertEqual(self.call("PUT", f"{rw}/jobs/once", {"body": "x"})[0], 201)
        token = self.call("POST", f"{rw}/reserve", {})[1]["jobs"][0]["token"]
        self.assertEqual(self.call("POST", f"{rw}/jobs/once/ack", {"token": token})[0], 200)
        self.assertEqual(self.call("PUT", f"{rw}/jobs/once", {"body": "x"})[0], 409)
        self.assertEqual(self.call("GET", f"{rw}/retry-window")[1]["remembered"], 1)
        self.assertEqual(self.call("PUT", f"{rw}/retry-window", {"retry_window_ms": 0})[1],
                         {"topic": "ops-retry", "retry_window_ms": 0, "remembered": 0})
        self.assertEqual(self.call("PUT", f"{rw}/jobs/once", {"body": "x"})[0], 201)
        for bad in ({}, {"retry_window_ms": -1}, {"retry_window_ms": 86400001},
                    {"retry_window_ms": 5, "x": 1}):
            self.assertEqual(self.call("PUT", f"{rw}/retry-window", bad)[0], 400, bad)
        # A spread topic's shards all take it.
        self.assertEqual(self.call("PUT", f"{hot}/retry-window", {"retry_window_ms": 5000})[1]
                         ["retry_window_ms"], 5000)
        self.assertEqual(self.call("GET", f"{hot}/retry-window")[1]["retry_window_ms"], 5000)
        sched = {"cron": "0 3 * * *", "time_zone": "Europe/Berlin", "body": "nightly",
                 "priority": 2, "keep_ms": 60000, "catch_up": "last"}
        put = self.call("PUT", f"{t}/schedules/nightly", sched)[1]
        self.assertEqual((put["cron"], put["time_zone"], put["catch_up"]),
                         ("0 3 * * *", "Europe/Berlin", "last"))
        self.assertEqual(len(put["next_runs"]), 5)
        self.assertEqual(self.call("PUT", f"{t}/schedules/b", {"every_ms": 0})[0], 400)
        self.assertEqual(self.call("GET", f"{t}/schedules")[1]["schedules"][0]["name"], "nightly")
        self.assertEqual(self.call("GET", f"{t}/schedules/nightly")[1]["paused"], False)
        self.assertEqual(self.call("GET", f"{t}/schedules/none")[0], 404)
        self.assertEqual(self.call("POST", f"{t}/schedules/nightly/pause")[1]["changed"], True)
        self.assertEqual(self.call("POST", f"{t}/schedules/nightly/resume")[1]["changed"], True)
        self.assertEqual(self.call("POST", f"{t}/schedules/none/pause")[0], 404)
        self.assertEqual(self.call("DELETE", f"{t}/schedules/nightly")[0], 200)
        self.assertEqual(self.call("DELETE", f"{t}/schedules/nightly")[0], 404)
        self.assertEqual(self.call("GET", f"{t}/webhook")[0], 404)
        self.assertEqual(self.call("PUT", f"{t}/webhook", {"url": "http://127.0.0.1:9/h"})[0], 200)
        self.assertEqual(self.call("GET", f"{t}/webhook")[1]["url"], "http://127.0.0.1:9/h")
        # The webhook's worker, in the worker registry.
        for _ in range(100):
            workers = self.call("GET", "/v1/workers")[1]["workers"]
            if any(x["topic"] == "ops" for w in workers for x in w["topics"]):
                break
            time.sleep(0.05)
        self.assertTrue(any(x["topic"] == "ops" for w in workers for x in w["topics"]), workers)
        self.assertEqual(self.call("DELETE", f"{t}/webhook")[0], 200)
        self.assertEqual(self.call("PUT", f"{t}/webhook", {"url": "ftp://x"})[0], 400)
        self.assertEqual(self.call("GET", "/healthz", token=False)[1]["status"], "ok")
        self.assertIn("redisched_build_info", self.call("GET", "/metrics")[1])
        for page in ("/", "/index.html", "/app.js", "/style.css", "/vendor/dygraph.min.js",
                     "/vendor/dygraph.min.css"):
            self.assertEqual(self.call("GET", page, token=False)[0], 200)

    def test_4_the_original_interfaces(self):
        self.assertEqual(self.call("POST", "/schedule/orig", {"id": 7, "contents": {"a": 1},
                                                              "delay": 60})[0], 200)
        self.assertEqual(self.call("POST", "/schedule/orig", {"delay": 1})[0], 400)
        self.assertEqual(self.call("POST", "/cancel/orig", {"id": "7"})[1]["deleted"], 1)
        self.assertEqual(self.call("POST", "/push", {"topic": "dq", "delay": 0, "ttr": 60,
                                                     "body": "b"})[1]["code"], 200)
        popped = self.call("GET", "/pop?topic=dq")[1]
        self.assertEqual(popped["data"], "b")
        self.assertEqual(self.call("GET", "/finish?job_id=" + popped["job_id"])[1]["code"], 200)
        self.assertEqual(self.call("GET", "/pop?topic=dq")[1]["code"], 500)

    def test_5_every_operation_was_checked(self):
        # The event stream stays open: its route is checked by the table test.
        expected = {(m, p) for p, m, _, _ in operations()} - {("get", "/v1/events")}
        self.assertEqual(sorted(expected - self.checked), [], "operations no request reached")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
