// The quota and usage page: per location, cores in use against each
// quota, and the clusters of the workspace that hold them.
import * as api from './api.js';
import { h, replace, pageHeader, errorBanner, syncTable, table } from './dom.js';
import { usageMeter } from './compute.js';
import { sizes } from './dialogs.js';
import { tierText } from './computes.js';

function kindOf(u) {
  if (u.type.endsWith('/vmFamily/usages')) return 'VM family, dedicated';
  if (u.type.endsWith('/lowPriorityCores/usages')) return 'Low priority, all families';
  if (u.type.endsWith('/dedicatedCores/usages')) return 'Dedicated, all families';
  return u.type;
}

export function render(main) {
  const banner = errorBanner();
  const locs = new Set([api.scope.location, ...((api.scope.workspaces || []).map((w) => w.location).filter(Boolean))]);
  const loc = h('select', { id: 'quota-location' }, [...locs].map((l) => h('option', { value: l, selected: l === api.scope.location }, l)));
  const showAll = h('input', { type: 'checkbox', id: 'quota-all' });
  const usageT = table('Cores in use and quota limits', ['Quota', 'Applies to', 'In use', 'Limit', 'Usage']);
  const clustersT = table('Clusters of the workspace in this location', ['Cluster', 'Size', 'Family', 'Tier', 'Nodes', 'Cores in use', 'Cores at minimum']);
  const help = h('p', { class: 'help' }, 'Quotas are per location and shared by every cluster of the subscription. Raise one with ',
    h('code', {}, 'cumulus quota update --family NAME --limit N'), '.');
  main.append(pageHeader('Quota and usage'), banner.el,
    h('div', { class: 'filters' }, h('div', { class: 'field inline-field' }, h('label', { for: 'quota-location' }, 'Location'), loc),
      h('div', { class: 'field check' }, h('label', { for: 'quota-all' }, showAll, ' Show VM families with no cores in use'))),
    help,
    h('section', { class: 'card', 'aria-labelledby': 'sec-usage' }, h('h2', { id: 'sec-usage' }, 'Usage'), usageT.el),
    h('section', { class: 'card', 'aria-labelledby': 'sec-qclusters' }, h('h2', { id: 'sec-qclusters' }, `Clusters of workspace ${api.scope.workspace}`), clustersT.el));

  async function refresh() {
    const l = loc.value;
    const [usages, computes, all] = await Promise.all([api.listUsages(l), api.listComputes(), sizes().catch(() => [])]);
    if (l !== loc.value) return;
    const shown = usages.filter((u) => showAll.checked || !u.type.endsWith('/vmFamily/usages') || u.currentValue > 0);
    syncTable(usageT.tbody, shown, {
      key: (u) => u.name.value, cols: 5, empty: 'No quota in this location.',
      cells: (u) => {
        const m = usageMeter(u);
        const meter = m.querySelector('meter');
        meter.setAttribute('aria-label', `${u.name.localizedValue}: ${u.currentValue} of ${u.limit} cores`);
        return [u.name.localizedValue || u.name.value, kindOf(u), String(u.currentValue), String(u.limit), [meter, ' ', m.querySelector('.usage-text')]];
      },
    });
    const mine = computes.filter((c) => (c.properties.computeLocation || c.location) === l);
    syncTable(clustersT.tbody, mine, {
      key: (c) => c.name, cols: 7, empty: 'No cluster of this workspace in this location.',
      cells: (c) => {
        const a = c.properties.properties || {};
        const s = all.find((x) => x.name === a.vmSize);
        const v = s ? s.vCPUs : 0;
        return [
          h('a', { href: '#/computes/' + encodeURIComponent(c.name) }, c.name),
          a.vmSize, s ? s.family : '—', tierText(a.vmPriority),
          String(a.currentNodeCount || 0),
          String((a.currentNodeCount || 0) * v),
          String(((a.scaleSettings || {}).minNodeCount || 0) * v),
        ];
      },
    });
  }
  showAll.addEventListener('change', () => refresh().catch((e) => banner.set(e.message)));
  loc.addEventListener('change', () => refresh().catch((e) => banner.set(e.message)));
  return { refresh, setError: banner.set };
}
