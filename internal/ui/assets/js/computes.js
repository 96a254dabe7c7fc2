// The compute clusters page: every cluster of the workspace, "+ New",
// scale settings and delete.
import * as api from './api.js';
import { h, badge, pageHeader, errorBanner, syncTable, table, isoSeconds, duration, announce, pager, humanize } from './dom.js';
import { openCreateDialog, openScaleDialog, openDeleteDialog, FIELD_NAMES } from './dialogs.js';

const STATES = [
  ['runningNodeCount', 'running'], ['idleNodeCount', 'idle'], ['preparingNodeCount', 'preparing'],
  ['leavingNodeCount', 'leaving'], ['unusableNodeCount', 'unusable'], ['preemptedNodeCount', 'preempted'],
];

// nodeStates renders a cluster's nodeStateCounts as labelled badges.
export function nodeStates(counts) {
  const parts = STATES.filter(([k]) => counts && counts[k] > 0).map(([k, s]) => badge(`${counts[k]} ${s}`, s === 'idle' ? 'ok' : undefined));
  return parts.length ? h('span', { class: 'badges' }, parts) : h('span', { class: 'muted' }, 'no nodes');
}

export function tierText(p) {
  return p === 'LowPriority' ? 'Low priority' : 'Dedicated';
}

// tierBadge marks a cluster's tier; low priority stands out.
export function tierBadge(p) {
  return h('span', { class: 'badge tier ' + (p === 'LowPriority' ? 'tier-low badge-wait' : 'tier-dedicated badge-plain') }, tierText(p));
}

export function stateCell(c) {
  const a = c.properties.properties || {};
  const st = c.properties.provisioningState;
  return h('span', { class: 'badges' }, badge(st), st === 'Succeeded' && a.allocationState ? badge(a.allocationState) : null);
}

export function tagsCell(tags) {
  const e = Object.entries(tags || {});
  if (!e.length) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'tags' }, e.map(([k, v]) => h('span', { class: 'tag' }, v ? `${k}=${v}` : k)));
}

export function errorsOf(c) {
  const a = c.properties.properties || {};
  return [...(a.errors || []), ...(c.properties.provisioningErrors || [])].map((e) => (e.error ? e.error : e));
}

// matches says whether a cluster has q (lower case) in its name, size,
// tier, state, description or tags.
function matches(c, q) {
  const a = c.properties.properties || {};
  const words = [c.name, a.vmSize, tierText(a.vmPriority), c.properties.provisioningState, a.allocationState, c.properties.description,
    ...Object.entries(c.tags || {}).map(([k, v]) => `${k}=${v}`)];
  return words.some((w) => (w || '').toLowerCase().includes(q));
}

export function render(main) {
  const banner = errorBanner();
  const newBtn = h('button', { type: 'button', id: 'new-cluster' }, h('span', { 'aria-hidden': 'true' }, '+ '), 'New');
  const t = table('Compute clusters of the workspace',
    ['Name', 'State', 'Size and tier', 'Nodes (current / target)', 'Min – max', 'Node states', 'Scale down after', 'Tags', 'Actions'],
    'clusters');
  const summary = h('p', { class: 'muted', id: 'clusters-summary' });
  const saved = sessionStorage.getItem('cumulus.computes.filter') || '';
  const text = h('input', { id: 'compute-filter', type: 'search', placeholder: 'name, size, state, tag…', value: saved });
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Search clusters' },
    h('div', { class: 'field inline-field' }, h('label', { for: 'compute-filter' }, 'Search'), text));
  filters.addEventListener('submit', (ev) => ev.preventDefault());
  const pages = pager('computes-pager', 'clusters', () => draw());
  main.append(pageHeader('Compute clusters', newBtn), banner.el, filters, summary, t.el, pages.el);
  let last = new Map();
  let list = [];

  async function refresh() {
    list = await api.listComputes();
    list.sort((a, b) => a.name.localeCompare(b.name));
    for (const c of list) {
      const prev = last.get(c.name);
      if (prev && prev !== c.properties.provisioningState) announce(`Cluster ${c.name} is ${c.properties.provisioningState}`);
    }
    last = new Map(list.map((c) => [c.name, c.properties.provisioningState]));
    draw();
  }

  function draw() {
    const nodes = list.reduce((n, c) => n + ((c.properties.properties || {}).currentNodeCount || 0), 0);
    const q = text.value.trim().toLowerCase();
    const found = list.filter((c) => !q || matches(c, q));
    summary.textContent = `${list.length} cluster${list.length === 1 ? '' : 's'} in workspace ${api.scope.workspace}, ${nodes} node${nodes === 1 ? '' : 's'} in all` +
      (q ? `; ${found.length} match “${text.value.trim()}”.` : '.');
    syncTable(t.tbody, pages.slice(found), {
      key: (c) => c.name,
      cols: 9,
      empty: list.length ? 'No cluster matches the search.' : 'No clusters in this workspace yet. Create one with “+ New”.',
      sig: (c) => [c.properties, c.tags],
      cells: (c) => {
        const a = c.properties.properties || {};
        const s = a.scaleSettings || {};
        const errs = errorsOf(c);
        return [
          [h('a', { href: '#/computes/' + encodeURIComponent(c.name) }, c.name),
            // Why the cluster is blocked, as text (a tooltip is unreadable on touch).
            errs.map((e) => h('p', { class: 'row-problem' }, h('span', { 'aria-hidden': 'true' }, '⚠ '), humanize(e.message, FIELD_NAMES)))],
          stateCell(c),
          // The tier goes with the size, so it stays in view at every
          // width: low priority and dedicated clusters never look alike.
          h('span', { class: 'size-tier' }, a.vmSize, ' ', tierBadge(a.vmPriority)),
          `${a.currentNodeCount ?? 0} / ${a.targetNodeCount ?? 0}`,
          `${s.minNodeCount ?? 0} – ${s.maxNodeCount ?? '?'}`,
          nodeStates(a.nodeStateCounts),
          duration((isoSeconds(s.nodeIdleTimeBeforeScaleDown) ?? 0) * 1000),
          tagsCell(c.tags),
        ];
      },
      actions: (item) => [
        h('button', { type: 'button', class: 'small secondary', onclick: () => openScaleDialog(item(), { onDone: refresh }) }, 'Scale'),
        h('button', { type: 'button', class: 'small danger-outline', onclick: () => openDeleteDialog(item(), { onDone: refresh }) }, 'Delete'),
      ],
    });
    for (const tr of t.tbody.rows) {
      if (!tr._item) continue;
      const [scale, del] = tr._actions.querySelectorAll('button');
      scale.setAttribute('aria-label', `Edit scale settings of ${tr._item.name}`);
      del.setAttribute('aria-label', `Delete ${tr._item.name}`);
    }
  }
  text.addEventListener('input', () => {
    sessionStorage.setItem('cumulus.computes.filter', text.value);
    pages.reset();
    draw();
  });
  newBtn.addEventListener('click', () => openCreateDialog({ onCreated: () => refresh() }));
  return { refresh, setError: banner.set };
}
