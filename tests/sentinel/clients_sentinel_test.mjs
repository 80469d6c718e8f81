// The Node client through a Sentinel failover; clients_sentinel_test.py runs
// it against its deployment and kills the primary when told:
//   node clients_sentinel_test.mjs <lua/redisched.lua> <redis+sentinel://...>
// It puts 200 jobs with replicas: 1 (each put waits until a replica has it),
// starts a worker, goes on putting and prints {"event":"kill"}; once stdin
// says "failed-over" it puts a little longer, waits until every accepted job
// was handled and prints {"event":"result", ...}. Exits 1 if a job was lost.
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, loadLibrary, Topic, work, OK, EXISTS, NotReplicated } from '../../clients/node/redisched.mjs';

const FIRST_JOBS = 200, PUTS_BEFORE_KILL = 50, PUT_AFTER_MS = 500, DRAIN_MS = 20000;
const HANDLE_MS = 5; // a job's work: slower than the puts, so jobs wait at the kill
const [lua, url] = process.argv.slice(2);
const say = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));

const redis = connect(url);
redis.on('error', () => {}); // met by the calls, made again there; unheard, ioredis would print them
await loadLibrary(redis, lua);
const topic = new Topic(redis, 'node-failover', { replicas: 1, replicaTimeoutMs: 1000 });

const accepted = new Set();
const handled = new Map();
let notReplicated = 0, exists = 0, longestPutMs = 0;

// Until the put is answered and on a replica (OK; or EXISTS: a try before
// it, or one made again inside the client, had done it).
async function put(id) {
  const t0 = performance.now();
  for (;;) {
    let got;
    try {
      got = await topic.put(id, 'payload');
    } catch (e) {
      if (!(e instanceof NotReplicated)) throw e;
      notReplicated++;
      continue;
    }
    if (got !== OK && got !== EXISTS) throw new Error(`put ${id}: ${got}`);
    if (got === EXISTS) exists++;
    accepted.add(id);
    longestPutMs = Math.max(longestPutMs, performance.now() - t0);
    return;
  }
}

for (let i = 0; i < FIRST_JOBS; i++) await put(`j${i}`);

let failedOverAt = null;
let longestGapMs = 0, lastHandled = null; // the longest time between two jobs handled: the worker's outage
process.stdin.setEncoding('utf8');
process.stdin.on('data', (text) => { if (text.includes('failed-over')) failedOverAt ??= performance.now(); });

const stop = new AbortController();
// A short ttr: a reservation lost with the primary comes back soon.
const worker = work(topic, async (job) => {
  await sleep(HANDLE_MS);
  handled.set(job.id, (handled.get(job.id) ?? 0) + 1);
  const now = performance.now();
  if (lastHandled !== null) longestGapMs = Math.max(longestGapMs, now - lastHandled);
  lastHandled = now;
}, { signal: stop.signal, ttrMs: 2000 });
let workerError = null;
worker.catch((e) => { workerError = e; });

let putting = 0, waitingAtKill = -1;
for (let i = FIRST_JOBS; ; i++) {
  await put(`j${i}`);
  if (++putting === PUTS_BEFORE_KILL) {
    waitingAtKill = [...accepted].filter((id) => !handled.has(id)).length;
    say('kill');
  }
  if (failedOverAt !== null && performance.now() - failedOverAt > PUT_AFTER_MS) break;
  if (putting > 20000) throw new Error('no word of the failover');
  await sleep(2);
}

// A primary without the library: the next calls load it again.
await redis.call('FUNCTION', 'DELETE', 'redisched');
await topic.stats();

const drainFrom = performance.now();
while (performance.now() - drainFrom < DRAIN_MS && !workerError && [...accepted].some((id) => !handled.has(id))) {
  await sleep(20);
}
const drainMs = performance.now() - drainFrom;

// Once the worker is subscribed again (on the new primary), a job put is
// handled at once, not after its idle wait of a minute.
for (let t0 = performance.now(); (await redis.call('PUBSUB', 'SHARDNUMSUB', topic.channel))[1] < 1;) {
  if (performance.now() - t0 > 5000) throw new Error('the worker did not subscribe again');
  await sleep(10);
}
const putAt = performance.now();
await put('after');
while (!handled.has('after') && performance.now() - putAt < 5000) await sleep(2);
const wokenMs = handled.has('after') ? Math.round(performance.now() - putAt) : -1;
stop.abort();
await worker.catch(() => {});
if (workerError) throw workerError;

const lostIds = [...accepted].filter((id) => !handled.has(id));
let twice = 0;
for (const n of handled.values()) twice += n - 1;
say('result', {
  accepted: accepted.size, putting, waitingAtKill, lost: lostIds.length, lostIds: lostIds.slice(0, 20), twice,
  notReplicated, exists, longestPutMs: Math.round(longestPutMs), drainMs: Math.round(drainMs),
  longestGapMs: Math.round(longestGapMs), wokenMs,
});
redis.disconnect();
process.exit(lostIds.length || wokenMs < 0 || wokenMs >= 500 ? 1 : 0);
