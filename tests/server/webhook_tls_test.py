#!/usr/bin/python3
"""https webhooks: serve checks the receiver's certificate (it must chain to
--webhook-ca, or to the system's CAs) and that it names the URL's host.

Three receivers on 127.0.0.1, each with a self-signed certificate:
  good       names 127.0.0.1, and is in the CA file  -> delivered, job acked
  wrongname  names other.example only, in the CA file -> refused (name)
  untrusted  names 127.0.0.1, not in the CA file      -> refused (chain)
A refused delivery never reaches the receiver's HTTP handler, and the job
is failed with the TLS error (retried later, as any failed delivery).

Usage: webhook_tls_test.py REDISCHED_BINARY
"""

import http.server
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from serve_process import start_serve  # noqa: E402

BINARY = None


def make_cert(d, name, san):
    key, cert = os.path.join(d, name + ".key"), os.path.join(d, name + ".pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=" + name, "-addext", "subjectAltName=" + san,
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


class Receiver:
    def __init__(self, cert, key):
        self.bodies = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                outer.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


class WebhookTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="redisched-webhook-tls-")
        good = make_cert(cls.dir, "good", "IP:127.0.0.1")
        wrong = make_cert(cls.dir, "wrongname", "DNS:other.example")
        untrusted = make_cert(cls.dir, "untrusted", "IP:127.0.0.1")
        cas = os.path.join(cls.dir, "cas.pem")
        with open(cas, "w") as out:
            for cert, _ in (good, wrong):
                with open(cert) as f:
                    out.write(f.read())
        cls.receivers = {"good": Receiver(*good), "wrongname": Receiver(*wrong),
                         "untrusted": Receiver(*untrusted)}
        argv = [BINARY, "--data-dir", os.path.join(cls.dir, "data"), "serve", "--listen",
                "127.0.0.1:0", "--webhook-ca", cas, "--webhook-allow", "127.0.0.1"]
        for topic, r in cls.receivers.items():
            argv += ["--webhook", "%s=https://127.0.0.1:%d/hook" % (topic, r.port)]
        cls.serve, cls.port = start_serve(argv, os.path.join(cls.dir, "serve.log"))

    @classmethod
    def tearDownClass(cls):
        cls.serve.send_signal(signal.SIGTERM)
        cls.serve.wait(30)
        for r in cls.receivers.values():
            r.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def call(self, method, path, body=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def wait_until(self, pred, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if pred():
                return True
            time.sleep(0.05)
        return False

    def test_a_trusted_certificate_naming_the_host_gets_the_job(self):
        self.assertEqual(self.call("PUT", "/v1/topics/good/jobs/j", {"body": "hello"})[0], 201)
        self.assertTrue(self.wait_until(lambda: self.receivers["good"].bodies))
        self.assertEqual(json.loads(self.receivers["good"].bodies[0])["body"], "hello")
        self.assertTrue(self.wait_until(
            lambda: self.call("GET", "/v1/topics/good/jobs/j")[0] == 404), "acked on 200")

    def check_refused(self, topic, why):
        self.assertEqual(self.call("PUT", "/v1/topics/%s/jobs/j" % topic, {"body": "x"})[0], 201)

        def failed():
            status, job = self.call("GET", "/v1/topics/%s/jobs/j" % topic)
            return status == 200 and job.get("error")
        self.assertTrue(self.wait_until(failed), "the delivery was not failed")
        error = self.call("GET", "/v1/topics/%s/jobs/j" % topic)[1]["error"]
        print("%s: %s" % (topic, error))
        self.assertRegex(error, why)
        self.assertEqual(self.receivers[topic].bodies, [], "the request went out")

    def test_a_certificate_for_another_name_is_refused(self):
        self.check_refused("wrongname", r"certificate verify failed")

    def test_a_certificate_outside_the_ca_file_is_refused(self):
        self.check_refused("untrusted", r"certificate verify failed")

    def test_a_destination_outside_the_allowlist_is_refused(self):
        status, body = self.call("PUT", "/v1/topics/other/webhook",
                                 {"url": "https://localhost:%d/" % self.receivers["good"].port})
        self.assertEqual(status, 403)
        self.assertIn("--webhook-allow", body["error"]["message"])
        self.assertEqual(self.call("GET", "/v1/topics/other/webhook")[0], 404)


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
