// clients/node/redisched.mjs against a real redis-server, and beside the
// C++ side: a job put from Node is the CLI's, and the other way round.
//   node test.mjs <lua/redisched.lua> <build/redisched>
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { Topic, loadLibrary, work, workers, VERSION, BEAT_MS, NotReplicated, OK, EXISTS, NOT_FOUND, WRONG_STATE } from './redisched.mjs';

const [lua, cli] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), 'redisched-node-'));
const sock = join(dir, 'redis.sock');
const server = spawn('redis-server', ['--port', '0', '--unixsocket', sock, '--save', '', '--dir', dir],
  { stdio: 'ignore' });
let failures = 0;
async function test(name, fn) {
  try { await fn(); console.log(`ok: ${name}`); } catch (e) { failures++; console.log(`FAIL: ${name}\n${e.stack}`); }
}
const runCli = (...args) => execFileSync(cli, ['--redis', `unix://${sock}`, ...args], { encoding: 'utf8' });

try {
  for (let i = 0; i < 200 && !existsSync(sock); i++) await sleep(20);
  const redis = new Redis({ path: sock });
  await loadLibrary(redis, lua);

  await test('put, reserve and ack with the documented keys', async () => {
    const t = new Topic(redis, 'emails');
    assert.equal(await t.put('welcome_42', 'Hello', { priority: 5 }), OK);
    assert.equal(await t.put('welcome_42', 'again'), EXISTS);
    assert.equal(await redis.exists('redisched:{emails}:jobs'), 1);
    assert.equal((await t.get('welcome_42')).state, 'ready');
    const r = await t.reserve(10, 30000);
    assert.deepEqual(r.jobs.map((j) => j.id), ['welcome_42']);
    assert.equal(r.jobs[0].body.toString(), 'Hello');
    assert.equal(await t.ack(r.jobs[0]), OK);
    assert.equal(await t.ack(r.jobs[0]), NOT_FOUND);
    // Found by id prefix (below, after the history's check: they are puts).
    // Counted in the topic's history (library version 34): the refusals not.
    const [total] = await t.history();
    assert.deepEqual([total.put, total.started, total.done], [1, 1, 1]);
    assert.equal((await t.stats()).done_total, 1);
    for (const id of ['order_1', 'order_2', 'or*der']) await t.put(id, 'x');
    const ids = async (prefix) => { const out = []; for await (const id of t.findIds(prefix)) out.push(id); return out.sort(); };
    assert.deepEqual(await ids('order_'), ['order_1', 'order_2']);
    assert.deepEqual(await ids('or*'), ['or*der']);
    assert.deepEqual(await ids(), ['or*der', 'order_1', 'order_2']);
  });

  await test('a flow across topics runs the parent after its children', async () => {
    // Library version 35: the parent waits, blocked; moveOutbox hands the
    // children's outcomes over, from a spread topic's shards too.
    runCli('shards', 'js_reports', '3');
    const parent = new Topic(redis, 'js_invoices');
    const kids = new Topic(redis, 'js_reports');
    assert.equal(await parent.put('invoice', 'send', { after: [['js_reports', 'r1'], ['js_reports', 'r2', 'ignore']] }), OK);
    assert.equal((await parent.get('invoice')).state, 'blocked');
    assert.equal(await parent.moveOutbox(), 1);
    await kids.put('r1', 'a');
    await kids.put('r2', 'b', { attempts: 1 });
    for (const job of (await kids.reserve(2)).jobs) {
      if (job.id === 'r1') assert.equal(await kids.ack(job, { result: 'pdf' }), OK);
      else await kids.fail(job, 'no paper');
    }
    assert.equal(await kids.moveOutbox(), 2);
    const job = await parent.get('invoice', { deps: true });
    assert.equal(job.state, 'ready');
    assert.deepEqual(job.deps.map((d) => [d.id, d.outcome, d.value]), [['r1', 'done', 'pdf'], ['r2', 'failed', 'no paper']]);
  });

  await test('a batch releases its callback once sealed and every member finished', async () => {
    // Library version 36: members added while it is open, a callback (on
    // complete: ignore) waits for it; one member dies.
    const batches = new Topic(redis, 'js_batches');
    const members = new Topic(redis, 'js_members');
    let b = await batches.batch('nightly', { add: [['js_members', 'm1'], ['js_members', 'm2']] });
    assert.deepEqual([b.state, b.batch_total, b.batch_sealed], ['blocked', 2, 0]);
    assert.equal(await batches.put('report', 'how it went', { after: [['js_batches', 'nightly', 'ignore']] }), OK);
    await members.put('m1', 'a');
    await members.put('m2', 'b', { attempts: 1 });
    for (const job of (await members.reserve(2)).jobs) {
      if (job.id === 'm1') await members.ack(job);
      else await members.fail(job, 'broke');
    }
    await batches.moveOutbox();
    await members.moveOutbox();
    b = await batches.batch('nightly', { seal: true });
    assert.deepEqual([b.state, b.batch_done, b.batch_failed], ['done', 1, 1]);
    await batches.moveOutbox();
    const job = await batches.get('report', { deps: true });
    assert.equal(job.state, 'ready');
    assert.equal(job.deps[0].outcome, 'failed');
    await assert.rejects(batches.batch('nightly', { add: [['js_members', 'm3']] }), /has finished/);
  });

  await test('a topic of version 8 is migrated by the first call that meets it', async () => {
    // Jobs put by library version 8 (its eight keys, stored format 1): a
    // call that meets them is refused (OLDFORMAT, nothing changed), the
    // client migrates the topic and calls again.
    const t = new Topic(redis, 'eight');
    await redis.call('FUNCTION', 'LOAD', 'REPLACE',
      readFileSync(join(dirname(lua), '..', 'tests', 'model', 'fixtures', 'redisched_v8.lua'), 'utf8'));
    for (let i = 0; i < 5; i++) await redis.call('FCALL', 'redisched_put', 8, ...t.keys.slice(0, 8), `j${i}`, 'old');
    await loadLibrary(redis, lua);
    assert.equal((await t.get('j3')).body.toString(), 'old');
    assert.deepEqual(await t.migrate(), { rewritten: 0, read: 0, calls: 1 });
    assert.deepEqual((await t.reserve(5)).jobs.map((j) => j.id).sort(), ['j0', 'j1', 'j2', 'j3', 'j4']);
  });

  await test('a write no replica had rejects, a refusal is answered', async () => {
    // No replica here: WAIT 1 counts 0.
    const t = new Topic(redis, 'lonely', { replicas: 1, replicaTimeoutMs: 10 });
    await assert.rejects(t.put('a', 'x'), (e) => e instanceof NotReplicated && e.reply === OK);
    assert.equal(await t.put('b', 'x', { replace: true }), 0); // no such job: changed nothing
    // Exists is no refusal: it stands for the put that made the job.
    await assert.rejects(t.put('a', 'x'), (e) => e instanceof NotReplicated && e.reply === EXISTS);
  });

  await test('priority first, failures to dead', async () => {
    const t = new Topic(redis, 'billing');
    await t.put('low', 'l', { priority: 1, attempts: 1 });
    await t.put('high', 'h', { priority: 9 });
    const r = await t.reserve(2, undefined, 'node-worker-1');
    assert.deepEqual(r.jobs.map((j) => j.id), ['high', 'low']);
    assert.equal((await t.get('low')).worker, 'node-worker-1');
    // A report (library version 31): progress and log lines, kept.
    assert.equal(await t.report(r.jobs[1], '{"percent":40}', ['one', 'two']), OK);
    assert.equal(await t.fail(r.jobs[1], 'card declined'), 'dead');
    const low = await t.get('low');
    assert.deepEqual([low.progress, low.log.map((e) => e.line), low.log_total],
      ['{"percent":40}', ['one', 'two'], 2]);
    const [attempt, ...more] = (await t.get('low')).history; // library version 30
    assert.deepEqual(more, []);
    assert.deepEqual([attempt.attempt, attempt.outcome, attempt.worker, attempt.error],
      [1, 'failed', 'node-worker-1', 'card declined']);
    assert.ok(attempt.started <= attempt.ended);
    assert.equal(await t.release(r.jobs[0], 60000), OK);
    const s = await t.stats();
    assert.deepEqual([s.dead, s.delayed, s.ready], [1, 1, 0]);
    // In place (library version 33): a waiting job's priority and due time.
    assert.equal(await t.reschedule('high', { priority: 3, atMs: 1 }), OK);
    const high = await t.get('high', { body: false });
    assert.deepEqual([high.state, high.priority, high.body.length], ['ready', 3, 0]);
    assert.equal(await t.reschedule('low', { priority: 1 }), WRONG_STATE);
    assert.equal(await t.reschedule('nope', { delayMs: 1 }), NOT_FOUND);
  });

  await test('a job put with a keep is kept by the ack of whoever reserved it', async () => {
    const t = new Topic(redis, 'reports');
    assert.equal(await t.put('r1', 'x', { keepMs: 60000 }), OK);
    assert.equal(await t.put('r2', 'y', { keepMs: 60000 }), OK);
    const byId = await t.reserveJob('r2');
    const [next] = (await t.reserve(1)).jobs;
    assert.deepEqual([byId.job.keep, next.id, next.keep], [60000, 'r1', 60000]);
    for (const j of [byId.job, next]) assert.equal(await t.ack(j), OK);
    assert.deepEqual([(await t.get('r1')).state, (await t.get('r2')).state], ['done', 'done']);
  });

  await test('a pause for a time ends by itself', async () => {
    const t = new Topic(redis, 'paused');
    assert.equal(await t.put('a', 'x'), OK);
    assert.equal(await t.pause(), true);
    assert.deepEqual([(await t.stats()).paused, (await t.stats()).pause_end], [1, -1]);
    const r = await t.reserve(1);
    assert.deepEqual([r.jobs, r.paused], [[], true]);
    // A pause for 1 ms replaces the one without end, and is over by the next
    // reserve whatever the machine's speed.
    assert.equal(await t.pause(1), true);
    await sleep(10);
    assert.deepEqual((await t.reserve(1)).jobs.map((j) => j.id), ['a']);
    assert.equal((await t.stats()).paused, 0);
    assert.equal(await t.resume(), false, 'over, and cleared by that reserve');
  });

  await test('the CLI reads what Node put, and the other way', async () => {
    const t = new Topic(redis, 'shared');
    await t.put('from_node', 'hi from node');
    assert.match(runCli('get', 'shared', 'from_node'), /hi from node/);
    runCli('put', 'shared', 'from_cli', 'hi from c++');
    assert.deepEqual((await t.reserve(5)).jobs.map((j) => j.id).sort(), ['from_cli', 'from_node']);
  });

  await test('a topic spread over shards by the CLI', async () => {
    // Spread by the C++ side; Node routes by the documented rule (CRC-16/
    // XMODEM of the id mod n) and finds every job where the CLI does.
    const t = new Topic(redis, 'hot');
    await t.stats(); // it has seen the topic unspread: SHARDED tells it otherwise
    runCli('put', 'hot', 'before', 'x'); // counted in the topic's own history
    runCli('delete', 'hot', 'before');
    assert.match(runCli('shards', 'hot', '3'), /3 shards/);
    for (let i = 0; i < 30; i++) assert.equal(await t.put(`n${i}`, 'from node'), OK);
    assert.equal((await t.shards()).length, 3);
    assert.match(runCli('--json', 'get', 'hot', 'n17'), /"state":"ready"/);
    runCli('put', 'hot', 'c1', 'from cli');
    assert.equal((await t.get('c1')).body.toString(), 'from cli');
    const held = await Promise.all((await t.shards()).map((s) => redis.hlen(s.keys[0])));
    assert.equal(held.reduce((a, b) => a + b, 0), 31);
    assert.ok(held.every((n) => n > 0), String(held));
    assert.equal((await t.stats()).ready, 31);
    assert.equal((await t.history())[0].put, 32, "the shards' and the topic's own");
    assert.equal((await t.stats()).put_total, 32, "stats' totals are the history's");
    const found = [];
    for await (const id of t.findIds('n1')) found.push(id);
    assert.deepEqual(found.sort(), ['n1', ...Array.from({ length: 10 }, (_, i) => `n1${i}`)].sort());
    // Paused on every shard, for a time (library version 38): stats say
    // until when (each shard's end, not their sum), and resumed.
    assert.equal(await t.pause(600000), true);
    const s = await t.stats(), nowMs = Date.now();
    assert.equal(s.paused, 1);
    assert.ok(nowMs + 500000 < s.pause_end && s.pause_end < nowMs + 600000, String(s.pause_end));
    assert.deepEqual((await t.reserve(4)).jobs, []);
    assert.equal(await t.resume(), true);
    assert.equal(await t.resume(), false);
    assert.equal((await t.stats()).pause_end, -1);
    // One job by its id, on its shard (library version 38).
    const one = await t.reserveJob('n17', { worker: 'node-worker-2' });
    assert.equal(one.outcome, OK);
    assert.equal(one.job.id, 'n17');
    assert.equal((await t.get('n17')).worker.toString(), 'node-worker-2');
    assert.deepEqual(await t.reserveJob('n17'), { outcome: WRONG_STATE, job: null });
    assert.deepEqual(await t.reserveJob('nope'), { outcome: NOT_FOUND, job: null });
    assert.equal(await t.ack(one.job), OK);
    const got = [];
    for (;;) {
      const r = await t.reserve(4, 30000);
      if (!r.jobs.length) break;
      got.push(...r.jobs);
    }
    assert.equal(got.length, 30);
    for (const j of got) assert.equal(await t.ack(j), OK);
    assert.match(runCli('stats', 'hot'), /hot\t0\t0\t0\t0\t0\tno/);
  });

  await test('a worker sleeps on the signal and the due time', async () => {
    const t = new Topic(redis, 'work');
    const ran = {};
    const stop = new AbortController();
    const worker = work(t, async (job) => {
      if (job.body.toString() === 'boom') throw new Error('boom');
      ran[job.id] = performance.now();
    }, { signal: stop.signal });
    await sleep(300); // idle: nothing is scheduled
    const putAt = performance.now();
    await t.put('now', 'x'); // the wake-up signal brings it at once
    await t.put('later', 'y', { delayMs: 400 }); // the due time Redis gave
    await t.put('bad', 'boom', { attempts: 1 });
    for (let i = 0; i < 300 && Object.keys(ran).length < 2; i++) await sleep(10);
    stop.abort();
    await worker;
    assert.ok(ran.now - putAt < 200, `woken by the signal, not a poll (${ran.now - putAt} ms)`);
    assert.ok(ran.later - putAt >= 390 && ran.later - putAt < 900, `at its due time (${ran.later - putAt} ms)`);
    const bad = await t.get('bad');
    assert.equal(bad.state, 'dead');
    assert.equal(bad.error, 'boom');
    // The loop names its reserves with its registry id: host:pid:hex.
    assert.match(bad.history[0].worker, new RegExp(`^.+:${process.pid}:[0-9a-f]{8}$`));
  });

  await test('a worker loop keeps an entry in the registry and leaves', async () => {
    const t = new Topic(redis, 'registry');
    const stop = new AbortController();
    let release;
    const released = new Promise((resolve) => { release = resolve; });
    let started;
    const running = new Promise((resolve) => { started = resolve; });
    await t.put('slow', 'x');
    const worker = work(t, async () => { started(); await released; }, { signal: stop.signal });
    await running;
    const mine = async () => (await workers(redis)).filter((w) => w.topics.some((x) => x.topic === 'registry'));
    let found = [];
    for (let i = 0; i < 100 && !(found.length && found[0].running.length); i++) {
      found = await mine();
      if (!(found.length && found[0].running.length)) await sleep(BEAT_MS / 50);
    }
    assert.equal(found.length, 1);
    const [w] = found;
    assert.equal(w.pid, process.pid);
    assert.equal(w.version, VERSION);
    assert.ok(w.id.startsWith(`${w.host}:${process.pid}:`), w.id);
    assert.deepEqual(w.running.map((r) => r.id), ['slow']);
    assert.equal(w.expires - w.beat, BEAT_MS * 3);
    assert.ok(runCli('workers').includes(w.id), 'the C++ side reads the same entry');
    release();
    stop.abort();
    await worker;
    assert.deepEqual((await workers(redis)).filter((x) => x.id === w.id), [], 'a loop that ends leaves');
  });
  redis.disconnect();
} finally {
  server.kill();
  rmSync(dir, { recursive: true, force: true });
}
console.log(failures ? `${failures} failed` : 'all passed');
process.exit(failures ? 1 : 0);
