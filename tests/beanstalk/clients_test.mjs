// Two real beanstalkd client libraries from npm, jackd and fivebeans,
// through their put / reserve / delete / release / bury / kick flows
// against one server: node clients_test.mjs PORT TUBE_PREFIX.
// conformance_test.py runs it against beanstalkd and redisched alike.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import Jackd from "jackd";

const require = createRequire(import.meta.url);
const fivebeans = require("fivebeans");

const port = Number(process.argv[2]);
const prefix = process.argv[3] ?? "clients";

function yamlValue(yaml, key) {
  const m = new RegExp(`^${key}: (.*)$`, "m").exec(yaml);
  return m ? m[1] : undefined;
}

async function jackdFlows() {
  const tube = `${prefix}-jackd`;
  const producer = new Jackd();
  await producer.connect({ host: "127.0.0.1", port });
  const worker = new Jackd();
  await worker.connect({ host: "127.0.0.1", port });
  assert.equal(await producer.use(tube), tube);
  assert.equal(await worker.watch(tube), 2);
  assert.equal(await worker.ignore("default"), 1);

  // put, reserve, delete; priorities first
  const later = await producer.put("later", { priority: 10, ttr: 30 });
  const first = await producer.put("ünïcode ✓\r\n", { priority: 1, ttr: 30 });
  let job = await worker.reserveWithTimeout(2);
  assert.equal(String(job.id), String(first));
  assert.equal(job.payload.toString(), "ünïcode ✓\r\n");
  await worker.delete(job.id);
  job = await worker.reserveWithTimeout(2);
  assert.equal(String(job.id), String(later));
  assert.equal(job.payload.toString(), "later");

  // release with a delay, then again at once
  await worker.release(job.id, { priority: 5, delay: 1 });
  const stats = await producer.statsJob(job.id);
  assert.equal(yamlValue(stats, "state"), "delayed");
  assert.equal(yamlValue(stats, "pri"), "5");
  job = await worker.reserveWithTimeout(3);
  assert.equal(String(job.id), String(later));

  // bury, peek-buried, kick
  await worker.bury(job.id, 7);
  const buried = await producer.peekBuried();
  assert.equal(String(buried.id), String(later));
  assert.equal(await producer.kick(10), 1);
  job = await worker.reserveWithTimeout(2);
  assert.equal(String(job.id), String(later));
  await worker.touch(job.id);
  await worker.delete(job.id);

  // a reserve that waits for the next put
  const waiting = worker.reserve();
  await new Promise((r) => setTimeout(r, 200));
  const woke = await producer.put("wake", { ttr: 30 });
  job = await waiting;
  assert.equal(String(job.id), String(woke));
  await worker.delete(job.id);

  await producer.disconnect();
  await worker.disconnect();
}

// fivebeans speaks in callbacks: one call at a time, as promises.
function call(client, method, ...args) {
  return new Promise((resolve, reject) => {
    client[method](...args, (err, ...rest) => (err ? reject(new Error(`${method}: ${err}`)) : resolve(rest)));
  });
}

async function fivebeansFlows() {
  const tube = `${prefix}-fivebeans`;
  const connect = () =>
    new Promise((resolve, reject) => {
      const c = new fivebeans.client("127.0.0.1", port);
      c.on("connect", () => resolve(c)).on("error", reject);
      c.connect();
    });
  const producer = await connect();
  const worker = await connect();
  assert.deepEqual(await call(producer, "use", tube), [tube]);
  assert.deepEqual(await call(worker, "watch", tube), ["2"]);
  await call(worker, "ignore", "default");

  const [a] = await call(producer, "put", 3, 0, 30, "alpha");
  const [b] = await call(producer, "put", 2, 0, 30, "beta");
  let [id, payload] = await call(worker, "reserve_with_timeout", 2);
  assert.equal(id, b);
  assert.equal(payload.toString(), "beta");
  await call(worker, "destroy", id);

  [id, payload] = await call(worker, "reserve_with_timeout", 2);
  assert.equal(id, a);
  await call(worker, "release", id, 1, 0);
  [id] = await call(worker, "reserve_with_timeout", 2);
  assert.equal(id, a);
  await call(worker, "bury", id, 4);
  const [peeked] = await call(producer, "peek_buried");
  assert.equal(peeked, a);
  const [stats] = await call(producer, "stats_job", a);
  assert.equal(stats.state, "buried");
  assert.deepEqual(await call(producer, "kick", 5), ["1"]);
  [id] = await call(worker, "reserve_with_timeout", 2);
  assert.equal(id, a);
  await call(worker, "destroy", id);
  await assert.rejects(call(worker, "reserve_with_timeout", 0), /TIMED_OUT/);

  const [tubeStats] = await call(producer, "stats_tube", tube);
  assert.equal(tubeStats.name, tube);
  assert.equal(Number(tubeStats["current-jobs-ready"]), 0);
  producer.end();
  worker.end();
}

await jackdFlows();
console.log(`jackd: put, reserve, delete, release, bury, kick, touch, waiting reserve: ok`);
await fivebeansFlows();
console.log(`fivebeans: put, reserve, destroy, release, bury, kick, stats: ok`);
