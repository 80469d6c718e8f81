"""clients/python/redisched.py against a real redis-server, and beside the
C++ side: a job put from Python is the CLI's, and the other way round.
    python3 test_redisched.py <lua/redisched.lua> <build/redisched>
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import redis

import redisched

LUA, CLI = sys.argv[1], sys.argv[2]


class RedischedFromPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.sock = os.path.join(cls.dir, "redis.sock")
        cls.server = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", cls.sock, "--save", "",
             "--dir", cls.dir], stdout=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(cls.sock):
                break
            time.sleep(0.02)
        cls.r = redis.Redis(unix_socket_path=cls.sock)
        redisched.load_library(cls.r, LUA)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait()
        shutil.rmtree(cls.dir)

    def topic(self, name):
        self.r.delete(*redisched.Topic(self.r, name).keys)
        return redisched.Topic(self.r, name)

    def cli(self, *args):
        return subprocess.run([CLI, "--redis", "unix://" + self.sock, *args],
                              capture_output=True, text=True, check=True).stdout

    def test_a_flow_across_topics_runs_the_parent_after_its_children(self):
        # Library version 35: the parent waits, blocked; move_outbox hands
        # the children's outcomes over; a spread child topic too.
        parent, kids = self.topic("py_invoices"), self.topic("py_reports")
        self.cli("shards", "py_reports", "3")
        self.assertEqual(parent.put("invoice", "send", after=[("py_reports", "r1"),
                                                              ("py_reports", "r2", "ignore")]), 1)
        self.assertEqual(parent.get("invoice")["state"], b"blocked")
        self.assertEqual(parent.move_outbox(), 1)
        kids.put("r1", "a")
        kids.put("r2", "b", attempts=1)
        for job in kids.reserve(2).jobs:
            if job.id == "r1":
                self.assertEqual(kids.ack(job, result="pdf"), 1)
            else:
                kids.fail(job, "no paper")
        self.assertEqual(kids.move_outbox(), 2)
        job = parent.get("invoice", deps=True)
        self.assertEqual(job["state"], b"ready")
        self.assertEqual([(d["id"], d["outcome"], d["value"]) for d in job["deps"]],
                         [(b"r1", b"done", b"pdf"), (b"r2", b"failed", b"no paper")])

    def test_a_batch_releases_its_callback_once_sealed_and_every_member_finished(self):
        # Library version 36: members added while it is open, a callback
        # (on complete: ignore) waits for it; one member dies.
        batches, members = self.topic("py_batches"), self.topic("py_members")
        b = batches.batch("nightly", add=[("py_members", "m1"), ("py_members", "m2")])
        self.assertEqual((b["state"], b["batch_total"], b["batch_sealed"]), (b"blocked", 2, 0))
        self.assertEqual(batches.put("report", "how it went",
                                     after=[("py_batches", "nightly", "ignore")]), 1)
        members.put("m1", "a")
        members.put("m2", "b", attempts=1)
        for job in members.reserve(2).jobs:
            if job.id == "m1":
                members.ack(job)
            else:
                members.fail(job, "broke")
        batches.move_outbox()
        members.move_outbox()
        b = batches.batch("nightly", seal=True)
        self.assertEqual((b["state"], b["batch_done"], b["batch_failed"]), (b"done", 1, 1))
        batches.move_outbox()
        job = batches.get("report", deps=True)
        self.assertEqual(job["state"], b"ready")
        self.assertEqual(job["deps"][0]["outcome"], b"failed")
        with self.assertRaises(redis.ResponseError):
            batches.batch("nightly", add=[("py_members", "m3")])

    def test_a_topic_of_version_8_is_migrated_by_the_first_call_that_meets_it(self):
        # Jobs put by library version 8 (its eight keys, stored format 1):
        # a call that meets them is refused (OLDFORMAT, nothing changed),
        # the client migrates the topic and calls again.
        fixture = os.path.join(os.path.dirname(LUA), "..", "tests", "model", "fixtures",
                               "redisched_v8.lua")
        t = self.topic("eight")
        with open(fixture, encoding="utf-8") as f:
            self.r.execute_command("FUNCTION", "LOAD", "REPLACE", f.read())
        for i in range(5):
            self.r.execute_command("FCALL", "redisched_put", 8, *t.keys[:8], f"j{i}", b"old")
        redisched.load_library(self.r, LUA)
        self.assertEqual(t.get("j3")["body"], b"old")
        self.assertEqual(t.migrate(), (0, 0, 1), "the first call migrated it, and marked it")
        self.assertEqual(sorted(j.id for j in t.reserve(5).jobs), [f"j{i}" for i in range(5)])

    def test_a_topic_spread_over_shards_by_the_cli(self):
        # Spread by the C++ side; Python routes by the documented rule (CRC-16/
        # XMODEM of the id mod n) and finds every job where the CLI does.
        t = self.topic("hot")
        t.stats()  # it has seen the topic unspread: SHARDED tells it otherwise
        self.cli("put", "hot", "before", "x")  # counted in the topic's own history
        self.cli("delete", "hot", "before")
        self.assertIn("3 shards", self.cli("shards", "hot", "3"))
        for i in range(30):
            self.assertEqual(t.put(f"p{i}", b"from python"), redisched.OK)
        self.assertEqual(len(t.shards()), 3)
        self.assertIn('"state":"ready"', self.cli("--json", "get", "hot", "p17"))
        self.cli("put", "hot", "c1", "from cli")
        self.assertEqual(t.get("c1")["body"], b"from cli")
        held = [len(self.r.hkeys(s.keys[0])) for s in t.shards()]
        self.assertEqual(sum(held), 31)
        self.assertTrue(all(n > 0 for n in held), held)
        self.assertEqual(t.stats()["ready"], 31)
        self.assertEqual(t.stats()["shards"], 3)
        self.assertEqual(t.history()[0]["put"], 32, "the shards' and the topic's own")
        self.assertEqual(t.stats()["put_total"], 32, "stats' totals are the history's")
        self.assertEqual(sorted(t.find_ids("p1")), ["p1"] + [f"p1{i}" for i in range(10)])
        # Paused on every shard, for a time (library version 38): stats say
        # until when (each shard's end, not their sum), and resumed.
        self.assertTrue(t.pause(for_ms=600000))
        s, now_ms = t.stats(), time.time() * 1000
        self.assertEqual(s["paused"], 1)
        self.assertTrue(now_ms + 500000 < s["pause_end"] < now_ms + 600000, s["pause_end"])
        self.assertEqual(t.reserve(4).jobs, [])
        self.assertTrue(t.resume())
        self.assertFalse(t.resume())
        self.assertEqual(t.stats()["pause_end"], -1)
        got = []
        while True:
            r = t.reserve(4, ttr_ms=30000)
            if not r.jobs:
                break
            got += r.jobs
        self.assertEqual(sorted(j.id for j in got), sorted([f"p{i}" for i in range(30)] + ["c1"]))
        for j in got:
            self.assertEqual(t.ack(j), redisched.OK)
        self.assertIn("hot\t0\t0\t0\t0\t0\tno", self.cli("stats", "hot"))

    def test_put_reserve_ack_with_the_documented_keys(self):
        t = self.topic("emails")
        self.assertEqual(t.put("welcome_42", b"Hello", priority=5), redisched.OK)
        self.assertEqual(t.put("welcome_42", b"again"), redisched.EXISTS)
        self.assertTrue(self.r.exists("redisched:{emails}:jobs"))
        self.assertEqual(t.get("welcome_42")["state"], b"ready")
        r = t.reserve(10, ttr_ms=30000)
        self.assertEqual([j.id for j in r.jobs], ["welcome_42"])
        self.assertEqual(r.jobs[0].body, b"Hello")
        self.assertEqual(t.ack(r.jobs[0]), redisched.OK)
        self.assertEqual(t.ack(r.jobs[0]), redisched.NOT_FOUND)
        self.assertIsNone(t.get("welcome_42"))
        # Counted in the topic's history (library version 34): the refusals not.
        total = t.history()[0]
        self.assertEqual((total["put"], total["started"], total["done"]), (1, 1, 1))
        self.assertEqual(t.stats()["done_total"], 1)
        # Found by id prefix; glob characters are themselves.
        for job_id in ("order_1", "order_2", "or*der"):
            t.put(job_id, b"x")
        self.assertEqual(sorted(t.find_ids("order_")), ["order_1", "order_2"])
        self.assertEqual(list(t.find_ids("or*")), ["or*der"])
        self.assertEqual(sorted(t.find_ids()), ["or*der", "order_1", "order_2"])

    def test_a_write_no_replica_had_raises_but_a_refusal_is_answered(self):
        # No replica here: WAIT 1 counts 0.
        t = redisched.Topic(self.r, "lonely", replicas=1, replica_timeout_ms=10)
        self.r.delete(*t.keys)
        with self.assertRaises(redisched.NotReplicated) as e:
            t.put("a", b"x")
        self.assertEqual(e.exception.reply, redisched.OK)  # done on the primary
        self.assertEqual(t.put("b", b"x", replace=True), 0)  # no such job: changed nothing
        # Exists is no refusal: it stands for the put that made the job.
        with self.assertRaises(redisched.NotReplicated) as e:
            t.put("a", b"x")
        self.assertEqual(e.exception.reply, redisched.EXISTS)

    def test_priority_first_and_failures_to_dead(self):
        t = self.topic("billing")
        t.put("low", b"l", priority=1, attempts=1)
        t.put("high", b"h", priority=9)
        r = t.reserve(2, worker="py-worker-1")
        self.assertEqual([j.id for j in r.jobs], ["high", "low"])
        self.assertEqual(t.get("low")["worker"], b"py-worker-1")
        # A report (library version 31): progress and log lines, kept.
        self.assertEqual(t.report(r.jobs[1], '{"percent":40}', ["one", "two"]), redisched.OK)
        self.assertEqual(t.fail(r.jobs[1], "card declined"), "dead")
        low = t.get("low")
        self.assertEqual((low["progress"], [e["line"] for e in low["log"]], low["log_total"]),
                         (b'{"percent":40}', [b"one", b"two"], 2))
        [attempt] = t.get("low")["history"]  # library version 30
        self.assertEqual((attempt["attempt"], attempt["outcome"], attempt["worker"], attempt["error"]),
                         (1, b"failed", b"py-worker-1", b"card declined"))
        self.assertLessEqual(attempt["started"], attempt["ended"])
        self.assertEqual(t.release(r.jobs[0], delay_ms=60000), redisched.OK)
        s = t.stats()
        self.assertEqual((s["dead"], s["delayed"], s["ready"]), (1, 1, 0))
        # In place (library version 33): a waiting job's priority and due time.
        self.assertEqual(t.reschedule("high", priority=3, at_ms=1), redisched.OK)
        high = t.get("high", body=False)
        self.assertEqual((high["state"], high["priority"], high["body"]), (b"ready", 3, b""))
        self.assertEqual(t.reschedule("low", priority=1), redisched.WRONG_STATE)
        self.assertEqual(t.reschedule("nope", delay_ms=1), redisched.NOT_FOUND)
        # One job by its id (library version 38): the dead one, ahead of high.
        outcome, low = t.reserve_job("low", worker="py-worker-2")
        self.assertEqual((outcome, low.id, low.attempt), (redisched.OK, "low", 1))
        self.assertEqual(t.get("low")["worker"], b"py-worker-2")
        self.assertEqual(t.reserve_job("low"), (redisched.WRONG_STATE, None))
        self.assertEqual(t.reserve_job("nope"), (redisched.NOT_FOUND, None))
        self.assertEqual(t.ack(low), redisched.OK)
        self.assertEqual([j.id for j in t.reserve(5).jobs], ["high"])

    def test_a_pause_for_a_time_ends_by_itself(self):
        t = self.topic("paused")
        self.assertEqual(t.put("a", b"x"), redisched.OK)
        self.assertTrue(t.pause())
        self.assertEqual((t.stats()["paused"], t.stats()["pause_end"]), (1, -1))
        r = t.reserve(1)
        self.assertEqual((r.jobs, r.paused), ([], True))
        # A pause for 1 ms replaces the one without end, and is over by the
        # next reserve whatever the machine's speed.
        self.assertTrue(t.pause(for_ms=1))
        time.sleep(0.01)
        self.assertEqual([j.id for j in t.reserve(1).jobs], ["a"])
        self.assertEqual(t.stats()["paused"], 0)
        self.assertFalse(t.resume())  # (over, and cleared by that reserve)

    def test_the_cli_reads_what_python_put_and_the_other_way(self):
        t = self.topic("shared")
        t.put("from_python", b"hi from python")
        self.assertIn("hi from python", self.cli("get", "shared", "from_python"))
        self.cli("put", "shared", "from_cli", "hi from c++")
        jobs = t.reserve(5).jobs
        self.assertEqual(sorted(j.id for j in jobs), ["from_cli", "from_python"])

    def test_python_waits_for_the_result_the_cli_acks_with(self):
        t = self.topic("reports")
        self.assertEqual(t.put("monthly", b"november", keep_ms=60000), redisched.OK)

        def worker():
            time.sleep(0.3)
            r = t.reserve()
            assert r.jobs[0].keep == 60000, r.jobs
            self.cli("ack", "reports", "monthly", str(r.jobs[0].token), "--keep", "60000",
                     "--result", "1234 rows")

        w = threading.Thread(target=worker)
        w.start()
        t0 = time.monotonic()
        job = t.wait("monthly", 10)
        took = time.monotonic() - t0
        w.join()
        self.assertEqual(job["state"], b"done")
        self.assertEqual(job["result"], b"1234 rows")
        self.assertLess(took, 3, "woken by the signal, not the timeout")
        # A result from Python, read by the CLI's wait.
        t.put("weekly", b"week 48", keep_ms=60000)
        r = t.reserve()
        self.assertEqual(t.ack(r.jobs[0], result=b"56 rows"), redisched.OK)
        self.assertIn("result:       56 rows", self.cli("wait", "reports", "weekly"))
        self.assertEqual(t.wait("never", 0.1), None)

    def test_a_worker_sleeps_on_the_signal_and_the_due_time(self):
        t = self.topic("work")
        ran = {}
        stop = threading.Event()

        def handler(job):
            if job.body == b"boom":
                raise ValueError("boom")
            ran[job.id] = time.monotonic()

        worker = threading.Thread(target=redisched.work, args=(t, handler, stop.is_set))
        worker.start()
        try:
            time.sleep(0.3)  # idle: nothing is scheduled
            put_at = time.monotonic()
            t.put("now", b"x")  # the wake-up signal brings it at once
            t.put("later", b"y", delay_ms=400)  # the due time Redis gave
            t.put("bad", b"boom", attempts=1)
            deadline = time.monotonic() + 3
            while len(ran) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            stop.set()
            worker.join()
        self.assertLess(ran["now"] - put_at, 0.2, "woken by the signal, not a poll")
        self.assertGreaterEqual(ran["later"] - put_at, 0.39)
        self.assertLess(ran["later"] - put_at, 0.9)
        self.assertEqual(t.get("bad")["state"], b"dead")
        self.assertEqual(t.get("bad")["error"], b"boom")
        # The loop names its reserves with its registry id: host:pid:hex.
        [attempt] = t.get("bad")["history"]
        self.assertRegex(attempt["worker"].decode(), r"^.+:%d:[0-9a-f]{8}$" % os.getpid())

    def test_a_worker_loop_keeps_an_entry_in_the_registry_and_leaves(self):
        t = self.topic("registry")
        started, release, stop = threading.Event(), threading.Event(), threading.Event()

        def handler(job):
            started.set()
            release.wait(10)

        t.put("slow", b"x")
        worker = threading.Thread(target=redisched.work, args=(t, handler, stop.is_set))
        worker.start()
        try:
            self.assertTrue(started.wait(5))
            deadline = time.monotonic() + redisched.BEAT_S + 2  # the next beat lists the job
            while True:
                mine = [w for w in redisched.workers(self.r) if ("registry", 1) in w.topics]
                if (mine and mine[0].running) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual(len(mine), 1)
            w = mine[0]
            self.assertEqual(w.pid, os.getpid())
            self.assertEqual(w.version, redisched.VERSION)
            self.assertTrue(w.id.startswith(w.host + ":" + str(os.getpid()) + ":"))
            self.assertEqual([(topic, job) for topic, job, _ in w.running], [("registry", "slow")])
            self.assertEqual(w.expires - w.beat, int(redisched.BEAT_S * 3000))
            # The C++ side reads the same entry.
            self.assertIn(w.id, self.cli("workers"))
        finally:
            release.set()
            stop.set()
            worker.join()
        self.assertEqual([w for w in redisched.workers(self.r) if w.id == mine[0].id], [],
                         "a loop that ends leaves the registry")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
