// redisched from Node.js: the Functions library (lua/redisched.lua) called
// with ioredis, the keys built as docs/redis-api.md says. A thin client:
// put, get, reserve, ack, release, fail, stats, and a worker loop that
// sleeps on the topic's wake-up channel, not by polling. A topic spread over
// shards (docs/redis-api.md, "A topic over many shards") is followed: a call
// on a job goes to the shard its id leads to, reserve asks the shards in
// turn, stats sums them.
//
//   import { Topic, connect, loadLibrary, work } from './redisched.mjs';
//   const redis = connect('redis://localhost:6379'); // or new Redis(...) of ioredis
//   await loadLibrary(redis, '/usr/local/share/redisched/redisched.lua');
//   const emails = new Topic(redis, 'emails');
//   await emails.put('welcome_42', 'Hello', { priority: 5 });
//   await work(emails, async (job) => console.log(job.id, job.body.toString()));
//
// Behind Redis Sentinel, the same with the sentinels' URL (see connect()):
//
//   const redis = connect('redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/mymaster');
//   const emails = new Topic(redis, 'emails', { replicas: 1 }); // a put answers once a replica has it
//
// A failover is waited out: a call that meets a lost connection or a demoted
// primary (READONLY) is made again, after a pause growing to 0.5 s, for up
// to failoverMs (30 s), ioredis asking the sentinels for the primary anew;
// work() subscribes again. A call may so run twice: put then answers EXISTS,
// ack NOT_FOUND, and a reservation whose answer was lost comes back after its
// ttr (jobs run at least once). A primary without the library (it answers
// "Function not found") gets it again from the path loadLibrary was given.
// Without replicas, a put the old primary answered but had not passed on to
// a replica is lost with it: { replicas: N } has each call that changes a
// job wait (WAIT) until N replicas have it, else reject with NotReplicated.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';

// (history, the twelfth, since library version 34: the calls are counted in
// the topic's history)
const KEY_NAMES = ['jobs', 'delayed', 'ready', 'reserved', 'dead', 'done', 'meta', 'leases',
  'queue', 'later', 'gone', 'history', 'blocked', 'flow', 'outbox'];
export const HISTORY_FIELDS = ['at', 'put', 'started', 'done', 'failed', 'dead', 'lapsed', 'wait_ms'];

// Per-job outcome codes (docs/redis-api.md, "Conventions").
export const OK = 1, UPDATED = 2, NOT_FOUND = 0, EXISTS = -1, WRONG_STATE = -2, STALE_TOKEN = -3;

// CRC-16/XMODEM (polynomial 0x1021, initial 0), the rule that picks a job's
// shard; Node has no CRC-16 of its own.
function crc16(bytes) {
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

// An ioredis client for url; options are added to (and win over) what
// the URL says.
//   redis://[[user]:password@]host[:port][/db], rediss://...: as ioredis takes them.
//   unix://[[user]:password@]/path/to.sock[?db=N&password=P]
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/name
//                    [?db=N&sentinel_user=U&sentinel_password=P]
//     the primary the sentinels (port 26379 unless given) name for the
//     service name, found again after a failover. user and password are the
//     data nodes' (AUTH), sentinel_user and sentinel_password the sentinels'
//     own; percent-encode what the URL would misread.
export function connect(url, options = {}) {
  const scheme = url.slice(0, Math.max(0, url.indexOf('://'))).toLowerCase();
  if (scheme === 'redis+sentinel') return new Redis({ ...sentinelOptions(url), ...options });
  if (scheme === 'unix') return new Redis({ ...unixOptions(url), ...options });
  return new Redis(url, options);
}

function sentinelOptions(url) {
  const m = /^redis\+sentinel:\/\/(?:([^@/]*)@)?([^/?#]+)\/([^/?#]+)\/?(?:\?([^#]*))?$/i.exec(url);
  if (!m) throw new Error(`${url}: redis+sentinel://[auth@]host:port[,host:port...]/name`);
  const [, userinfo, hosts, name, query] = m;
  const out = {
    ...auth(userinfo),
    ...queryOptions(url, query, { db: 'db', sentinel_user: 'sentinelUsername', sentinel_password: 'sentinelPassword' }),
    sentinels: hosts.split(',').map(hostPort),
    name: decodeURIComponent(name),
    // Ask the sentinels again soon while a failover runs, not after
    // ioredis's pauses growing to 5 s.
    retryStrategy: (times) => Math.min(times * 50, 500),
    // A failover the sentinels announce (+switch-master) drops the
    // connection at once, even one to a primary that lives on as a replica.
    failoverDetector: true,
    // Still connected to the old primary, now a replica: connect again
    // (the sentinels name the new one); the call is made again above.
    reconnectOnError: (e) => /^READONLY/.test(e.message),
  };
  if (out.db !== undefined) out.db = Number(out.db);
  return out;
}

function unixOptions(url) {
  const m = /^unix:\/\/(?:([^@/]*)@)?(\/[^?#]*)(?:\?([^#]*))?$/i.exec(url);
  if (!m) throw new Error(`${url}: unix://[auth@]/path/to.sock[?db=N&password=P]`);
  const out = { ...auth(m[1]), ...queryOptions(url, m[3], { db: 'db', password: 'password', username: 'username' }), path: decodeURIComponent(m[2]) };
  if (out.db !== undefined) out.db = Number(out.db);
  return out;
}

// {username, password} of "user:password" (either may be empty).
function auth(userinfo) {
  if (!userinfo) return {};
  const colon = userinfo.indexOf(':');
  const user = decodeURIComponent(colon < 0 ? userinfo : userinfo.slice(0, colon));
  const out = user ? { username: user } : {};
  if (colon >= 0) out.password = decodeURIComponent(userinfo.slice(colon + 1));
  return out;
}

function queryOptions(url, query, names) {
  const out = {};
  for (const [key, value] of new URLSearchParams(query ?? '')) {
    if (!(key in names)) throw new Error(`${url}: unknown parameter ${key}`);
    out[names[key]] = value;
  }
  return out;
}

// {host, port} of "h:p", "h", "[v6]:p" or "[v6]".
function hostPort(text) {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d+))?$/.exec(text);
  if (!m) throw new Error(`not host:port: ${text}`);
  return { host: m[1] ?? m[2], port: m[3] ? Number(m[3]) : 26379 };
}

// A refusal (0, -1, -2, -3; each of a batch) changed nothing: it is answered
// as it is, whatever the replicas had.
// A flat field/value reply as an object: strings, but the raw field
// (Buffers: a body) and replies that are no Buffer (numbers, arrays).
function fields(reply, raw) {
  const out = {};
  for (let i = 0; i < reply.length; i += 2) {
    const field = reply[i].toString();
    out[field] = field === raw || !Buffer.isBuffer(reply[i + 1]) ? reply[i + 1] : reply[i + 1].toString();
  }
  return out;
}

// A refusal changed nothing: answered as it is, whatever the replicas had.
// A put's -1 (exists) is none: its producer takes it for "my job is in", so
// it waits for the replicas as the put that made the job would have.
function refused(op, reply) {
  const no = op === 'put' ? (x) => x === 0 : (x) => typeof x === 'number' && x <= 0;
  return Array.isArray(reply) ? reply.every(no) : no(reply);
}

// client -> the path loadLibrary read, to load it again where it is missing.
const libraries = new WeakMap();

// The call was made, but fewer replicas than asked had it in time.
export class NotReplicated extends Error {
  constructor(reply, acked, wanted) {
    super(`${acked} of ${wanted} replicas acknowledged the write`);
    this.name = 'NotReplicated';
    this.reply = reply; // what the call answered
    this.acked = acked;
  }
}

// What a failover looks like from here: the connection lost (ioredis gave up
// on a call, or dropped it unanswered), or still to the old primary, now a
// replica.
function duringFailover(e) {
  if (e?.name === 'ReplyError') return /^(READONLY|LOADING|MASTERDOWN)\b/.test(e.message);
  return ['AbortError', 'MaxRetriesPerRequestError', 'InterruptError'].includes(e?.name)
    || /^E[A-Z]+$/.test(e?.code ?? '');
}

// fn(), made again through a failover for up to forMs; once more after
// loading the library again where Redis says it has none.
async function surviving(redis, fn, forMs) {
  const deadline = Date.now() + forMs;
  let pause = 50, reloaded = false;
  for (;;) {
    try {
      return await (forMs > 0 ? by(deadline, forMs, fn()) : fn());
    } catch (e) {
      if (duringFailover(e)) {
        if (Date.now() + pause > deadline) throw e;
        await sleep(pause);
        pause = Math.min(2 * pause, 500);
      } else if (!reloaded && libraries.has(redis) && /Function not found/.test(e?.message)) {
        reloaded = true;
        await surviving(redis, () => loadLibrary(redis, libraries.get(redis)), deadline - Date.now());
      } else {
        throw e;
      }
    }
  }
}

// The promise, or a TimeoutError at the deadline: while no sentinel answers,
// ioredis holds a call without end (it may still make it later).
function by(deadline, forMs, promise) {
  let timer;
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(
      new Error(`no answer within ${forMs} ms: no primary found?`), { name: 'TimeoutError' })),
    Math.max(0, deadline - Date.now()));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// FUNCTION LOAD REPLACE of the library at path (once per server). The path
// is kept for redis: a primary found without it gets it again.
export async function loadLibrary(redis, path) {
  libraries.set(redis, path);
  return redis.call('FUNCTION', 'LOAD', 'REPLACE', await readFile(path, 'utf8'));
}

// One topic: its fifteen keys, in the order every function takes them.
//   new Topic(redis, name[, prefix][, { prefix, replicas, replicaTimeoutMs, failoverMs }])
// replicas: put, ack, release and fail answer once that many replicas have
// the write (WAIT, up to replicaTimeoutMs), else reject with NotReplicated;
// reserve does not wait (a reservation lost in a failover only brings the
// job back after its ttr). failoverMs: how long a call keeps trying through
// a failover, and waits at most for its answer.
// A reserved job as reserve and reservejob answer it; keep: the keep it was
// put with (0: none), which ack passes on.
function reserved([id, body, token, attempt, maxAttempts, priority, created, due, deadline, keep]) {
  return { id: id.toString(), body, token, attempt, maxAttempts, priority, created, due, deadline, keep: keep || 0 };
}

export class Topic {
  constructor(redis, name, prefix = 'redisched', options = {}) {
    if (typeof prefix === 'object') [prefix, options] = [prefix.prefix ?? 'redisched', prefix];
    const { replicas = 0, replicaTimeoutMs = 1000, failoverMs = 30000 } = options;
    const base = `${prefix}:{${name}}`;
    this.redis = redis;
    this.name = name;
    this.prefix = prefix;
    this.replicas = replicas;
    this.replicaTimeoutMs = replicaTimeoutMs;
    this.failoverMs = failoverMs;
    this.keys = KEY_NAMES.map((k) => `${base}:${k}`);
    this.channel = `${base}:ready`; // the wake-up signal (SPUBLISH)
    this.spread = null; // the Topics of its shards ([] if none), once read
    this.turn = 0;
  }

  call(op, ...args) {
    return this.migrating(op, () => surviving(this.redis,
      () => this.redis.callBuffer('FCALL', ...this.fcall(op, args)), this.failoverMs));
  }

  // A call that changes a job: with replicas, answered once they have it.
  change(op, ...args) {
    if (!this.replicas) return this.call(op, ...args);
    return this.migrating(op, () => surviving(this.redis, () => this.replicated(op, args), this.failoverMs));
  }

  // send(); when the topic holds data of an older stored format (OLDFORMAT:
  // nothing changed), the topic is migrated and send() made once more.
  async migrating(op, send) {
    try {
      return await send();
    } catch (e) {
      if (op === 'migrate' || !/^OLDFORMAT\b/.test(e?.message)) throw e;
      await this.migrate();
      return send();
    }
  }

  // Rewrites what the topic (each shard, when spread) holds in an older
  // stored format, in calls of limit records and members, until done
  // (docs/redis-api.md, "Migrations"): { rewritten, read, calls }.
  async migrate(limit = 1000) {
    const total = { rewritten: 0, read: 0, calls: 0 };
    for (const t of [this, ...await this.shards()]) {
      for (;;) {
        const [done, rewritten, read] = await t.call('migrate', 'LIMIT', limit);
        total.rewritten += rewritten;
        total.read += read;
        total.calls += 1;
        if (done === 1) break;
      }
    }
    return total;
  }

  fcall(op, args) { return [`redisched_${op}`, this.keys.length, ...this.keys, ...args]; }

  // The call, then WAIT, in one pipeline: WAIT counts the replicas that have
  // this connection's writes, and ioredis drops (never sends alone on a new
  // connection) the tail of a pipeline whose head was answered.
  async replicated(op, args) {
    const [[error, reply], [waitError, acked]] = await this.redis.pipeline()
      .callBuffer('FCALL', ...this.fcall(op, args))
      .call('WAIT', this.replicas, this.replicaTimeoutMs)
      .exec();
    if (error || waitError) throw error || waitError;
    if (acked < this.replicas && !refused(op, reply)) {
      throw new NotReplicated(reply, acked, this.replicas);
    }
    return reply;
  }

  // The Topics of its shards, [] when it holds its own jobs.
  async shards(fresh = false) {
    if (this.spread === null || fresh) {
      const names = (await this.call('shards')).map((v) => v.toString());
      this.spread = names.length === 0 || (names.length === 1 && names[0] === '*') ? []
        : names.map((v) => new Topic(this.redis, `${this.name}~${v}`, this.prefix, this));
    }
    return this.spread;
  }

  // The topic that holds the job id: a shard by CRC-16/XMODEM of the id mod n.
  async at(id) {
    const shards = await this.shards();
    return shards.length ? shards[crc16(Buffer.from(id)) % shards.length] : this;
  }

  // fn() where the job is; once more after SHARDED (spread since).
  async routed(fn) {
    try {
      return await fn();
    } catch (e) {
      if (!String(e?.message).startsWith('SHARDED')) throw e;
      await this.shards(true);
      return fn();
    }
  }

  // 1 created, -1 exists (with replace: 2 updated, 0 no such job).
  // after (library version 35, docs/flows.md): jobs to wait for first,
  // each [topic, id] or [topic, id, policy], policy 'fail' (the default),
  // 'ignore' or 'drop': what its failure does. keepMs: once acked, keep the
  // job and its result that long (reserve hands it to the worker's ack).
  put(id, body, { delayMs, priority, ttrMs, attempts, keepMs, replace, after } = {}) {
    const args = [id, body];
    for (const [word, value] of [['DELAY', delayMs], ['PRIORITY', priority], ['TTR', ttrMs], ['ATTEMPTS', attempts],
      ['KEEP', keepMs]]) {
      if (value !== undefined) args.push(word, value);
    }
    if (replace) args.push('REPLACE');
    if (after && after.length) {
      args.push('AFTER', after.length);
      for (const [topic, dep, policy = 'fail'] of after) args.push(topic, dep, policy);
    }
    // (CONFIRM, library version 37: answered -1, the put writes all the
    // same, so that WAIT covers the job whichever connection put it)
    if (this.replicas) args.push('CONFIRM');
    return this.routed(async () => (await this.at(id)).change('put', ...args));
  }

  // The job's fields ({state, body, ...}; strings but body), or null. Its
  // history (library version 30), when it has one: [{attempt, outcome,
  // started, ended, worker, error, error_cut}], oldest first; its log
  // (library version 31): [{at, attempt, line, cut}], oldest first, beside
  // progress (JSON text), progress_attempt, progress_at and log_total.
  // { body: false }: its body empty (NOBODY, library version 33). { deps:
  // true } (library version 35): a job put with after has deps, [{topic,
  // id, policy, outcome, value}], beside deps_total and deps_left.
  async get(id, { body = true, deps = false } = {}) {
    const args = body ? [id] : [id, 'NOBODY'];
    if (deps) args.push('DEPS');
    const reply = await this.routed(async () => (await this.at(id)).call('get', ...args));
    if (reply === null) return null;
    const job = fields(reply, 'body');
    if (job.history) job.history = job.history.map((e) => fields(e));
    if (job.log) job.log = job.log.map((e) => fields(e));
    if (job.deps) job.deps = job.deps.map((e) => fields(e));
    return job;
  }

  // Makes batch id of this topic (the first call on the id), adds members
  // to it, seals it (library version 36, docs/flows.md, "Batches"); the
  // batch after the call, as get's fields, with batch_sealed, batch_total,
  // batch_done and batch_failed. add: jobs, each [topic, id], of any topic
  // (add each before its put). A job put with after [[this topic, id,
  // 'fail']] runs once it is sealed and every member was done; with
  // 'ignore', once they all finished.
  async batch(id, { add = [], seal = false, keepMs } = {}) {
    const args = [id];
    if (add.length) {
      args.push('ADD', add.length);
      for (const [topic, member] of add) args.push(topic, member);
    }
    if (seal) args.push('SEAL');
    if (keepMs !== undefined) args.push('KEEP', keepMs);
    return fields(await this.routed(async () => (await this.at(id)).change('batch', ...args)), 'body');
  }

  // Carries out the topic's outbox (its shards' too): the calls that hand
  // flows over to other topics (docs/redis-api.md, "Flows"), each made,
  // then its entry deleted. Resolves to how many entries it carried out.
  // Any number of movers may run at once.
  async moveOutbox() {
    let moved = 0;
    for (const t of [this, ...await this.shards()]) {
      for (;;) {
        const entries = await t.call('outbox', 1000);
        const done = [];
        // The resolves of one job (topic, id, gen) merged into calls of up to
        // 1000 settlements, as the C++ mover does: a flow's children each
        // add one as they finish.
        const calls = [];
        const open = new Map();
        for (const [entry, fnName, topic, ...args] of entries) {
          const fn = fnName.toString();
          if (fn === 'resolve') {
            const key = [topic, args[0], args[1]].map(String).join('\0');
            const c = open.get(key);
            const n = Number(args[2]);
            if (c && c.count + n <= 1000) {
              c.count += n;
              c.rest.push(...args.slice(3));
              c.entries.push(entry);
              continue;
            }
            const merged = { fn, topic, head: args.slice(0, 2), count: n, rest: args.slice(3), entries: [entry] };
            open.set(key, merged);
            calls.push(merged);
          } else {
            calls.push({ fn, topic, args, entries: [entry] });
          }
        }
        for (const { fn, topic, args, head, count, rest, entries: carried } of calls) {
          const target = new Topic(this.redis, topic.toString(), this.prefix, this);
          if (fn === 'resolve') {
            await target.routed(async () => (await target.at(head[0].toString())).change('resolve', ...head, count, ...rest));
          } else if (fn === 'depend' || fn === 'forget') {
            const [head, ids] = [args.slice(0, 3), args.slice(4)];
            await target.routed(async () => {
              const byShard = new Map();
              for (const dep of ids) {
                const where = await target.at(dep.toString());
                if (!byShard.has(where)) byShard.set(where, []);
                byShard.get(where).push(dep);
              }
              for (const [where, part] of byShard) await where.change(fn, ...head, part.length, ...part);
            });
          } else {
            continue; // a later version's call: left for its mover
          }
          done.push(...carried);
        }
        if (done.length) {
          await t.call('moved', ...done);
          moved += done.length;
        }
        if (!done.length) break; // (empty, or no call answered: again later)
      }
    }
    return moved;
  }

  // {now, next, paused, jobs: [{id, body, token, attempt, ...}]}
  // From a spread topic: its shards in turn, starting one further each call,
  // until count jobs came or each was asked.
  // worker: who reserves (1..128 bytes without control characters), which
  // get shows on the reservation and the job's history on an attempt that
  // fails or lapses.
  reserve(count = 1, ttrMs, worker) { return this.routed(() => this.reserveHere(count, ttrMs, worker)); }

  async reserveHere(count, ttrMs, worker) {
    const shards = await this.shards();
    if (shards.length) {
      const out = { now: 0, next: -1, paused: true, jobs: [] };
      this.turn++;
      for (let k = 0; k < shards.length; k++) {
        const part = await shards[(this.turn + k) % shards.length].reserveHere(count - out.jobs.length, ttrMs, worker);
        out.now = Math.max(out.now, part.now);
        out.next = out.next < 0 ? part.next : part.next < 0 ? out.next : Math.min(out.next, part.next);
        out.paused = out.paused && part.paused;
        out.jobs.push(...part.jobs);
        if (out.jobs.length >= count) {
          if (k < shards.length - 1) out.next = 0; // shards not asked may hold more
          break;
        }
      }
      return out;
    }
    const [now, next, paused, ...jobs] = await this.call('reserve', count, ...(ttrMs ? ['TTR', ttrMs] : []),
      ...(worker !== undefined ? ['WORKER', worker] : []));
    return {
      now, next, paused: paused === 1,
      jobs: jobs.map(reserved),
    };
  }

  // The job named, ready, delayed or dead, reserved ahead of the rest and
  // whatever the topic's pause and limits (library version 38; beanstalkd's
  // reserve-job): {outcome: OK, job}, or {outcome: NOT_FOUND or WRONG_STATE
  // (reserved, blocked or finished), job: null}.
  reserveJob(id, { ttrMs, worker } = {}) {
    const args = [id, ...(ttrMs !== undefined ? ['TTR', ttrMs] : []),
      ...(worker !== undefined ? ['WORKER', worker] : [])];
    return this.routed(async () => {
      const [outcome, , j] = await (await this.at(id)).call('reservejob', ...args);
      return { outcome, job: outcome === OK ? reserved(j) : null };
    });
  }

  // Reserve and pull hand out nothing while paused (put and the rest go
  // on), on every shard of a spread topic. forMs: a pause that ends by
  // itself after that long (library version 38), kept in Redis whoever
  // paused it; none or 0: until resume. true when any shard's state changed.
  async pause(forMs) {
    return this.everyShard('pause', ...(forMs ? ['FOR', forMs] : []));
  }

  resume() { return this.everyShard('resume'); }

  async everyShard(op, ...args) {
    const shards = await this.shards(true);
    let changed = false;
    for (const t of shards.length ? shards : [this]) {
      if (await t.call(op, ...args) === 1) changed = true;
    }
    return changed;
  }

  // A waiting job's priority and/or due time (delayMs from now, or atMs),
  // changed in place: its attempts and history stay (library version 33).
  // 1, 0 (no such job) or -2 (reserved, dead or done).
  reschedule(id, { priority, delayMs, atMs } = {}) {
    const args = [id];
    for (const [word, value] of [['PRIORITY', priority], ['DELAY', delayMs], ['AT', atMs]]) {
      if (value !== undefined) args.push(word, value);
    }
    return this.routed(async () => (await this.at(id)).change('reschedule', ...args));
  }

  // result: kept with the job for keep (the job's, or keepMs), and at least
  // the topic's retry window (library version 38), and sent to the jobs
  // waiting for it (version 35).
  async ack(job, { keepMs, result } = {}) {
    const args = [job.id, job.token];
    const keep = keepMs ?? job.keep;
    if (keep) args.push('KEEP', keep);
    if (result !== undefined) args.push('RESULT', result);
    return (await this.at(job.id)).change('ack', ...args);
  }
  async release(job, delayMs = 0) { return (await this.at(job.id)).change('release', job.id, job.token, 'DELAY', delayMs); }
  // A reserved job's progress (JSON text, e.g. '{"percent":40}') and log
  // lines (up to 100), kept with the job (get shows them): 1, or a code
  // (0, -2, -3). Each call rewrites the job's record: a few a second at most.
  async report(job, progress, lines = []) {
    const args = [job.id, job.token, lines.length, ...lines];
    if (progress !== undefined) args.push('PROGRESS', progress);
    return (await this.at(job.id)).call('progress', ...args);
  }

  // 'delayed' or 'ready' (it runs again), 'dead'; or a code (0, -2, -3).
  async fail(job, error) {
    const r = await (await this.at(job.id)).change('fail', job.id, job.token, error);
    return Buffer.isBuffer(r) ? r.toString() : r;
  }

  // The ids of the topic's jobs, of any state, that start with prefix
  // (compared byte by byte; glob characters are themselves), one by one: an
  // HSCAN MATCH of the jobs hash, a spread topic's shards in turn, count a
  // step. Each job there from the first id to the last is listed once or
  // more (HSCAN's guarantee); one put or deleted meanwhile may be or not.
  async *findIds(prefix = '', count = 100) {
    const pattern = Buffer.concat([Buffer.from(String(prefix).replace(/[*?[\]\\]/g, '\\$&')), Buffer.from('*')]);
    const shards = await this.shards(true);
    for (const t of shards.length ? shards : [this]) {
      let cursor = '0';
      do {
        const [next, pairs] = await this.redis.hscanBuffer(t.keys[0], cursor, 'MATCH', pattern, 'COUNT', count);
        cursor = next.toString();
        for (let i = 0; i < pairs.length; i += 2) yield pairs[i].toString();
      } while (cursor !== '0');
    }
  }

  // The topic's history (library version 34): objects of HISTORY_FIELDS,
  // one per minute or hour (step 'minute' or 'hour') from fromMs to toMs
  // that counted anything, in time order; step 'total': one, of everything
  // since it began. Of a spread topic, summed over its shards and what it
  // counted itself before it was spread.
  async history(step = 'total', fromMs = 0, toMs = 0) {
    const args = step === 'total' ? ['total'] : [step, fromMs, toMs];
    const shards = await this.shards(true);
    // A spread topic: its shards, and itself for what it counted before
    // it was spread (SPREAD; without, it answers SHARDED).
    const parts = shards.length
      ? [...shards.map((t) => [t, args]), [this, [...args, 'SPREAD']]]
      : [[this, args]];
    const rows = new Map();
    for (const [t, a] of parts) {
      for (const row of (await t.call('history', ...a)).slice(1)) {
        const have = rows.get(row[0]) || [row[0], 0, 0, 0, 0, 0, 0, 0];
        for (let i = 1; i < 8; i++) have[i] += row[i];
        rows.set(row[0], have);
      }
    }
    return [...rows.keys()].sort((a, b) => a - b)
      .map((at) => Object.fromEntries(HISTORY_FIELDS.map((f, i) => [f, rows.get(at)[i]])));
  }

  // The counts; of a spread topic, summed over its shards, with the totals
  // it counted itself before it was spread.
  async stats() {
    const shards = await this.shards(true);
    const s = {};
    for (const t of shards.length ? shards : [this]) {
      const reply = await t.call('stats');
      for (let i = 0; i < reply.length; i += 2) {
        const name = reply[i].toString(), value = reply[i + 1];
        if (!(name in s)) s[name] = value;
        else if (name === 'paused') s[name] = Math.min(s[name], value); // paused: every shard is
        else if (name === 'next_due' || name === 'pause_end') { // the earliest; -1: none
          s[name] = s[name] < 0 ? value : value < 0 ? s[name] : Math.min(s[name], value);
        } else s[name] += value;
      }
    }
    if (shards.length) {
      s.shards = shards.length;
      if (!s.paused) s.pause_end = -1; // (paused while every shard is)
      // The totals it counted itself before it was spread.
      const own = await this.call('stats');
      for (let i = 0; i < own.length; i += 2) {
        const name = own[i].toString();
        if (name.endsWith('_total')) s[name] = (s[name] || 0) + own[i + 1];
      }
    }
    return s;
  }
}

// What a worker loop's registry entry says it runs, and its beat (its
// entry lives three of them).
export const VERSION = 'node-0.1.0';
export const BEAT_MS = 5000;

const registryKeys = (prefix) => [`${prefix}:{~workers}:alive`, `${prefix}:{~workers}:entries`];

// The workers alive, in id order (docs/redis-api.md, "the worker
// registry"): { id, host, pid, version, started, beat, expires, topics:
// [{ topic, concurrency }], running: [{ topic, id, started }] }.
export async function workers(redis, prefix = 'redisched') {
  const reply = await redis.call('FCALL_RO', 'redisched_workers', 2, ...registryKeys(prefix));
  return reply.slice(1).map(([id, host, pid, version, started, beat, expires, t, run]) => ({
    id, host, pid, version, started, beat, expires,
    topics: t.flatMap((v, i) => (i % 2 ? [] : [{ topic: v, concurrency: t[i + 1] }])),
    running: run.flatMap((v, i) => (i % 3 ? [] : [{ topic: v, id: run[i + 1], started: run[i + 2] }])),
  }));
}

// work()'s entry in the worker registry: beaten every BEAT_MS with the job
// it runs then, deleted when the loop ends. A refused or lost beat costs
// the loop nothing: it is listed again at the next.
class Registration {
  constructor(topic) {
    this.redis = topic.redis;
    this.keys = registryKeys(topic.prefix);
    this.topic = topic.name;
    this.host = hostname();
    this.id = `${this.host}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.started = Date.now();
    this.running = null; // { id, started }
    this.beat();
    this.timer = setInterval(() => this.beat(), BEAT_MS);
    this.timer.unref();
  }

  beat() {
    const jobs = this.running ? [this.topic, this.running.id, this.running.started] : [];
    this.redis.call('FCALL', 'redisched_beat', 2, ...this.keys, this.id, BEAT_MS * 3, this.host,
      process.pid, VERSION, this.started, 1, this.topic, 1, jobs.length / 3, ...jobs).catch(() => {});
  }

  leave() {
    clearInterval(this.timer);
    return this.redis.call('FCALL', 'redisched_leave', 2, ...this.keys, this.id).catch(() => {});
  }
}

// Runs handler(job) on the topic's jobs until signal aborts: a resolved
// handler acks the job, a rejected one fails it with its message. Between
// jobs it sleeps on the wake-up channel (a connection of its own) until
// the next due time Redis gave, or a signal of an earlier one. Its
// connection lost (a failover), it subscribes again, then reserves: the
// signals sent meanwhile are lost, not their jobs. It keeps an entry in
// the worker registry (workers()) while it runs, and names its reserves
// with the entry's id (the jobs' history shows it). The handler may report
// its job's progress and log lines with topic.report(job, ...) while it runs.
export async function work(topic, handler, { signal, batch = 10, ttrMs = 30000 } = {}) {
  let entry = null;
  const sub = topic.redis.duplicate({ autoResubscribe: false }); // this loop subscribes
  let wake = () => {};
  let lost = 0, subscribedAt = -1; // connections lost so far; at which count it subscribed
  sub.on('smessage', () => wake());
  sub.on('close', () => { lost++; wake(); });
  sub.on('error', () => {}); // the calls below meet them; unheard, ioredis would print them
  const aborted = new Promise((resolve) => signal?.addEventListener('abort', resolve));
  try {
    entry = new Registration(topic);
    while (!signal?.aborted) {
      if (subscribedAt !== lost) {
        // Subscribed before the reserve: nothing falls between (to each
        // shard's channel for a spread topic; a change of its shards is
        // not followed here: restart the loop).
        const at = lost;
        const shards = await topic.shards(true);
        for (const t of shards.length ? shards : [topic]) {
          await surviving(sub, () => sub.ssubscribe(t.channel), topic.failoverMs);
        }
        subscribedAt = at;
      }
      const r = await topic.reserve(batch, ttrMs, entry.id);
      for (const job of r.jobs) {
        let failure = null;
        entry.running = { id: String(job.id), started: Date.now() };
        try {
          await handler(job);
        } catch (e) {
          failure = String(e?.message ?? e) || 'failed';
        }
        entry.running = null;
        try {
          await (failure === null ? topic.ack(job) : topic.fail(job, failure));
        } catch (e) {
          // Done here, only not yet on a replica: lost, the job runs again.
          if (!(e instanceof NotReplicated)) throw e;
        }
      }
      if (r.next === 0) continue;
      const waitMs = r.next < 0 ? 60000 : Math.max(0, r.next - r.now);
      let timer;
      await Promise.race([
        new Promise((resolve) => { wake = resolve; timer = setTimeout(resolve, waitMs); }),
        aborted,
      ]);
      clearTimeout(timer);
    }
  } finally {
    sub.disconnect();
    // (Redis away: the entry lapses by itself; the loop does not wait on it.)
    await Promise.race([entry?.leave(), sleep(2000)]);
  }
}
