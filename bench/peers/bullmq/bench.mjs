// BullMQ, a peer measured in the same run as redisched's core
// (redisched_bench --peers runs this against the Redis it measures, then
// flushes it). Driven the way BullMQ's users drive it, with the same
// 100-byte bodies as the core benchmark:
//   add      Queue.add, one job per call, 50 calls in flight;
//   addBulk  Queue.addBulk of 100 jobs, 8 calls in flight;
//   process  a Worker at concurrency 50 with a no-op processor over the jobs
//            added, completed jobs removed (as an ack removes them here).
// Prints one line per figure: "<name> <jobs/s>".
//
//   node bench.mjs --redis 127.0.0.1:6379 --jobs 200000
import { Queue, Worker } from 'bullmq';

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const [host, port] = arg('--redis', '127.0.0.1:6379').split(':');
const jobs = Number(arg('--jobs', '200000'));
if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--jobs must be a whole number, got ${arg('--jobs')}`);
const connection = { host, port: Number(port), maxRetriesPerRequest: null };
const body = 'x'.repeat(100);
const opts = { removeOnComplete: true };

// Runs n calls with `window` of them in flight; returns jobs/s.
async function timed(n, window, perCall, call) {
  const t0 = process.hrtime.bigint();
  let next = 0;
  const lanes = Array.from({ length: window }, async () => {
    while (next < n) await call(next++);
  });
  await Promise.all(lanes);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return (n * perCall) / secs;
}

async function processAll(queueName, n) {
  let done = 0;
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  const t0 = process.hrtime.bigint();
  const worker = new Worker(queueName, async () => {}, { connection, concurrency: 50 });
  worker.on('completed', () => {
    if (++done === n) finish();
  });
  worker.on('failed', (job, err) => {
    throw new Error(`job ${job && job.id} failed: ${err}`);
  });
  await all;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  await worker.close();
  return n / secs;
}

const single = new Queue('bench-single', { connection });
const add = await timed(jobs, 50, 1, (i) => single.add('job', { body }, { ...opts, jobId: `job-${i}` }));
const process1 = await processAll('bench-single', jobs);
await single.obliterate({ force: true });
await single.close();

const bulk = new Queue('bench-bulk', { connection });
const perBulk = 100;
const bulks = Math.ceil(jobs / perBulk);
const addBulk = await timed(bulks, 8, perBulk, (b) =>
  bulk.addBulk(
    Array.from({ length: perBulk }, (_, k) => ({ name: 'job', data: { body }, opts: { ...opts, jobId: `bulk-${b * perBulk + k}` } })),
  ),
);
await bulk.obliterate({ force: true });
await bulk.close();

console.log(`add ${add.toFixed(0)}`);
console.log(`addBulk ${addBulk.toFixed(0)}`);
console.log(`process ${process1.toFixed(0)}`);
