// redisched from Node.js: the Functions library (lua/redisched.lua) called
// with ioredis, the keys built as docs/redis-api.md says. A thin client:
// put, get, reserve, ack, release, fail, stats, and a worker loop that
// sleeps on the topic's wake-up channel, not by polling.
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

export async function loadLibrary(redis, path) {
  return redis.call('FUNCTION', 'LOAD', 'REPLACE', await readFile(path, 'utf8'));
}

export class Topic {
  constructor(redis, name, prefix = 'redisched') {
    const base = `${prefix}:{${name}}`;
    this.redis = redis;
    this.name = name;
    this.keys = KEY_NAMES.map((k) => `${base}:${k}`);
    this.channel = `${base}:ready`; // the wake-up signal (SPUBLISH)
  }

  call(op, ...args) {
    return this.redis.callBuffer('FCALL', `redisched_${op}`, this.keys.length, ...this.keys, ...args);
  }

  // 1 created, -1 exists (with replace: 2 updated, 0 no such job).
  put(id, body, { delayMs, priority, ttrMs, attempts, replace } = {}) {
    const args = [id, body];
    for (const [word, value] of [['DELAY', delayMs], ['PRIORITY', priority], ['TTR', ttrMs], ['ATTEMPTS', attempts]]) {
      if (value !== undefined) args.push(word, value);
    }
    if (replace) args.push('REPLACE');
    return this.call('put', ...args);
  }

  // The job's fields ({state, body, ...}; strings but body), or null.
  async get(id) {
    const reply = await this.call('get', id);
    if (reply === null) return null;
    const job = {};
    for (let i = 0; i < reply.length; i += 2) {
      const field = reply[i].toString();
      job[field] = field === 'body' || !Buffer.isBuffer(reply[i + 1]) ? reply[i + 1] : reply[i + 1].toString();
    }
    return job;
  }

  // {now, next, paused, jobs: [{id, body, token, attempt, ...}]}
  async reserve(count = 1, ttrMs) {
    const [now, next, paused, ...jobs] = await this.call('reserve', count, ...(ttrMs ? ['TTR', ttrMs] : []));
    return {
      now, next, paused: paused === 1,
      jobs: jobs.map(([id, body, token, attempt, maxAttempts, priority, created, due, deadline]) =>
        ({ id: id.toString(), body, token, attempt, maxAttempts, priority, created, due, deadline })),
    };
  }

  ack(job) { return this.call('ack', job.id, job.token); }
  release(job, delayMs = 0) { return this.call('release', job.id, job.token, 'DELAY', delayMs); }
  // 'delayed' or 'ready' (it runs again), 'dead'; or a code (0, -2, -3).
  async fail(job, error) {
    const r = await this.call('fail', job.id, job.token, error);
    return Buffer.isBuffer(r) ? r.toString() : r;
  }

  async stats() {
    const reply = await this.call('stats');
    const s = {};
    for (let i = 0; i < reply.length; i += 2) s[reply[i].toString()] = reply[i + 1];
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
  // Subscribed before the first reserve: nothing falls between.
  await sub.ssubscribe(topic.channel);
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
