// A pipeline's page shows its steps as a graph (a box per step, in
// columns by how many steps come before it, arrows from the steps whose
// outputs it reads; each box says its status in words and colour and
// links to the step's job), with a table of the same; a parallel step's
// page shows its mini-batches' progress and the failed ones.
import { h, replace, badge, statusKind, syncTable, table, duration } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

// stepsOf is a pipeline's steps in the order they run, with their kind,
// job, status and the steps before them.
export function stepsOf(p) {
  const jobs = p.jobs || {};
  // Before its controller's first pass a pipeline has no status yet: its
  // steps' order and edges come from their bindings.
  const readsFrom = (name) => [...new Set(Object.values((jobs[name] || {}).inputs || {})
    .map((i) => /\$\{\{\s*parent\.jobs\.([^.]+)\.outputs\./.exec((i.value || '') + ' ' + (i.uri || '')))
    .filter(Boolean).map((m) => m[1]))].sort();
  const st = p.pipeline || { order: topo(Object.keys(jobs).sort(), readsFrom), steps: {} };
  return (st.order || []).map((name) => {
    const ss = (st.steps || {})[name] || {};
    return { name, type: (jobs[name] || {}).type || 'command', job: ss.job || '', status: ss.status || 'NotStarted', reason: ss.reason || '', after: ss.after || readsFrom(name) };
  });
}

// topo orders names so that each comes after those deps(name) lists.
function topo(names, deps) {
  const out = [], seen = new Set();
  const visit = (n) => {
    if (seen.has(n)) return;
    seen.add(n);
    deps(n).forEach(visit);
    out.push(n);
  };
  names.forEach(visit);
  return out;
}

// graph lays the steps out: column = the longest chain of steps before
// it, row = its place in that column.
function graph(steps) {
  const col = {};
  for (const st of steps) col[st.name] = Math.max(0, ...st.after.map((a) => (col[a] ?? 0) + 1));
  const rows = {};
  const at = {};
  for (const st of steps) {
    const c = col[st.name];
    rows[c] = (rows[c] || 0) + 1;
    at[st.name] = { c, r: rows[c] - 1 };
  }
  const BW = 170, BH = 54, GX = 60, GY = 22, PAD = 10;
  const cols = Math.max(...Object.values(col)) + 1;
  const maxRows = Math.max(...Object.values(rows));
  const W = PAD * 2 + cols * BW + (cols - 1) * GX, H = PAD * 2 + maxRows * BH + (maxRows - 1) * GY;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart pipeline-graph', id: 'pipeline-graph', role: 'img',
    'aria-label': `The pipeline's ${steps.length} steps: ` + steps.map((st) => `${st.name} ${st.status}`).join(', ') });
  svg.style.maxWidth = W + 'px'; // through the CSSOM: the page's policy allows no style attributes
  svg.appendChild(s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'pipeline-arrowhead' }))));
  const box = (n) => ({ x: PAD + at[n].c * (BW + GX), y: PAD + at[n].r * (BH + GY) });
  for (const st of steps) {
    for (const a of st.after) {
      if (!at[a]) continue;
      const f = box(a), t = box(st.name);
      const x1 = f.x + BW, y1 = f.y + BH / 2, x2 = t.x - 2, y2 = t.y + BH / 2;
      svg.appendChild(s('path', { d: `M ${x1} ${y1} C ${x1 + GX / 2} ${y1}, ${x2 - GX / 2} ${y2}, ${x2} ${y2}`, class: 'pipeline-edge', 'marker-end': 'url(#arrow)' }));
    }
  }
  for (const st of steps) {
    const b = box(st.name);
    const g = s('g', { class: 'pipeline-step step-' + statusKind(st.status), 'data-step': st.name });
    g.appendChild(s('rect', { x: b.x, y: b.y, width: BW, height: BH, rx: 8 }));
    g.appendChild(s('text', { x: b.x + 10, y: b.y + 20, class: 'step-name' }, st.name));
    g.appendChild(s('text', { x: b.x + 10, y: b.y + 40, class: 'step-status' }, `${st.type} · ${st.status}`));
    g.appendChild(s('title', {}, `${st.name} (${st.type}): ${st.status}${st.reason ? ' — ' + st.reason : ''}`));
    if (st.job) {
      const link = s('a', { href: '#/jobs/' + encodeURIComponent(st.job) });
      link.appendChild(g);
      svg.appendChild(link);
    } else {
      svg.appendChild(g);
    }
  }
  return svg;
}

// pipelinePanel shows a pipeline's steps; hidden for other jobs.
export function pipelinePanel(name) {
  const summary = h('p', { id: 'pipeline-summary', class: 'status-line' });
  const graphBox = h('div', { class: 'chart-box', id: 'pipeline-graph-box' });
  const t = table({ text: `Steps of ${name}`, visible: false }, ['Step', 'Type', 'Status', 'Job', 'After', 'Reason'], 'steps');
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-steps', hidden: true },
    h('h2', { id: 'sec-steps' }, 'Steps'), summary, graphBox, t.el);
  let sig = '';
  function update(j) {
    const p = j.properties;
    if ((p.jobType || '').toLowerCase() !== 'pipeline') return;
    el.hidden = false;
    const steps = stepsOf(p);
    const counts = {};
    for (const st of steps) counts[st.status] = (counts[st.status] || 0) + 1;
    replace(summary, `${steps.length} steps: ` + Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(', ') +
      ((p.settings || {}).continue_on_step_failure ? '; continues on step failure.' : '.'));
    const now = JSON.stringify(steps);
    if (now !== sig) {
      sig = now;
      replace(graphBox, graph(steps));
    }
    syncTable(t.tbody, steps, {
      key: (st) => st.name, cols: 6, empty: 'No steps.',
      sig: (st) => [st.status, st.job, st.reason],
      cells: (st) => [st.name, st.type, badge(st.status), st.job ? h('a', { href: '#/jobs/' + encodeURIComponent(st.job) }, st.job) : '—',
        st.after.join(', ') || '—', st.reason || '—'],
    });
  }
  return { el, update };
}

// parallelPanel shows a parallel step's mini-batches; hidden for other
// jobs.
export function parallelPanel(name) {
  const line = h('p', { id: 'parallel-summary', class: 'status-line' });
  const bar = h('div', { class: 'progress', id: 'parallel-progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-label': 'Mini-batches ended' });
  const failBox = h('div', { id: 'parallel-failures' });
  const pipelineLink = h('p', { class: 'muted' });
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-parallel', hidden: true },
    h('h2', { id: 'sec-parallel' }, 'Mini-batches'), pipelineLink, line, bar, failBox);
  let ft = null;
  function update(j) {
    const p = j.properties;
    if ((p.jobType || '').toLowerCase() !== 'parallel') return;
    el.hidden = false;
    replace(pipelineLink, 'A parallel step of pipeline ', h('a', { href: '#/jobs/' + encodeURIComponent(p.parentJobName || '') }, p.parentJobName || '—'),
      `: ${p.mini_batch_size} ${/[a-z]/i.test(p.mini_batch_size || '') ? 'of rows' : 'items'} per mini-batch, `,
      `${p.max_concurrency_per_instance || 'a worker per core'} ${p.max_concurrency_per_instance ? 'workers' : ''} on each of ${(p.resources || {}).instanceCount || 1} nodes.`);
    const st = p.parallel;
    if (!st) {
      replace(line, 'The nodes split the input into mini-batches when they start.');
      replace(bar);
      return;
    }
    const ended = st.done + st.failed;
    const left = st.secondsLeft !== undefined && ended < st.miniBatches ? `, about ${duration(st.secondsLeft * 1000)} left` : '';
    replace(line, `${st.done} of ${st.miniBatches} mini-batches done, ${st.failed} failed, ${st.running} running, ${st.pending} waiting, ${st.retried} retried`,
      ` · ${st.items} items`, st.miniBatchesPerSecond ? ` · ${st.miniBatchesPerSecond.toFixed(2)} mini-batches/s${left}` : '');
    bar.setAttribute('aria-valuemax', String(st.miniBatches));
    bar.setAttribute('aria-valuenow', String(ended));
    const pct = (n) => (st.miniBatches ? (100 * n) / st.miniBatches : 0);
    const seg = (cls, n) => {
      const el = h('span', { class: cls });
      el.style.width = pct(n) + '%';
      return el;
    };
    replace(bar, seg('progress-done', st.done), seg('progress-failed', st.failed), seg('progress-running', st.running));
    const failures = st.failures || [];
    if (!failures.length) {
      replace(failBox);
      ft = null;
      return;
    }
    if (!ft) {
      ft = table('Failed mini-batches, with their items and the error of their last try', ['Mini-batch', 'Tries', 'Items', 'Error'], 'failures');
      replace(failBox, h('h3', {}, 'Failed mini-batches'), ft.el);
    }
    syncTable(ft.tbody, failures, {
      key: (f) => String(f.index), cols: 4, empty: '',
      sig: (f) => [f.tries, f.error],
      cells: (f) => [String(f.index), String(f.tries), (f.items || []).join(', '), h('code', {}, f.error)],
    });
  }
  return { el, update };
}
