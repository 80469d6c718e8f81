// The redisched dashboard: plain JavaScript, no build step. Every piece of
// job data reaches the page as a text node (el() below), never as HTML.
'use strict';

const state = {
  token: sessionStorage.getItem('redisched-token') || '',
  topics: [],          // the followed topics' rows, by name
  rows: new Map(),     // topic -> its row, as the feed last sent it
  following: null,     // the feed's topics= ('' for every topic) and token
  loaded: false,       // the feed's first message came
  history: new Map(),  // topic -> [{put, acked, failed}] per snapshot, last 300
  filter: '',
  topicsPage: 0,
  // The overview's page (GET /v1/topics?count=&contains=&after=): its
  // topics' names, how many match the filter, and where each page starts.
  overview: { names: [], total: 0, next: null, starts: [''] },
  topic: null,
  jobState: 'ready',
  jobId: null,         // the job page's
  selected: new Set(), // ids selected in the topic's list (its page)
  jobsOffset: 0,
  feed: [],
  source: null,
};
const PAGE = 50;
const JOBS_PAGE = 25;
const STATES = ['delayed', 'ready', 'reserved', 'dead', 'done', 'blocked'];

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

// A press (a pointer down, or Space held, on something) must not have the
// box it is in rebuilt under it: the browser clicks only when the press
// ends on the element where it began, so a rebuild in between lost the
// click. whenFree(box, rebuild) runs rebuild now, or, while box holds the
// press, once the press has ended and its click has run (only the latest
// rebuild asked for the box; it builds then, from the state then).
// A press that never sees its end (PRESS_MAX_MS) holds nothing back.
const PRESS_MAX_MS = 20000;
let pressed = null;  // the element pressed
let pressTimer = null;
const heldBack = new Map();  // box -> its rebuild
function pressStarts(e) {
  pressed = e.target;
  clearTimeout(pressTimer);
  pressTimer = setTimeout(pressEnds, PRESS_MAX_MS);
}
function pressEnds() {
  pressed = null;
  clearTimeout(pressTimer);
  if (heldBack.size === 0) return;
  // (After this event's click, which the browser fires in the same task.)
  setTimeout(() => {
    for (const [box, rebuild] of [...heldBack]) whenFree(box, rebuild);
  }, 0);
}
for (const end of ['pointerup', 'pointercancel', 'contextmenu', 'dragstart']) document.addEventListener(end, pressEnds, true);
document.addEventListener('pointerdown', pressStarts, true);
document.addEventListener('keydown', (e) => { if (e.key === ' ' && !e.repeat) pressStarts(e); }, true);
document.addEventListener('keyup', (e) => { if (e.key === ' ') pressEnds(); }, true);
window.addEventListener('blur', pressEnds);
function whenFree(box, rebuild) {
  if (pressed && box.contains(pressed)) {
    heldBack.set(box, rebuild);
    return;
  }
  heldBack.delete(box);
  rebuild();
}

// Replaces box's children (once it holds no press: whenFree). When the
// focus was inside, it goes to the same control among the new ones: in the
// same keyed row, the one of the same kind and label (else the one at the
// same place, else the row's first), never a disabled one. The page's live
// updates rebuild rows every second or so, and a keyboard user's place
// must survive them.
const FOCUSABLE = 'a[href], button, input, select, textarea, [tabindex]';
const KEYED = '[data-topic], [data-id], [data-worker], [data-node], [data-schedule], [data-dep], [data-attempt]';
function controlLabel(e) { return `${e.tagName} ${e.getAttribute('aria-label') || e.textContent.trim()}`; }
function replaceKeepingFocus(box, ...children) {
  whenFree(box, () => replaceNow(box, children));
}
function replaceNow(box, children) {
  const a = document.activeElement;
  let place = null;
  if (a && a !== box && box.contains(a)) {
    const row = a.closest(KEYED);
    const scope = row && box.contains(row) ? row : box;
    const key = scope === box ? null : [...scope.attributes].find((x) => x.name.startsWith('data-'));
    place = { key: key && [key.name, key.value], label: controlLabel(a),
      index: [...scope.querySelectorAll(FOCUSABLE)].indexOf(a) };
  }
  box.replaceChildren(...children);
  if (!place) return;
  const scope = place.key
    ? [...box.querySelectorAll(`[${place.key[0]}]`)].find((r) => r.getAttribute(place.key[0]) === place.key[1])
    : box;
  if (!scope) return;
  const all = [...scope.querySelectorAll(FOCUSABLE)];
  const usable = all.filter((e) => !e.disabled);
  const target = usable.find((e) => controlLabel(e) === place.label)
    || (all[place.index] && !all[place.index].disabled ? all[place.index] : usable[0]);
  if (target) target.focus({ preventScroll: true });
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
// when() of a time that has passed.
function was(ms) {
  if (!ms || ms <= 0) return '';
  return `${new Date(ms).toLocaleString()} (${past(ms)})`;
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

// The feed follows every topic on the overview and the live list, and
// only the one shown on a topic's or a job's page (?topics=: the server
// reads just that topic, and sends its row only when it changed).
// counts false: the events alone (no topic's counts read for it).
function connect(topic = '', { counts = true } = {}) {
  // (a feed closed by a refused token is opened again, with the new one)
  const follows = `${topic}\n${state.token}\n${counts}`;
  if (state.source && state.following === follows && state.source.readyState !== EventSource.CLOSED) return;
  if (state.source) state.source.close();
  // Another set of topics: what was kept of the last one goes (its rows,
  // and the rate history that would show a gap as one spike).
  if (state.following !== null && state.following.split('\n')[0] !== topic) {
    state.rows.clear();
    state.topics = [];
    state.history.clear();
    state.loaded = false;  // (until its first, full, message)
  }
  state.following = follows;
  const q = new URLSearchParams();
  if (state.token) q.set('token', state.token);
  if (topic) q.set('topics', topic);
  if (!counts) q.set('counts', 'none');
  const query = q.toString();
  const source = new EventSource(`/v1/events${query ? `?${query}` : ''}`);
  state.source = source;
  source.onopen = () => setStatus('live');
  source.onerror = () => {
    setStatus('reconnecting…');
    // A refused token shows as an error too: ask the API which it is.
    fetch('/v1/topics?count=1', { headers: state.token ? { Authorization: `Bearer ${state.token}` } : {} })
      .then((r) => { if (r.status === 401) { source.close(); showLogin(state.token ? 'The token was refused.' : ''); } })
      .catch(() => {});
  };
  source.onmessage = (m) => onSnapshot(JSON.parse(m.data));
}

// No feed: a page that reads what it shows on its own.
function disconnect() {
  if (state.source) state.source.close();
  state.source = null;
  state.following = null;
  setStatus('');
}

function onSnapshot(snap) {
  // The first message holds every followed topic ("full"); the next ones
  // only the rows that changed, and the topics gone.
  if (snap.full) { state.rows.clear(); state.loaded = true; }
  for (const t of snap.topics) state.rows.set(t.topic, t);
  for (const t of snap.gone || []) state.rows.delete(t);
  state.topics = [...state.rows.values()].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0));
  for (const t of state.topics) {
    const h = state.history.get(t.topic) || [];
    const e = t.events || {};
    h.push({ put: e.put || 0, acked: (e.acked || 0) + (e.pushed || 0), failed: (e.failed || 0) + (e.dead || 0) + (e.push_failed || 0) });
    if (h.length > 301) h.shift();
    state.history.set(t.topic, h);
  }
  for (const ev of snap.events) addFeed(ev);
  // A job page's feed carries its topic's reports (progress, log lines).
  for (const r of snap.reports || []) {
    if (shownJob && !$('job').hidden && r.topic === state.topic && r.id === state.jobId) {
      for (const k of ['progress', 'progress_attempt', 'progress_at', 'log', 'log_total']) {
        if (k in r) shownJob[k] = r[k]; else delete shownJob[k];  // (an update drops them)
      }
      renderReport(shownJob);
    }
  }
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
  let hash = location.hash || '#/';
  // #/history/R and #/topic/T/history/R: the view with its charts over
  // range R (a deep link; without one, the range last chosen).
  const ranged = hash.match(/^(#\/(?:topic\/[^/]+)?)\/?history\/(1h|24h|30d)$/);
  if (ranged) {
    hash = ranged[1];
    historyView.range = ranged[2];
    sessionStorage.setItem('redisched-range', historyView.range);
  }
  const jm = hash.match(/^#\/topic\/([^/]+)\/job\/(.+)$/);
  const m = hash.match(/^#\/topic\/([^/]+)$/) || hash.match(/^#\/topic\/([^/]+)\/find\/(.*)$/);
  if (jm) {
    const topic = decodeURIComponent(jm[1]);
    // (another topic's list opens on its own first tab, as from the overview)
    if (state.topic !== topic) { state.topic = topic; state.jobsOffset = 0; state.jobState = 'ready'; state.selected.clear(); }
    connect(topic);
    state.jobId = decodeURIComponent(jm[2]);
    show('job');
    jobFormDirty = false;
    loadJob();
  } else if (m) {
    const topic = decodeURIComponent(m[1]);
    if (state.topic !== topic) { state.topic = topic; state.jobsOffset = 0; state.jobState = 'ready'; state.selected.clear(); }
    connect(topic);
    show('topic');
    loadJobs();
    loadLimits();
    loadSchedules();
    // #/topic/T/find/P: the ids that start with P (a deep link to a search).
    findJobs(m[2] === undefined ? null : decodeURIComponent(m[2]));
    showHistory();
  } else if (hash === '#/send') {
    connect('', { counts: false });  // (its list is the events of every topic)
    show('send');
  } else if (hash === '#/workers') {
    disconnect();  // (its page reads GET /v1/workers every 5 s: no feed)
    show('workers');
    loadWorkers();
  } else if (hash === '#/redis') {
    disconnect();
    show('redis');
    loadRedis();
  } else {
    state.topic = null;
    show('overview');
    loadOverview();
    showHistory();
  }
  render(true);
}

// The overview follows one page of topics: their names and the count of
// those that match come from GET /v1/topics (a SCAN of the names, the
// counts of the page's topics only), their counts live from the feed of
// those topics alone, so a server with 100,000 topics reads 50 of them a
// second for it, not all. Read again every 5 s, for topics new or gone.
let overviewTimer = null;
let overviewAsked = 0;
async function loadOverview() {
  clearTimeout(overviewTimer);
  if ($('overview').hidden) return;
  const asked = ++overviewAsked;
  const o = state.overview;
  const q = new URLSearchParams({ count: String(PAGE), after: o.starts[state.topicsPage] || '' });
  if (state.filter) q.set('contains', state.filter);
  try {
    const r = await api('GET', `/v1/topics?${q}`);
    // (an answer for a view left meanwhile must not take its feed over)
    if (asked !== overviewAsked || $('overview').hidden) return;
    if (!r.topics.length && state.topicsPage > 0) {  // (its page is gone: the first)
      state.topicsPage = 0;
      o.starts = [''];
      return loadOverview();
    }
    o.names = r.topics.map((t) => t.topic);
    o.total = r.total;
    o.next = r.next;
    if (o.names.length) connect(o.names.join(','));
    else disconnect();
    // (until the feed's first message: the rows as the page read them)
    for (const t of r.topics) if (!state.rows.has(t.topic)) state.rows.set(t.topic, t);
    state.loaded = true;
    $('filter-error').textContent = '';
  } catch (e) {
    if (asked !== overviewAsked || $('overview').hidden) return;
    $('filter-error').textContent = e.message;
  }
  renderOverview();
  overviewTimer = setTimeout(loadOverview, 5000);
}

function show(id) {
  for (const s of ['login', 'overview', 'topic', 'job', 'workers', 'redis', 'send']) $(s).hidden = s !== id;
}

let lastJobCounts = '';
function render(full) {
  if (!$('overview').hidden) renderOverview();
  if (!$('topic').hidden) renderTopicHead(full);
  if (!$('send').hidden) renderFeed();
  // The job page reads its job again when its topic's counts move (a
  // blocked job's also every few seconds: blockedTick).
  if (!$('job').hidden) {
    const t = current();
    const counts = STATES.map((s) => t[s]).join(',');
    if (counts !== lastJobCounts) { lastJobCounts = counts; loadJob(true); }
  }
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
  const o = state.overview;
  const pages = Math.max(1, Math.ceil(o.total / PAGE));
  const list = o.names.map((n) => state.rows.get(n)).filter(Boolean);
  const rows = list.map((t) =>
    el('tr', { 'data-topic': t.topic },
      el('td', {}, el('a', { href: `#/topic/${encodeURIComponent(t.topic)}` }, t.topic)),
      el('td', { class: 'n' }, t.delayed), el('td', { class: 'n' }, t.ready),
      el('td', { class: 'n' }, t.reserved), el('td', { class: 'n' }, t.dead),
      el('td', {}, sparkline(t.topic)),
      el('td', {}, el('span', { class: t.paused ? 'tag paused' : 'tag', title: pauseEnd(t) }, t.paused ? (t.pause_end > 0 ? `paused, ends ${ago(t.pause_end)}` : 'paused') : 'running'),
        limited(t) ? el('span', { class: 'tag limited', title: describeLimits(t.limits) }, 'limited') : '',
        t.shards > 0 ? el('span', { class: 'tag shards', title: `spread over ${t.shards} shards (one Redis Cluster slot each)` }, `${t.shards} shards`) : '')));
  replaceKeepingFocus($('topics').tBodies[0], ...rows);
  $('topics-empty').hidden = o.total > 0 || state.filter !== '' || !state.loaded;
  pager($('topics-pager'), state.topicsPage, pages, o.total, 'topics', (p) => {
    if (p > state.topicsPage) {
      if (!o.next) return;
      o.starts[p] = o.next;
    }
    state.topicsPage = p;
    loadOverview();
  });
}

function pager(box, page, pages, total, what, go) {
  replaceKeepingFocus(box,
    el('button', { type: 'button', class: 'secondary', disabled: page <= 0, onclick: () => go(page - 1) }, 'Previous'),
    el('span', { class: 'muted' }, `page ${page + 1} of ${pages} · ${total} ${what}`),
    el('button', { type: 'button', class: 'secondary', disabled: page >= pages - 1, onclick: () => go(page + 1) }, 'Next'));
}

// ---- history charts: GET /v1/history (every topic, on the overview) or
// /v1/topics/T/history (the topic's page), by the minute over 1 h or 24 h,
// by the hour over 30 d; drawn with dygraphs (Debian's libjs-dygraphs,
// built into serve) and read again every minute while shown.

const HISTORY_SERIES = [['put', '#2456d6'], ['done', '#1f7a4d'], ['failed', '#a15c00'],
  ['dead', '#b3261e'], ['lapsed', '#6b4fbb']];
const RANGE_NAMES = { '1h': 'hour', '24h': '24 hours', '30d': '30 days' };
const historyView = {
  range: RANGE_NAMES[sessionStorage.getItem('redisched-range')] ? sessionStorage.getItem('redisched-range') : '1h',
  timer: null, asked: 0, charts: new Map(),
};

// Every minute or hour of the answer's range, zeros where nothing counted.
function historyUnits(r) {
  const unit = r.step === 'minute' ? 60000 : 3600000;
  const by = new Map(r.rows.map((row) => [row.at, row]));
  const out = [];
  for (let t = r.from - (r.from % unit); t <= r.to; t += unit) {
    out.push(by.get(t) || { at: t, put: 0, started: 0, done: 0, failed: 0, dead: 0, lapsed: 0, wait_ms: 0 });
  }
  return out;
}

function drawChart(box, name, data, options) {
  // (Without dygraphs' legend plugin: it writes HTML with inline styles,
  // which the page's Content-Security-Policy refuses. The page has its own
  // legend, and the summary says the figures in words.)
  if (Dygraph.PLUGINS) Dygraph.PLUGINS = Dygraph.PLUGINS.filter((p) => p !== Dygraph.Plugins?.Legend);
  const key = `${box.id}/${name}`;
  const g = historyView.charts.get(key);
  if (g) { g.updateOptions({ file: data, ...options }); return; }
  historyView.charts.set(key, new Dygraph(box.querySelector(`[data-chart="${name}"]`), data,
    { height: 200, includeZero: true, strokeWidth: 1.5, legend: 'never', ...options }));
}

function drawHistory(box, r) {
  const units = historyUnits(r);
  const sum = Object.fromEntries(['put', 'started', 'done', 'failed', 'dead', 'lapsed', 'wait_ms']
    .map((k) => [k, units.reduce((a, u) => a + u[k], 0)]));
  const wait = sum.started ? Math.round(sum.wait_ms / sum.started) : 0;
  const summary = `Over the last ${RANGE_NAMES[r.range]}: put ${sum.put}, started ${sum.started}, done ${sum.done}, ` +
    `failed ${sum.failed}, dead ${sum.dead}, lapsed ${sum.lapsed}; mean wait ${duration(wait)}.`;
  box.querySelector('[data-summary]').textContent = summary;
  if (typeof Dygraph === 'undefined') return;  // (the summary stands alone)
  const jobs = box.querySelector('[data-chart="jobs"]');
  jobs.setAttribute('aria-label', `Jobs per ${r.step}. ${summary}`);
  drawChart(box, 'jobs', units.map((u) => [new Date(u.at), ...HISTORY_SERIES.map(([k]) => u[k])]),
    { labels: ['time', ...HISTORY_SERIES.map(([k]) => k)], colors: HISTORY_SERIES.map(([, c]) => c), ylabel: `jobs per ${r.step}` });
  box.querySelector('[data-chart="wait"]').setAttribute('aria-label', `Mean wait from due to start per ${r.step}: ${duration(wait)} over the range.`);
  drawChart(box, 'wait', units.map((u) => [new Date(u.at), u.started ? u.wait_ms / u.started : null]),
    // (points too: a minute alone among idle ones is a point, no line)
    { labels: ['time', 'mean wait (ms)'], colors: ['#3d4a5c'], ylabel: 'mean wait, ms', drawPoints: true, pointSize: 2 });
}

// The history of the view that shows (view: its section's id), now and
// then every minute until that view is left.
async function loadHistory(view, box, path) {
  clearTimeout(historyView.timer);
  if ($(view).hidden) return;
  const asked = ++historyView.asked;
  for (const b of box.querySelectorAll('[data-range]')) b.setAttribute('aria-pressed', String(b.dataset.range === historyView.range));
  try {
    const r = await api('GET', `${path}?range=${historyView.range}`);
    if (asked !== historyView.asked || $(view).hidden) return;
    drawHistory(box, r);
  } catch (e) {
    if (asked !== historyView.asked) return;
    box.querySelector('[data-summary]').textContent = e.message;
  }
  historyView.timer = setTimeout(() => loadHistory(view, box, path), 60000);
}

function showHistory() {
  if (!$('overview').hidden) loadHistory('overview', $('overview-history'), '/v1/history');
  else if (!$('topic').hidden) loadHistory('topic', $('topic-history'), topicPath('history'));
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
    replaceKeepingFocus($('workers-table').tBodies[0], ...rows);
    $('workers-empty').hidden = workers.length > 0;
  } catch (e) {
    setStatus(e.message);
  }
  workersTimer = setTimeout(loadWorkers, 5000);
}

// ---- the Redis page: GET /v1/redis, again every 5 s while it shows

function persistence(p) {
  const parts = [];
  if (p.rdb_last_save) parts.push(`RDB saved ${past(p.rdb_last_save * 1000)}${p.rdb_last_status && p.rdb_last_status !== 'ok' ? ` (${p.rdb_last_status})` : ''}, ${p.rdb_changes_since_save ?? '?'} changes since`);
  parts.push(p.aof_enabled ? `AOF on${p.aof_last_write_status && p.aof_last_write_status !== 'ok' ? ` (${p.aof_last_write_status})` : ''}` : 'AOF off');
  return parts.join('; ');
}

// A node's replicas (a Sentinel's or a cluster's: those a failover
// promotes), each with how far behind its primary it is.
function replicasCell(n) {
  const list = n.replica_nodes || [];
  if (!list.length) return el('td', { class: 'n' }, n.replicas ?? '');
  return el('td', {}, el('ul', { class: 'plain' }, list.map((r) => el('li', { 'data-replica': r.address },
    el('code', {}, r.address), ` ${r.state}`,
    r.offset !== null && n.replication_offset !== null ? `, ${size(Math.max(0, n.replication_offset - r.offset))} behind` : '',
    r.lag_s !== null ? `, heard ${r.lag_s} s ago` : ''))));
}

let redisTimer = null;
async function loadRedis() {
  clearTimeout(redisTimer);
  if ($('redis').hidden) return;
  try {
    const r = await api('GET', '/v1/redis');
    $('redis-mode').textContent = r.mode;
    replaceKeepingFocus($('redis-table').tBodies[0], ...r.nodes.map((n) => el('tr', { 'data-node': n.address },
      el('td', {}, el('code', {}, n.address)),
      el('td', {}, `${n.version ?? '?'} · ${n.role ?? '?'}`),
      el('td', {}, n.uptime_s === null ? '' : duration(n.uptime_s * 1000)),
      el('td', { class: 'n' }, `${size(n.memory.used ?? 0)} · ${size(n.memory.peak ?? 0)} · ${n.memory.max ? size(n.memory.max) : 'no limit'}`),
      el('td', { class: 'n' }, `${n.clients.connected ?? '?'}${n.clients.blocked ? ` (${n.clients.blocked} blocked)` : ''}`),
      el('td', { class: 'n' }, n.ops_per_sec ?? ''),
      el('td', { class: 'n' }, n.keys),
      replicasCell(n),
      el('td', {}, persistence(n.persistence)))));
    $('redis-message').textContent = '';
  } catch (e) {
    $('redis-message').textContent = e.message;
  }
  redisTimer = setTimeout(loadRedis, 5000);
}

// When a pause for a time ends (library 38), as a title; '' for none.
function pauseEnd(t) { return t.paused && t.pause_end > 0 ? `the pause ends by itself ${when(t.pause_end)}` : ''; }

function current() { return state.topics.find((t) => t.topic === state.topic) || { delayed: 0, ready: 0, reserved: 0, dead: 0, done: 0, blocked: 0, paused: false }; }

let lastCounts = '';
function renderTopicHead() {
  const t = current();
  $('topic-name').textContent = state.topic;
  $('pause').textContent = t.paused ? 'Resume' : 'Pause';
  $('pause').title = pauseEnd(t);
  $('kick-all').disabled = !t.dead;
  $('promote-all').disabled = !t.delayed;
  $('purge').hidden = state.jobState !== 'dead';
  replaceKeepingFocus($('states'), ...STATES.map((s) =>
    el('button', { type: 'button', role: 'tab', 'aria-selected': s === state.jobState ? 'true' : 'false',
      onclick: () => { state.jobState = s; state.jobsOffset = 0; state.selected.clear(); renderTopicHead(); loadJobs(); } },
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
    el('td', {}, el('input', { type: 'checkbox', 'aria-label': `Select ${j.id}`, checked: state.selected.has(j.id),
      onchange: (ev) => { if (ev.target.checked) state.selected.add(j.id); else state.selected.delete(j.id); renderBulk(); } })),
    el('td', {}, el('a', { class: 'body', href: jobHash(state.topic, j.id) }, j.id)),
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
    replaceKeepingFocus($('schedules').tBodies[0], ...list.schedules.map(scheduleRow));
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
function jobHash(topic, id) { return `#/topic/${encodeURIComponent(topic)}/job/${encodeURIComponent(id)}`; }
function jobPath(id) { return `${topicPath('jobs')}/${encodeURIComponent(id)}`; }

// The bulk actions' bar: what is selected on the page, and what can be done
// with it (retry: dead jobs only). Each action is one call, atomic.
function renderBulk() {
  const n = state.selected.size;
  $('bulk-count').textContent = n ? `${n} selected` : 'none selected';
  $('bulk-retry').disabled = !n || state.jobState !== 'dead';
  $('bulk-delete').disabled = !n;
  const boxes = [...$('jobs').tBodies[0].querySelectorAll('input[type=checkbox]')];
  $('select-page').checked = boxes.length > 0 && boxes.every((b) => b.checked);
}

// The list's requests in flight: only the latest one's answer is shown (a
// tab clicked while the previous tab's list was on its way showed that one).
let jobsAsked = 0;
// The ids that start with a prefix (GET .../ids), FOUND_PAGE at a time:
// pages that the scan left empty are followed at once, up to 20 calls.
const FOUND_PAGE = 50;
let found = { prefix: null, cursor: null, asked: 0 };
async function findJobs(prefix, more) {
  if (prefix === null) { found = { prefix: null, cursor: null, asked: found.asked + 1 }; $('found').hidden = true; return; }
  if (!more) {
    found = { prefix, cursor: null, asked: found.asked + 1 };
    $('find-id').value = prefix;
    $('found-list').replaceChildren();
  }
  const asked = found.asked;
  $('found').hidden = false;
  $('found-more').disabled = true;  // (one scan at a time)
  $('found-status').textContent = `looking for ids that start with "${prefix}"…`;
  let shown = 0;
  try {
    for (let calls = 0; calls < 20 && shown < FOUND_PAGE; ++calls) {
      const q = `ids?prefix=${encodeURIComponent(prefix)}&count=${FOUND_PAGE}` +
        (found.cursor ? `&cursor=${encodeURIComponent(found.cursor)}` : '');
      const page = await api('GET', topicPath(q));
      if (asked !== found.asked) return;
      for (const id of page.ids) {
        const li = document.createElement('li');
        const a = document.createElement('a');
        a.href = jobHash(state.topic, id);
        a.textContent = id;
        li.append(a);
        if (id === prefix) $('found-list').prepend(li); else $('found-list').append(li);
        ++shown;
      }
      found.cursor = page.cursor;
      if (!found.cursor) break;
    }
  } catch (e) {
    if (asked === found.asked) {
      $('found-status').textContent = e.message;
      $('found-more').hidden = true;
    }
    return;
  }
  const n = $('found-list').children.length;
  $('found-status').textContent = found.cursor
    ? `${n} jobs so far whose id starts with "${prefix}"`
    : n ? `${n} ${n === 1 ? 'job' : 'jobs'} whose id starts with "${prefix}"` : `no job's id starts with "${prefix}"`;
  $('found-more').hidden = !found.cursor;
  $('found-more').disabled = false;
}

async function loadJobs() {
  if (!state.topic) return;
  const asked = ++jobsAsked;
  try {
    const page = await api('GET', `${topicPath('jobs')}?state=${state.jobState}&offset=${state.jobsOffset}&count=${JOBS_PAGE}`);
    if (asked !== jobsAsked) return;
    // (Each row's box is ticked from the selection as it is when the rows
    // go in: a box clicked while they were held back counts.)
    const rows = $('jobs').tBodies[0];
    whenFree(rows, () => {
      // A selection holds only jobs still listed here.
      const listed = new Set(page.jobs.map((j) => j.id));
      for (const id of [...state.selected]) if (!listed.has(id)) state.selected.delete(id);
      replaceNow(rows, page.jobs.map(jobRow));
      renderBulk();
    });
    const pages = Math.max(1, Math.ceil(page.total / JOBS_PAGE));
    pager($('jobs-pager'), state.jobsOffset / JOBS_PAGE, pages, page.total, `${state.jobState} jobs`,
      (p) => { state.jobsOffset = p * JOBS_PAGE; loadJobs(); });
  } catch (e) {
    $('topic-message').textContent = e.message;
  }
}

// A delayed job due now, in place: its attempts, history and log stay.
async function runNow(j) {
  const r = await api('POST', topicPath('promote'), { ids: [j.id] });
  if (!r.promoted) throw new Error(`${j.id} is no longer delayed`);
  return r;
}

// A call that works through the topic a batch at a time ({all: ...}, or
// purge): again while it says some are left, the count shown as it goes.
// At most `most` in all (what the confirmation said; jobs that come
// meanwhile are not the user's choice). A failure says how many were done.
async function inBatches(path, body, field, verb, most = Infinity) {
  let done = 0;
  for (let i = 0; i < 10000 && done < most; i++) {
    let r;
    try {
      r = await api('POST', topicPath(path), { ...body, limit: Math.min(1000, most - done) });
    } catch (e) {
      throw new Error(`${e.message} (after ${verb} ${done})`);
    }
    done += r[field];
    $('topic-message').textContent = `${verb} ${done}${r.left ? `, ${r.left} left…` : ''}`;
    if (!r.left || !r[field]) break;
  }
  return `${verb} ${done}`;
}

// ---- the job page: #/topic/<topic>/job/<id>, every field, the body, the
// attempt history and the actions of its state.

function bytesOf(j) {
  if ('body_base64' in j) return Uint8Array.from(atob(j.body_base64), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(j.body);
}

// Binary as hex lines of 16 bytes with their offset; the first 4 KiB.
function hexDump(bytes) {
  const lines = [];
  const shown = Math.min(bytes.length, 4096);
  for (let o = 0; o < shown; o += 16) {
    const row = Array.from(bytes.slice(o, Math.min(o + 16, shown)));
    const hex = row.map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const text = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${o.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${text}`);
  }
  if (bytes.length > shown) lines.push(`… ${bytes.length - shown} more bytes`);
  return lines.join('\n');
}

// Text, pretty-printed when it is JSON.
function pretty(text) {
  const t = text.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try { return JSON.stringify(JSON.parse(t), null, 2); } catch { /* as it is */ }
  }
  return text;
}

function size(n) {
  if (n < 1024) return `${n} bytes`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
  return n < 1073741824 ? `${(n / 1048576).toFixed(1)} MiB` : `${(n / 1073741824).toFixed(2)} GiB`;
}

function duration(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600000) return `${Math.round(ms / 60000)} min`;
  return ms < 86400000 ? `${(ms / 3600000).toFixed(1)} h` : `${(ms / 86400000).toFixed(1)} d`;
}

function jobFields(j) {
  const f = [['State', j.state], ['Priority', j.priority], ['Created', was(j.created)],
    j.state === 'delayed' ? ['Due', when(j.due)] : ['Was due', was(j.due)],
    ['Attempts', `${j.attempts} of ${j.max_attempts}`],
    ['Time-to-run', `${duration(j.ttr)}${j.own_ttr ? '' : ' (the default, or the reserve\'s)'}`],
    ['Backoff', `${j.backoff.kind}, ${duration(j.backoff.base)} up to ${duration(j.backoff.cap)}`]];
  if (j.keep) f.push(['Kept when done', duration(j.keep)]);
  if (j.state === 'reserved') {
    f.push(['Reserved', was(j.reserved_at)], ['Deadline', when(j.deadline)], ['Token', j.token]);
    if (j.worker) f.push(['Worker', j.worker]);
  }
  if (j.state === 'dead') f.push(['Died', was(j.died)]);
  if (j.state === 'done') f.push(['Finished', was(j.finished)], ['Kept until', when(j.expires)]);
  const out = f.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, String(v))]);
  if (j.error) out.push(el('dt', {}, 'Last error'), el('dd', { 'data-field': 'Last error' }, el('pre', { class: 'body clamp bad', tabindex: 0 }, j.error)));
  return out;
}

// A job this one waits for (a flow): a link to its own page, where its own
// dependencies show in turn, and how it settled.
function depRow(d) {
  const outcome = { pending: 'tag', done: 'tag ok-tag', failed: 'tag bad-tag', dropped: 'tag warn-tag' }[d.outcome] || 'tag';
  const value = 'value_base64' in d ? `base64: ${d.value_base64}` : (d.value || '');
  return el('tr', { 'data-dep': `${d.topic}/${d.id}` },
    el('td', {}, el('a', { href: `#/topic/${encodeURIComponent(d.topic)}` }, d.topic)),
    el('td', {}, el('a', { class: 'body', href: jobHash(d.topic, d.id) }, d.id)),
    el('td', {}, d.on_failure),
    el('td', {}, el('span', { class: outcome }, d.outcome)),
    el('td', {}, el('pre', { class: `body clamp${d.outcome === 'done' ? '' : ' bad'}`, tabindex: 0 }, value)));
}

// The whole flow under the job shown: what it waits for, what those wait
// for, and so on, each read once (a GET; at most kTreeJobs of them), as an
// indented tree. Read when asked, not with each refresh of the page.
const kTreeJobs = 200;
let treeOf = null;  // topic/id of the job whose tree is shown
async function showFlowTree() {
  const top = shownJob;
  if (!top) return;
  const key = `${state.topic}/${state.jobId}`;
  const rows = [];
  let cut = false;
  async function walk(deps, depth) {
    for (const d of deps) {
      if (rows.length >= kTreeJobs) {
        cut = true;
        return;
      }
      let j = null;
      try {
        j = await api('GET', `/v1/topics/${encodeURIComponent(d.topic)}/jobs/${encodeURIComponent(d.id)}`);
      } catch (e) {
        j = null;  // gone (acked without keep, deleted) or never put
      }
      rows.push({ d, j, depth });
      if (j && j.deps) await walk(j.deps, depth + 1);
    }
  }
  $('job-tree-note').textContent = 'reading…';
  await walk(top.deps || [], 0);
  if (key !== `${state.topic}/${state.jobId}`) return;  // another job's page now
  treeOf = key;
  $('job-tree').tBodies[0].replaceChildren(...rows.map(treeRow));
  $('job-tree-box').hidden = false;
  $('job-tree-note').textContent = `${rows.length} jobs${cut ? ` (the first ${kTreeJobs})` : ''}, read ${new Date().toLocaleTimeString()}`;
}

function treeRow({ d, j, depth }) {
  const outcome = { pending: 'tag', done: 'tag ok-tag', failed: 'tag bad-tag', dropped: 'tag warn-tag' }[d.outcome] || 'tag';
  const name = el('td', { 'data-depth': depth }, el('a', { class: 'body', href: jobHash(d.topic, d.id) }, `${d.topic}/${d.id}`));
  name.style.paddingLeft = `${0.5 + depth * 1.5}rem`;  // (CSSOM: the page's policy refuses style attributes)
  return el('tr', { 'data-dep': `${d.topic}/${d.id}` }, name,
    el('td', {}, j ? j.state : el('span', { class: 'muted' }, 'gone, or never put')),
    el('td', {}, el('span', { class: outcome }, d.outcome)));
}

function historyRow(a) {
  return el('tr', { 'data-attempt': a.attempt },
    el('td', { class: 'n' }, a.attempt),
    el('td', {}, el('span', { class: a.outcome === 'failed' ? 'tag bad-tag' : 'tag warn-tag' }, a.outcome)),
    el('td', { title: new Date(a.started).toISOString() }, was(a.started)),
    el('td', { class: 'n' }, duration(a.ended - a.started)),
    el('td', {}, a.worker ? el('code', {}, a.worker) : el('span', { class: 'muted' }, 'not named')),
    el('td', {}, el('pre', { class: 'body clamp bad', tabindex: 0 }, a.error),
      a.error_cut ? el('span', { class: 'muted' }, ' (the first 1024 bytes)') : ''));
}

// What the job's handlers reported: the latest progress (a bar when it is
// a number 0..100 or has a percent), and the log's lines.
function renderReport(j) {
  $('job-progress-box').hidden = !('progress' in j);
  if ('progress' in j) {
    const p = j.progress;
    const percent = typeof p === 'number' ? p : (p && typeof p.percent === 'number' ? p.percent : null);
    const bar = $('job-progress-bar');
    bar.hidden = percent === null || percent < 0 || percent > 100;
    if (!bar.hidden) { bar.value = percent; bar.textContent = `${percent}%`; }
    $('job-progress').textContent = typeof p === 'string' ? p : JSON.stringify(p, null, 2);
    $('job-progress-when').textContent = `(attempt ${j.progress_attempt}, ${was(j.progress_at)})`;
  }
  const log = j.log || [];
  $('job-log-box').hidden = log.length === 0;
  $('job-log').textContent = log.map((l) => `${new Date(l.at).toLocaleTimeString()}  #${l.attempt}  ${l.line}${l.cut ? ' […cut]' : ''}`).join('\n');
  const dropped = (j.log_total || 0) - log.length;
  $('job-log-count').textContent = log.length ? `(${log.length} lines${dropped > 0 ? `; ${dropped} earlier ones dropped` : ''})` : '';
}

function jobActions(j) {
  const back = () => { location.hash = `#/topic/${encodeURIComponent(state.topic)}`; };
  const b = [];
  if (j.state === 'dead') b.push(el('button', { type: 'button', onclick: () => jobAct(() => api('POST', topicPath('kick'), { ids: [j.id] }), `${j.id} is ready again`) }, 'Retry'));
  if (j.state === 'delayed') b.push(el('button', { type: 'button', onclick: () => jobAct(() => runNow(j), `${j.id} is due now`) }, 'Run now'));
  b.push(el('button', { type: 'button', class: 'danger', onclick: () => {
    if (!confirm(`Delete job ${j.id}?`)) return;
    // Deleted: back to its topic, which says so; refused: the page says why.
    api('DELETE', jobPath(j.id)).then(() => { back(); $('topic-message').textContent = `deleted ${j.id}`; },
      (e) => { $('job-message').textContent = e.message; });
  } }, 'Delete'));
  return b;
}

async function jobAct(fn, done) {
  try {
    await fn();
    $('job-message').textContent = done;
  } catch (e) {
    $('job-message').textContent = e.message;
  }
  if (!$('job').hidden) await loadJob(true);
}

// A datetime-local input's value for a time (local, to the second).
function localInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

// A batch's progress (docs/flows.md, "Batches"): its members finished of
// those named, and whether more may come.
function renderBatch(b) {
  $('job-batch-box').hidden = !b;
  if (!b) return;
  $('job-batch-sealed').textContent = b.sealed ? '(sealed)' : '(open: members may still be added)';
  const bar = $('job-batch-bar');
  bar.max = Math.max(b.total, 1);
  bar.value = b.done + b.failed;
  $('job-batch-counts').textContent =
    `${b.total} members: ${b.done} done, ${b.failed} failed, ${b.pending} pending`;
}

let shownJob = null;
let jobFormDirty = false;  // the change form holds input not saved yet
let jobAsked = 0;
// A blocked job's page reads it again every 2 s: what settles its
// dependencies happens in other topics, where counts may end as they began
// (a job put, run and gone between two readings), and a mover hands it
// over later still. One small GET while such a page is open.
setInterval(() => {
  if (!$('job').hidden && shownJob && shownJob.state === 'blocked' && !document.hidden) loadJob(true);
}, 2000);
async function loadJob(keepMessage) {
  const link = $('job-topic-link');
  link.textContent = state.topic;
  link.href = `#/topic/${encodeURIComponent(state.topic)}`;
  $('job-id').textContent = state.jobId;
  if (!keepMessage) $('job-message').textContent = '';
  const asked = ++jobAsked;  // (only the latest read is shown, as loadJobs)
  let j;
  try {
    j = await api('GET', jobPath(state.jobId));
  } catch (e) {
    if (asked !== jobAsked) return;
    shownJob = null;
    $('job-state').textContent = 'not found';
    $('job-message').textContent = `${e.message}: it was never put, or it is gone (acked, deleted, or its retention ended).`;
    for (const id of ['job-fields', 'job-body']) $(id).replaceChildren();
    // (As a found job's page replaces them: a rebuild held back under a
    // press must not bring back what this empties.)
    for (const box of [$('job-actions'), $('job-deps').tBodies[0], $('job-history').tBodies[0]]) replaceKeepingFocus(box);
    $('job-history-count').textContent = '';
    $('job-body-size').textContent = '';
    $('job-result-box').hidden = true;
    $('job-progress-box').hidden = true;
    $('job-log-box').hidden = true;
    $('job-deps-box').hidden = true;
    $('job-batch-box').hidden = true;
    $('job-change').hidden = true;
    return;
  }
  if (asked !== jobAsked) return;
  shownJob = j;
  $('job-state').textContent = j.state;
  $('job-fields').replaceChildren(...jobFields(j));
  const bytes = bytesOf(j);
  const binary = 'body_base64' in j;
  $('job-body-size').textContent = `(${size(bytes.length)}${binary ? ', binary: hex' : ''})`;
  $('job-body').textContent = binary ? hexDump(bytes) : pretty(j.body);
  $('job-result-box').hidden = !('result' in j || 'result_base64' in j);
  if ('result' in j) $('job-result').textContent = pretty(j.result);
  if ('result_base64' in j) $('job-result').textContent = hexDump(Uint8Array.from(atob(j.result_base64), (c) => c.charCodeAt(0)));
  renderReport(j);
  renderBatch(j.batch);
  if (treeOf !== `${state.topic}/${state.jobId}`) {  // (another job's page: the tree was not its)
    treeOf = null;
    $('job-tree-box').hidden = true;
    $('job-tree-note').textContent = '';
  }
  const deps = j.deps || [];
  $('job-deps-box').hidden = deps.length === 0;
  replaceKeepingFocus($('job-deps').tBodies[0], ...deps.map(depRow));
  $('job-deps-count').textContent = deps.length ? `(${j.deps_total - j.deps_left} of ${j.deps_total} settled)` : '';
  const history = j.history || [];
  replaceKeepingFocus($('job-history').tBodies[0], ...history.map(historyRow));
  $('job-history-count').textContent = history.length ? `(the last ${history.length})` : '';
  $('job-history-empty').hidden = history.length > 0;
  replaceKeepingFocus($('job-actions'), ...jobActions(j));
  // Priority and due time change while the job waits (a put of it again).
  // A refresh leaves what the user is typing alone (jobFormDirty).
  $('job-change').hidden = j.state !== 'delayed' && j.state !== 'ready';
  if (!jobFormDirty) {
    $('job-priority').value = j.priority;
    $('job-due').value = localInput(j.due);
  }
}

// Runs an action of the topic page; done: the message, or a function of
// the answer that makes it.
async function act(fn, done) {
  try {
    const r = await fn();
    $('topic-message').textContent = typeof done === 'function' ? done(r) : done;
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
    fetch('/v1/topics?count=1', { headers: { Authorization: `Bearer ${state.token}` } }).then((r) => {
      if (r.status === 401) { $('login-error').textContent = 'The token was refused.'; return; }
      route();  // (which opens the feed)
    });
  });
  $('filter').addEventListener('input', (ev) => {
    state.filter = ev.target.value;
    state.topicsPage = 0;
    state.overview.starts = [''];
    loadOverview();
  });
  $('pause').addEventListener('click', () => act(() => api('POST', topicPath(current().paused ? 'resume' : 'pause')), current().paused ? 'resumed' : 'paused'));
  $('kick-all').addEventListener('click', () => {
    if (confirm(`Retry every dead job of ${state.topic} (up to 1000 at a time)?`)) {
      act(() => api('POST', topicPath('kick'), { all: true }), 'kicked every dead job');
    }
  });
  $('promote-all').addEventListener('click', () => {
    const n = current().delayed;
    if (!confirm(`Make all ${n} delayed job${n === 1 ? '' : 's'} of ${state.topic} due now (1000 at a time)?`)) return;
    act(() => inBatches('promote', { all: true }, 'promoted', 'promoted', n), (m) => m);
  });
  $('purge').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const age = Number($('purge-age').value) * Number($('purge-unit').value);
    const said = `${$('purge-age').value} ${$('purge-unit').selectedOptions[0].textContent}`;
    if (!confirm(`Delete the dead jobs of ${state.topic} that died more than ${said} ago? This cannot be undone.`)) return;
    act(() => inBatches('purge', { older_than_ms: age }, 'deleted', 'deleted'), (m) => m);
  });
  $('select-page').addEventListener('change', (ev) => {
    for (const box of $('jobs').tBodies[0].querySelectorAll('input[type=checkbox]')) {
      box.checked = ev.target.checked;
      const id = box.closest('tr').dataset.id;
      if (ev.target.checked) state.selected.add(id); else state.selected.delete(id);
    }
    renderBulk();
  });
  $('bulk-retry').addEventListener('click', () => {
    const ids = [...state.selected];
    if (!confirm(`Retry ${ids.length} dead job${ids.length > 1 ? 's' : ''}?`)) return;
    state.selected.clear();
    act(() => api('POST', topicPath('kick'), { ids }), (r) => `retried ${r.kicked} of ${ids.length}`);
  });
  $('bulk-delete').addEventListener('click', () => {
    const ids = [...state.selected];
    if (!confirm(`Delete ${ids.length} job${ids.length > 1 ? 's' : ''}? This cannot be undone.`)) return;
    state.selected.clear();
    act(() => api('POST', topicPath('delete'), { ids }), (r) => `deleted ${r.deleted} of ${ids.length}`);
  });
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
  $('find').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const hash = `#/topic/${encodeURIComponent(state.topic)}/find/${encodeURIComponent($('find-id').value)}`;
    if (location.hash === hash) findJobs($('find-id').value);  // (the same search: again)
    else location.hash = hash;
  });
  $('found-more').addEventListener('click', () => findJobs(found.prefix, true));
  $('job-tree-show').addEventListener('click', () => showFlowTree());
  // Each history panel from the page's one template, its heading its own.
  for (const box of document.querySelectorAll('section.history')) {
    box.append($('history-template').content.cloneNode(true));
    const h2 = box.querySelector('h2');
    h2.id = `${box.id}-title`;
    h2.textContent = box.dataset.title;
    box.setAttribute('aria-labelledby', h2.id);
  }
  for (const b of document.querySelectorAll('.history [data-range]')) {
    // (to the view's link with the range: route() draws it)
    b.addEventListener('click', () => {
      const view = $('topic').hidden ? '#/' : `#/topic/${encodeURIComponent(state.topic)}/`;
      location.hash = `${view}history/${b.dataset.range}`;
    });
  }
  $('job-change').addEventListener('input', () => { jobFormDirty = true; });
  $('job-change').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const j = shownJob;
    if (!j) return;
    // In place (library 33's reschedule): its attempts and history stay.
    // The due time goes only when changed (the field holds whole seconds;
    // one in the past is now).
    // (Compared as times: a browser may give "12:00" for "12:00:00".)
    const change = {};
    const priority = Number($('job-priority').value);
    if (priority !== j.priority) change.priority = priority;
    const due = $('job-due').value ? new Date($('job-due').value).getTime() : null;
    if (due !== null && due !== Math.floor(j.due / 1000) * 1000) change.due_at_ms = due;
    jobFormDirty = false;
    if (!Object.keys(change).length) { $('job-message').textContent = 'nothing changed'; return; }
    jobAct(() => api('POST', `${jobPath(j.id)}/reschedule`, change), `saved ${j.id}`);
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
  fetch('/v1/topics?count=1', { headers: state.token ? { Authorization: `Bearer ${state.token}` } : {} }).then((r) => {
    if (r.status === 401) { showLogin(''); return; }
    route();  // (which opens the feed)
  });
});
