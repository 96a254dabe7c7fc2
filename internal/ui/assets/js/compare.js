// Runs side by side: jobs picked from the list (#/compare/a,b,c) or a
// sweep's trials (#/compare/sweep/NAME), with a column per run (status,
// compute, duration, parameters, the latest value of each metric) and a
// chart per metric with a line per run, all charts zooming together.
import * as api from './api.js';
import { h, replace, badge, pageHeader, errorBanner, nameFromId } from './dom.js';
import { jobDuration } from './jobs.js';
import { PALETTE, byStep, chartsPanel, fmt, zoomControls, zoomState } from './metricchart.js';

const MAX_RUNS = 24; // lines a chart can tell apart with its legend

export function render(main, [list]) {
  const names = (list || '').split(',').map((n) => n.trim()).filter(Boolean);
  return page(main, { names });
}

export function renderSweep(main, [sweep]) {
  return page(main, { sweep });
}

function page(main, { names = [], sweep = null }) {
  const banner = errorBanner();
  const crumbs = h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ',
    sweep ? [h('a', { href: '#/jobs/' + encodeURIComponent(sweep) }, sweep), ' / '] : null, 'Compare');
  const title = sweep ? `Trials of ${sweep}` : 'Compare runs';
  const runsBox = h('ul', { class: 'run-chips', id: 'compare-runs', 'aria-label': 'Runs compared' });
  const addInput = h('input', { id: 'compare-add', list: 'compare-jobs', placeholder: 'job name', autocomplete: 'off' });
  const jobsList = h('datalist', { id: 'compare-jobs' });
  const addForm = h('form', { class: 'filters', 'aria-label': 'Add a run' },
    h('div', { class: 'field inline-field' }, h('label', { for: 'compare-add' }, 'Add a run'), addInput, jobsList),
    h('button', { type: 'submit', class: 'secondary small' }, 'Add'));
  const note = h('p', { class: 'muted', id: 'compare-note', 'aria-live': 'polite' });
  const tableBox = h('div', { class: 'table-wrap compare-wrap' });
  const zoom = zoomState();
  const chartsBox = h('div', { class: 'metric-charts', id: 'compare-charts' });
  const charts = chartsPanel(chartsBox, zoom, 'compare-chart');
  main.append(crumbs, pageHeader(title), banner.el,
    h('section', { class: 'card', 'aria-labelledby': 'sec-runs' }, h('h2', { id: 'sec-runs' }, 'Runs'), runsBox, addForm, note),
    h('section', { class: 'card', 'aria-labelledby': 'sec-side' }, h('h2', { id: 'sec-side' }, 'Side by side'), tableBox),
    h('section', { class: 'card', 'aria-labelledby': 'sec-compare-metrics' }, h('h2', { id: 'sec-compare-metrics' }, 'Metrics'),
      zoomControls(zoom, 'compare-zoom'), chartsBox));

  const dropped = new Set(); // runs taken out of a sweep's comparison
  const runs = new Map(); // name → {job, sig, metrics}
  let order = names.slice();
  let listed = 0;

  function setOrder(next) {
    order = next;
    if (!sweep) history.replaceState(null, '', '#/compare/' + order.map(encodeURIComponent).join(','));
    draw();
  }
  addForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const n = addInput.value.trim();
    if (!n) return;
    addInput.value = '';
    dropped.delete(n);
    if (!order.includes(n)) setOrder([...order, n]);
    refresh().catch((e) => banner.set(e.message));
  });

  async function refresh() {
    if (sweep) {
      const trials = await api.listAll(api.wsPath() + '/jobs?parentJobName=' + encodeURIComponent(sweep));
      trials.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }));
      const extra = order.filter((n) => !trials.some((tr) => tr.name === n));
      order = [...trials.map((tr) => tr.name), ...extra].filter((n) => !dropped.has(n));
    }
    if (Date.now() - listed > 30000) { // the names to pick from, now and then
      listed = Date.now();
      const jobs = await api.listJobs().catch(() => []);
      replace(jobsList, jobs.slice(0, 500).map((j) => h('option', { value: j.name }, j.properties.displayName || j.name)));
    }
    await Promise.all(order.slice(0, MAX_RUNS).map(async (n) => {
      let job;
      try {
        job = await api.getJob(n);
      } catch (e) {
        runs.set(n, { error: e.status === 404 ? 'no such job' : e.message });
        return;
      }
      const r = runs.get(n) || {};
      const sig = JSON.stringify(job.properties.metrics || {});
      if (r.sig !== sig || !r.metrics) {
        r.metrics = Object.keys(job.properties.metrics || {}).length
          ? await api.get(api.jobPath(n) + '/metrics') : { latest: [], history: {}, params: {} };
        r.sig = sig;
      }
      r.job = job;
      r.error = null;
      runs.set(n, r);
    }));
    draw();
  }

  function draw() {
    const shown = order.slice(0, MAX_RUNS);
    note.textContent = !order.length ? 'No runs yet: pick jobs on the Jobs page (Compare selected), or add one here.'
      : order.length > MAX_RUNS ? `The first ${MAX_RUNS} of ${order.length} runs are compared.` : `${order.length} run${order.length === 1 ? '' : 's'}.`;
    replace(runsBox, shown.map((n, i) => {
      const r = runs.get(n) || {};
      const rm = h('button', { type: 'button', class: 'chip-remove', 'aria-label': `Remove ${n} from the comparison` }, '×');
      rm.addEventListener('click', () => {
        dropped.add(n);
        setOrder(order.filter((x) => x !== n));
      });
      return h('li', { class: 'run-chip', dataset: { run: n } }, h('span', { class: `swatch series-swatch series-${i % PALETTE}`, 'aria-hidden': 'true' }),
        h('a', { href: '#/jobs/' + encodeURIComponent(n) }, n), r.job ? ' ' : null, r.job ? badge(r.job.properties.status) : null,
        r.error ? h('span', { class: 'field-error' }, ' ' + r.error) : null, rm);
    }));
    const ok = shown.filter((n) => runs.get(n) && runs.get(n).job);
    // Columns: the runs; rows: what they have, parameters and metrics.
    const params = [...new Set(ok.flatMap((n) => Object.keys(paramsOf(runs.get(n)))))].sort();
    const metrics = [...new Set(ok.flatMap((n) => runs.get(n).metrics.latest.map((v) => v.name)))].sort();
    const row = (label, f, cls) => h('tr', { class: cls }, h('th', { scope: 'row' }, label), ok.map((n) => h('td', {}, f(runs.get(n), n))));
    const differs = (f) => new Set(ok.map((n) => JSON.stringify(f(runs.get(n))))).size > 1;
    const t = h('table', { class: 'compare', id: 'compare-table' },
      h('caption', { class: 'visually-hidden' }, 'The runs side by side: a column per run'),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Run'), ok.map((n) => h('th', { scope: 'col', dataset: { run: n } },
        h('span', { class: `swatch series-swatch series-${shown.indexOf(n) % PALETTE}`, 'aria-hidden': 'true' }),
        h('a', { href: '#/jobs/' + encodeURIComponent(n) }, n))))),
      h('tbody', {},
        row('Status', (r) => badge(r.job.properties.status)),
        row('Display name', (r) => r.job.properties.displayName || r.job.name),
        row('Compute', (r) => nameFromId(r.job.properties.computeId) || '—'),
        row('Duration', (r) => jobDuration(r.job)),
        params.map((p) => row(p, (r) => valueText(paramsOf(r)[p]), differs((r) => paramsOf(r)[p]) ? 'param differs' : 'param')),
        metrics.map((m) => row(`${m} (latest)`, (r) => {
          const v = r.metrics.latest.find((x) => x.name === m);
          return v ? `${fmt(v.value)} at step ${v.step}` : '—';
        }, 'metric'))));
    if (tableBox._sig !== JSON.stringify([ok, ok.map((n) => [runs.get(n).job.properties.status, runs.get(n).sig])])) {
      tableBox._sig = JSON.stringify([ok, ok.map((n) => [runs.get(n).job.properties.status, runs.get(n).sig])]);
      replace(tableBox, ok.length ? t : h('p', { class: 'muted' }, 'No run to show yet.'));
    }
    charts.update(metrics.map((m) => [m, ok.map((n) => ({ label: n, color: shown.indexOf(n), points: byStep(runs.get(n).metrics.history[m]) }))
      .filter((ser) => ser.points.length)]));
  }

  return { refresh, setError: banner.set, dispose: () => charts.dispose() };
}

// paramsOf are a run's parameters: what its sweep gave it, the literal
// inputs it was given, and what it logged with MLflow.
function paramsOf(r) {
  const p = r.job.properties;
  const out = {};
  for (const [k, v] of Object.entries(p.inputs || {})) if (v && v.value !== undefined && v.value !== '') out[k] = v.value;
  Object.assign(out, p.parameters || {});
  Object.assign(out, (r.metrics && r.metrics.params) || {});
  return out;
}

function valueText(v) {
  if (v === undefined || v === null) return '—';
  return typeof v === 'number' ? fmt(v) : String(v);
}
