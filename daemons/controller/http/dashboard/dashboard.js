/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cohort dashboard: polls the controller's REST API (api/v1/..., protobuf
 * JSON with proto field names) every 2 s and draws the queue, the nodes, the
 * switch tree heat map, the selected job's placement and wait, and fair share.
 * A token given as /#token=TOKEN is kept in sessionStorage and sent as
 * "Authorization: Bearer TOKEN"; without one the page reads anonymously.
 * /#job=ID opens on that job (the address follows the selection).
 * Every API string reaches the DOM through textContent (see el()).
 */
'use strict';

const REFRESH_MS = 2000;
const TOKEN_KEY = 'cohort.token';
const AUTH_HINT = 'get a token with: cohort token, then open this page as /#token=TOKEN';
const UNAVAILABLE = new Set(['NODE_UNKNOWN', 'NODE_DRAINING', 'NODE_DRAINED', 'NODE_DOWN']);
const USED = new Set(['NODE_MIXED', 'NODE_ALLOCATED']);

const view = {
  data: {},          // section -> {value} or {error}, from the last refresh
  selected: null,    // display_id of the selected job
  why: null,         // {id, value} or {id, error}: the selected job's explanation
  refreshedAt: null,
};

// ---------------------------------------------------------------- helpers

/** Builds an element; string children become text nodes (never HTML). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'data') Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (selector) => document.querySelector(selector);
const num = (value) => Number(value || 0);            // int64 fields arrive as strings
const stateName = (s, prefix) => String(s || '').replace(prefix, '');
const pad = (n) => String(n).padStart(2, '0');

/** Slurm-style duration: [D-]HH:MM:SS. */
function duration(seconds) {
  if (!Number.isFinite(seconds) || seconds >= 1e12) return 'UNLIMITED';
  let s = Math.max(0, Math.floor(seconds));
  const days = Math.floor(s / 86400);
  s %= 86400;
  const hms = `${pad(Math.floor(s / 3600))}:${pad(Math.floor(s / 60) % 60)}:${pad(s % 60)}`;
  return days ? `${days}-${hms}` : hms;
}

/** Local time of Unix milliseconds: HH:MM:SS today, else with the date. */
function clock(ms) {
  const t = new Date(num(ms));
  const hms = `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
  if (t.toDateString() === new Date().toDateString()) return hms;
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ${hms}`;
}

function fromNow(ms) {
  const delta = (num(ms) - Date.now()) / 1000;
  return delta > 0 ? `${clock(ms)} (in ${duration(delta)})` : `${clock(ms)} (due)`;
}

const fixed = (value, digits) => Number(value || 0).toFixed(digits);
const leavesOf = (job) => String(job.leaves || '').split(',').map((s) => s.trim()).filter(Boolean);

// ---------------------------------------------------------------- API

function takeToken() {
  try {
    const match = location.hash.match(/(?:^#|&)token=([^&]*)/);
    if (match) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
      const job = linkedJob();
      history.replaceState(null, '', location.pathname + location.search +
        (job ? `#job=${encodeURIComponent(job)}` : ''));
    }
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch (e) {
    return '';
  }
}

/** The job a link names (/#job=ID), shown on load; null when none. */
function linkedJob() {
  const match = location.hash.match(/(?:^#|&)job=([^&]*)/);
  return match ? decodeURIComponent(match[1]) : null;
}
const token = takeToken();

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** GETs a relative API path; rejects with an ApiError carrying the error's message. */
async function api(path) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, { headers, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, `the controller does not answer (${e.message})`);
  }
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : {}; } catch (e) { /* not JSON */ }
  if (!response.ok) {
    const error = (body && body.error) || {};
    const message = error.message || text.trim() || response.statusText;
    throw new ApiError(response.status, `${response.status}${error.code ? ' ' + error.code : ''}: ${message}`);
  }
  if (body === null) throw new ApiError(response.status, `${path}: the answer is not JSON`);
  return body;
}

const isAuth = (error) => error && (error.status === 401 || error.status === 403);

// ---------------------------------------------------------------- refresh

const SOURCES = {
  jobs: 'api/v1/jobs?all_users=true&states=JOB_PENDING,JOB_RUNNING',
  nodes: 'api/v1/nodes',
  partitions: 'api/v1/partitions',
  topology: 'api/v1/topology',
  shares: 'api/v1/shares',
  reservations: 'api/v1/reservations',
};

async function refresh() {
  const names = Object.keys(SOURCES);
  const results = await Promise.allSettled(names.map((name) => api(SOURCES[name])));
  names.forEach((name, i) => {
    const r = results[i];
    view.data[name] = r.status === 'fulfilled' ? { value: r.value } : { error: r.reason };
  });
  if (view.selected) await loadWhy(view.selected);
  view.refreshedAt = Date.now();
  render();
}

async function loadWhy(ref) {
  let result;
  try {
    result = { id: ref, value: await api(`api/v1/jobs/${encodeURIComponent(ref)}/why`) };
  } catch (error) {
    result = { id: ref, error };
  }
  if (view.selected === ref) view.why = result;   // drop answers for an older selection
}

async function loop() {
  if (!document.hidden) {
    try { await refresh(); } catch (e) { showBanner(`dashboard error: ${e.message}`); }
  }
  setTimeout(loop, REFRESH_MS);
}

function select(ref) {
  if (view.selected === ref) return;
  view.selected = ref;
  view.why = null;
  // The address names the selected job, so that it can be shared.
  history.replaceState(null, '', location.pathname + location.search +
    (ref ? `#job=${encodeURIComponent(ref)}` : ''));
  render();
  if (ref) loadWhy(ref).then(render);
}

// ---------------------------------------------------------------- rendering

function render() {
  const errors = Object.values(view.data).map((d) => d.error).concat(view.why ? [view.why.error] : []);
  const auth = errors.find(isAuth);
  const down = errors.find((e) => e && e.status === 0);
  if (auth) showBanner(auth.message, AUTH_HINT);
  else if (down) showBanner(down.message);
  else showBanner(null);
  renderSummary();
  renderQueue();
  renderNodes();
  renderTree();
  renderJob();
  renderShares();
  renderReservations();
}

function showBanner(message, hint) {
  const banner = $('#banner');
  banner.replaceChildren();
  banner.hidden = !message;
  if (message) banner.append(el('strong', {}, message), hint ? el('span', { class: 'hint' }, hint) : null);
}

/** Shows a section's error (or hides it); returns the section's value or null. */
function sectionValue(section, name) {
  const entry = view.data[name] || {};
  const box = document.querySelector(`[data-error-for="${section}"]`);
  if (box) {
    box.hidden = !entry.error;
    box.textContent = entry.error ? entry.error.message : '';
  }
  return entry.error ? null : entry.value || null;
}

function fillBody(table, rows, columns, emptyText) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
  if (!rows.length) body.append(el('tr', { class: 'empty' }, el('td', { colspan: columns }, emptyText)));
}

function renderSummary() {
  $('#refreshed').textContent = view.refreshedAt ? clock(view.refreshedAt) : 'never';
  const nodes = (view.data.nodes && view.data.nodes.value || {}).nodes;
  if (!nodes) { $('#summary').textContent = 'cluster state unavailable'; return; }
  let idle = 0, used = 0, off = 0, gpus = 0, gpusUsed = 0;
  for (const n of nodes) {
    if (UNAVAILABLE.has(n.state)) off++;
    else if (USED.has(n.state)) used++;
    else if (n.state === 'NODE_IDLE') idle++;
    gpus += n.gpus || 0;
    gpusUsed += n.gpus_allocated || 0;
  }
  $('#summary').textContent = `${nodes.length} nodes: ${idle} idle, ${used} allocated, ` +
    `${off} unavailable · GPUs ${gpusUsed}/${gpus} in use`;
}

const isRunning = (job) => job.state === 'JOB_RUNNING' || job.state === 'JOB_COMPLETING';

function renderQueue() {
  const table = $('#queue');
  const value = sectionValue('queue', 'jobs');
  const jobs = value ? [...(value.jobs || [])] : [];
  jobs.sort((a, b) => (isRunning(b) - isRunning(a)) ||
    (isRunning(a) ? num(a.start_time_ms) - num(b.start_time_ms)
      : (a.queue_position || 1e9) - (b.queue_position || 1e9)) || num(a.id) - num(b.id));
  $('#queue-count').textContent = value ? `${jobs.length}` : '';
  const rows = jobs.map((job) => {
    const spec = job.spec || {};
    const running = isRunning(job);
    const where = running
      ? [job.nodes, job.suspended ? el('span', { class: 'tag' }, 'suspended') : null, idleTag(job)]
      : [job.reason || 'pending', job.queue_position ? ` (#${job.queue_position})` : '',
        job.held ? el('span', { class: 'tag' }, 'held') : null];
    const when = running ? duration((Date.now() - num(job.start_time_ms)) / 1000)
      : (num(job.expected_start_ms) ? fromNow(job.expected_start_ms) : '—');
    const row = el('tr', {
      class: `job-row${job.display_id === view.selected ? ' selected' : ''}`,
      data: { jobId: job.display_id }, tabindex: 0,
      title: `job ${job.display_id}: click for details`,
    },
    el('td', { class: 'mono' }, job.display_id), el('td', {}, spec.name), el('td', {}, spec.user_name),
    el('td', {}, spec.account), el('td', {}, spec.partition),
    el('td', {}, el('span', { class: `state s-${stateName(job.state, 'JOB_').toLowerCase()}` },
      stateName(job.state, 'JOB_'))),
    el('td', { class: 'num' }, spec.nodes), el('td', { class: 'num' }, spec.gpus_per_node),
    el('td', { class: running ? 'mono' : '' }, where), el('td', { class: 'mono' }, when));
    row.addEventListener('click', () => select(job.display_id));
    row.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); select(job.display_id); } });
    return row;
  });
  fillBody(table, rows, 10, value ? 'no jobs pending or running' : 'no data');
}

/** A running job whose every GPU was under 5% busy at each sample since: how long. */
function idleTag(job) {
  const usage = job.usage || {};
  const since = num(usage.gpu_idle_since_ms);
  if (!usage.gpu_measured || !since) return null;
  const idle = duration(Math.max(Date.now() - since, 0) / 1000);
  return el('span', {
    class: 'tag idle-gpus',
    title: `every GPU of job ${job.display_id} has been under 5% busy for ${idle} (NVML samples)`,
  }, `GPUs idle ${idle}`);
}

/** What a running job uses now, from its nodes' last samples. */
function usageText(job) {
  const u = job.usage;
  if (!u) return '';
  const parts = [`${u.tasks || 0} tasks`, `CPU ${duration(num(u.cpu_ms) / 1000)}`,
    `RSS ${fixed(num(u.rss_kb) / 1048576, 2)} GiB`];
  if (u.gpu_measured) {
    parts.push(`GPUs ${u.gpu_util_pct || 0}% busy (max ${u.gpu_util_max_pct || 0}%), ` +
      `${fixed(num(u.gpu_mem_mb) / 1024, 1)} GiB in use`);
  }
  return parts.join(' · ');
}

/** The numeric id (as a string) of the selected job, from its explanation or the queue. */
function selectedJob() {
  if (!view.selected) return null;
  if (view.why && view.why.value && view.why.value.job) return view.why.value.job;
  const jobs = (view.data.jobs && view.data.jobs.value || {}).jobs || [];
  return jobs.find((j) => j.display_id === view.selected) || null;
}

function renderNodes() {
  const value = sectionValue('nodes', 'nodes');
  const nodes = value ? value.nodes || [] : [];
  const job = selectedJob();
  $('#nodes-count').textContent = value ? `${nodes.length}` : '';
  const rows = nodes.map((n) => el('tr', { class: job && (n.jobs || []).includes(String(job.id)) ? 'hl' : '' },
    el('td', { class: 'mono' }, n.name),
    el('td', {}, el('span', { class: `state n-${nodeClass(n)}` }, stateName(n.state, 'NODE_'))),
    el('td', { class: 'num' }, `${n.cpus_allocated}/${n.cpus}`),
    el('td', { class: 'num' }, `${n.gpus_allocated}/${n.gpus}`),
    el('td', { class: 'mono' }, n.leaf), el('td', { class: 'mono' }, (n.jobs || []).join(', ')),
    el('td', { class: 'muted' }, n.reason)));
  fillBody($('#nodes'), rows, 7, value ? 'no nodes' : 'no data');
  renderPartitions();
}

function renderPartitions() {
  const entry = view.data.partitions || {};
  const box = $('#partitions');
  box.replaceChildren();
  if (entry.error) { box.append(el('span', { class: 'muted' }, `partitions: ${entry.error.message}`)); return; }
  for (const p of (entry.value || {}).partitions || []) {
    const limit = num(p.max_time_s) ? duration(num(p.max_time_s)) : 'UNLIMITED';
    box.append(el('span', { class: 'chip', title: `nodes ${p.nodes}; priority tier ${p.priority_tier}` },
      el('strong', {}, p.name, p.is_default ? '*' : ''),
      ` ${p.total_nodes} nodes · ${p.total_gpus} GPUs · max ${limit}`));
  }
}

const nodeClass = (n) => (UNAVAILABLE.has(n.state) ? 'off' : USED.has(n.state) ? 'used' : 'idle');

function renderTree() {
  const box = $('#tree');
  const topology = sectionValue('tree', 'topology');
  const nodes = (view.data.nodes && view.data.nodes.value || {}).nodes || [];
  box.replaceChildren();
  if (!topology) return;
  const switches = new Map((topology.switches || []).map((s) => [s.name, s]));
  if (!switches.size) { box.append(el('p', { class: 'muted' }, 'no topology configured')); return; }
  const byLeaf = new Map();
  for (const n of nodes) {
    if (!byLeaf.has(n.leaf)) byLeaf.set(n.leaf, []);
    byLeaf.get(n.leaf).push(n);
  }
  const job = selectedJob();
  const jobId = job ? String(job.id) : null;
  const spanned = new Set(job ? leavesOf(job) : []);
  let roots = topology.roots || [];
  if (!roots.length) roots = [...switches.values()].filter((s) => !s.parent).map((s) => s.name);
  const draw = (name, depth) => {
    const sw = switches.get(name);
    if (!sw || depth > 32) return null;
    if (sw.level === 0 || !(sw.children || []).length) return drawLeaf(sw, byLeaf.get(sw.name) || [], jobId, spanned);
    return el('div', { class: 'switch' },
      el('div', { class: 'switch-label' }, el('strong', {}, sw.name),
        el('span', { class: 'muted' }, ` ${sw.node_count} nodes · ${sw.idle} idle · ${sw.allocated} used · ${sw.unavailable} off`)),
      el('div', { class: 'children' }, (sw.children || []).map((c) => draw(c, depth + 1))));
  };
  box.append(el('div', { class: 'children roots' }, roots.map((r) => draw(r, 0))));
}

function drawLeaf(sw, nodes, jobId, spanned) {
  const gpus = nodes.reduce((sum, n) => sum + (n.gpus || 0), 0);
  const unit = gpus ? 'GPUs' : 'CPUs';
  const total = gpus || nodes.reduce((sum, n) => sum + (n.cpus || 0), 0);
  const used = nodes.reduce((sum, n) => sum + ((gpus ? n.gpus_allocated : n.cpus_allocated) || 0), 0);
  const off = nodes.length > 0 && nodes.every((n) => UNAVAILABLE.has(n.state));
  let placed = spanned.has(sw.name);
  const squares = nodes.map((n) => {
    const runs = jobId !== null && (n.jobs || []).includes(jobId);
    placed = placed || runs;
    return el('span', {
      class: `node-sq ${nodeClass(n)}${runs ? ' placed' : ''}`, data: { node: n.name },
      title: `${n.name}: ${stateName(n.state, 'NODE_')}, GPUs ${n.gpus_allocated}/${n.gpus}, ` +
        `CPUs ${n.cpus_allocated}/${n.cpus}${(n.jobs || []).length ? ', jobs ' + n.jobs.join(' ') : ''}`,
    });
  });
  const cell = el('div', {
    class: `leaf${off || !total ? ' off' : ''}${placed ? ' placed' : ''}`, data: { switch: sw.name },
    title: `${sw.name}: ${sw.nodes || 'no nodes'}`,
  },
  el('div', { class: 'leaf-label' }, el('strong', {}, sw.name), el('span', {}, `${used}/${total} ${unit}`)),
  el('div', { class: 'leaf-nodes' }, squares));
  const fraction = total ? Math.min(1, used / total) : 0;
  cell.style.setProperty('--heat-hue', String(Math.round(130 * (1 - fraction))));
  return cell;
}

/**
 * The fewest leaf switches whose node counts reach `want` (largest first,
 * greedily); a string says why there is no such number.
 */
function bestLeafCount(want) {
  const topology = (view.data.topology || {}).value;
  const sizes = ((topology && topology.switches) || []).filter((s) => s.level === 0)
    .map((s) => s.node_count || 0).sort((a, b) => b - a);
  if (!sizes.length) return 'no topology known';
  let sum = 0;
  for (let i = 0; i < sizes.length; i++) {
    sum += sizes[i];
    if (sum >= want) return i + 1;
  }
  return `the leaves hold ${sum} nodes, fewer than ${want}`;
}

function fact(dl, label, ...value) {
  if (value.every((v) => v === '' || v === null || v === undefined)) return;
  dl.append(el('dt', {}, label), el('dd', {}, value));
}

function renderJob() {
  const panel = $('#job');
  panel.hidden = !view.selected;
  if (!view.selected) return;
  const body = $('#job-body');
  const why = view.why && view.why.id === view.selected ? view.why : null;
  const job = selectedJob();
  const spec = (job && job.spec) || {};
  $('#job-title').textContent = `job ${view.selected}${spec.name ? ' · ' + spec.name : ''}`;
  body.replaceChildren();
  if (why && why.error) body.append(el('p', { class: 'section-error' }, why.error.message));
  if (!job) { body.append(el('p', { class: 'muted' }, why ? 'job not found' : 'loading…')); return; }
  const facts = el('dl', { class: 'facts' });
  const state = stateName(job.state, 'JOB_');
  fact(facts, 'state', state, job.held ? ' (held)' : '', job.suspended ? ' (suspended)' : '');
  fact(facts, 'reason', job.reason, job.reason_detail ? ` — ${job.reason_detail}` : '');
  fact(facts, 'user', `${spec.user_name} (${spec.account})`);
  fact(facts, 'partition', `${spec.partition}${job.qos ? ' · qos ' + job.qos : ''}`);
  fact(facts, 'asks', `${spec.nodes} nodes × ${spec.gpus_per_node} GPUs, ` +
    `${spec.tasks_per_node} tasks × ${spec.cpus_per_task} CPUs per node`);
  fact(facts, 'nodes', job.nodes);
  const container = spec.container || {};
  if (container.image || container.name) {
    fact(facts, 'container', [container.image, container.name ? `named ${container.name}` : '',
      container.mounts ? `mounts ${container.mounts}` : ''].filter(Boolean).join(' · '));
  }
  fact(facts, 'image ahead', job.image_status);
  fact(facts, 'leaves spanned', leavesOf(job).join(', '));
  if (num(spec.segment)) {
    fact(facts, 'segments', `of ${spec.segment} nodes${spec.spread_segments ? ', each in a block of its own' : ''}`);
  }
  const shape = job.placement || {};
  fact(facts, 'placement', shape.summary);
  fact(facts, 'rank order', shape.rank_order && shape.rank_order !== job.nodes ? shape.rank_order : '');
  fact(facts, 'submitted', num(job.submit_time_ms) ? clock(job.submit_time_ms) : '');
  if (num(job.start_time_ms)) fact(facts, 'started', `${clock(job.start_time_ms)} (elapsed ${duration((Date.now() - num(job.start_time_ms)) / 1000)})`);
  fact(facts, 'time limit', num(job.time_limit_s) ? duration(num(job.time_limit_s)) : 'none');
  if (job.state === 'JOB_PENDING') fact(facts, 'priority', job.priority);
  if (job.gpu_hours) fact(facts, 'GPU-hours', fixed(job.gpu_hours, 2));
  fact(facts, 'uses now', usageText(job), idleTag(job) ? ' ' : '', idleTag(job));
  if (num(spec.spares)) fact(facts, 'spares', `${spec.spares}: ${job.spare_nodes || 'none left'}`);
  for (const r of job.repairs || []) {
    fact(facts, 'repaired', `${clock(num(r.time_ms))}: ${(r.lost || []).join(',')} → ` +
      `${(r.replacement || []).join(',')}; started ${r.restarted}`);
  }
  body.append(facts, placement(job));
  if (job.state === 'JOB_PENDING') body.append(waitFacts(why ? why.value : null));
}

function placement(job) {
  const spanned = leavesOf(job).length;
  const want = num((job.spec || {}).nodes);
  const box = el('div', { class: 'placement' }, el('h3', {}, 'placement'));
  if (!spanned) {
    box.append(el('p', { class: 'muted' }, 'not placed yet'));
    return box;
  }
  const spans = `spans ${spanned} leaf switch${spanned === 1 ? '' : 'es'}`;
  const best = bestLeafCount(want);
  if (typeof best === 'string') {
    box.append(el('p', {}, `${spans}; no best possible known (${best})`));
    return box;
  }
  const verdict = spanned <= best ? el('span', { class: 'verdict good' }, 'optimal')
    : el('span', { class: 'verdict bad' }, `${spanned - best} more than the best`);
  box.append(el('p', {}, `${spans}; the best possible is ${best} `, verdict));
  return box;
}

function waitFacts(why) {
  const box = el('div', { class: 'wait' }, el('h3', {}, 'why it waits'));
  if (!why) { box.append(el('p', { class: 'muted' }, 'loading…')); return box; }
  const wait = why.wait || {};
  const sooner = why.sooner || {};
  const dl = el('dl', { class: 'facts' });
  fact(dl, 'pending reason', why.pending_reason);
  fact(dl, 'shortfall', wait.shortfall || 'none: it fits now');
  fact(dl, 'jobs ahead', `${wait.ahead_count || 0}`,
    (wait.ahead || []).length ? ` (first: ${wait.ahead.map((a) => `${a.display_id} prio ${a.priority}, ${a.nodes} nodes`).join('; ')})` : '');
  fact(dl, 'expected start', num(why.expected_start_ms) ? fromNow(why.expected_start_ms)
    : wait.beyond_backfill_depth ? 'unknown (beyond the backfill depth, or no time limit)' : 'unknown');
  fact(dl, 'preempting', wait.preempting);
  box.append(dl);
  const leaves = wait.closest_leaves || [];
  if (leaves.length) {
    box.append(el('p', { class: 'label' }, 'closest leaves (nodes that fit now / nodes)'),
      el('div', { class: 'chips' }, leaves.map((l) => el('span', { class: 'chip mono' }, `${l.name} ${l.fitting}/${l.nodes}`))));
  }
  const changes = [];
  if (sooner.fewer_nodes) changes.push(`with ${sooner.fewer_nodes} nodes instead of ${wait.nodes || (why.job && why.job.spec || {}).nodes} it would start now`);
  if (sooner.without_switches) changes.push(`dropping --switches=${sooner.without_switches} would start it now`);
  if ((sooner.partitions || []).length) changes.push(`it would start now in partition ${sooner.partitions.join(', ')}`);
  box.append(el('p', { class: 'label' }, 'what would start it sooner'),
    changes.length ? el('ul', { class: 'sooner' }, changes.map((c) => el('li', {}, c)))
      : el('p', { class: 'muted' }, 'no single change starts it now'));
  return box;
}

function renderShares() {
  const value = sectionValue('shares', 'shares');
  const rows = value ? value.rows || [] : [];
  const half = value ? num(value.half_life_s) : 0;
  $('#half-life').textContent = half ? `usage half-life ${duration(half)}` : '';
  const accounts = rows.filter((r) => !r.user);
  const ordered = [];
  for (const a of accounts) ordered.push(a, ...rows.filter((r) => r.user && r.account === a.account));
  ordered.push(...rows.filter((r) => r.user && !accounts.some((a) => a.account === r.account)));
  const out = ordered.map((r) => el('tr', { class: r.user ? 'user-row' : 'account-row' },
    el('td', {}, r.user ? el('span', { class: 'indent' }, r.user) : el('strong', {}, r.account)),
    el('td', { class: 'num' }, r.shares), el('td', { class: 'num' }, fixed(r.norm_shares, 3)),
    el('td', { class: 'num' }, fixed(num(r.usage_gpu_seconds) / 3600, 2)),
    el('td', { class: 'num' }, fixed(r.norm_usage, 3)), el('td', { class: 'num' }, fixed(r.factor, 3))));
  fillBody($('#shares'), out, 6, value ? 'no accounts' : 'no data');
}

/** Operators' reservations by start: a maintenance window is marked. */
function renderReservations() {
  const value = sectionValue('reservations', 'reservations');
  const list = value ? value.reservations || [] : [];
  $('#reservations-count').textContent = value ? `${list.length}` : '';
  const out = list.map((r) => {
    const flags = (r.flags || '').split(',').filter(Boolean);
    const who = [...(r.users || []).map((u) => `user ${u}`), ...(r.accounts || []).map((a) => `account ${a}`)];
    if (r.partition) who.push(`partition ${r.partition}`);
    return el('tr', { class: flags.includes('MAINT') ? 'maint-row' : '' },
      el('td', { class: 'mono' }, r.name),
      el('td', {}, r.active ? el('span', { class: 'state s-running' }, 'ACTIVE') : 'INACTIVE'),
      el('td', { class: 'mono' }, clock(num(r.start_ms))), el('td', { class: 'mono' }, clock(num(r.end_ms))),
      el('td', { class: 'mono' }, r.nodes || `${r.node_count || 0} nodes`),
      el('td', {}, who.join(', ') || 'everyone'),
      el('td', {}, flags.map((f) => el('span', { class: f === 'MAINT' ? 'tag maint' : 'tag' }, f))));
  });
  fillBody($('#reservations'), out, 7, value ? 'no reservations' : 'no data');
}

// ---------------------------------------------------------------- start

document.addEventListener('DOMContentLoaded', () => {
  $('#job-close').addEventListener('click', () => select(null));
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && view.selected) select(null); });
  view.selected = linkedJob();
  loop();
});
