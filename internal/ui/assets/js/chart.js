// The node count chart: nodes by state as stacked step areas, queued
// demand as a line, the maximum as a dashed rule. Plain inline SVG.
import { h } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
export const SERIES = [
  ['running', 'Running'], ['idle', 'Idle'], ['preparing', 'Preparing'],
  ['leaving', 'Leaving'], ['unusable', 'Unusable'], ['preempted', 'Preempted'],
];

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

function niceStep(max) {
  for (const st of [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]) if (max / st <= 5) return st;
  return Math.ceil(max / 5);
}

// nodeChart draws samples ({t, running, idle, …, queued}) between
// now-windowSec and now. maxNodes draws the cluster's maximum.
// width is the box's width in pixels: the chart is drawn at that width, so
// its labels keep their size on a phone.
export function nodeChart({ samples, now, windowSec, maxNodes, title, width }) {
  const W = Math.round(Math.min(760, Math.max(300, width || 760))), H = 230, L = 40, R = 14, T = 14, B = 30;
  // The axis runs a little past now, so the present state shows as a step.
  const t1 = now + windowSec * 30, t0 = now - windowSec * 1000;
  const pts = samples.filter((p) => p.time >= t0 - 60000).sort((a, b) => a.time - b.time);
  const total = (p) => SERIES.reduce((n, [k]) => n + (p[k] || 0), 0);
  const top = Math.max(1, maxNodes || 0, ...pts.map(total), ...pts.map((p) => p.queued || 0));
  const step = niceStep(top);
  const yMax = Math.ceil(top / step) * step;
  const x = (t) => L + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / yMax) * (H - T - B);

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': title, preserveAspectRatio: 'xMidYMid meet' });
  svg.appendChild(s('title', {}, title));
  // grid and y axis
  for (let v = 0; v <= yMax; v += step) {
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    svg.appendChild(s('text', { x: L - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, String(v)));
  }
  // x axis labels
  const ticks = W < 560 ? 2 : 6;
  const short = windowSec <= 1800;
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + (i / ticks) * (t1 - t0);
    const d = new Date(t);
    const label = d.toLocaleTimeString([], short ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { hour: '2-digit', minute: '2-digit' });
    svg.appendChild(s('text', { x: x(t), y: H - 10, class: 'axis', 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' }, label));
  }
  if (pts.length) {
    // stacked step areas
    const base = pts.map(() => 0);
    for (const [key] of SERIES) {
      if (!pts.some((p) => (p[key] || 0) > 0)) continue;
      const upper = pts.map((p, i) => base[i] + (p[key] || 0));
      let d = '';
      for (let i = 0; i < pts.length; i++) {
        const xa = x(pts[i].time), xb = i + 1 < pts.length ? x(pts[i + 1].time) : x(t1);
        d += (i === 0 ? `M${xa},${y(upper[i])}` : `L${xa},${y(upper[i])}`) + `L${xb},${y(upper[i])}`;
      }
      for (let i = pts.length - 1; i >= 0; i--) {
        const xa = x(pts[i].time), xb = i + 1 < pts.length ? x(pts[i + 1].time) : x(t1);
        d += `L${xb},${y(base[i])}L${xa},${y(base[i])}`;
      }
      svg.appendChild(s('path', { d: d + 'Z', class: 'area area-' + key }));
      upper.forEach((v, i) => { base[i] = v; });
    }
    // queued demand, when there was any
    let q = '';
    if (pts.some((p) => (p.queued || 0) > 0)) {
      for (let i = 0; i < pts.length; i++) {
        const xa = x(pts[i].time), xb = i + 1 < pts.length ? x(pts[i + 1].time) : x(t1);
        q += (i === 0 ? 'M' : 'L') + `${xa},${y(pts[i].queued || 0)}L${xb},${y(pts[i].queued || 0)}`;
      }
      svg.appendChild(s('path', { d: q, class: 'line-queued' }));
    }
  } else {
    svg.appendChild(s('text', { x: (L + W - R) / 2, y: (T + H - B) / 2, class: 'axis', 'text-anchor': 'middle' }, 'Collecting samples…'));
  }
  if (maxNodes) {
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(maxNodes), y2: y(maxNodes), class: 'line-max' }));
    svg.appendChild(s('text', { x: W - R - 4, y: y(maxNodes) - 4, class: 'axis', 'text-anchor': 'end' }, `max ${maxNodes}`));
  }
  svg.appendChild(s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis-line' }));
  svg.appendChild(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis-line' }));
  return svg;
}

export function legend() {
  return h('ul', { class: 'legend', 'aria-label': 'Legend' },
    SERIES.map(([k, label]) => h('li', {}, h('span', { class: 'swatch swatch-' + k, 'aria-hidden': 'true' }), label)),
    h('li', {}, h('span', { class: 'swatch swatch-queued', 'aria-hidden': 'true' }), 'Queued demand (nodes)'),
    h('li', {}, h('span', { class: 'swatch swatch-max', 'aria-hidden': 'true' }), 'Maximum nodes'));
}
