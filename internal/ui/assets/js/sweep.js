// What jobs logged the MLflow way, on a job's page: each metric's latest
// value with a chart over steps; and, on a sweep's page, its trials
// (parameters, status, primary metric, the best highlighted) with a chart
// of the primary metric per trial.
import * as api from './api.js';
import { h, replace, badge, syncTable, table } from './dom.js';
import { byStep, chartsPanel, zoomControls, zoomState } from './metricchart.js';

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

const fmt = (v) => (typeof v === 'number' ? String(Number(v.toPrecision(6))) : String(v));

// plot draws points ({x, y, best}) on axes; lines joins them.
function plot({ points, title, xLabel, lines }) {
  const W = 520, H = 180, L = 52, R = 12, T = 12, B = 30;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart metric-chart', role: 'img', 'aria-label': title });
  svg.appendChild(s('title', {}, title));
  if (!points.length) return svg;
  let [x0, x1] = [Math.min(...points.map((p) => p.x)), Math.max(...points.map((p) => p.x))];
  let [y0, y1] = [Math.min(...points.map((p) => p.y)), Math.max(...points.map((p) => p.y))];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  const x = (v) => L + ((v - x0) / (x1 - x0)) * (W - L - R);
  const y = (v) => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
  for (const v of [y0, (y0 + y1) / 2, y1]) {
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    svg.appendChild(s('text', { x: L - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, fmt(v)));
  }
  for (const v of [x0, x1]) svg.appendChild(s('text', { x: x(v), y: H - 12, class: 'axis', 'text-anchor': v === x0 ? 'start' : 'end' }, fmt(v)));
  svg.appendChild(s('text', { x: (L + W - R) / 2, y: H - 2, class: 'axis', 'text-anchor': 'middle' }, xLabel));
  if (lines) svg.appendChild(s('path', { d: points.map((p, i) => `${i ? 'L' : 'M'}${x(p.x)},${y(p.y)}`).join(''), class: 'metric-line' }));
  for (const p of points) {
    svg.appendChild(s('circle', { cx: x(p.x), cy: y(p.y), r: p.best ? 5 : 3, class: p.best ? 'metric-dot best' : 'metric-dot' },
      s('title', {}, `${p.label || xLabel + ' ' + p.x}: ${fmt(p.y)}`)));
  }
  svg.appendChild(s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis-line' }));
  svg.appendChild(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis-line' }));
  return svg;
}

// metricsPanel shows a job's metrics; hidden until it logged one: the
// latest value of each, and a chart of each over its steps, which zoom
// together.
export function metricsPanel(name) {
  const body = h('div', { id: 'job-metrics' });
  const zoom = zoomState();
  const tableBox = h('div');
  const chartsBox = h('div', { class: 'metric-charts' });
  const compare = h('a', { href: '#/compare/' + encodeURIComponent(name), class: 'button-link secondary', id: 'compare-job' }, 'Compare with other runs');
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-metrics', hidden: true },
    h('div', { class: 'section-header' }, h('h2', { id: 'sec-metrics' }, 'Metrics'), compare), body);
  replace(body, tableBox, zoomControls(zoom, 'metrics-zoom'), chartsBox);
  const charts = chartsPanel(chartsBox, zoom, 'metric-chart');
  let t = null;
  let shown = '';
  async function update(j) {
    if (!j.properties.metrics || !Object.keys(j.properties.metrics).length) return;
    const sig = JSON.stringify(j.properties.metrics);
    if (sig === shown && shown) return;
    const m = await api.get(api.jobPath(name) + '/metrics');
    shown = sig;
    el.hidden = false;
    if (!t) {
      t = table('Latest value of each metric', ['Metric', 'Latest', 'Step', 'Values']);
      replace(tableBox, t.el);
    }
    syncTable(t.tbody, m.latest, {
      key: (v) => v.name, cols: 4, empty: 'No metrics.',
      cells: (v) => [v.name, fmt(v.value), String(v.step), String((m.history[v.name] || []).length)],
    });
    charts.update(m.latest.map((v) => [v.name, [{ label: name, points: byStep(m.history[v.name]) }]]));
  }
  return { el, update, dispose: () => charts.dispose() };
}

// sweepPanel shows a sweep's trials; hidden for other jobs.
export function sweepPanel(name) {
  const summary = h('p', { id: 'sweep-summary', class: 'status-line' });
  const chartBox = h('div', { class: 'chart-box', id: 'sweep-chart' });
  let t = null;
  const tableBox = h('div');
  const compare = h('a', { href: '#/compare/sweep/' + encodeURIComponent(name), class: 'button-link secondary', id: 'compare-trials' }, 'Compare trials');
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-trials', hidden: true },
    h('div', { class: 'section-header' }, h('h2', { id: 'sec-trials' }, 'Trials'), compare), summary, chartBox, tableBox);
  async function update(j) {
    const p = j.properties;
    if ((p.jobType || '').toLowerCase() !== 'sweep') return;
    el.hidden = false;
    const metric = (p.objective || {}).primaryMetric || '';
    const names = Object.keys(p.searchSpace || {}).sort();
    if (!t) {
      t = table({ text: `Trials of ${name}`, visible: false }, ['Trial', 'Status', ...names, metric || 'metric'], 'trials');
      replace(tableBox, t.el);
    }
    const trials = await api.listAll(api.wsPath() + '/jobs?parentJobName=' + encodeURIComponent(name));
    const st = p.sweep || {};
    const best = (st.bestTrial || {}).name;
    const limits = p.limits || {};
    replace(summary, `${st.trialsCreated || 0} of ${limits.maxTotalTrials} trials created, up to ${limits.maxConcurrentTrials} at a time; `,
      `${(p.samplingAlgorithm || {}).samplingAlgorithmType} sampling; ${(p.objective || {}).goal} ${metric}. `,
      st.bestTrial ? h('strong', { id: 'sweep-best' }, `Best: ${best}, ${metric} ${fmt(st.bestTrial.value)} (${Object.entries(st.bestTrial.parameters || {}).map(([k, v]) => `${k}=${fmt(v)}`).join(', ')})`) : 'No trial has logged the metric yet.',
      (st.stoppedEarly || []).length ? ` ${st.stoppedEarly.length} stopped early.` : '');
    syncTable(t.tbody, trials, {
      key: (tr) => tr.name, cols: 3 + names.length, empty: 'No trials yet.',
      sig: (tr) => [tr.properties.status, tr.properties.metrics, tr.name === best],
      cells: (tr) => [
        [h('a', { href: '#/jobs/' + encodeURIComponent(tr.name) }, tr.name), tr.name === best ? h('span', { class: 'best-mark' }, ' ★ best') : null],
        badge(tr.properties.status),
        ...names.map((n) => fmt((tr.properties.parameters || {})[n])),
        (tr.properties.metrics || {})[metric] === undefined ? '—' : fmt(tr.properties.metrics[metric]),
      ],
    });
    for (const tr of t.tbody.rows) tr.classList.toggle('best-row', tr.dataset.key === best);
    const pts = trials.map((tr, i) => ({ x: i, y: (tr.properties.metrics || {})[metric], best: tr.name === best, label: tr.name }))
      .filter((pt) => typeof pt.y === 'number');
    replace(chartBox, plot({ points: pts, title: `${metric} of each trial`, xLabel: 'trial', lines: false }));
  }
  return { el, update };
}
