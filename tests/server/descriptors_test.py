"""serve out of file descriptors: its accept loops wait rather than spin,
and it serves again once descriptors are free.

serve starts under `prlimit --nofile=64:64` (it raises its soft limit to the
hard one at start, so the hard one is what counts), with its HTTP and
beanstalkd faces. 200 connections to each then queue in the kernel past what
serve can accept (EMFILE). Over the next 3 s serve must use under 0.3 s of
CPU (a loop that retried at once would use all it gets); once the
connections close, both faces answer again.

    descriptors_test.py BINARY
"""

import os
import re
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
from serve_process import start_serve  # noqa: E402

CONNECTIONS = 200


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def http_ok(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data.startswith(b"HTTP/1.1 200 ")


def beanstalk_ok(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"list-tube-used\r\n")
        return s.recv(100) == b"USING default\r\n"


def answers_again(check, port, within=10):
    deadline = time.monotonic() + within
    while True:
        try:
            if check(port):
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def main():
    binary = sys.argv[1]
    d = tempfile.mkdtemp(prefix="redisched-descriptors-")
    log = os.path.join(d, "serve.log")
    proc, port = start_serve(
        ["prlimit", "--nofile=64:64", binary, "--data-dir", os.path.join(d, "data"), "serve",
         "--listen", "127.0.0.1:0", "--beanstalk", "127.0.0.1:0", "--max-connections", "1000"],
        log)
    try:
        with open(log, "rb") as f:
            bport = int(re.search(rb"beanstalkd's protocol on [^ ]*?:(\d+)", f.read()).group(1))
        assert http_ok(port) and beanstalk_ok(bport), "serve does not answer at start"
        held = []
        for p in (port, bport):
            for _ in range(CONNECTIONS):
                held.append(socket.create_connection(("127.0.0.1", p), timeout=5))
        time.sleep(0.5)  # (serve takes what it can, then meets EMFILE)
        before = cpu_seconds(proc.pid)
        time.sleep(3)
        used = cpu_seconds(proc.pid) - before
        with open(log, "rb") as f:
            text = f.read()
        assert b"accept: Too many open files" in text, "serve never ran out of descriptors"
        assert used < 0.3, "serve used %.2f s of CPU in 3 s out of descriptors: a loop spins" % used
        for s in held:
            s.close()
        assert answers_again(http_ok, port), "the HTTP face does not answer once descriptors are free"
        assert answers_again(beanstalk_ok, bport), "the beanstalkd face does not answer again"
        print("ok: out of descriptors, serve used %.2f s of CPU in 3 s, and answers again" % used)
    finally:
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
