// Utilization charts: CPU, memory and GPU over time, one line per node,
// from …/usageSamples (the samples the nodes' agents take). Plain inline
// SVG, colored with presentation attributes (the page's CSP allows no
// inline styles); each chart scales to its box, so it fits a phone too.
import * as api from './api.js';
import { h, replace, zoneName, duration } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#2563c9', '#d9480f', '#2b8a3e', '#9c36b5', '#c2255c', '#0b7285', '#5c940d', '#e67700'];
// A job whose GPUs are busy less than this, on average, likely waits on
// something else (the CLI says the same).
export const LOW_GPU = 0.5;

export const computeUsage = (name, since) =>
  api.get(`${api.computePath(name)}/usageSamples?since=${encodeURIComponent(since)}`).then((r) => (r && r.value) || []);
export const jobUsage = (name) => api.get(`${api.jobPath(name)}/usageSamples`).then((r) => (r && r.value) || []);

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

const pct = (v) => `${Math.round(v * 100)} %`;

export function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// lineChart draws series ([{label, points: [{time, v}]}]) from 0 to yMax.
function lineChart({ series, yMax, fmt, title, name }) {
  // As wide as a phone's screen there, so the labels keep their size.
  const W = matchMedia('(max-width: 640px)').matches ? 340 : 480, H = 170, L = 52, R = 10, T = 10, B = 26;
  const all = series.flatMap((x) => x.points);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'usage-chart', role: 'img', 'aria-label': title,
    'data-chart': name, 'data-series': String(series.length), preserveAspectRatio: 'xMidYMid meet' });
  svg.appendChild(s('title', {}, title));
  const text = (x, y, str, anchor) => s('text', { x, y, fill: '#5b6578', 'font-size': 12, 'font-family': 'system-ui, sans-serif', 'text-anchor': anchor }, str);
  if (!all.length) {
    svg.appendChild(text((L + W - R) / 2, H / 2, 'No samples yet', 'middle'));
    return svg;
  }
  const t0 = Math.min(...all.map((p) => p.time)), t1 = Math.max(t0 + 1000, ...all.map((p) => p.time));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - Math.min(v, yMax) / yMax) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(f * yMax), y2: y(f * yMax), stroke: '#e5e9f0', 'stroke-width': 1 }));
    svg.appendChild(text(L - 6, y(f * yMax) + 4, fmt(f * yMax), 'end'));
  }
  const clock = (t) => new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  svg.appendChild(text(L, H - 8, clock(t0), 'start'));
  svg.appendChild(text(W - R, H - 8, clock(t1), 'end'));
  series.forEach((ser, i) => {
    const pts = ser.points.slice().sort((a, b) => a.time - b.time);
    if (!pts.length) return;
    const color = COLORS[i % COLORS.length];
    if (pts.length === 1) {
      svg.appendChild(s('circle', { cx: x(pts[0].time), cy: y(pts[0].v), r: 3, fill: color, class: 'usage-line' }));
      return;
    }
    const d = pts.map((p, j) => `${j ? 'L' : 'M'}${x(p.time).toFixed(1)},${y(p.v).toFixed(1)}`).join('');
    svg.appendChild(s('path', { d, fill: 'none', stroke: color, 'stroke-width': 2, class: 'usage-line' }, s('title', {}, ser.label)));
  });
  svg.appendChild(s('line', { x1: L, x2: L, y1: T, y2: H - B, stroke: '#9aa3b2', 'stroke-width': 1 }));
  svg.appendChild(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: '#9aa3b2', 'stroke-width': 1 }));
  return svg;
}

function legend(labels) {
  return h('ul', { class: 'legend', 'aria-label': 'Nodes' }, labels.map((label, i) =>
    h('li', {}, s('svg', { width: 14, height: 10, 'aria-hidden': 'true' }, s('line', { x1: 0, x2: 14, y1: 5, y2: 5, stroke: COLORS[i % COLORS.length], 'stroke-width': 3 })), ' ', label)));
}

// byNode groups samples by node: [[node, samples]], in order of first
// appearance.
function byNode(samples) {
  const m = new Map();
  for (const x of samples) {
    if (!m.has(x.node)) m.set(x.node, []);
    m.get(x.node).push({ ...x, time: new Date(x.time).getTime() });
  }
  return [...m.entries()];
}

// meanGPU is the mean utilization of every GPU in every sample that
// reports one (null: none does).
export function meanGPU(samples) {
  let sum = 0, n = 0;
  for (const x of samples) for (const g of x.gpus || []) if (typeof g.utilization === 'number') { sum += g.utilization; n++; }
  return n ? sum / n : null;
}

// noJobSamples says why a job has no samples: it has not run yet, or it
// ran (or runs) for less than the time between two of its node's samples.
export function noJobSamples(job) {
  const p = (job && job.properties) || {};
  if (!p.startTime) return 'No samples: the job has not run on a node yet.';
  const ms = (p.endTime ? new Date(p.endTime).getTime() : Date.now()) - new Date(p.startTime).getTime();
  const ran = ms < 1000 ? 'less than a second' : duration(ms);
  if (p.endTime) return `No samples: the job ran for ${ran}, less than the time between two samples of its node, so none was taken while it ran.`;
  return `No samples yet: the job has run for ${ran}; its node sends a sample at each sampling interval.`;
}

// usagePanel is a card of utilization charts: of a cluster's nodes
// (kind 'compute': memory as a share of each node's) or of a job on each
// of its nodes (kind 'job': memory in bytes, and a word when its GPUs are
// mostly idle).
export function usagePanel(kind, name) {
  const charts = h('div', { class: 'two-col usage-charts' });
  const note = h('p', { class: 'muted', id: `usage-note-${kind}` });
  const hint = h('p', { class: 'banner banner-warn', id: 'usage-gpu-hint', role: 'status', hidden: true });
  const whose = kind === 'job' ? `job ${name}` : `the nodes of ${name}`;
  const legendBox = h('div');
  const el = h('section', { class: 'card', 'aria-labelledby': `sec-usage-${kind}` },
    h('h2', { id: `sec-usage-${kind}` }, 'Utilization'), hint, charts, legendBox, note);

  // update draws the samples; for a job, job says whether and how long
  // it ran, for a job with none (one shorter than the nodes' sampling).
  function update(samples, job) {
    const nodes = byNode(samples);
    const labels = nodes.map(([n]) => n);
    const series = (f) => nodes.map(([node, xs]) => ({ label: node, points: xs.filter((x) => f(x) !== null).map((x) => ({ time: x.time, v: f(x) })) }));
    const gpuOf = (x) => {
      const u = (x.gpus || []).map((g) => g.utilization).filter((v) => typeof v === 'number');
      return u.length ? u.reduce((a, b) => a + b, 0) / u.length : null;
    };
    const figs = [];
    const fig = (chartName, what, sers, yMax, fmt) => {
      const last = sers.map((x) => x.points.length ? `${x.label} ${fmt(x.points[x.points.length - 1].v)}` : null).filter(Boolean).join(', ');
      const title = `${what} of ${whose}${last ? ': latest ' + last : ''}.`;
      figs.push(h('figure', { class: 'usage-figure' }, h('figcaption', {}, what), lineChart({ series: sers, yMax, fmt, title, name: chartName })));
    };
    fig('cpu', 'CPU utilization', series((x) => x.cpu.utilization), 1, pct);
    if (kind === 'job') {
      const mem = series((x) => x.memory.usedBytes);
      const top = Math.max(1, ...mem.flatMap((x) => x.points.map((p) => p.v)));
      fig('memory', 'Memory used', mem, top * 1.1, bytes);
    } else {
      fig('memory', 'Memory utilization', series((x) => (x.memory.totalBytes ? x.memory.usedBytes / x.memory.totalBytes : null)), 1, pct);
    }
    const gpu = series(gpuOf);
    if (gpu.some((x) => x.points.length)) fig('gpu', 'GPU utilization', gpu, 1, pct);
    replace(charts, figs);
    replace(legendBox, labels.length ? legend(labels) : null);
    note.textContent = samples.length
      ? `${samples.length} sample${samples.length === 1 ? '' : 's'} of ${labels.length} node${labels.length === 1 ? '' : 's'}, taken by the nodes' agents${gpu.some((x) => x.points.length) ? '' : '; no GPU reports a utilization'}; times in ${zoneName()}.`
      : (kind === 'job' ? noJobSamples(job) : 'No samples in the last 30 minutes: the cluster has no nodes.');
    const mean = kind === 'job' ? meanGPU(samples) : null;
    hint.hidden = !(mean !== null && mean < LOW_GPU);
    hint.textContent = hint.hidden ? '' : `GPU utilization below ${LOW_GPU * 100} % (mean ${pct(mean)}): the job may be waiting on data loading.`;
  }
  update([]);
  return { el, update };
}
