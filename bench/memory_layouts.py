#!/usr/bin/env python3
"""What a waiting job costs in Redis memory under other keyspace layouts
than the library's: bytes per job from Redis's used_memory before and after
filling one layout with --jobs jobs (100-byte bodies, ids like job-0000001),
each layout in an empty Redis.

    python3 bench/memory_layouts.py               # 10^6 jobs per layout
    python3 bench/memory_layouts.py --jobs 100000

The layouts (records are the library's format 2: a 14-byte header, then
the body; members of ready are the format 2 member: 9 bytes, then the id):
  today          one jobs hash, one ready sorted set (the library, version 15)
  ready list     one jobs hash, ready members in a list instead
  ready list +   the same, with a 15-byte member (its ready score packed in
  score          it, so that a list holds what the sorted set orders by)
  bucketed jobs  records in 1024 hashes by a hash of the id, ready sorted set
  listpack       records in 4096 hashes, and hash-max-listpack-value 128 so
  buckets        that each bucket of up to 512 records is a listpack (a
                 setting of the server, not of a key)

Starts its own redis-server (no persistence) on a free port in a temp dir
for each layout; needs Debian's python3-redis.
"""

import argparse
import hashlib
import time

from scratch_redis import scratch_redis

# Fills the layout ARGV[1] with jobs ARGV[2]..ARGV[3] in one call per chunk:
# the fill runs inside Redis, so it is as quick as the layout allows.
FILL = r"""
local layout, from, to = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local body = string.rep('x', 100)
for n = from, to do
  local id = string.format('job-%07d', n)
  local rec = struct.pack('>BI6I7', 2, 1700000000000 + n, n) .. body
  local member = struct.pack('>I7I2', n, 0) .. id
  local jobs = KEYS[1]
  if layout == 'bucketed' or layout == 'listpack' then
    jobs = KEYS[1] .. ':' .. tonumber(redis.sha1hex(id):sub(1, 3), 16) % tonumber(ARGV[4])
  end
  redis.call('HSET', jobs, id, rec)
  if layout == 'list' then
    redis.call('RPUSH', KEYS[2], member)
  elseif layout == 'list_score' then
    redis.call('RPUSH', KEYS[2], struct.pack('>I2I6I7', 0, 1700000000000 + n, n) .. id)
  else
    redis.call('ZADD', KEYS[2], 1700000000000 + n, member)
  end
end
"""

LAYOUTS = [
    ("today", "zset", [], 1),
    ("ready list", "list", [], 1),
    ("ready list + score", "list_score", [], 1),
    ("bucketed jobs", "bucketed", [], 1024),
    ("listpack buckets", "listpack", ["--hash-max-listpack-value", "128"], 4096),
]


def measure(layout, settings, buckets, jobs):
    with scratch_redis(*settings) as r:
        fill = r.register_script(FILL)
        keys = ["redisched:{t}:jobs", "redisched:{t}:ready"]
        before = r.info("memory")["used_memory"]
        t0 = time.monotonic()
        for start in range(1, jobs + 1, 10000):
            fill(keys=keys, args=[layout, start, min(start + 9999, jobs), buckets])
        secs = time.monotonic() - t0
        after = r.info("memory")["used_memory"]
        # A lookup by id, as ack, get and delete make: its cost in this layout.
        probe = r.register_script(
            "local t = 0 for n = 1, 100000 do "
            "local id = string.format('job-%07d', (n * 7919) % tonumber(ARGV[2]) + 1) "
            "local key = KEYS[1] "
            "if ARGV[1] == 'bucketed' or ARGV[1] == 'listpack' then "
            "key = KEYS[1] .. ':' .. tonumber(redis.sha1hex(id):sub(1, 3), 16) % tonumber(ARGV[3]) end "
            "if redis.call('HGET', key, id) then t = t + 1 end end return t")
        t1 = time.monotonic()
        found = probe(keys=keys[:1], args=[layout, jobs, buckets])
        lookup_us = (time.monotonic() - t1) / 100000 * 1e6
        # The encoding of the first job's bucket (or of the one jobs hash).
        jobs_key = keys[0]
        if layout in ("bucketed", "listpack"):
            jobs_key += f":{int(hashlib.sha1(b'job-0000001').hexdigest()[:3], 16) % buckets}"
        encoding = r.object("encoding", jobs_key)
        return (after - before) / jobs, jobs / secs, lookup_us, found, encoding.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000000)
    a = ap.parse_args()
    print(f"{a.jobs} waiting jobs, 100-byte bodies")
    # lookup: one HGET by id from a script, the bucket's name made from the id
    print(f"  {'layout':20s} {'B/job':>7s} {'fill jobs/s':>12s} {'lookup us':>9s}  jobs encoding")
    for name, layout, settings, buckets in LAYOUTS:
        per_job, rate, lookup_us, found, encoding = measure(layout, settings, buckets, a.jobs)
        if found != 100000:
            raise SystemExit(f"{name}: the probe found {found} of 100000 jobs")
        print(f"  {name:20s} {per_job:7.1f} {rate:12,.0f} {lookup_us:9.2f}  {encoding}")


if __name__ == "__main__":
    main()
