// The redisched dashboard: plain JavaScript, no build step. Every piece of
// job data reaches the page as a text node (el() below), never as HTML.
'use strict';

const state = {
  token: sessionStorage.getItem('redisched-token') || '',
  topics: [],          // the latest snapshot
  history: new Map(),  // topic -> [{put, acked, failed}] per snapshot, last 300
  filter: '',
  topicsPage: 0,
  topic: null,
  jobState: 'ready',
  jobsOffset: 0,
  feed: [],
  source: null,
};
const PAGE = 50;
const JOBS_PAGE = 25;
const STATES = ['delayed', 'ready', 'reserved', 'dead', 'done'];

// ---- small helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const $ = (id) => document.getElementById(id);

function ago(ms) {
  const d = Math.round((ms - Date.now()) / 1000);
  const a = Math.abs(d);
  const text = a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return d >= 0 ? `in ${text}` : `${text} ago`;
}
// ago() of a time that has passed: never "in 0 s" (clocks a moment apart).
function past(ms) { return ago(Math.min(ms, Date.now() - 1000)); }
function when(ms) {
  if (!ms || ms <= 0) return '';
  return `${new Date(ms).toLocaleString()} (${ago(ms)})`;
}

async function api(method, path, body) {
  const headers = {};
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    showLogin('The token was refused.');
    throw new Error('unauthorized');
  }
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error ? data.error.message : `HTTP ${res.status}`);
  return data;
}

function setStatus(text) { $('status').textContent = text; }

// ---- live feed (server-sent events)

function connect() {
  if (state.source) state.source.close();
  const q = state.token ? `?token=${encodeURIComponent(state.token)}` : '';
  const source = new EventSource(`/v1/events${q}`);
  state.source = source;
  source.onopen = () => setStatus('live');
  source.onerror = () => {
    setStatus('reconnecting…');
    // A refused token shows as an error too: ask the API which it is.
    fetch('/v1/topics', { headers: state.token ? { Authorization: `Bearer ${state.token}` } : {} })
      .then((r) => { if (r.status === 401) { source.close(); showLogin(state.token ? 'The token was refused.' : ''); } })
      .catch(() => {});
  };
  source.onmessage = (m) => onSnapshot(JSON.parse(m.data));
}

function onSnapshot(snap) {
  state.topics = snap.topics;
  for (const t of snap.topics) {
    const h = state.history.get(t.topic) || [];
    const e = t.events || {};
    h.push({ put: e.put || 0, acked: (e.acked || 0) + (e.pushed || 0), failed: (e.failed || 0) + (e.dead || 0) + (e.push_failed || 0) });
    if (h.length > 301) h.shift();
    state.history.set(t.topic, h);
  }
  for (const ev of snap.events) addFeed(ev);
  render(false);
}

function addFeed(ev) {
  state.feed.unshift(ev);
  if (ev.event === 'put' && ev.due > Date.now()) {
    setTimeout(() => { addFeed({ ...ev, event: 'due', at: Date.now() }); renderFeed(); }, ev.due - Date.now());
  }
  if (state.feed.length > 200) state.feed.pop();
}

// ---- views

function route() {
  const hash = location.hash || '#/';
  const m = hash.match(/^#\/topic\/(.+)$/);
  if (m) {
    const topic = decodeURIComponent(m[1]);
    if (state.topic !== topic) { state.topic = topic; state.jobsOffset = 0; state.jobState = 'ready'; }
    show('topic');
    loadJobs();
    loadLimits();
    loadSchedules();
  } else if (hash === '#/send') {
    show('send');
  } else if (hash === '#/workers') {
    show('workers');
    loadWorkers();
  } else {
    state.topic = null;
    show('overview');
  }
  render(true);
}

function show(id) {
  for (const s of ['login', 'overview', 'topic', 'workers', 'send']) $(s).hidden = s !== id;
}

function render(full) {
  if (!$('overview').hidden) renderOverview();
  if (!$('topic').hidden) renderTopicHead(full);
  if (!$('send').hidden) renderFeed();
}

function sparkline(topic) {
  const h = state.history.get(topic) || [];
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('viewBox', '0 0 300 28');
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  const series = [['put', '#2456d6'], ['acked', '#1f7a4d'], ['failed', '#b3261e']];
  const rates = series.map(([k]) => h.slice(1).map((p, i) => Math.max(0, p[k] - h[i][k])));
  const max = Math.max(1, ...rates.flat());
  // One point a second, right-aligned; at least a minute wide so that a
  // fresh page shows its first seconds legibly.
  const step = 300 / Math.max(59, (rates[0] || []).length - 1);
  const base = document.createElementNS(ns, 'line');
  for (const [k, v] of [['x1', 0], ['x2', 300], ['y1', 27.5], ['y2', 27.5], ['stroke', '#dde2e8']]) base.setAttribute(k, v);
  svg.append(base);
  series.forEach(([, color], s) => {
    const r = rates[s];
    if (r.length < 2) return;
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('fill', 'none');
    line.setAttribute('stroke', color);
    line.setAttribute('stroke-width', '2');
    line.setAttribute('points', r.map((v, i) => `${300 - (r.length - 1 - i) * step},${27 - (v / max) * 25}`).join(' '));
    svg.append(line);
  });
  const sum = (k) => rates[series.findIndex((x) => x[0] === k)].reduce((a, b) => a + b, 0);
  const label = `put ${sum('put')}, acked ${sum('acked')}, failed ${sum('failed')} in the last ${Math.max(0, h.length - 1)} s`;
  svg.setAttribute('aria-label', label);
  const title = document.createElementNS(ns, 'title');
  title.textContent = label;
  svg.append(title);
  return svg;
}

function renderOverview() {
  const f = state.filter.toLowerCase();
  const list = state.topics.filter((t) => t.topic.toLowerCase().includes(f));
  const pages = Math.max(1, Math.ceil(list.length / PAGE));
  state.topicsPage = Math.min(state.topicsPage, pages - 1);
  const rows = list.slice(state.topicsPage * PAGE, (state.topicsPage + 1) * PAGE).map((t) =>
    el('tr', { 'data-topic': t.topic },
      el('td', {}, el('a', { href: `#/topic/${encodeURIComponent(t.topic)}` }, t.topic)),
      el('td', { class: 'n' }, t.delayed), el('td', { class: 'n' }, t.ready),
      el('td', { class: 'n' }, t.reserved), el('td', { class: 'n' }, t.dead),
      el('td', {}, sparkline(t.topic)),
      el('td', {}, el('span', { class: t.paused ? 'tag paused' : 'tag' }, t.paused ? 'paused' : 'running'),
        limited(t) ? el('span', { class: 'tag limited', title: describeLimits(t.limits) }, 'limited') : '',
        t.shards > 0 ? el('span', { class: 'tag shards', title: `spread over ${t.shards} shards (one Redis Cluster slot each)` }, `${t.shards} shards`) : '')));
  $('topics').tBodies[0].replaceChildren(...rows);
  $('topics-empty').hidden = state.topics.length > 0;
  pager($('topics-pager'), state.topicsPage, pages, list.length, 'topics', (p) => { state.topicsPage = p; renderOverview(); });
}

function pager(box, page, pages, total, what, go) {
  box.replaceChildren(
    el('button', { type: 'button', class: 'secondary', disabled: page <= 0, onclick: () => go(page - 1) }, 'Previous'),
    el('span', { class: 'muted' }, `page ${page + 1} of ${pages} · ${total} ${what}`),
    el('button', { type: 'button', class: 'secondary', disabled: page >= pages - 1, onclick: () => go(page + 1) }, 'Next'));
}

// ---- the workers page: GET /v1/workers, again every 5 s while it shows

let workersTimer = null;
async function loadWorkers() {
  clearTimeout(workersTimer);
  if ($('workers').hidden) return;
  try {
    const { workers } = await api('GET', '/v1/workers');
    const rows = workers.map((w) => el('tr', { 'data-worker': w.id },
      el('td', {}, el('code', {}, w.id)),
      el('td', {}, `${w.host} · ${w.pid}`),
      el('td', {}, w.version),
      el('td', { title: when(w.started) }, past(w.started)),
      el('td', {}, ...w.topics.map((t) => el('a', { class: 'tag', href: `#/topic/${encodeURIComponent(t.topic)}` }, `${t.topic} (${t.concurrency})`))),
      el('td', {}, w.running.length === 0 ? el('span', { class: 'muted' }, 'idle')
        : el('ul', { class: 'plain' }, ...w.running.map((r) => el('li', {},
          el('a', { href: `#/topic/${encodeURIComponent(r.topic)}` }, r.topic), ' / ', el('code', {}, r.id),
          el('span', { class: 'muted', title: when(r.started) }, ` since ${past(r.started)}`))))),
      el('td', { title: when(w.beat) }, past(w.beat))));
    $('workers-table').tBodies[0].replaceChildren(...rows);
    $('workers-empty').hidden = workers.length > 0;
  } catch (e) {
    setStatus(e.message);
  }
  workersTimer = setTimeout(loadWorkers, 5000);
}

function current() { return state.topics.find((t) => t.topic === state.topic) || { delayed: 0, ready: 0, reserved: 0, dead: 0, done: 0, paused: false }; }

let lastCounts = '';
function renderTopicHead() {
  const t = current();
  $('topic-name').textContent = state.topic;
  $('pause').textContent = t.paused ? 'Resume' : 'Pause';
  $('kick-all').disabled = !t.dead;
  $('states').replaceChildren(...STATES.map((s) =>
    el('button', { type: 'button', role: 'tab', 'aria-selected': s === state.jobState ? 'true' : 'false',
      onclick: () => { state.jobState = s; state.jobsOffset = 0; renderTopicHead(); loadJobs(); } },
    `${s} (${t[s]})`)));
  // Counts moved: the list may have too.
  const counts = STATES.map((s) => t[s]).join(',');
  if (counts !== lastCounts) { lastCounts = counts; loadJobs(); }
}

function bodyCell(j) {
  if ('body_base64' in j) return el('span', { class: 'body', title: 'binary body, shown as base64' }, `base64: ${j.body_base64}`);
  return el('span', { class: 'body' }, j.body.length > 300 ? `${j.body.slice(0, 300)}…` : j.body);
}

// A done job's result (text, or base64 for bytes), else its last error.
function outcomeCell(j) {
  if ('result' in j) return el('td', { class: 'result' }, j.result.length > 300 ? `${j.result.slice(0, 300)}…` : j.result);
  if ('result_base64' in j) return el('td', { class: 'result', title: 'binary result, shown as base64' }, `base64: ${j.result_base64}`);
  return el('td', { class: 'bad' }, j.error || '');
}

function jobRow(j) {
  const actions = [];
  if (j.state === 'dead') actions.push(el('button', { type: 'button', class: 'secondary', onclick: () => act(() => api('POST', topicPath('kick'), { ids: [j.id] }), `kicked ${j.id}`) }, 'Kick'));
  if (j.state === 'delayed') actions.push(el('button', { type: 'button', class: 'secondary', onclick: () => act(() => runNow(j), `${j.id} is due now`) }, 'Run now'));
  actions.push(el('button', { type: 'button', class: 'danger', onclick: () => { if (confirm(`Delete job ${j.id}?`)) act(() => api('DELETE', jobPath(j.id)), `deleted ${j.id}`); } }, 'Delete'));
  return el('tr', { 'data-id': j.id },
    el('td', {}, el('span', { class: 'body' }, j.id)),
    el('td', {}, bodyCell(j)),
    el('td', { class: 'n' }, j.priority),
    el('td', {}, when(j.due)),
    el('td', { class: 'n' }, `${j.attempts} / ${j.max_attempts}`),
    outcomeCell(j),
    el('td', {}, j.deadline ? when(j.deadline) : ''),
    el('td', {}, el('div', { class: 'actions' }, actions)));
}

function limited(t) { return t.limits && (t.limits.rate > 0 || t.limits.concurrency > 0 || t.limits.aging_ms > 0); }

function describeLimits(l) {
  const parts = [];
  if (l.rate) parts.push(`${l.rate} per ${l.window_ms} ms`);
  if (l.concurrency) parts.push(`${l.concurrency} at once`);
  if (l.aging_ms) parts.push(`priority ages a level per ${l.aging_ms} ms`);
  return parts.length ? `Limited: ${parts.join(', ')}` : 'No limits';
}

function showLimits(l) {
  $('limit-rate').value = l.rate || '';
  $('limit-window').value = l.window_ms || 1000;
  $('limit-concurrency').value = l.concurrency || '';
  $('limit-aging').value = l.aging_ms || '';
  $('limits-now').textContent = describeLimits(l);
}

async function loadLimits() {
  if (!state.topic) return;
  try {
    showLimits(await api('GET', topicPath('limits')));
  } catch (e) {
    $('limits-now').textContent = e.message;
  }
}

function scheduleRule(s) {
  return s.every_ms ? `every ${s.every_ms} ms` : `${s.cron} (${s.time_zone})`;
}

function scheduleRow(s) {
  const path = topicPath(`schedules/${encodeURIComponent(s.name)}`);
  const runs = (s.next_runs || []).slice(0, 3).map((t) => el('div', {}, when(t)));
  return el('tr', { 'data-schedule': s.name },
    el('td', {}, el('span', { class: 'body' }, s.name), s.paused ? el('span', { class: 'tag' }, 'paused') : ''),
    el('td', {}, el('span', { class: 'body' }, scheduleRule(s))),
    el('td', { class: 'runs' }, ...runs),
    el('td', {}, s.last_tick ? when(s.last_tick) : 'none yet'),
    el('td', {}, bodyCell(s)),
    el('td', {}, el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'secondary', onclick: () => scheduleAct(() => api('POST', `${path}/${s.paused ? 'resume' : 'pause'}`), `${s.paused ? 'resumed' : 'paused'} ${s.name}`) }, s.paused ? 'Resume' : 'Pause'),
      el('button', { type: 'button', class: 'danger', onclick: () => { if (confirm(`Delete schedule ${s.name}?`)) scheduleAct(() => api('DELETE', path), `deleted schedule ${s.name}`); } }, 'Delete'))));
}

async function loadSchedules() {
  if (!state.topic) return;
  try {
    const list = await api('GET', topicPath('schedules'));
    $('schedules').tBodies[0].replaceChildren(...list.schedules.map(scheduleRow));
    $('schedules-count').textContent = `(${list.schedules.length})`;
    if (list.schedules.length) $('schedules-box').open = true;
  } catch (e) {
    $('topic-message').textContent = e.message;
  }
}

async function scheduleAct(fn, done) {
  try {
    await fn();
    $('topic-message').textContent = done;
  } catch (e) {
    $('topic-message').textContent = e.message;
  }
  loadSchedules();
}

function topicPath(what) { return `/v1/topics/${encodeURIComponent(state.topic)}/${what}`; }
function jobPath(id) { return `${topicPath('jobs')}/${encodeURIComponent(id)}`; }

async function loadJobs() {
  if (!state.topic) return;
  try {
    const page = await api('GET', `${topicPath('jobs')}?state=${state.jobState}&offset=${state.jobsOffset}&count=${JOBS_PAGE}`);
    $('jobs').tBodies[0].replaceChildren(...page.jobs.map(jobRow));
    const pages = Math.max(1, Math.ceil(page.total / JOBS_PAGE));
    pager($('jobs-pager'), state.jobsOffset / JOBS_PAGE, pages, page.total, `${state.jobState} jobs`,
      (p) => { state.jobsOffset = p * JOBS_PAGE; loadJobs(); });
  } catch (e) {
    $('topic-message').textContent = e.message;
  }
}

// A delayed job due now: the same job, put again without its delay.
async function runNow(j) {
  const spec = { mode: 'replace', priority: j.priority, ttr_ms: j.ttr, attempts: j.max_attempts,
    backoff: { kind: j.backoff.kind, base_ms: j.backoff.base, cap_ms: j.backoff.cap } };
  if (j.keep) spec.keep_ms = j.keep;
  if ('body_base64' in j) spec.body_base64 = j.body_base64; else spec.body = j.body;
  return api('PUT', jobPath(j.id), spec);
}

async function act(fn, done) {
  try {
    await fn();
    $('topic-message').textContent = done;
  } catch (e) {
    $('topic-message').textContent = e.message;
  }
  loadJobs();
}

function renderFeed() {
  $('feed').replaceChildren(...state.feed.slice(0, 100).map((e) =>
    el('li', {},
      el('span', { class: `ev ${e.event}` }, e.event === 'put' && e.due > e.at ? 'scheduled' : e.event),
      el('span', {}, e.topic), el('span', { class: 'body' }, e.id),
      el('span', { class: 'muted' }, e.event === 'put' && e.due > e.at ? `due ${when(e.due)}` : new Date(e.at).toLocaleTimeString()))));
}

// ---- login

function showLogin(message) {
  show('login');
  $('login-error').textContent = message || '';
  $('token').focus();
}

// ---- wiring

document.addEventListener('DOMContentLoaded', () => {
  // Which server this is (no token needed for /healthz).
  fetch('/healthz').then((r) => r.json()).then((h) => {
    $('version').textContent = `redisched ${h.version || '?'} · Functions library version ${h.library_version ?? '?'}`;
  }).catch(() => {});
  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.token = $('token').value;
    sessionStorage.setItem('redisched-token', state.token);
    fetch('/v1/topics', { headers: { Authorization: `Bearer ${state.token}` } }).then((r) => {
      if (r.status === 401) { $('login-error').textContent = 'The token was refused.'; return; }
      connect();
      route();
    });
  });
  $('filter').addEventListener('input', (ev) => { state.filter = ev.target.value; state.topicsPage = 0; renderOverview(); });
  $('pause').addEventListener('click', () => act(() => api('POST', topicPath(current().paused ? 'resume' : 'pause')), current().paused ? 'resumed' : 'paused'));
  $('kick-all').addEventListener('click', () => act(() => api('POST', topicPath('kick'), { all: true }), 'kicked every dead job'));
  $('limits').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const want = { rate: Number($('limit-rate').value || 0), concurrency: Number($('limit-concurrency').value || 0),
      aging_ms: Number($('limit-aging').value || 0) };
    if (want.rate) want.window_ms = Number($('limit-window').value || 1000);
    try {
      const l = await api('PUT', topicPath('limits'), want);
      showLimits(l);
      $('topic-message').textContent = 'limits set';
    } catch (e) {
      $('topic-message').textContent = e.message;
    }
  });
  $('schedule-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const name = $('sched-name').value;
    const spec = { body: $('sched-body').value };
    if ($('sched-every').value) spec.every_ms = Number($('sched-every').value);
    else { spec.cron = $('sched-cron').value; spec.time_zone = $('sched-tz').value || 'UTC'; }
    scheduleAct(() => api('PUT', topicPath(`schedules/${encodeURIComponent(name)}`), spec), `saved schedule ${name}`);
  });
  $('find').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const j = await api('GET', jobPath($('find-id').value));
      $('jobs').tBodies[0].replaceChildren(jobRow(j));
      $('topic-message').textContent = `${j.id} is ${j.state}`;
    } catch (e) {
      $('topic-message').textContent = e.message;
    }
  });
  $('put-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const topic = $('put-topic').value;
    const id = $('put-id').value;
    const spec = { body: $('put-body').value, priority: Number($('put-priority').value || 0) };
    if ($('put-at').value) spec.due_at_ms = new Date($('put-at').value).getTime();
    else if (Number($('put-delay').value) > 0) spec.delay_ms = Number($('put-delay').value);
    if ($('put-ttr').value) spec.ttr_ms = Number($('put-ttr').value);
    if ($('put-attempts').value) spec.attempts = Number($('put-attempts').value);
    if ($('put-keep').value) spec.keep_ms = Number($('put-keep').value);
    if ($('put-mode').value !== 'create') spec.mode = $('put-mode').value;
    try {
      const path = `/v1/topics/${encodeURIComponent(topic)}/jobs`;
      const r = id ? await api('PUT', `${path}/${encodeURIComponent(id)}`, spec) : await api('POST', path, spec);
      $('put-result').textContent = `${r.outcome} ${r.id}`;
      $('put-result').className = '';
    } catch (e) {
      $('put-result').textContent = e.message;
      $('put-result').className = 'error';
    }
  });
  window.addEventListener('hashchange', route);
  fetch('/v1/topics', { headers: state.token ? { Authorization: `Bearer ${state.token}` } : {} }).then((r) => {
    if (r.status === 401) { showLogin(''); return; }
    connect();
    route();
  });
});
