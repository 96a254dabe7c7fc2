// The cost page: what the nodes of the workspace's computes cost in a
// period, per day (or hour) as stacked bars and grouped by compute, job
// or tag as a table with a CSV download; and the workspace's budgets.
// Periods are in UTC, like the server's reports and budgets.
import * as api from './api.js';
import { h, replace, pageHeader, errorBanner, syncTable, table, announce } from './dom.js';
import { costChart, costLegend, seriesOf } from './costchart.js';
import { budgetsPanel } from './budgets.js';

const HOUR = 3600000, DAY = 24 * HOUR;
// The period's report is read again this often (the budgets every refresh).
const COSTS_EVERY_MS = 60000;
// At most this many bars, hence calls to …/costs, per chart.
const MAX_BARS = 31;

export const PERIODS = [['month', 'This month'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['custom', 'Custom']];
const GROUPS = [['compute', 'Compute'], ['job', 'Job'], ['tag', 'Tag']];

const utcDay = (ms) => { const d = new Date(ms); return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()); };
const dateText = (ms) => new Date(ms).toISOString().slice(0, 10);
// iso is an RFC 3339 time without fractions of a second.
export const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

// money renders an amount with 2 decimals and its currency; a cost too
// small to show as 0.01 says so rather than reading 0.00.
export function money(v, currency) {
  const c = currency ? ' ' + currency : '';
  if (v > 0 && v < 0.005) return '< 0.01' + c;
  return (v || 0).toFixed(2) + c;
}

export function hours(v) {
  return (v || 0).toFixed(v > 0 && v < 10 ? 3 : 2) + ' h';
}

// periodOf turns the picker's choice into [since, until) in milliseconds
// (until: now, or the end of the custom last day), or an error.
export function periodOf(kind, sinceDate, untilDate, now = Date.now()) {
  const today = utcDay(now);
  switch (kind) {
    case '7d': return { since: today - 6 * DAY, until: now, open: true, label: 'the last 7 days' };
    case '30d': return { since: today - 29 * DAY, until: now, open: true, label: 'the last 30 days' };
    case 'custom': {
      const since = Date.parse(sinceDate + 'T00:00:00Z'), last = Date.parse(untilDate + 'T00:00:00Z');
      if (Number.isNaN(since)) return { error: 'Pick the first day of the period.', field: 'since' };
      if (Number.isNaN(last)) return { error: 'Pick the last day of the period.', field: 'until' };
      if (last < since) return { error: 'The last day comes before the first.', field: 'until' };
      if (since >= now) return { error: 'The period starts in the future.', field: 'since' };
      const until = Math.min(last + DAY, now);
      return { since, until, open: until === now, label: sinceDate === untilDate ? sinceDate : `${sinceDate} to ${untilDate}` };
    }
    default: {
      const d = new Date(now);
      return { since: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), until: now, open: true, label: 'this month' };
    }
  }
}

// bucketsOf cuts [since, until) into the chart's bars: days, or hours for
// a period of 2 days or less, several of them per bar when there would be
// more than MAX_BARS.
export function bucketsOf(since, until) {
  const span = until - since;
  const hourly = span <= 2 * DAY;
  const unit = hourly ? HOUR : DAY;
  const step = unit * Math.max(1, Math.ceil(span / unit / (hourly ? 24 : MAX_BARS)));
  const out = [];
  for (let t = since; t < until; t += step) out.push({ start: t, end: Math.min(t + step, until) });
  return { buckets: out, hourly, step };
}

// csvOf is the report as CSV (RFC 4180), the total last.
export function csvOf(r) {
  const q = (v) => {
    const s = String(v ?? '');
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  const head = ['key', 'workspace', 'compute', 'nodeHours', 'busyNodeHours', 'idleNodeHours', 'cost', 'busyCost', 'idleCost', 'currency'];
  const line = (x) => [x.key, x.workspace, x.compute, x.nodeHours, x.busyNodeHours, x.idleNodeHours, x.cost, x.busyCost, x.idleCost, r.currency].map(q).join(',');
  return [head.join(','), ...r.rows.map(line), line({ ...r.total, key: 'total', workspace: '', compute: '' })].join('\r\n') + '\r\n';
}

export function render(main) {
  const banner = errorBanner();
  const saved = JSON.parse(sessionStorage.getItem('cumulus.cost') || '{}');
  const periodSel = h('select', { id: 'cost-period' }, PERIODS.map(([v, t]) => h('option', { value: v, selected: v === (saved.period || 'month') }, t)));
  const today = dateText(Date.now());
  const sinceIn = h('input', { type: 'date', id: 'cost-since', value: saved.since || today.slice(0, 8) + '01', max: today });
  const untilIn = h('input', { type: 'date', id: 'cost-until', value: saved.until || today, max: today });
  const customBox = h('div', { class: 'filters-group', id: 'cost-custom' },
    h('div', { class: 'field inline-field' }, h('label', { for: 'cost-since' }, 'From'), sinceIn),
    h('div', { class: 'field inline-field' }, h('label', { for: 'cost-until' }, 'To'), untilIn));
  const bySel = h('select', { id: 'cost-by' }, GROUPS.map(([v, t]) => h('option', { value: v, selected: v === (saved.by || 'compute') }, t)));
  const tagIn = h('input', { type: 'text', id: 'cost-tag', value: saved.tag || '', spellcheck: 'false', autocomplete: 'off', placeholder: 'team', size: '12' });
  const tagBox = h('div', { class: 'field inline-field', id: 'cost-tag-field' }, h('label', { for: 'cost-tag' }, 'Tag key'), tagIn);
  const pickError = h('p', { class: 'field-error', id: 'cost-pick-error', role: 'alert' });
  const form = h('form', { class: 'filters', 'aria-label': 'Period and grouping', novalidate: true },
    h('div', { class: 'field inline-field' }, h('label', { for: 'cost-period' }, 'Period'), periodSel),
    customBox,
    h('div', { class: 'field inline-field' }, h('label', { for: 'cost-by' }, 'Group by'), bySel),
    tagBox,
    h('button', { type: 'submit', class: 'secondary small', id: 'cost-apply' }, 'Show'));
  const unpriced = h('p', { class: 'banner banner-warn', id: 'cost-unpriced', role: 'status', hidden: true });
  const status = h('p', { class: 'muted', id: 'cost-status', 'aria-live': 'polite' });

  const chartTitle = h('h2', { id: 'sec-cost-chart' }, 'Cost over time');
  const chartBox = h('div', { class: 'chart-box', id: 'cost-chart' });
  const legendBox = h('div');
  const chartNote = h('p', { class: 'help', id: 'cost-chart-note' });
  const chartCard = h('section', { class: 'card', 'aria-labelledby': 'sec-cost-chart' }, chartTitle, h('figure', {}, chartBox, legendBox), chartNote);

  const download = h('a', { class: 'button-link', id: 'cost-csv', href: '#', hidden: true }, 'Download CSV');
  const tableBox = h('div', { id: 'cost-table' });
  const tableTitle = h('h2', { id: 'sec-cost-table' }, 'Cost by compute');
  const tableCard = h('section', { class: 'card', 'aria-labelledby': 'sec-cost-table' },
    h('div', { class: 'section-header' }, tableTitle, download), tableBox,
    h('p', { class: 'help' }, 'Node-hours count from a node\'s request to its removal; busy while a job held the node, idle the rest. ',
      'The same report on the command line: ', h('code', {}, 'cumulus cost show --by compute')));

  const budgets = budgetsPanel();
  main.append(pageHeader('Cost'), banner.el, form, pickError, unpriced, status, chartCard, tableCard, budgets.el);

  let seq = 0; // the latest load; older answers are dropped
  let loadedAt = 0;
  let loadedKey = '';
  let csvURL = '';
  let currency = '';

  function choice() {
    return { period: periodSel.value, since: sinceIn.value, until: untilIn.value, by: bySel.value, tag: tagIn.value.trim() };
  }
  function showControls() {
    customBox.hidden = periodSel.value !== 'custom';
    tagBox.hidden = bySel.value !== 'tag';
  }

  // load reads the period's report (grouped as asked) and one report per
  // bar (by compute, or by the tag), all at once.
  async function load() {
    const c = choice();
    const my = ++seq;
    pickError.textContent = '';
    sinceIn.removeAttribute('aria-invalid');
    untilIn.removeAttribute('aria-invalid');
    tagIn.removeAttribute('aria-invalid');
    const p = periodOf(c.period, c.since, c.until);
    if (p.error) {
      pickError.textContent = p.error;
      (p.field === 'since' ? sinceIn : untilIn).setAttribute('aria-invalid', 'true');
      return;
    }
    if (c.by === 'tag' && !c.tag) {
      pickError.textContent = 'Enter the tag key to group by.';
      tagIn.setAttribute('aria-invalid', 'true');
      return;
    }
    const by = c.by === 'tag' ? 'tag:' + c.tag : c.by;
    const chartBy = c.by === 'tag' ? by : 'compute';
    const { buckets, hourly, step } = bucketsOf(p.since, p.until);
    // A period that ends now lets the server say when now is.
    const untilOf = (end) => (p.open && end === p.until ? undefined : iso(end));
    status.textContent = `Reading the cost of ${p.label}…`;
    const [report, ...parts] = await Promise.all([
      api.costs({ by, since: iso(p.since), until: untilOf(p.until) }),
      ...buckets.map((b) => api.costs({ by: chartBy, since: iso(b.start), until: untilOf(b.end) })),
    ]);
    if (my !== seq) return;
    loadedAt = Date.now();
    loadedKey = JSON.stringify(c);
    currency = report.currency;
    budgets.setCurrency(currency);
    const fmt = (v) => money(v, report.currency);

    // The warning about sizes without a price.
    const missing = [...new Set([report, ...parts].flatMap((r) => r.unpriced || []))].sort();
    unpriced.hidden = !missing.length;
    unpriced.textContent = missing.length
      ? `No price for ${missing.length === 1 ? 'VM size' : 'VM sizes'} ${missing.join(', ')}: their nodes' hours count here at no cost, so the totals are too low.`
      : '';

    // The chart.
    const bars = buckets.map((b, i) => ({ ...b, values: new Map(parts[i].rows.map((r) => [r.key, r.cost])) }));
    const series = seriesOf(bars);
    const what = c.by === 'tag' ? `tag ${c.tag}` : 'compute';
    const unit = hourly ? (step === HOUR ? 'hour' : `${step / HOUR} hours`) : (step === DAY ? 'day' : `${step / DAY} days`);
    const summary = series.length ? series.map((x) => `${x.label} ${fmt(x.total)}`).join(', ') : 'nothing';
    const title = `Cost per ${unit} by ${what}, ${p.label}: total ${fmt(report.total.cost)}; ${summary}.`;
    chartTitle.textContent = `Cost per ${unit} by ${what}`;
    replace(chartBox, costChart({ buckets: bars, series, title, hourly, fmt, width: chartBox.clientWidth }));
    replace(legendBox, series.length ? costLegend(series, fmt) : null);
    chartNote.textContent = `${bars.length} bar${bars.length === 1 ? '' : 's'} from ${iso(p.since).replace('T00:00:00Z', '')} (UTC), one per ${unit}.` +
      (c.by === 'job' ? ' Jobs come and go; the bars show their computes.' : '');

    // The table.
    drawTable(report, c);
    if (csvURL) URL.revokeObjectURL(csvURL);
    csvURL = URL.createObjectURL(new Blob([csvOf(report)], { type: 'text/csv' }));
    download.href = csvURL;
    download.setAttribute('download', `cost-${api.scope.workspace}-${by.replace(/[^A-Za-z0-9_-]+/g, '-')}-${dateText(p.since)}-${dateText(p.until - 1)}.csv`);
    download.hidden = false;
    status.textContent = `${p.label[0].toUpperCase() + p.label.slice(1)}: ${fmt(report.total.cost)} for ${hours(report.total.nodeHours)} of nodes, ` +
      `${fmt(report.total.idleCost)} of it idle.`;
    announce(`Cost of ${p.label}: ${fmt(report.total.cost)}`);
  }

  let shownBy = '';
  let t = null;
  function drawTable(r, c) {
    const keyHead = c.by === 'job' ? 'Job' : c.by === 'tag' ? `Tag ${c.tag}` : 'Compute';
    const withCompute = c.by === 'job';
    const key = JSON.stringify([c.by, c.tag]);
    if (key !== shownBy || !t) {
      shownBy = key;
      const heads = [keyHead, withCompute ? 'Compute' : null, 'Node-hours', 'Busy node-hours', 'Idle node-hours', 'Idle cost', 'Cost'].filter(Boolean);
      t = table({ text: `Cost by ${keyHead.toLowerCase()}, ${r.currency}`, visible: false }, heads, 'cost-table');
      t.foot = h('tfoot');
      t.el.querySelector('table').appendChild(t.foot);
      for (const th of t.el.querySelectorAll('thead th')) if (/hours|cost/i.test(th.textContent)) th.classList.add('num');
      for (const th of t.el.querySelectorAll('thead th')) if (/^Idle/.test(th.textContent)) th.classList.add('idle');
      tableTitle.textContent = `Cost by ${keyHead.toLowerCase()}`;
      replace(tableBox, t.el);
    }
    const cols = withCompute ? 7 : 6;
    const num = (text, extra = {}) => h('td', { class: 'num', ...extra }, text);
    const cells = (x, idleRow) => [
      idleRow ? h('th', { scope: 'row' }, h('span', { class: 'badge badge-wait' }, 'idle'), ' no job') : x.key,
      withCompute ? (x.compute || '—') : null,
      num(hours(x.nodeHours)),
      num(hours(x.busyNodeHours)),
      num(hours(x.idleNodeHours), { class: 'num idle' }),
      num(money(x.idleCost, r.currency), { class: 'num idle' }),
      num(money(x.cost, r.currency), { 'data-cost': String(x.cost), title: `${x.cost} ${r.currency}` }),
    ].filter((v) => v !== null);
    syncTable(t.tbody, r.rows, {
      key: (x) => `${x.workspace}/${x.compute}/${x.key}`, cols, empty: 'No node ran in this period.',
      cells: (x) => cells(x, c.by === 'job' && x.key === '(idle)'),
    });
    const total = cells({ ...r.total, key: 'Total', compute: '' }, false);
    total[0] = h('th', { scope: 'row' }, 'Total');
    if (withCompute) total[1] = h('td');
    const heads = [...t.el.querySelectorAll('thead th')].map((th) => th.textContent);
    total.forEach((c, i) => { if (c instanceof HTMLElement) c.dataset.label = heads[i]; });
    replace(t.foot, h('tr', {}, total));
  }

  function apply() {
    showControls();
    sessionStorage.setItem('cumulus.cost', JSON.stringify(choice()));
    return load().catch((e) => banner.set(e.message));
  }
  form.addEventListener('submit', (ev) => { ev.preventDefault(); apply(); });
  periodSel.addEventListener('change', () => { if (periodSel.value !== 'custom') apply(); else showControls(); });
  bySel.addEventListener('change', () => {
    showControls();
    if (bySel.value === 'tag' && !tagIn.value.trim()) { tagIn.focus(); return; }
    apply();
  });
  for (const el of [sinceIn, untilIn]) el.addEventListener('change', apply);
  tagIn.addEventListener('change', apply);
  showControls();

  // refresh (every 2 s by the shell) reads the budgets each time and the
  // cost again once it is a minute old.
  async function refresh() {
    const jobs = [budgets.refresh()];
    if (Date.now() - loadedAt > COSTS_EVERY_MS || loadedKey !== JSON.stringify(choice())) {
      if (loadedKey !== JSON.stringify(choice()) && loadedAt) {
        // a choice not applied yet (a custom date being typed): wait for it
      } else {
        jobs.push(load());
      }
    }
    await Promise.all(jobs);
  }
  return {
    refresh, setError: banner.set,
    dispose() { if (csvURL) URL.revokeObjectURL(csvURL); },
  };
}
