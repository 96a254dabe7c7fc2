// The jobs page: every job of the workspace, newest first, with a status
// filter and a text filter.
import * as api from './api.js';
import { h, badge, pageHeader, errorBanner, syncTable, table, duration, when, nameFromId, announce, pager } from './dom.js';

export const STATUSES = ['NotStarted', 'Queued', 'Preparing', 'Starting', 'Running', 'Finalizing', 'Completed', 'Failed', 'CancelRequested', 'Canceled'];
export const terminal = (s) => s === 'Completed' || s === 'Failed' || s === 'Canceled';

export function jobDuration(j, now = Date.now()) {
  const p = j.properties;
  if (!p.startTime) return '—';
  const end = p.endTime ? new Date(p.endTime).getTime() : now;
  return duration(end - new Date(p.startTime).getTime());
}

export function render(main) {
  const banner = errorBanner();
  const saved = JSON.parse(sessionStorage.getItem('cumulus.jobs.filter') || '{}');
  const status = h('select', { id: 'job-status' }, h('option', { value: '' }, 'Any status'),
    STATUSES.map((s) => h('option', { value: s, selected: s === saved.status }, s)));
  const text = h('input', { id: 'job-filter', type: 'search', placeholder: 'name, compute, experiment…', value: saved.text || '' });
  const count = h('p', { class: 'muted', id: 'jobs-count', 'aria-live': 'polite' });
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs' },
    h('div', { class: 'field inline-field' }, h('label', { for: 'job-status' }, 'Status'), status),
    h('div', { class: 'field inline-field' }, h('label', { for: 'job-filter' }, 'Search'), text));
  filters.addEventListener('submit', (ev) => ev.preventDefault());
  const t = table('Jobs of the workspace', ['Name', 'Status', 'Compute', 'Nodes', 'Submitted', 'Duration', 'Experiment', 'Message'], 'jobs');
  const pages = pager('jobs-pager', 'jobs', () => draw());
  const submit = h('a', { class: 'button-link primary', href: '#/submit', id: 'submit-job' }, h('span', { 'aria-hidden': 'true' }, '+ '), 'Submit job');
  // Runs picked here open side by side on the compare page.
  const picked = new Set(JSON.parse(sessionStorage.getItem('cumulus.jobs.picked') || '[]'));
  const compareBtn = h('button', { type: 'button', class: 'secondary', id: 'compare-selected', disabled: true }, 'Compare selected');
  const pickedChanged = () => {
    sessionStorage.setItem('cumulus.jobs.picked', JSON.stringify([...picked]));
    compareBtn.disabled = picked.size < 2;
    compareBtn.textContent = picked.size ? `Compare selected (${picked.size})` : 'Compare selected';
  };
  compareBtn.addEventListener('click', () => {
    location.hash = '#/compare/' + [...picked].map(encodeURIComponent).join(',');
  });
  pickedChanged();
  main.append(pageHeader('Jobs', compareBtn, submit), banner.el,
    h('p', { class: 'help' }, 'Submit a job here, or with ', h('code', {}, 'cumulus job create --file job.yml'), '; it appears at once.'),
    filters, count, t.el, pages.el);
  const seen = new Map();
  let list = [];

  function draw() {
    const q = text.value.trim().toLowerCase();
    const shown = list.filter((j) => !q || [j.name, j.properties.displayName, nameFromId(j.properties.computeId), j.properties.experimentName, j.properties.status]
      .some((v) => (v || '').toLowerCase().includes(q)));
    count.textContent = `${shown.length} of ${list.length} job${list.length === 1 ? '' : 's'}${status.value ? ' with status ' + status.value : ''}.`;
    const now = Date.now();
    syncTable(t.tbody, pages.slice(shown), {
      key: (j) => j.name, cols: 8, empty: list.length ? 'No job matches the filter.' : (status.value ? `No job is ${status.value}.` : 'No jobs yet.'),
      sig: (j) => [j.properties.status, j.properties.statusMessage, j.properties.endTime, terminal(j.properties.status) ? 0 : Math.floor(now / 5000)],
      cells: (j) => [
        [pickBox(j.name),
          h('a', { href: '#/jobs/' + encodeURIComponent(j.name) }, j.name),
          j.properties.displayName && j.properties.displayName !== j.name
            ? h('div', { class: 'small' }, h('a', { href: '#/jobs/' + encodeURIComponent(j.name), class: 'display-name' }, j.properties.displayName)) : null],
        badge(j.properties.status),
        h('a', { href: '#/computes/' + encodeURIComponent(nameFromId(j.properties.computeId)) }, nameFromId(j.properties.computeId)),
        String((j.properties.resources || {}).instanceCount || 1),
        when(j.systemData && j.systemData.createdAt),
        jobDuration(j, now),
        j.properties.experimentName || '—',
        j.properties.statusMessage || '',
      ],
    });
  }

  function pickBox(name) {
    const box = h('input', { type: 'checkbox', class: 'pick', checked: picked.has(name), 'aria-label': `Compare ${name}` });
    box.addEventListener('change', () => {
      if (box.checked) picked.add(name);
      else picked.delete(name);
      pickedChanged();
    });
    return box;
  }

  async function refresh() {
    const st = status.value;
    const got = await api.listJobs(st);
    if (st !== status.value) return; // the filter changed meanwhile
    got.sort((a, b) => String((b.systemData || {}).createdAt).localeCompare(String((a.systemData || {}).createdAt)) || a.name.localeCompare(b.name));
    for (const j of got) {
      const prev = seen.get(j.name);
      if (prev && prev !== j.properties.status) announce(`Job ${j.name} is ${j.properties.status}`);
      seen.set(j.name, j.properties.status);
    }
    list = got;
    draw();
  }
  const remember = () => sessionStorage.setItem('cumulus.jobs.filter', JSON.stringify({ status: status.value, text: text.value }));
  status.addEventListener('change', () => { remember(); pages.reset(); refresh().catch((e) => banner.set(e.message)); });
  text.addEventListener('input', () => { remember(); pages.reset(); draw(); });
  return { refresh, setError: banner.set };
}
