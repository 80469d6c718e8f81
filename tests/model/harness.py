"""Test harness: a throwaway redis-server, a plain RESP client that keeps
status and bulk replies apart (as the C++ codec does), the library loaded
(optionally with its housekeeping bounds lowered), and a reader of the
topic's raw keys with the invariants every state must keep.
"""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

from model import Error, Status

# A topic's keys, in the order the calls take them: all eleven since
# library version 23, the first eight before (and still accepted); the
# twelfth, history, since version 34, optional (the model passes eleven:
# its calls count nothing; regressions_test.py, class History, checks it);
# the last three, the flows' (version 35), optional too: the library names
# them from the first key for a caller that passes 8, 11 or 12.
KEY_NAMES = ['jobs', 'delayed', 'ready', 'reserved', 'dead', 'done', 'meta', 'leases',
             'queue', 'later', 'gone', 'history', 'blocked', 'flow', 'outbox']
LEASES_PIN = b'\0unpacked'  # (library version 15)
LEASES_PIN_VALUE = b'a value longer than hash-max-listpack-value keeps this hash a hash table'
# The reserved set's member that is no reservation, at +inf (version 16),
# and the ready set's, the same text.
RESERVED_PIN = b'\0unpacked: a member longer than zset-max-listpack-value keeps this set a skiplist'
READY_PIN = RESERVED_PIN
TIME_SPAN = 2 ** 43
PAUSED = b'\0paused'
SHARDED = b'\0sharded'  # a spread topic's mark (redisched_shard)


def topic_keys(topic, prefix='redisched', count=11):
    return [f'{prefix}:{{{topic}}}:{n}'.encode() for n in KEY_NAMES[:count]]


def queue_key(keys):
    """The topic's ready list (version 17), named from the keys' base (a
    key of the calls since version 23, named by the library before)."""
    return keys[0][:-len(b'jobs')] + b'queue'


def later_key(keys):
    """The topic's delayed list (version 18), named as the ready list."""
    return keys[0][:-len(b'jobs')] + b'later'


def gone_key(keys):
    """The topic's retry windows (version 20), named as the ready list."""
    return keys[0][:-len(b'jobs')] + b'gone'


def list_keys(keys):
    """The keys added in versions 17 to 20 (the last three of eleven)."""
    return [queue_key(keys), later_key(keys), gone_key(keys)]


# ---------------------------------------------------------------- RESP

def encode(args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


class ServerError(Exception):
    pass


class Conn:
    """One connection; replies: int, bytes, None, list, Status, Error."""

    def __init__(self, port):
        self.sock = socket.create_connection(('127.0.0.1', port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile('rb')

    def close(self):
        self.f.close()
        self.sock.close()

    def read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError('redis closed the connection')
        kind, rest = line[:1], line[1:-2]
        if kind == b'+':
            return Status(rest.decode())
        if kind == b'-':
            e = Error(rest.split(b' ', 1)[0].decode())
            e.message = rest.decode(errors='replace')
            return e
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if kind == b'*':
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise ConnectionError('bad reply line %r' % line)

    def pipeline(self, commands):
        self.sock.sendall(b''.join(encode(c) for c in commands))
        return [self.read() for _ in commands]

    def call(self, *args):
        return self.pipeline([args])[0]

    def check(self, *args):
        r = self.call(*args)
        if isinstance(r, Error):
            raise ServerError(getattr(r, 'message', r.code))
        return r


# ---------------------------------------------------------------- server

def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    """redis-server on a free port in a temp dir, stopped by stop()."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='redisched-model-')
        binary = os.environ.get('REDIS_SERVER', 'redis-server')
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [binary, '--port', str(self.port), '--bind', '127.0.0.1', '--dir', self.dir,
                 '--save', '', '--appendonly', 'no', '--logfile', os.path.join(self.dir, 'log')],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(200):
                try:
                    c = Conn(self.port)
                    if c.call('PING') == Status('PONG'):
                        c.close()
                        return
                    c.close()
                except OSError:
                    pass
                if self.proc.poll() is not None:
                    break
                time.sleep(0.02)
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError('redis-server did not start: ' + self.log())

    def log(self):
        try:
            with open(os.path.join(self.dir, 'log')) as f:
                return f.read()[-2000:]
        except OSError:
            return ''

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# The housekeeping bounds a test may lower, so that few jobs reach them.
BOUNDS = ('PROMOTE_BATCH', 'REQUEUE_INLINE', 'TRIM_BATCH')


# The write-order checker (issue 33): every redis.call of the library goes
# through a wrapper that notes the call's first write, and an error raised
# after it is answered as WRITEORDER <command> ... instead of the library's
# own error, which no model reply matches. A write is a command that writes,
# but a removal that removed nothing (no change, nothing Redis propagates):
# ack's ZREM that finds no reservation is its check.
# The same wrapper checks that every key a command names is one of the
# call's KEYS, when the call passes all eleven (version 23): a key named
# otherwise raises UNDECLARED <key>. Every command the library sends names
# its key first (DEL and EXISTS, one key); TIME names none, INFO a section
# (migrate reads the server's run id), and SPUBLISH a
# channel.
WRITE_COMMANDS = 'HINCRBY HSET LPUSH LTRIM RPUSH SPUBLISH XADD ZADD'.split()
REMOVE_COMMANDS = 'DEL HDEL LREM XDEL ZPOPMIN ZREM ZREMRANGEBYRANK ZREMRANGEBYSCORE'.split()
WRITE_ORDER_WRAPPER = """
do
  local writes, removes = {%s}, {%s}
  local keyless = { TIME = true, SPUBLISH = true, INFO = true }
  PIN.call = function(cmd, key, ...)
    local c = string.upper(cmd)
    if PIN.declared and not keyless[c] and not PIN.declared[key] then
      error('UNDECLARED ' .. c .. ' names ' .. tostring(key) .. ', no key of the call')
    end
    local r
    if key == nil then r = redis.call(cmd) else r = redis.call(cmd, key, ...) end
    if not PIN.wrote then
      if writes[c] or (removes[c] and r ~= 0 and not (type(r) == 'table' and #r == 0)) then
        PIN.wrote = c
      end
    end
    return r
  end
end
""" % (', '.join('%s = true' % c for c in WRITE_COMMANDS),
       ', '.join('%s = true' % c for c in REMOVE_COMMANDS))
WRITE_ORDER_API = (
    "    local ok, res = pcall(fn, keys, args)\n",
    "    PIN.wrote, PIN.declared = nil, nil\n"
    "    if #keys >= 11 then\n"
    "      PIN.declared = {}\n"
    "      for _, name in ipairs(keys) do PIN.declared[name] = true end\n"
    "      if #keys < 15 then -- (the flows' keys, named by the library for older callers)\n"
    "        local base = keys[1]:sub(1, -6)\n"
    "        for _, n in ipairs({ 'blocked', 'flow', 'outbox' }) do PIN.declared[base .. ':' .. n] = true end\n"
    "      end\n"
    "    end\n"
    "    local ok, res = pcall(fn, keys, args)\n"
    "    if not ok and PIN.wrote then\n"
    "      return redis.error_reply('WRITEORDER an error after ' .. PIN.wrote .. ': ' ..\n"
    "        tostring(type(res) == 'table' and res.bad or res))\n"
    "    end\n")


def write_order_checked(code):
    """The library with the write-order checker (the PIN table, declared
    early, holds it: the main chunk has no local to spare)."""
    # redis.pcall would let the library catch a failed command after a
    # write and go on: the checker (which wraps redis.call) could not see
    # it, so the library uses none, but for the sweep signal's PUBLISH
    # (version 29) and the outbox channel's SPUBLISH (version 36), hints
    # sent once the call has succeeded, which an ACL without the channel
    # may refuse without failing the call.
    hints = ("redis.pcall('PUBLISH', sweep_notice", "redis.pcall('PUBLISH', flows.notice",
             "redis.pcall('SPUBLISH', flows.notice")
    rest = code
    for hint in hints:
        rest = rest.replace(hint, '')
    if 'redis.pcall(' in rest:
        raise RuntimeError('the library calls redis.pcall: the write-order checker cannot follow it')
    pin = code.index('\nlocal PIN = {')
    end = code.index('\n}\n', pin) + 3
    body = code[end:].replace('redis.call(', 'PIN.call(')
    if body.count(WRITE_ORDER_API[0]) != 1:
        raise RuntimeError('the write-order checker finds no single pcall in api()')
    body = body.replace(WRITE_ORDER_API[0], WRITE_ORDER_API[1])
    return code[:end] + WRITE_ORDER_WRAPPER + body


def library_source(path, bounds=None, mutation=None, write_order=False):
    with open(path) as f:
        code = f.read()
    for name, value in (bounds or {}).items():
        code, n = re.subn(r'\nlocal %s = \d+' % name, '\nlocal %s = %d' % (name, value), code)
        if n != 1:
            raise RuntimeError('cannot set %s in %s' % (name, path))
    for old, new in mutation or ():  # a planted bug: edits, each matching once
        if code.count(old) != 1:
            raise RuntimeError('mutation does not match exactly once: %r' % old)
        code = code.replace(old, new)
    return write_order_checked(code) if write_order else code


def load(conn, code):
    r = conn.call('FUNCTION', 'LOAD', 'REPLACE', code)
    if r != b'redisched':
        raise RuntimeError('FUNCTION LOAD: %r %s' % (r, getattr(r, 'message', '')))


# ---------------------------------------------------------------- records

def decode_record(rec):
    """A job record (docs/redis-api.md, "Stored format"), as a dict."""
    flags = rec[0]
    j = {'prio': 0, 'made': 0}
    if flags & 128:  # format 2
        pos = 1
        ext = 0
        more = 0
        if flags & 16:
            ext = rec[pos]
            pos += 1
        if ext & 0x80:  # a third flags byte (version 30)
            more = rec[pos]
            pos += 1
        # (third flags: 1 history, 2 progress, 4 log, 32 a wide priority)
        assert not flags & 64 and not more & 0xd8, 'reserved flag bits set: %r' % rec[:3]
        assert not ext & 0x80 or more, 'a third flags byte of no flag: %r' % rec[:3]
        j['later'] = bool(ext & 64)
        j['format'] = 2
        j['created'] = int.from_bytes(rec[pos:pos + 6], 'big')
        j['seq'] = int.from_bytes(rec[pos + 6:pos + 13], 'big')
        pos += 13
        fields = [(flags & 1, 'prio', 2), (flags & 2, 'due', 6), (flags & 4, 'made', 2),
                  (flags & 32, 'place', 7), (ext & 1, 'ttr', 4), (ext & 2, 'max', 2)]
        for on, name, size in fields:
            if on:
                j[name] = int.from_bytes(rec[pos:pos + size], 'big')
                pos += size
                if name == 'prio' and j['prio'] == WIDE:  # below 0 (version 37)
                    j['prio'] = int.from_bytes(rec[pos:pos + 8], 'big', signed=True)
                    pos += 8
                    assert more & 32, 'a wide priority without its flag: %r' % rec[:3]
                    assert j['prio'] < 0, 'a wide priority of %d' % j['prio']
        if ext & 4:
            j['backoff'] = (rec[pos], int.from_bytes(rec[pos + 1:pos + 7], 'big'),
                            int.from_bytes(rec[pos + 7:pos + 13], 'big'))
            pos += 13
        if ext & 8:
            j['finished'] = int.from_bytes(rec[pos:pos + 6], 'big')
            pos += 6
        if ext & 16:
            j['keep'] = int.from_bytes(rec[pos:pos + 6], 'big')
            pos += 6
        if flags & 8:
            n = int.from_bytes(rec[pos:pos + 2], 'big')
            j['err'] = rec[pos + 2:pos + 2 + n]
            pos += 2 + n
        if ext & 32:
            n = int.from_bytes(rec[pos:pos + 4], 'big')
            j['result'] = rec[pos + 4:pos + 4 + n]
            pos += 4 + n
        if more & 1:  # the attempt history
            n = rec[pos]
            pos += 1
            assert 0 < n <= 10, 'a history of %d entries' % n
            h = []
            for _ in range(n):
                attempt = int.from_bytes(rec[pos:pos + 2], 'big')
                code = rec[pos + 2]
                started = int.from_bytes(rec[pos + 3:pos + 9], 'big')
                ended = int.from_bytes(rec[pos + 9:pos + 15], 'big')
                wn = rec[pos + 15]
                pos += 16
                worker = rec[pos:pos + wn]
                pos += wn
                en = int.from_bytes(rec[pos:pos + 2], 'big')
                err = rec[pos + 2:pos + 2 + en]
                pos += 2 + en
                assert code & 0x7f in (1, 2), 'a history entry of outcome %d' % code
                assert started <= ended, 'a history entry that ends before it starts'
                # (a cut error keeps 1024 bytes, less a UTF-8 character they would split)
                assert en <= 1024 and (en >= 1021 or not code & 0x80), 'a history error of %d bytes' % en
                h.append((attempt, code, started, ended, worker, err))
            j['history'] = h
        if more & 2:  # the progress (version 31)
            attempt = int.from_bytes(rec[pos:pos + 2], 'big')
            at = int.from_bytes(rec[pos + 2:pos + 8], 'big')
            n = int.from_bytes(rec[pos + 8:pos + 10], 'big')
            assert 0 < n <= 1024, 'a progress of %d bytes' % n
            j['progress'] = (attempt, at, rec[pos + 10:pos + 10 + n])
            pos += 10 + n
        if more & 4:  # the log (version 31)
            total = int.from_bytes(rec[pos:pos + 4], 'big')
            n = int.from_bytes(rec[pos + 4:pos + 6], 'big')
            pos += 6
            assert 0 < n <= 100 and n <= total, 'a log of %d lines of %d' % (n, total)
            lines, size = [], 0
            for _ in range(n):
                at = int.from_bytes(rec[pos:pos + 6], 'big')
                attempt = int.from_bytes(rec[pos + 6:pos + 8], 'big')
                cut = rec[pos + 8]
                ln = int.from_bytes(rec[pos + 9:pos + 11], 'big')
                text = rec[pos + 11:pos + 11 + ln]
                pos += 11 + ln
                assert cut in (0, 1) and ln <= 1024, 'a log line of %d bytes, cut %d' % (ln, cut)
                text.decode('utf-8')  # (raises for a line that is not UTF-8)
                size += ln
                lines.append((at, attempt, text, cut == 1))
            assert size <= 32768, 'a log of %d bytes' % size
            j['log'] = (total, lines)
        j.setdefault('due', j['created'])
        j.setdefault('place', j['seq'])
        j['body'] = rec[pos:]
        return j
    raise AssertionError('a record of format 1 where format 2 was expected: %r' % rec[:16])


WIDE = 65535  # a priority below 0: 8 bytes follow (version 37)


def decode_member(m):
    """(seq, prio, id) of a member of delayed or ready."""
    prio = int.from_bytes(m[7:9], 'big')
    if prio == WIDE:
        return int.from_bytes(m[:7], 'big'), int.from_bytes(m[9:17], 'big', signed=True), m[17:]
    return int.from_bytes(m[:7], 'big'), prio, m[9:]


# ---------------------------------------------------------------- raw keys

def dump(conn, keys):
    """Every key's serialised value (None when absent): equal dumps mean the
    call changed nothing."""
    return conn.pipeline([('DUMP', k) for k in list(keys) + list_keys(keys)])


def read_raw(conn, keys):
    k = keys
    r = conn.pipeline([
        ('HGETALL', k[0]), ('ZRANGE', k[1], 0, -1, 'WITHSCORES'),
        ('ZRANGE', k[2], 0, -1, 'WITHSCORES'), ('ZRANGE', k[3], 0, -1, 'WITHSCORES'),
        ('ZRANGE', k[4], 0, -1, 'WITHSCORES'), ('ZRANGE', k[5], 0, -1, 'WITHSCORES'),
        ('HGETALL', k[6]), ('HGETALL', k[7]), ('KEYS', '*'), ('LRANGE', queue_key(k), 0, -1),
        ('LRANGE', later_key(k), 0, -1), ('ZRANGE', gone_key(k), 0, -1, 'WITHSCORES')])

    def number(v):
        try:
            return int(v)
        except ValueError:
            return float(v)  # the pause mark's -inf

    def pairs(v, num=False):
        it = iter(v)
        return [(a, number(bb) if num else bb) for a, bb in zip(it, it)]
    return {
        'jobs': dict(pairs(r[0])), 'delayed': pairs(r[1], True), 'ready': pairs(r[2], True),
        'reserved': pairs(r[3], True), 'dead': pairs(r[4], True), 'done': pairs(r[5], True),
        'meta': dict(pairs(r[6])), 'leases': dict(pairs(r[7])), 'keys': set(r[8]),
        'queue': r[9], 'later': r[10], 'gone': pairs(r[11], True),
    }


def check_invariants(raw, keys, others=()):
    """The structural invariants of a topic's keys (docs/redis-api.md,
    "Keyspace"); returns the decoded records by id. Raises AssertionError."""
    allowed = set(keys) | set(list_keys(keys)) | set(others)
    assert raw['keys'] <= allowed, 'keys outside the topic: %r' % (raw['keys'] - allowed)
    recs = {i: decode_record(v) for i, v in raw['jobs'].items()}
    where = {}

    def hold(id_, state):
        assert id_ in recs, '%s holds %r, which has no record' % (state, id_)
        assert id_ not in where, '%r is in %s and %s' % (id_, where[id_], state)
        where[id_] = state

    for state in ('delayed', 'ready'):
        for m, score in raw[state]:
            if m == READY_PIN:
                assert state == 'ready' and score == float('inf'), 'the ready pin is at %r in %s' % (score, state)
                assert (m, score) == raw['ready'][-1], 'a job after the ready pin'
                continue
            if m in (PAUSED, SHARDED):
                assert state == 'ready' and score == float('-inf'), 'mark %r misplaced' % m
                assert m != SHARDED or b'shards' in raw['meta'], 'a shard mark without shards'
                continue
            seq, prio, id_ = decode_member(m)
            hold(id_, state)
            j = recs[id_]
            assert state == 'ready' or not j['later'], 'a job of the delayed set says it is listed: %r' % id_
            assert (seq, prio) == (j['seq'], j['prio']), 'member of %r disagrees with its record' % id_
            want = j['due'] if state == 'delayed' else float((1000 - prio) * TIME_SPAN + j['due'])
            assert score == want, 'score of %r in %s is %d, not %d' % (id_, state, score, want)
    # The ready list: entries in order (ready score, then put sequence), each
    # a job in no other place, as its record says; the delayed list the
    # same in order of due time, each job's record saying it is listed.
    for name, state in (('queue', 'ready'), ('later', 'delayed')):
        last = None
        for e in raw[name]:
            due, (seq, prio, id_) = int.from_bytes(e[:6], 'big'), decode_member(e[6:])
            hold(id_, state)
            j = recs[id_]
            assert (seq, prio, due) == (j['seq'], j['prio'], j['due']), '%s entry of %r disagrees with its record' % (name, id_)
            assert j['later'] == (name == 'later'), 'the record of %r in the %s list has later=%r' % (id_, name, j['later'])
            key = (float((1000 - prio) * TIME_SPAN + due) if state == 'ready' else due, seq)
            assert last is None or key > last, 'the %s list is out of order at %r' % (name, id_)
            last = key
    assert not raw['queue'] or b'limit_aging' not in raw['meta'], 'a ready list under priority aging'
    # The leases hash's one field that is no id (a long value: no listpack).
    leases = dict(raw['leases'])
    pin = leases.pop(LEASES_PIN, None)
    assert pin is None or pin == LEASES_PIN_VALUE, 'the leases pin holds %r' % pin
    assert not any(f.startswith(b'\0') for f in leases), 'a lease of no id'
    reserved = [(m, d) for m, d in raw['reserved'] if m != RESERVED_PIN]
    pins = [d for m, d in raw['reserved'] if m == RESERVED_PIN]
    assert pins in ([], [float('inf')]), 'the reserved pin is at %r' % pins
    assert not pins or raw['reserved'][-1][0] == RESERVED_PIN, 'a reservation after the pin'
    # Reserve writes the two pins together, and nothing takes either out.
    assert bool(pins) == (pin is not None), 'the leases pin without the reserved pin, or the reverse'
    assert len(reserved) == len(leases), 'leases and reserved differ'
    for m, deadline in reserved:
        id_, token = m.split(b'\0')
        hold(id_, 'reserved')
        lease = leases.get(id_)
        assert lease is not None, 'reservation of %r has no lease' % id_
        t, at, ttr, *worker = lease.split(b':', 3)  # worker: reserve's WORKER (version 30)
        assert t == token, 'lease token %r is not the reserved member\'s %r' % (t, token)
        assert all(x.isdigit() for x in (t, at, ttr)), 'lease %r is not three integers' % lease
        assert worker != [b''], 'lease %r names an empty worker' % lease
    for state in ('dead', 'done'):
        for id_, _ in raw[state]:
            hold(id_, state)
    orphans = set(recs) - set(where)
    assert not orphans, 'records in no state: %r' % orphans
    seq = int(raw['meta'].get(b'seq', 0))
    for id_, j in recs.items():
        assert j['place'] <= seq and j['seq'] <= seq, 'record of %r is ahead of the counter' % id_
    return recs, where
