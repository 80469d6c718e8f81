// redisched from Node.js: the Functions library (lua/redisched.lua) called
// with ioredis, the keys built as docs/redis-api.md says. A thin client:
// put, get, reserve, ack, release, fail, stats, and a worker loop that
// sleeps on the topic's wake-up channel, not by polling. A topic spread over
// shards (docs/redis-api.md, "A topic over many shards") is followed: a call
// on a job goes to the shard its id leads to, reserve asks the shards in
// turn, stats sums them.
//
//   import Redis from 'ioredis';
//   import { Topic, loadLibrary, work } from './redisched.mjs';
//   const redis = new Redis();
//   await loadLibrary(redis, '/usr/local/share/redisched/redisched.lua');
//   const emails = new Topic(redis, 'emails');
//   await emails.put('welcome_42', 'Hello', { priority: 5 });
//   await work(emails, async (job) => console.log(job.id, job.body.toString()));
import { readFile } from 'node:fs/promises';

const KEY_NAMES = ['jobs', 'delayed', 'ready', 'reserved', 'dead', 'done', 'meta', 'leases'];

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

export async function loadLibrary(redis, path) {
  return redis.call('FUNCTION', 'LOAD', 'REPLACE', await readFile(path, 'utf8'));
}

export class Topic {
  constructor(redis, name, prefix = 'redisched') {
    const base = `${prefix}:{${name}}`;
    this.redis = redis;
    this.name = name;
    this.prefix = prefix;
    this.keys = KEY_NAMES.map((k) => `${base}:${k}`);
    this.channel = `${base}:ready`; // the wake-up signal (SPUBLISH)
    this.spread = null; // the Topics of its shards ([] if none), once read
    this.turn = 0;
  }

  call(op, ...args) {
    return this.redis.callBuffer('FCALL', `redisched_${op}`, this.keys.length, ...this.keys, ...args);
  }

  // The Topics of its shards, [] when it holds its own jobs.
  async shards(fresh = false) {
    if (this.spread === null || fresh) {
      const names = (await this.call('shards')).map((v) => v.toString());
      this.spread = names.length === 0 || (names.length === 1 && names[0] === '*') ? []
        : names.map((v) => new Topic(this.redis, `${this.name}~${v}`, this.prefix));
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
  put(id, body, { delayMs, priority, ttrMs, attempts, replace } = {}) {
    const args = [id, body];
    for (const [word, value] of [['DELAY', delayMs], ['PRIORITY', priority], ['TTR', ttrMs], ['ATTEMPTS', attempts]]) {
      if (value !== undefined) args.push(word, value);
    }
    if (replace) args.push('REPLACE');
    return this.routed(async () => (await this.at(id)).call('put', ...args));
  }

  // The job's fields ({state, body, ...}; strings but body), or null.
  async get(id) {
    const reply = await this.routed(async () => (await this.at(id)).call('get', id));
    if (reply === null) return null;
    const job = {};
    for (let i = 0; i < reply.length; i += 2) {
      const field = reply[i].toString();
      job[field] = field === 'body' || !Buffer.isBuffer(reply[i + 1]) ? reply[i + 1] : reply[i + 1].toString();
    }
    return job;
  }

  // {now, next, paused, jobs: [{id, body, token, attempt, ...}]}
  // From a spread topic: its shards in turn, starting one further each call,
  // until count jobs came or each was asked.
  reserve(count = 1, ttrMs) { return this.routed(() => this.reserveHere(count, ttrMs)); }

  async reserveHere(count, ttrMs) {
    const shards = await this.shards();
    if (shards.length) {
      const out = { now: 0, next: -1, paused: true, jobs: [] };
      this.turn++;
      for (let k = 0; k < shards.length; k++) {
        const part = await shards[(this.turn + k) % shards.length].reserveHere(count - out.jobs.length, ttrMs);
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
    const [now, next, paused, ...jobs] = await this.call('reserve', count, ...(ttrMs ? ['TTR', ttrMs] : []));
    return {
      now, next, paused: paused === 1,
      jobs: jobs.map(([id, body, token, attempt, maxAttempts, priority, created, due, deadline]) =>
        ({ id: id.toString(), body, token, attempt, maxAttempts, priority, created, due, deadline })),
    };
  }

  async ack(job) { return (await this.at(job.id)).call('ack', job.id, job.token); }
  async release(job, delayMs = 0) { return (await this.at(job.id)).call('release', job.id, job.token, 'DELAY', delayMs); }
  // 'delayed' or 'ready' (it runs again), 'dead'; or a code (0, -2, -3).
  async fail(job, error) {
    const r = await (await this.at(job.id)).call('fail', job.id, job.token, error);
    return Buffer.isBuffer(r) ? r.toString() : r;
  }

  // The counts; of a spread topic, summed over its shards.
  async stats() {
    const shards = await this.shards(true);
    const s = {};
    for (const t of shards.length ? shards : [this]) {
      const reply = await t.call('stats');
      for (let i = 0; i < reply.length; i += 2) {
        const name = reply[i].toString(), value = reply[i + 1];
        if (!(name in s)) s[name] = value;
        else if (name === 'paused') s[name] = Math.min(s[name], value); // paused: every shard is
        else if (name === 'next_due') s[name] = s[name] < 0 ? value : value < 0 ? s[name] : Math.min(s[name], value);
        else s[name] += value;
      }
    }
    if (shards.length) s.shards = shards.length;
    return s;
  }
}

// Runs handler(job) on the topic's jobs until signal aborts: a resolved
// handler acks the job, a rejected one fails it with its message. Between
// jobs it sleeps on the wake-up channel (a connection of its own) until
// the next due time Redis gave, or a signal of an earlier one.
export async function work(topic, handler, { signal, batch = 10, ttrMs = 30000 } = {}) {
  const sub = topic.redis.duplicate();
  let wake = () => {};
  sub.on('smessage', () => wake());
  // Subscribed before the first reserve: nothing falls between (to each
  // shard's channel for a spread topic; a change of its shards is not
  // followed here: restart the loop).
  const shards = await topic.shards(true);
  for (const t of shards.length ? shards : [topic]) await sub.ssubscribe(t.channel);
  const aborted = new Promise((resolve) => signal?.addEventListener('abort', resolve));
  try {
    while (!signal?.aborted) {
      const r = await topic.reserve(batch, ttrMs);
      for (const job of r.jobs) {
        try {
          await handler(job);
          await topic.ack(job);
        } catch (e) {
          await topic.fail(job, String(e?.message ?? e) || 'failed');
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
  }
}
