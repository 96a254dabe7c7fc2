// Metric charts an ML engineer reads every day: a metric over steps, one
// line per run, drawn at the width of its box with labelled axes and round
// ticks, a legend, the values under the pointer, and zoom (drag across the
// plot, or type the steps; Reset zoom). Charts of one panel share their
// zoom, so every metric shows the same steps. Plain inline SVG.
import { h, replace } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
export const PALETTE = 8; // series colours: --s0 … --s7 in app.css

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

// fmt writes a value compactly: 4 significant digits, exponents only for
// the very small and very large.
export function fmt(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}

// niceTicks are about n round values from lo to hi (1, 2 or 5 times a
// power of ten apart), and the rounded range they span.
export function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
  const raw = (hi - lo) / Math.max(1, n);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= raw);
  const start = Math.floor(lo / step + 1e-9) * step, end = Math.ceil(hi / step - 1e-9) * step;
  const ticks = [];
  for (let v = start; v <= end + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { ticks, lo: start, hi: end };
}

// byStep keeps the last value logged at each step, sorted by step.
export function byStep(values) {
  const m = new Map();
  for (const v of values || []) m.set(v.step, v.value);
  return [...m.entries()].sort((a, b) => a[0] - b[0]).map(([x, y]) => ({ x, y }));
}

// zoomState is the step range that the charts of a panel show: null for
// all of it. Listeners redraw on a change.
export function zoomState() {
  const listeners = new Set();
  const z = {
    range: null,
    set(x0, x1) { z.range = x0 === null ? null : [Math.min(x0, x1), Math.max(x0, x1)]; listeners.forEach((f) => f()); },
    reset() { z.set(null); },
    on(f) { listeners.add(f); return () => listeners.delete(f); },
  };
  return z;
}

// zoomControls are the step range's inputs and Reset, for the keyboard
// and for exact steps; a drag across a chart fills them in.
export function zoomControls(zoom, id) {
  const from = h('input', { type: 'number', id: id + '-from', class: 'step-input', inputmode: 'numeric' });
  const to = h('input', { type: 'number', id: id + '-to', class: 'step-input', inputmode: 'numeric' });
  const reset = h('button', { type: 'button', class: 'small secondary', id: id + '-reset', disabled: true }, 'Reset zoom');
  const apply = () => {
    const a = from.value === '' ? null : Number(from.value), b = to.value === '' ? null : Number(to.value);
    if (a === null && b === null) zoom.reset();
    else zoom.set(a ?? -Infinity, b ?? Infinity);
  };
  from.addEventListener('change', apply);
  to.addEventListener('change', apply);
  reset.addEventListener('click', () => zoom.reset());
  zoom.on(() => {
    const r = zoom.range;
    from.value = r && Number.isFinite(r[0]) ? String(Math.round(r[0])) : '';
    to.value = r && Number.isFinite(r[1]) ? String(Math.round(r[1])) : '';
    reset.disabled = !r;
  });
  return h('div', { class: 'zoom-controls', role: 'group', 'aria-label': 'Steps shown' },
    h('span', { class: 'field inline-field' }, h('label', { for: id + '-from' }, 'From step'), from),
    h('span', { class: 'field inline-field' }, h('label', { for: id + '-to' }, 'to'), to),
    reset, h('span', { class: 'muted small zoom-hint' }, 'or drag across a chart'));
}

// draw makes the SVG of series ([{label, points: [{x, y}], color}])
// between the steps range ([x0, x1] or null for all), width px wide.
function draw({ series, title, xLabel, yLabel, width, range }) {
  const phone = width < 500;
  const W = Math.round(Math.max(280, Math.min(1400, width))), H = phone ? 240 : 300;
  const L = phone ? 56 : 68, R = 16, T = 14, B = 46;
  const all = series.flatMap((x) => x.points);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart metric-chart', role: 'img', 'aria-label': title, 'data-series': series.length });
  svg.appendChild(s('title', {}, title));
  if (!all.length) {
    svg.appendChild(s('text', { x: W / 2, y: H / 2, class: 'axis', 'text-anchor': 'middle' }, 'No values yet'));
    return { svg, scale: null };
  }
  let x0 = Math.min(...all.map((p) => p.x)), x1 = Math.max(...all.map((p) => p.x));
  if (range) { x0 = Math.max(x0, range[0]); x1 = Math.min(x1, range[1]); }
  if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
  const shown = series.map((ser) => ser.points.filter((p) => p.x >= x0 && p.x <= x1));
  const ys = shown.flat().map((p) => p.y);
  const yt = niceTicks(ys.length ? Math.min(...ys) : 0, ys.length ? Math.max(...ys) : 1, phone ? 4 : 5);
  const xt = niceTicks(x0, x1, phone ? 4 : 8);
  const xs = (v) => L + ((v - x0) / (x1 - x0)) * (W - L - R);
  const yv = (v) => T + (1 - (v - yt.lo) / (yt.hi - yt.lo)) * (H - T - B);
  svg.dataset.x0 = String(x0);
  svg.dataset.x1 = String(x1);
  for (const v of yt.ticks) {
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: yv(v), y2: yv(v), class: 'grid' }));
    svg.appendChild(s('text', { x: L - 8, y: yv(v) + 4, class: 'axis tick-y', 'text-anchor': 'end' }, fmt(v)));
  }
  for (const v of xt.ticks.filter((t) => t >= x0 - 1e-9 && t <= x1 + 1e-9)) {
    svg.appendChild(s('line', { x1: xs(v), x2: xs(v), y1: H - B, y2: H - B + 5, class: 'axis-line' }));
    svg.appendChild(s('text', { x: xs(v), y: H - B + 18, class: 'axis tick-x', 'text-anchor': 'middle' }, fmt(v)));
  }
  svg.appendChild(s('text', { x: (L + W - R) / 2, y: H - 6, class: 'axis axis-title', 'text-anchor': 'middle' }, xLabel));
  svg.appendChild(s('text', { x: 14, y: (T + H - B) / 2, class: 'axis axis-title', 'text-anchor': 'middle', transform: `rotate(-90 14 ${(T + H - B) / 2})` }, yLabel));
  const plot = s('g', { class: 'plot' });
  shown.forEach((pts, i) => {
    const c = series[i].color ?? i;
    if (pts.length > 1) {
      plot.appendChild(s('path', { d: pts.map((p, j) => `${j ? 'L' : 'M'}${xs(p.x).toFixed(1)},${yv(p.y).toFixed(1)}`).join(''),
        class: `series series-${c % PALETTE}`, 'data-label': series[i].label }, s('title', {}, series[i].label)));
    }
    if (pts.length <= 60) {
      for (const p of pts) {
        plot.appendChild(s('circle', { cx: xs(p.x), cy: yv(p.y), r: pts.length === 1 ? 4 : 2.5, class: `point series-${c % PALETTE}` },
          s('title', {}, `${series[i].label}, ${xLabel} ${fmt(p.x)}: ${fmt(p.y)}`)));
      }
    }
  });
  svg.appendChild(plot);
  svg.appendChild(s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis-line' }));
  svg.appendChild(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis-line' }));
  return { svg, scale: { W, H, L, R, T, B, x0, x1, xs, shown } };
}

// metricChart is a chart component: update(series) redraws it at its
// box's width (the panel's zoom applied); the pointer shows the values at
// a step, a drag across the plot zooms to those steps.
export function metricChart({ title, xLabel = 'step', yLabel, zoom, id }) {
  const box = h('div', { class: 'metric-chart-box', id });
  const readout = h('p', { class: 'chart-readout muted small', 'aria-hidden': 'true' }, '\u00a0');
  const legendBox = h('div');
  const el = h('figure', { class: 'metric-figure' }, h('figcaption', {}, title), box, readout, legendBox);
  let series = [];
  let cur = null; // {svg, scale}
  let drag = null;

  function redraw() {
    const width = box.clientWidth || el.clientWidth || 600;
    const last = series.map((ser) => (ser.points.length ? `${ser.label} ${fmt(ser.points[ser.points.length - 1].y)} at ${xLabel} ${fmt(ser.points[ser.points.length - 1].x)}` : null)).filter(Boolean);
    cur = draw({ series, width, range: zoom && zoom.range, xLabel, yLabel: yLabel || title,
      title: `${title} by ${xLabel}${series.length > 1 ? ', ' + series.length + ' runs' : ''}${last.length ? ': latest ' + last.join('; ') : ''}.` });
    replace(box, cur.svg);
    replace(legendBox, series.length > 1 ? h('ul', { class: 'legend', 'aria-label': 'Runs' }, series.map((ser, i) =>
      h('li', {}, h('span', { class: `swatch series-swatch series-${(ser.color ?? i) % PALETTE}`, 'aria-hidden': 'true' }), ser.label))) : null);
    if (cur.scale) wire(cur);
  }

  // toX is the step at a pointer position.
  const toX = (ev, sc) => {
    const r = cur.svg.getBoundingClientRect();
    const vx = ((ev.clientX - r.left) * sc.W) / r.width;
    return sc.x0 + ((Math.min(Math.max(vx, sc.L), sc.W - sc.R) - sc.L) / (sc.W - sc.L - sc.R)) * (sc.x1 - sc.x0);
  };

  function wire({ svg, scale: sc }) {
    const rule = s('line', { y1: sc.T, y2: sc.H - sc.B, class: 'hover-rule', visibility: 'hidden' });
    const sel = s('rect', { y: sc.T, height: sc.H - sc.T - sc.B, class: 'zoom-selection', visibility: 'hidden' });
    svg.append(rule, sel);
    svg.addEventListener('pointerdown', (ev) => {
      if (ev.button !== 0) return;
      drag = { from: toX(ev, sc) };
      svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener('pointermove', (ev) => {
      const x = toX(ev, sc);
      if (drag) {
        const a = sc.xs(Math.min(drag.from, x)), b = sc.xs(Math.max(drag.from, x));
        sel.setAttribute('x', a);
        sel.setAttribute('width', Math.max(0, b - a));
        sel.setAttribute('visibility', 'visible');
        return;
      }
      // The values at the nearest logged step.
      let best = null;
      for (const pts of sc.shown) for (const p of pts) if (!best || Math.abs(p.x - x) < Math.abs(best - x)) best = p.x;
      if (best === null) return;
      rule.setAttribute('x1', sc.xs(best));
      rule.setAttribute('x2', sc.xs(best));
      rule.setAttribute('visibility', 'visible');
      const vals = series.map((ser, i) => {
        const p = sc.shown[i].find((q) => q.x === best);
        return p ? (series.length > 1 ? `${ser.label} ${fmt(p.y)}` : fmt(p.y)) : null;
      }).filter(Boolean);
      readout.textContent = `${xLabel} ${fmt(best)}: ${vals.join(' · ')}`;
    });
    const end = (ev) => {
      if (!drag) return;
      const from = drag.from, to = toX(ev, sc);
      drag = null;
      sel.setAttribute('visibility', 'hidden');
      // Steps are whole numbers: the zoom takes in the steps the drag touched.
      if (zoom && Math.abs(sc.xs(to) - sc.xs(from)) > 6) zoom.set(Math.floor(Math.min(from, to)), Math.ceil(Math.max(from, to)));
    };
    svg.addEventListener('pointerup', end);
    svg.addEventListener('pointercancel', () => { drag = null; sel.setAttribute('visibility', 'hidden'); });
    svg.addEventListener('pointerleave', () => { if (!drag) rule.setAttribute('visibility', 'hidden'); });
  }

  const off = zoom ? zoom.on(redraw) : () => {};
  return {
    el,
    update(next) {
      const sig = JSON.stringify(next);
      if (sig === el.dataset.sig && box.firstChild) return;
      el.dataset.sig = sig;
      series = next;
      redraw();
    },
    redraw,
    dispose: off,
  };
}

// chartsPanel keeps one metricChart per metric name in box, in order,
// sharing zoom: update(byMetric) takes [[metric, series]].
export function chartsPanel(box, zoom, idPrefix) {
  const charts = new Map();
  let lastWidth = 0;
  const onResize = () => {
    if (box.clientWidth && box.clientWidth !== lastWidth) {
      lastWidth = box.clientWidth;
      charts.forEach((c) => c.redraw());
    }
  };
  window.addEventListener('resize', onResize);
  return {
    update(byMetric) {
      lastWidth = box.clientWidth;
      const want = byMetric.map(([m]) => m);
      for (const [m, c] of charts) if (!want.includes(m)) { c.dispose(); c.el.remove(); charts.delete(m); }
      byMetric.forEach(([m, series], i) => {
        let c = charts.get(m);
        if (!c) {
          c = metricChart({ title: m, zoom, id: `${idPrefix}-${i}` });
          c.el.dataset.metric = m;
          charts.set(m, c);
        }
        if (box.children[i] !== c.el) box.insertBefore(c.el, box.children[i] || null);
        c.update(series);
      });
    },
    dispose() {
      window.removeEventListener('resize', onResize);
      charts.forEach((c) => c.dispose());
    },
  };
}
