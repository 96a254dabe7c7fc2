// The cost chart: what each group (a compute, a tag value) cost per day
// or hour of a period, as stacked bars. Plain inline SVG coloured with
// presentation attributes (the page's CSP allows no inline styles); each
// bar segment has a title, and the legend names every colour.
import { h } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
export const COLORS = ['#2563c9', '#d9480f', '#2b8a3e', '#9c36b5', '#c2255c', '#0b7285', '#5c940d', '#e67700'];
export const OTHER_COLOR = '#8a93a6';
export const OTHER = 'Other';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

// niceStep is a step of 1, 2 or 5 times a power of ten that cuts max
// into at most 5 parts.
function niceStep(max) {
  const raw = max / 5;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
  return 10 * p;
}

function decimalsOf(step) {
  return Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
}

// series picks the keys to draw, most expensive first: up to 7 of them
// and "Other" for the rest (or all 8 when there are 8).
export function seriesOf(buckets) {
  const total = new Map();
  for (const b of buckets) for (const [k, v] of b.values) total.set(k, (total.get(k) || 0) + v);
  const keys = [...total.keys()].sort((a, b) => total.get(b) - total.get(a) || a.localeCompare(b));
  const shown = keys.length <= COLORS.length ? keys : keys.slice(0, COLORS.length - 1);
  const rest = keys.slice(shown.length);
  const out = shown.map((k, i) => ({ key: k, label: k, color: COLORS[i], total: total.get(k), members: [k] }));
  if (rest.length) out.push({ key: OTHER, label: `${OTHER} (${rest.length})`, color: OTHER_COLOR, total: rest.reduce((n, k) => n + total.get(k), 0), members: rest });
  return out;
}

// costChart draws buckets ([{start, end, values: Map key → cost}], in
// order) as stacked bars of series (from seriesOf). hourly: the buckets
// are hours (labels show the time, not the date).
// width is the box's width in pixels (the chart is drawn at it, so its
// labels keep their size on a phone).
export function costChart({ buckets, series, title, hourly, fmt, width }) {
  const W = Math.round(Math.min(760, Math.max(300, width || 760))), H = 240, L = 64, R = 12, T = 12, B = 30;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart cost-chart', role: 'img', 'aria-label': title,
    'data-bars': String(buckets.length), 'data-series': String(series.length), preserveAspectRatio: 'xMidYMid meet' });
  svg.appendChild(s('title', {}, title));
  const text = (x, y, str, anchor) => s('text', { x, y, class: 'axis', 'text-anchor': anchor }, str);
  const sums = buckets.map((b) => [...b.values.values()].reduce((n, v) => n + v, 0));
  const top = Math.max(0, ...sums);
  const step = top > 0 ? niceStep(top) : 1;
  const yMax = top > 0 ? Math.ceil(top / step - 1e-9) * step : 1;
  const dec = decimalsOf(step);
  const y = (v) => T + (1 - v / yMax) * (H - T - B);
  for (let i = 0; i * step <= yMax + step / 1e6; i++) {
    const v = i * step;
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    svg.appendChild(text(L - 6, y(v) + 4, v.toFixed(dec), 'end'));
  }
  const n = Math.max(1, buckets.length);
  const slot = (W - L - R) / n;
  const bw = Math.max(1, Math.min(48, slot * 0.72));
  const day = (t) => new Date(t).toLocaleDateString([], { month: 'short', day: 'numeric', timeZone: 'UTC' });
  const clock = (t) => new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', timeZone: 'UTC' });
  const label = (t) => (hourly ? `${day(t)} ${clock(t)}` : day(t));
  const every = Math.ceil(n / (W < 560 ? (hourly ? 2 : 4) : 8));
  // An hourly axis names the day at its first label and where the day
  // changes; the other labels are times.
  let lastDay = '';
  const tick = (t) => {
    if (!hourly) return day(t);
    const d = day(t);
    const out = d === lastDay ? clock(t) : `${d} ${clock(t)}`;
    lastDay = d;
    return out;
  };
  buckets.forEach((b, i) => {
    const x = L + i * slot + (slot - bw) / 2;
    let base = 0;
    for (const ser of series) {
      const v = ser.members.reduce((m, k) => m + (b.values.get(k) || 0), 0);
      if (v <= 0) continue;
      const y1 = y(base + v), y0 = y(base);
      // A segment too thin to see still gets a sliver, so a day with a
      // tiny cost shows a bar.
      const hgt = Math.max(0.75, y0 - y1);
      svg.appendChild(s('rect', { x: x.toFixed(1), y: (y0 - hgt).toFixed(1), width: bw.toFixed(1), height: hgt.toFixed(1),
        fill: ser.color, class: 'bar', 'data-key': ser.key },
      s('title', {}, `${ser.label}, ${label(b.start)}: ${fmt(v)}`)));
      base += v;
    }
    if (i % every === 0) svg.appendChild(text(L + i * slot + slot / 2, H - 10, tick(b.start), 'middle'));
  });
  if (top === 0) svg.appendChild(text((L + W - R) / 2, (T + H - B) / 2, 'No cost in this period', 'middle'));
  svg.appendChild(s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis-line' }));
  svg.appendChild(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis-line' }));
  return svg;
}

// costLegend names each series' colour, with its total.
export function costLegend(series, fmt) {
  return h('ul', { class: 'legend', 'aria-label': 'Legend' }, series.map((ser) =>
    h('li', {}, s('svg', { width: 14, height: 10, 'aria-hidden': 'true', class: 'swatch-svg' }, s('rect', { x: 0, y: 0, width: 14, height: 10, rx: 2, fill: ser.color })),
      ' ', ser.label, h('span', { class: 'muted' }, ' ', fmt(ser.total)))));
}
