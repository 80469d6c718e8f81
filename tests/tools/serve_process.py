"""`redisched serve` started from a Python test: the process, its log, and
the port it listens on (its first line says "listening on http://HOST:PORT";
tests give --listen 127.0.0.1:0). Standard library only.

    import sys; sys.path.insert(0, "<tests>/tools")
    from serve_process import start_serve
    proc, port = start_serve([binary, "--data-dir", d, "serve", "--listen", "127.0.0.1:0"],
                             log_path)
"""

import re
import subprocess
import time

LISTENING = re.compile(rb"listening on http://[^ ]*?:(\d+)")


class StartError(Exception):
    """serve exited at start, or did not listen in time."""


def start_serve(argv, log_path, timeout=20.0):
    """Starts argv with stdout and stderr appended to log_path; returns
    (process, port) once this process said where it listens. Raises
    StartError with the log's tail if it exits first or says nothing in
    time (it is killed then)."""
    log = open(log_path, "ab")
    offset = log.tell()  # a restart appends: look only at what this process prints
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()  # (the child has its own)
    deadline = time.monotonic() + timeout
    while True:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read()
        m = LISTENING.search(text)
        if m and proc.poll() is None:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            raise StartError("redisched serve exited at start (status %d): %s"
                             % (proc.returncode, text.decode("utf-8", "replace")[-2000:]))
        if time.monotonic() >= deadline:
            proc.kill()
            proc.wait()
            raise StartError("redisched serve did not listen within %.0f s: %s"
                             % (timeout, text.decode("utf-8", "replace")[-2000:]))
        time.sleep(0.005)
