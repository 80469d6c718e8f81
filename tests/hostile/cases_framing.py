"""Limits, framing, request lines, garbage, slowloris, HEAD."""

import random
import time

from core import RAW, Case, R, describe
from harness import Conn, Malformed, Serve, StartError, chunked, request

H = b"Host: 127.0.0.1\r\n"
SMUGGLED = b"GET /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
PULL = b"POST /v1/topics/alpha/pull HTTP/1.1\r\n" + H  # a wrong acceptance pulls r1


def limits():
    cases = []
    big = "X-Big: " + "a" * 17000
    cases.append(R("limits/header-17000-over-max-header", "GET", "/healthz", headers=[big], expect=431,
                   close=True))
    many = ["X-H%04d: %s" % (i, "b" * 40) for i in range(400)]  # 20 KB of short headers
    cases.append(R("limits/400-headers-over-max-header", "GET", "/healthz", headers=many, expect=431,
                   close=True))
    cases.append(R("limits/request-line-over-max-header", "GET", "/healthz?x=" + "a" * 17000,
                   expect={414, 431}, close=True))
    cases.append(R("limits/head-just-under-max-header-ok", "GET", "/healthz",
                   headers=["X-Fill: " + "c" * 15500], expect=200, unchanged=True))
    cases.append(R("limits/single-header-70000", "GET", "/healthz", headers=["X-Huge: " + "d" * 70000],
                   expect={400, 431}, close=True))
    cases.append(R("limits/header-name-70000", "GET", "/healthz", headers=["X" * 70000 + ": e"],
                   expect={400, 431}, close=True))
    # Bodies over --max-request (2 MiB).
    huge = '{"mode":"upsert","body":"' + "x" * (3 << 20) + '"}'
    cases.append(R("limits/body-3MiB-over-max-request", "PUT", "/v1/topics/alpha/jobs/r1", huge,
                   expect=413, close=True))
    cases.append(RAW("limits/content-length-over-max-request-head-only",
                     b"PUT /v1/topics/alpha/jobs/r1 HTTP/1.1\r\n" + H +
                     b"Content-Length: 2097153\r\n\r\n", 413, close=True, method="PUT"))
    cases.append(RAW("limits/content-length-3e9-head-only",
                     b"PUT /v1/topics/alpha/jobs/r1 HTTP/1.1\r\n" + H +
                     b"Content-Length: 3000000000\r\n\r\n", 413, close=True, method="PUT"))
    body = ('{"mode":"upsert","body":"' + "y" * (5 << 19) + '"}').encode()  # 2.5 MiB
    cases.append(RAW("limits/chunked-body-grows-over-max-request",
                     b"PUT /v1/topics/alpha/jobs/r1 HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
                     + chunked(body, 65536), 413, close=True, method="PUT"))
    cases.append(RAW("limits/chunk-size-declared-over-max-request",
                     b"PUT /v1/topics/alpha/jobs/r1 HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
                     b"300000\r\n" + b"z" * 1000, 413, close=True, method="PUT"))
    cases.append(RAW("limits/chunk-size-overflows-64-bits",
                     PULL + b"Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\nab\r\n0\r\n\r\n",
                     {400, 413}, close=True, method="POST"))
    cases.append(RAW("limits/chunked-trailer-65534",
                     PULL + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: " + b"a" * 65534 +
                     b"\r\n\r\n", {400, 431}, close=True, method="POST"))
    cases.append(RAW("limits/chunked-trailer-2000-fields",
                     PULL + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n" +
                     b"".join(b"X-T%d: aaaaaaaaaaaaaaaaaaaa\r\n" % i for i in range(2000)) + b"\r\n",
                     {400, 431}, close=True, method="POST"))
    cases.append(RAW("limits/chunk-extension-100KiB",
                     PULL + b"Transfer-Encoding: chunked\r\n\r\n2;" + b"a" * 102400 + b"\r\n{}\r\n0\r\n\r\n",
                     {400, 431}, close=True, method="POST"))
    cases.append(RAW("limits/chunk-size-1MiB-of-leading-zeros",
                     PULL + b"Transfer-Encoding: chunked\r\n\r\n" + b"0" * (1 << 20) + b"2\r\n{}\r\n0\r\n\r\n",
                     {400, 413, 431}, close=True, method="POST"))
    cases.append(Case("limits/chunk-extension-64MiB-bounded-memory", {400, 431}, run=run_chunk_ext,
                      unchanged=True))
    cases.append(Case("limits/max-header-over-65535-refused-at-start", None, run=run_max_header_start,
                      server="main", unchanged=False))
    # Over the job body limit (1 MiB), under the request limit.
    over = "v" * ((1 << 20) + 10)
    cases.append(R("limits/job-body-over-1MiB", "PUT", "/v1/topics/alpha/jobs/r1",
                   '{"mode":"upsert","body":"%s"}' % over, expect={400, 413}))
    cases.append(R("limits/job-body-base64-over-1MiB", "PUT", "/v1/topics/alpha/jobs/r1",
                   '{"mode":"upsert","body_base64":"%s"}' % ("QUJD" * 350000), expect={400, 413}))
    cases.append(R("limits/generated-id-body-over-1MiB", "POST", "/v1/topics/alpha/jobs",
                   '{"body":"%s"}' % over, expect={400, 413}))
    cases.append(R("limits/fail-error-over-8KiB", "POST", "/v1/topics/alpha/jobs/s1/fail",
                   '{"token":%d,"error":"%s"}' % (987654321987, "e" * 9000), expect={400, 413}))
    return cases


def run_chunk_ext(ctx, srv):
    """A chunk extension of 64 MiB sent in pieces: the server must refuse it
    without holding it: its peak memory (VmHWM, reset before the case) grows
    by less than 32 MB."""
    srv.reset_hwm()
    base = srv.vm_hwm_kb()
    c = Conn(srv.port)
    failures = []
    try:
        c.send(PULL + b"Transfer-Encoding: chunked\r\n\r\n2;")
        piece = b"a" * (1 << 18)
        total = 0
        while total < (64 << 20) and not c.eof and not c.buf and c.send_error is None:
            n = c.send(piece, stall=3.0, until=lambda cc: bool(cc.buf))
            total += n
            if n < len(piece):
                break
        hwm = srv.vm_hwm_kb()
        try:
            resp = c.read_response("POST", 3.0)
        except Malformed as e:
            resp = None
            failures.append("malformed answer: %s" % e)
        observed = "%s after %.1f MiB sent, VmHWM %s kB (was %s kB)" % (
            describe(resp) if resp else ("closed" if c.eof else "no answer"), total / 1048576.0, hwm, base)
        if resp is None:
            failures.append("no answer")
        elif resp.status not in (400, 431):
            failures.append("status %d" % resp.status)
        if hwm is not None and base is not None and (hwm - base) * 1024 >= 32 << 20:
            failures.append("VmHWM grew %d kB: over 32 MiB" % (hwm - base))
        return observed, failures
    finally:
        c.close()


def run_max_header_start(ctx, srv):
    """--max-header above 65535 is refused at start, naming the option."""
    s = Serve(srv.binary, "maxheader", ["--max-header", "65536"])
    try:
        try:
            s.start(timeout=8)
        except StartError as e:
            text = str(e)
            if "exited at start" not in text:
                return "did not start or exit", ["neither started nor exited: %s" % text[:200]]
            if "max-header" not in text:
                return "exited, message without --max-header", ["message does not name --max-header: %s"
                                                                % text[-300:]]
            return "refused at start", []
        return "started", ["serve started with --max-header 65536"]
    finally:
        s.stop()
        s.cleanup()


TE_BAD = [
    ("chunked-gzip", b"chunked, gzip"),
    ("gzip", b"gzip"),
    ("gzip-chunked", b"gzip, chunked"),
    ("xchunked", b"xchunked"),
    ("chunkedx", b"chunkedx"),
    ("identity", b"identity"),
    ("chunked-chunked", b"chunked, chunked"),
    ("quoted", b'"chunked"'),
    ("param-q", b"chunked;q=1"),
    ("empty", b""),
    ("vertical-tab", b"\x0bchunked"),
    ("comma-only", b","),
]


def te_cases():
    cases = []
    body = chunked(b'{"count":1}')
    for name, te in TE_BAD:
        # Refused, closed, and the request smuggled behind it never runs.
        cases.append(RAW("framing/te-%s" % name,
                         PULL + b"Transfer-Encoding: " + te + b"\r\n\r\n" + body + SMUGGLED,
                         {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-two-headers",
                     PULL + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + body + SMUGGLED,
                     {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-two-headers-gzip-second",
                     PULL + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n" + body + SMUGGLED,
                     {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-obs-fold",
                     PULL + b"Transfer-Encoding:\r\n chunked\r\n\r\n" + body + SMUGGLED,
                     {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-obs-fold-continuation",
                     PULL + b"Transfer-Encoding: chunked\r\n , identity\r\n\r\n" + body + SMUGGLED,
                     {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-space-before-colon",
                     PULL + b"Transfer-Encoding : chunked\r\n\r\n" + body + SMUGGLED,
                     {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-on-http10",
                     b"POST /v1/topics/alpha/pull HTTP/1.0\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n" +
                     body + SMUGGLED, {400, 501}, close=True, method="POST"))
    cases.append(RAW("framing/te-and-content-length",
                     PULL + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" + body + SMUGGLED,
                     400, close=True, method="POST"))
    cases.append(RAW("framing/content-length-and-te",
                     PULL + b"Transfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n" + body + SMUGGLED,
                     400, close=True, method="POST"))
    cases.append(RAW("framing/te-gzip-and-content-length",
                     PULL + b"Transfer-Encoding: gzip\r\nContent-Length: 11\r\n\r\n" + b'{"count":1}' + SMUGGLED,
                     400, close=True, method="POST"))
    # Case-insensitive "chunked" is accepted (a put on a scratch topic).
    for name, te in (("upper", b"CHUNKED"), ("mixed", b"Chunked")):
        cases.append(RAW("framing/te-%s-accepted" % name,
                         b"PUT /v1/topics/scratch/jobs/te-%s HTTP/1.1\r\n" % name.encode() + H +
                         b"Transfer-Encoding: " + te + b"\r\n\r\n" + chunked(b'{"body":"ok"}', 4),
                         201, method="PUT"))
    cases.append(RAW("framing/chunked-with-small-trailer-accepted",
                     b"PUT /v1/topics/scratch/jobs/te-trailer HTTP/1.1\r\n" + H +
                     b"Transfer-Encoding: chunked\r\n\r\nd\r\n{\"body\":\"ok\"}\r\n0\r\nX-Trailer: 1\r\n\r\n",
                     201, method="PUT"))
    # Broken chunked bodies.
    for name, raw in (("negative-size", b"-2\r\n{}\r\n0\r\n\r\n"),
                      ("size-not-hex", b"zz\r\n{}\r\n0\r\n\r\n"),
                      ("no-crlf-after-data", b"2\r\n{}XX0\r\n\r\n"),
                      ("size-with-space", b"2 \r\n{}\r\n0\r\n\r\n"),
                      ("size-0x-prefix", b"0x2\r\n{}\r\n0\r\n\r\n"),
                      ("data-longer-than-size", b"1\r\n{}\r\n0\r\n\r\n"),
                      ("bare-lf", b"2\n{}\n0\n\n")):
        cases.append(RAW("framing/chunked-%s" % name,
                         PULL + b"Transfer-Encoding: chunked\r\n\r\n" + raw + SMUGGLED,
                         400, close=True, method="POST"))
    return cases


CL_BAD = [
    ("negative", [b"-1"], {400}),
    ("signed-plus", [b"+11"], {400}),
    ("hex", [b"0xb"], {400}),
    ("huge-20-digits", [b"99999999999999999999"], {400, 413}),
    ("decimal-point", [b"11.0"], {400}),
    ("empty", [b""], {400}),
    ("two-numbers", [b"11 11"], {400}),
    ("list-different", [b"11, 12"], {400}),
    ("two-headers-different", [b"11", b"12"], {400}),
    ("letters", [b"eleven"], {400}),
    ("exponent", [b"1e1"], {400}),
]


def cl_cases():
    cases = []
    for name, values, want in CL_BAD:
        head = PULL + b"".join(b"Content-Length: " + v + b"\r\n" for v in values) + b"\r\n"
        # After a framing error the server cannot know where the next request
        # starts: stricter reading, it must close (and never run what follows).
        cases.append(RAW("framing/content-length-%s" % name, head + b'{"count":1}' + SMUGGLED, want,
                         close=True, method="POST"))
    return cases


def request_line_cases():
    cases = []

    def rl(name, line, want={400}, extra=b"", **kw):
        kw.setdefault("close", True)
        cases.append(RAW("reqline/" + name, line + b"\r\n" + H + extra + b"\r\n", want, **kw))

    rl("garbage-word", b"HELLO")
    rl("nuls", b"\x00\x00\x00\x00")
    rl("nul-in-method", b"G\x00T /healthz HTTP/1.1")
    rl("nul-in-target", b"GET /heal\x00thz HTTP/1.1")
    rl("missing-version", b"GET /healthz")
    rl("missing-target", b"GET HTTP/1.1")
    rl("http-2.0", b"GET /healthz HTTP/2.0", {400, 505})
    rl("http-3", b"GET /healthz HTTP/3", {400, 505})
    rl("http-0.9-style", b"GET /healthz HTTP/0.9", {400, 505})
    rl("version-lowercase", b"GET /healthz http/1.1")
    rl("version-garbage", b"GET /healthz HTTP/1.x", {400, 505})
    # Methods are case-sensitive: "get" is a method the server does not
    # implement (RFC 9110 9.1: 501).
    rl("lowercase-method", b"get /healthz HTTP/1.1", {501}, close=False)
    rl("lowercase-method-put", b"put /v1/topics/alpha/jobs/r1 HTTP/1.1", {501}, close=False)
    # RFC 9112 3.2.2: a server MUST accept the absolute form.
    rl("absolute-form", b"GET http://127.0.0.1/healthz HTTP/1.1", {200}, close=False)
    rl("absolute-form-v1", b"GET http://127.0.0.1/v1/topics/alpha HTTP/1.1", {200}, close=False)
    rl("asterisk-form", b"GET * HTTP/1.1", close=False)
    rl("authority-form-connect", b"CONNECT 127.0.0.1:6379 HTTP/1.1", {400, 405, 501}, close=False)
    rl("target-9000-bytes", b"GET /" + b"a" * 9000 + b" HTTP/1.1", {400, 414, 431}, close=False)
    rl("query-9000-bytes", b"GET /healthz?" + b"q" * 9000 + b" HTTP/1.1", {400, 414, 431}, close=False)
    rl("v1-target-9000-bytes", b"GET /v1/topics/alpha/jobs/" + b"i" * 9000 + b" HTTP/1.1", {400, 414, 431}, close=False)
    rl("method-10000-bytes", b"A" * 10000 + b" /healthz HTTP/1.1", {400, 414, 431, 501}, close=False)
    rl("double-space", b"GET  /healthz HTTP/1.1")
    rl("tab-separator", b"GET\t/healthz HTTP/1.1")
    rl("trailing-word", b"GET /healthz HTTP/1.1 extra")
    rl("fragment-in-target", b"GET /healthz#frag HTTP/1.1", close=False)
    rl("bad-percent", b"GET /v1/topics/%ZZ HTTP/1.1", close=False)
    rl("lone-percent", b"GET /v1/topics/alpha/jobs/% HTTP/1.1", close=False)
    rl("raw-utf8-in-target", b"GET /v1/topics/\xc3\xa9 HTTP/1.1", close=False)
    rl("raw-high-byte-in-target", b"GET /v1/topics/alpha/jobs/\xff HTTP/1.1", close=False)
    rl("space-in-target", b"GET /v1/topics/al pha HTTP/1.1", close=False)
    rl("control-in-method", b"G\x01T /healthz HTTP/1.1")
    rl("empty-method", b" /healthz HTTP/1.1")
    rl("relative-target", b"GET healthz HTTP/1.1", close=False)
    cases.append(RAW("reqline/bare-lf-line-ends", b"GET /healthz HTTP/1.1\nHost: x\n\n", 400, close=True))
    cases.append(RAW("reqline/mixed-line-ends", b"GET /healthz HTTP/1.1\r\nHost: x\n\r\n", 400, close=True))
    cases.append(RAW("reqline/bare-cr-line-ends", b"GET /healthz HTTP/1.1\rHost: x\r\r", 400, close=True,
                     garbage=True))
    return cases


def header_cases():
    cases = []

    def hd(name, lines, want={400}, **kw):
        kw.setdefault("close", True)
        cases.append(RAW("headers/" + name, b"GET /healthz HTTP/1.1\r\n" + lines + b"\r\n", want, **kw))

    hd("no-colon", H + b"X-No-Colon\r\n")
    hd("space-before-colon", b"Host : 127.0.0.1\r\n")
    hd("space-in-name", H + b"X Bad: 1\r\n")
    hd("nul-in-value", H + b"X-A: a\x00b\r\n")
    hd("cr-in-value", H + b"X-A: a\rb\r\n")
    hd("obs-fold", H + b"X-A: a\r\n b\r\n", close=False)
    hd("leading-whitespace-first-header", b" Host: 127.0.0.1\r\n")
    hd("empty-name", H + b": value\r\n")
    hd("non-token-name", H + b"X(A): 1\r\n")
    # RFC 9112 3.2: an HTTP/1.1 request without Host, or with two, is answered 400.
    hd("missing-host", b"", close=False)
    hd("two-hosts", b"Host: a\r\nHost: b\r\n", close=False)
    hd("high-bytes-in-name", H + b"X-\xff\xfe: 1\r\n")
    return cases


def pipelining_cases():
    return [
        RAW("framing/pipelined-two-gets",
            request("GET", "/healthz") + request("GET", "/v1/topics/alpha/jobs/r1"), 200, answers=2,
            then=[200], unchanged=False),
        RAW("framing/http10-answered-and-closed", b"GET /healthz HTTP/1.0\r\n\r\n", 200, close=True,
            unchanged=True),
        RAW("framing/connection-close-honoured",
            b"GET /healthz HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\n" + SMUGGLED, 200, close=True,
            unchanged=True),
        RAW("framing/valid-then-garbage",
            request("GET", "/healthz") + b"\x16\x03\x01\x00\xa5garbage\r\n\r\n", 200, answers=2, then=[400],
            close=True, unchanged=True),
        RAW("framing/tls-client-hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) +
            b"\x00" * 64, 400, garbage=True),
        RAW("framing/body-on-get-consumed",
            b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length: 40\r\n\r\n" + SMUGGLED[:40] +
            request("GET", "/healthz"), 200, answers=2, then=[200], unchanged=True),
        RAW("framing/content-length-shorter-than-body",
            b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length: 2\r\n\r\n{}XYZ\r\n\r\n", 200, answers=2,
            then=[400], close=True, unchanged=True),
    ]


def garbage_cases():
    rng = random.Random(20241130)
    cases = []
    lengths = [1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 64, 100, 127, 128, 255, 256, 511, 512, 1000, 1024,
               2048, 4096, 5000, 8192, 10000, 16383, 16384, 16385, 20000, 32768, 65536]
    for i, n in enumerate(lengths):
        data = bytes(rng.getrandbits(8) for _ in range(n))
        cases.append(RAW("garbage/random-%02d-%dB" % (i, n), data, {400, 413, 414, 431, 501, 505},
                         garbage=True, unchanged=True))
    # Printable garbage, and garbage after a valid request line.
    for i, n in enumerate([10, 200, 3000, 20000]):
        data = bytes(rng.choice(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ /:\r\n\t") for _ in range(n))
        cases.append(RAW("garbage/printable-%d-%dB" % (i, n), data, {400, 413, 414, 431, 501, 505},
                         garbage=True, unchanged=True))
    for i, n in enumerate([10, 500, 5000]):
        data = b"GET /healthz HTTP/1.1\r\n" + bytes(rng.getrandbits(8) for _ in range(n)) + b"\r\n\r\n"
        cases.append(RAW("garbage/after-request-line-%d-%dB" % (i, n), data, {400, 413, 414, 431, 501, 505},
                         garbage=True, unchanged=True))
    for i, n in enumerate([10, 500, 5000]):
        data = PULL + b"Content-Length: %d\r\n\r\n" % n + bytes(rng.getrandbits(8) for _ in range(n))
        cases.append(RAW("garbage/json-body-%d-%dB" % (i, n), data, 400, method="POST"))
    return cases


# --------------------------------------------------------------------------
# Slowloris (the "slow" instance: --idle-timeout 500 --header-timeout 1000)

IDLE_S = 0.5
HEADER_S = 1.0


def run_slow_header(ctx, srv):
    """One byte of the head per 200 ms: closed within header-timeout + 1 s."""
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 200
    c = Conn(srv.port)
    try:
        start = time.monotonic()
        i = 0
        limit = HEADER_S + 1.0
        while time.monotonic() - start < limit + 2.0:
            if i < len(head):
                try:
                    c.sock.send(head[i:i + 1])
                except OSError:
                    break
                i += 1
            c.fill(time.monotonic() + 0.2)
            if c.eof or c.buf:
                break
        took = time.monotonic() - start
        status = ""
        if c.buf:
            try:
                r = c.read_response("GET", 1.0)
                status = " with %s" % describe(r)
                if r is not None and r.status not in (408, 400, 431):
                    return "answered %d" % r.status, ["a trickled head was answered %d" % r.status]
            except Malformed as e:
                return "malformed", ["malformed answer: %s" % e]
            c.wait_close(1.0)
        if not c.eof:
            return "open after %.1f s" % took, ["still open %.1f s after its first byte (%d bytes sent)"
                                                % (took, i)]
        obs = "closed after %.2f s%s" % (took, status)
        if took > limit:
            return obs, ["closed after %.2f s, later than header-timeout + 1 s" % took]
        return obs, []
    finally:
        c.close()


def run_slow_body(ctx, srv):
    """A complete head, then the body at one byte per 200 ms: the server must
    not wait for it forever (stricter reading: closed within 5 s)."""
    c = Conn(srv.port)
    try:
        c.send(b"PUT /v1/topics/slow/jobs/j HTTP/1.1\r\n" + H + b"Content-Length: 1000\r\n\r\n")
        start = time.monotonic()
        while time.monotonic() - start < 7.0:
            try:
                c.sock.send(b"x")
            except OSError:
                break
            c.fill(time.monotonic() + 0.2)
            if c.eof or c.buf:
                break
        took = time.monotonic() - start
        if not c.eof and not c.buf:
            return "open after %.1f s" % took, ["a trickled body kept the connection %.1f s" % took]
        return "closed after %.2f s" % took, [] if took <= 5.0 else ["closed only after %.1f s" % took]
    finally:
        c.close()


def run_idle_keepalive(ctx, srv):
    """An idle keep-alive connection is closed after --idle-timeout."""
    c = Conn(srv.port)
    try:
        c.send(request("GET", "/healthz"))
        r = c.read_response("GET", 3.0)
        if r is None or r.status != 200:
            return describe(r), ["healthz did not answer 200"]
        t0 = time.monotonic()
        state = c.wait_close(IDLE_S + 2.0)
        took = time.monotonic() - t0
        if state != "eof":
            return "%s after %.1f s" % (state, took), ["idle keep-alive connection %s after %.1f s"
                                                       % ("still open" if state == "open" else "sent data", took)]
        obs = "closed after %.2f s idle" % took
        if took > IDLE_S + 1.0:
            return obs, ["closed later than idle-timeout + 1 s"]
        if took < IDLE_S * 0.6:
            return obs, ["closed before the idle timeout"]
        return obs, []
    finally:
        c.close()


def run_idle_fresh(ctx, srv):
    """A connection that never sends a byte is closed after --idle-timeout."""
    c = Conn(srv.port)
    try:
        t0 = time.monotonic()
        state = c.wait_close(IDLE_S + 2.5)
        took = time.monotonic() - t0
        if state != "eof":
            return "%s after %.1f s" % (state, took), ["silent connection not closed"]
        if took > IDLE_S + 1.0:
            return "closed after %.2f s" % took, ["closed later than idle-timeout + 1 s"]
        return "closed after %.2f s" % took, []
    finally:
        c.close()


def run_half_open(ctx, srv):
    """50 connections holding half-sent requests; a normal request is still
    answered within 1 s (twice: at once and a second later)."""
    partials = [b"", b"G", b"GET /v1/topics HTTP/1.1\r\n", b"GET /v1/topics HTTP/1.1\r\nHost: x\r\n",
                b"PUT /v1/topics/alpha/jobs/r1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mode\"",
                PULL + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"co"]
    conns = []
    failures = []
    times = []
    try:
        for i in range(50):
            c = Conn(srv.port)
            if partials[i % len(partials)]:
                c.send(partials[i % len(partials)])
            conns.append(c)
        for round_ in range(2):
            if round_:
                time.sleep(1.0)
            t0 = time.monotonic()
            c = Conn(srv.port)
            try:
                c.send(request("GET", "/v1/topics/beta"))
                r = c.read_response("GET", 5.0)
            finally:
                c.close()
            took = time.monotonic() - t0
            times.append(took)
            if r is None or r.status != 200:
                failures.append("normal request got %s" % describe(r))
            elif took >= 1.0:
                failures.append("normal request took %.2f s" % took)
        return "answered in %s s" % "/".join("%.3f" % t for t in times), failures
    finally:
        for c in conns:
            c.close()


def slow_cases():
    return [
        Case("slow/header-one-byte-per-200ms", None, run=run_slow_header, server="slow", unchanged=True),
        Case("slow/body-one-byte-per-200ms", None, run=run_slow_body, server="slow", unchanged=True),
        Case("slow/idle-keepalive-closed", None, run=run_idle_keepalive, server="slow", unchanged=True),
        Case("slow/silent-connection-closed", None, run=run_idle_fresh, server="slow", unchanged=True),
        Case("slow/50-half-open-connections", None, run=run_half_open, server="main", unchanged=False),
    ]


# --------------------------------------------------------------------------
# HEAD


def head_runner(target, compare_length=True, want_status=200):
    def run(ctx, srv):
        c = Conn(srv.port)
        failures = []
        try:
            c.send(request("HEAD", target))
            try:
                h = c.read_response("HEAD", 5.0)
            except Malformed as e:
                return "malformed", ["HEAD answer malformed: %s" % e]
            if h is None:
                return "no answer", ["no answer to HEAD"]
            if h.status != want_status:
                failures.append("HEAD status %d" % h.status)
            time.sleep(0.2)
            c.fill(time.monotonic() + 0.05)
            stray = c.buf
            if stray:
                failures.append("HEAD answer carries %d bytes of body: %r" % (len(stray), stray[:60]))
            if h.wants_close():
                return describe(h) + ", closed", failures + ["HEAD answer closes the connection"]
            c.send(request("GET", target))
            try:
                g = c.read_response("GET", 5.0)
            except Malformed as e:
                return describe(h) + ", GET malformed", failures + [
                    "the GET after the HEAD got a malformed answer: %s" % e]
            if g is None:
                return describe(h) + ", GET unanswered", failures + ["no answer to the GET after the HEAD"]
            if g.status != h.status:
                failures.append("HEAD %d but GET %d" % (h.status, g.status))
            cl = h.header("content-length")
            if cl is None:
                failures.append("HEAD answer without Content-Length")
            elif compare_length and cl != str(len(g.body)):
                failures.append("HEAD Content-Length %s, GET body %d bytes" % (cl, len(g.body)))
            skip = {"content-length", "date"}
            hh = sorted((k.lower(), v) for k, v in h.headers if k.lower() not in skip)
            gh = sorted((k.lower(), v) for k, v in g.headers if k.lower() not in skip)
            if hh != gh:
                failures.append("headers differ: HEAD %s GET %s" % (
                    [x for x in hh if x not in gh], [x for x in gh if x not in hh]))
            return "HEAD %s, GET %s" % (describe(h), describe(g)), failures
        finally:
            c.close()
    return run


def head_cases():
    routes = [("root", "/", True), ("app-js", "/app.js", True), ("index-html", "/index.html", True),
              ("style-css", "/style.css", True), ("healthz", "/healthz", True),
              ("topics", "/v1/topics", True), ("topic-alpha", "/v1/topics/alpha", True),
              ("job-r1", "/v1/topics/alpha/jobs/r1", True), ("list-dead", "/v1/topics/alpha/jobs?state=dead", True),
              ("metrics", "/metrics", False)]
    cases = [Case("head/%s" % n, None, run=head_runner(t, cmp), unchanged=False) for n, t, cmp in routes]
    cases.append(Case("head/unknown-path-404", None, run=head_runner("/nowhere", True, 404), unchanged=True))
    cases.append(Case("head/job-nosuch-404", None, run=head_runner("/v1/topics/alpha/jobs/nosuch", True, 404),
                      unchanged=True))
    return cases


def cases():
    return (limits() + te_cases() + cl_cases() + request_line_cases() + header_cases() +
            pipelining_cases() + garbage_cases() + slow_cases() + head_cases())
