// A cluster's page: settings, node count chart, nodes, queued and running
// jobs, and the quota its VM family draws on.
import * as api from './api.js';
import { h, replace, badge, pageHeader, errorBanner, syncTable, table, isoSeconds, duration, when, nameFromId, announce, ago, humanize, zoneName } from './dom.js';
import { openScaleDialog, openDeleteDialog, sizes, sizeSummary, FIELD_NAMES } from './dialogs.js';
import { nodeStates, tierText, stateCell, tagsCell, errorsOf } from './computes.js';
import { nodeChart, legend } from './chart.js';
import { timeline } from './events.js';
import { usagePanel, computeUsage } from './usage.js';

const WINDOWS = [[60, '1 min'], [300, '5 min'], [900, '15 min'], [3600, '1 h'], [21600, '6 h']];
const KEEP_MS = 6 * 3600 * 1000;
const ACTIVE = ['NotStarted', 'Queued', 'Preparing', 'Starting', 'Running', 'Finalizing', 'CancelRequested'];

export function render(main, [name]) {
  const banner = errorBanner();
  let current = null;
  const scaleBtn = h('button', { type: 'button', class: 'secondary', disabled: true }, 'Edit scale');
  const deleteBtn = h('button', { type: 'button', class: 'danger-outline', disabled: true }, 'Delete');
  scaleBtn.addEventListener('click', () => current && openScaleDialog(current, { onDone: refresh }));
  deleteBtn.addEventListener('click', () => current && openDeleteDialog(current, { onDone: refresh }));
  const crumbs = h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/computes' }, 'Compute clusters'), ' / ', name);
  const facts = h('dl', { class: 'facts' });
  const errors = h('div', { class: 'compute-errors', role: 'status' });

  let windowSec = 0; // chosen at the first draw: the smallest window that shows the whole history
  const windowBtns = WINDOWS.map(([sec, label]) => {
    const b = h('button', { type: 'button', class: 'small secondary', 'aria-pressed': String(sec === windowSec) }, label);
    b.addEventListener('click', () => {
      windowSec = sec;
      for (const x of windowBtns) x.setAttribute('aria-pressed', String(x === b));
      drawChart();
    });
    return b;
  });
  const chartBox = h('div', { class: 'chart-box' });
  const chartCaption = h('figcaption', { class: 'muted', id: 'chart-caption' });
  const nodesT = table('Nodes of the cluster', ['Node', 'State', 'Address', 'Current job', 'GPUs', 'Up for', 'Idle for']);
  const jobsT = table('Queued and running jobs on the cluster, queued ones in the order the scheduler will start them',
    ['Job', 'Status', 'Place in queue', 'Group', 'Nodes', 'Submitted', 'Running for', 'Message']);
  const groupsT = table('Where each group stands: usage, share and waiting jobs',
    ['Group', 'Weight', 'Usage', 'Held lately', 'Nodes now', 'Share', 'Waiting jobs']);
  const groupsNote = h('p', { class: 'muted' });
  const groupsSec = h('section', { 'aria-labelledby': 'sec-groups', class: 'card', hidden: true },
    h('h2', { id: 'sec-groups' }, 'Sharing between groups'), groupsNote, groupsT.el);
  const quotaBox = h('div', { class: 'quota-rows' });
  const events = timeline('compute-events', `Events of ${name}, newest first`, FIELD_NAMES);
  const usage = usagePanel('compute', name);

  main.append(crumbs, pageHeader(name, scaleBtn, deleteBtn), banner.el, errors,
    h('section', { 'aria-labelledby': 'sec-settings', class: 'card' }, h('h2', { id: 'sec-settings' }, 'Settings and state'), facts),
    h('section', { 'aria-labelledby': 'sec-chart', class: 'card' },
      h('div', { class: 'section-header' }, h('h2', { id: 'sec-chart' }, 'Node count'),
        h('div', { class: 'segmented', role: 'group', 'aria-label': 'Time window' }, windowBtns)),
      h('figure', {}, chartBox, legend(), chartCaption)),
    usage.el,
    groupsSec,
    h('div', { class: 'two-col' },
      h('section', { 'aria-labelledby': 'sec-nodes', class: 'card' }, h('h2', { id: 'sec-nodes' }, 'Nodes'), nodesT.el),
      h('section', { 'aria-labelledby': 'sec-quota', class: 'card' }, h('h2', { id: 'sec-quota' }, 'Quota'), quotaBox)),
    h('section', { 'aria-labelledby': 'sec-jobs', class: 'card' }, h('h2', { id: 'sec-jobs' }, 'Queued and running jobs'), jobsT.el),
    h('section', { 'aria-labelledby': 'sec-events', class: 'card' }, h('h2', { id: 'sec-events' }, 'Events'),
      h('p', { class: 'muted' }, 'The newest 50: resizes, nodes requested, ready, idle, leaving, removed, preempted or unusable, and why the cluster could not grow.'), events.el));

  // The chart's data: the server's samples (fetched once, then only the
  // newer ones) merged with what this page saw on each refresh.
  let hist = null;
  const serverSamples = [];
  const liveSamples = [];
  let lastState = null;
  let gone = false;

  function drawChart() {
    if (!current || !hist) return;
    const a = current.properties.properties || {};
    const c = a.nodeStateCounts || {};
    const serverNow = new Date(hist.now).getTime();
    const samples = [...serverSamples, ...liveSamples].sort((p, q) => p.time - q.time);
    if (!windowSec) {
      const span = samples.length ? (serverNow - samples[0].time) / 1000 : 0;
      windowSec = (WINDOWS.find(([sec]) => sec >= span) || WINDOWS[WINDOWS.length - 1])[0];
      for (const b of windowBtns) b.setAttribute('aria-pressed', String(b.textContent === WINDOWS.find(([sec]) => sec === windowSec)[1]));
    }
    const max = (a.scaleSettings || {}).maxNodeCount;
    const label = WINDOWS.find(([s]) => s === windowSec)[1];
    const peak = Math.max(0, ...samples.map((p) => (p.running || 0) + (p.idle || 0) + (p.preparing || 0) + (p.leaving || 0) + (p.unusable || 0) + (p.preempted || 0)));
    const title = `Nodes of ${name} over the last ${label}: now ${a.currentNodeCount || 0} ` +
      `(${c.runningNodeCount || 0} running, ${c.idleNodeCount || 0} idle, ${c.preparingNodeCount || 0} preparing), ` +
      `queued demand ${demandNow} node${demandNow === 1 ? '' : 's'}, peak ${peak}, maximum ${max}.`;
    replace(chartBox, nodeChart({ samples, now: serverNow, windowSec, maxNodes: max, title, width: chartBox.clientWidth }));
    chartCaption.textContent = title + ` Sampled every ${hist.everySeconds} s by the server; times in ${zoneName()}.`;
  }

  let demandNow = 0;

  // renderGroups shows where each fair-share group stands; the section is
  // hidden on a FIFO cluster.
  function renderGroups(fs, policy) {
    groupsSec.hidden = !fs;
    if (!fs) return;
    const unit = fs.unit === 'GPU' ? 'GPU' : 'node';
    groupsNote.textContent = `Usage is the ${unit} time each group's jobs held, halved every ${duration((isoSeconds(policy.usageHalfLife) ?? 86400) * 1000)}; ` +
      'a share is the nodes a group is entitled to: its weighted part of the maximum among the groups with work, no more than it asks for. ' +
      'The next job to start is one of the group furthest below its share.';
    syncTable(groupsT.tbody, fs.groups || [], {
      key: (g) => 'g:' + g.name, cols: 7, empty: 'No group has used or asked for the cluster yet.',
      sig: (g) => [g.weight, g.usageHours.toFixed(1), g.recentNodes.toFixed(1), g.nodes, g.share.toFixed(1), g.queuedJobs],
      cells: (g) => [
        g.display,
        String(g.weight),
        `${g.usageHours.toFixed(1)} ${unit}-h`,
        `${g.recentNodes.toFixed(1)} nodes`,
        String(g.nodes),
        [g.share.toFixed(1), g.nodes > g.share + 0.05 ? h('span', { class: 'muted' }, ' (over)') : null],
        g.queuedJobs ? `${g.queuedJobs} (${g.queuedNodes} node${g.queuedNodes === 1 ? '' : 's'})` : '0',
      ],
    });
  }

  async function refresh() {
    if (gone) return;
    let c;
    try {
      c = await api.getCompute(name);
    } catch (e) {
      if (e.status === 404) {
        gone = true;
        current = null;
        scaleBtn.disabled = deleteBtn.disabled = true;
        replace(errors, h('p', { class: 'banner banner-info' }, `Cluster ${name} no longer exists in workspace ${api.scope.workspace}. `,
          h('a', { href: '#/computes' }, 'Back to the compute clusters')));
        announce(`Cluster ${name} was deleted`);
        return;
      }
      throw e;
    }
    current = c;
    const a = c.properties.properties || {};
    const s = a.scaleSettings || {};
    scaleBtn.disabled = deleteBtn.disabled = c.properties.provisioningState === 'Deleting';
    if (lastState && lastState !== c.properties.provisioningState) announce(`Cluster ${name} is ${c.properties.provisioningState}`);
    lastState = c.properties.provisioningState;

    const [nodes, jobs, h0, usages, all, evs, , queue] = await Promise.all([
      api.listNodes(name).catch(() => []),
      // Only the jobs still to run or running: one small list per status.
      Promise.all(ACTIVE.map((st) => api.listJobs(st))).then((l) => l.flat()).catch(() => []),
      api.history(c.id, serverSamples.length ? { after: serverSamples[serverSamples.length - 1].t } : {}).catch(() => null),
      api.listUsages(c.properties.computeLocation || c.location).catch(() => []),
      sizes().catch(() => []),
      api.computeEvents(name).catch(() => null),
      computeUsage(name, '30m').then(usage.update).catch(() => {}),
      api.getQueue(name).catch(() => null),
    ]);
    if (evs) events.render(evs, 'No events yet: they start when the cluster first grows.');
    if (h0) {
      hist = h0;
      serverSamples.push(...h0.samples.map((p) => ({ ...p, time: new Date(p.t).getTime() })));
    }
    const size = all.find((x) => x.name === a.vmSize);
    const id = c.id.toLowerCase();
    const mine = jobs.filter((j) => (j.properties.computeId || '').toLowerCase() === id);
    // Running jobs first, then the queued ones in the scheduler's order.
    const place = new Map(((queue && queue.value) || []).map((e) => [e.name, e.position]));
    const rank = (j) => (j.properties.status === 'Queued' ? place.get(j.name) ?? 1e9 : 0);
    const active = mine.sort((x, y) => rank(x) - rank(y) ||
      String((x.systemData || {}).createdAt).localeCompare(String((y.systemData || {}).createdAt)));
    demandNow = active.filter((j) => j.properties.status === 'Queued')
      .reduce((n, j) => n + ((j.properties.resources || {}).instanceCount || 1), 0);

    const ident = c.identity ? c.identity.type : 'None';
    const cred = a.userAccountCredentials;
    const fact = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
    replace(facts,
      fact('State', stateCell(c)),
      fact('Size', [a.vmSize, size ? h('span', { class: 'muted' }, ` (${sizeSummary(size)}, family ${size.family})`) : null]),
      fact('Tier', tierText(a.vmPriority)),
      fact('Nodes', `${a.currentNodeCount ?? 0} now, target ${a.targetNodeCount ?? 0}, min ${s.minNodeCount ?? 0}, max ${s.maxNodeCount ?? '?'}`),
      fact('Node states', nodeStates(a.nodeStateCounts)),
      fact('Scale down after', duration((isoSeconds(s.nodeIdleTimeBeforeScaleDown) ?? 0) * 1000) + ' idle'),
      fact('Schedules', schedulesText(a.schedules, a.activeSchedule)),
      fact('Queue', queueText(a.queuePolicy)),
      fact('Location', c.properties.computeLocation || c.location),
      fact('Created', when(c.properties.createdOn)),
      fact('Description', c.properties.description || '—'),
      fact('Tags', tagsCell(c.tags)),
      fact('Identity', ident),
      fact('Remote login', remoteLoginText(a.remoteLoginPortPublicAccess, cred)),
      fact('Subnet', a.subnet ? a.subnet.id : '—'),
      fact('Network isolation', a.networkIsolation || '—'));
    const errs = errorsOf(c);
    replace(errors, errs.length ? h('ul', { class: 'banner banner-warn' }, errs.map((e) => h('li', {}, h('strong', {}, e.code + ': '), humanize(e.message, FIELD_NAMES)))) : null);

    const times = new Map(((hist && hist.nodes) || []).map((n) => [n.nodeId, n]));
    const serverNow = hist ? new Date(hist.now).getTime() : Date.now();
    syncTable(nodesT.tbody, nodes, {
      key: (n) => n.nodeId, cols: 7, empty: 'No nodes: the cluster grows when jobs are queued.',
      sig: (n) => [n, Math.floor(serverNow / 5000)],
      cells: (n) => {
        const t = times.get(n.nodeId);
        return [
          h('code', { class: 'node-id' }, n.nodeId),
          badge(n.nodeState),
          n.privateIpAddress ? `${n.privateIpAddress}${n.port ? ':' + n.port : ''}` : '—',
          n.runId ? jobLink(n, mine) : h('span', { class: 'muted' }, '—'),
          n.gpus && n.gpus.length ? h('code', { class: 'node-gpus' }, n.gpus.join(', ')) : h('span', { class: 'muted' }, '—'),
          t ? duration(serverNow - new Date(t.created).getTime()) : '—',
          t && t.idleSince ? duration(serverNow - new Date(t.idleSince).getTime()) : '—',
        ];
      },
    });
    syncTable(jobsT.tbody, active, {
      key: (j) => j.name, cols: 8, empty: 'No queued or running jobs.',
      sig: (j) => [j.properties.status, j.properties.statusMessage, j.properties.startTime, place.get(j.name), j.properties.fairShareGroup],
      cells: (j) => [
        h('a', { href: '#/jobs/' + encodeURIComponent(j.name) }, j.properties.displayName || j.name),
        badge(j.properties.status),
        j.properties.status === 'Queued' && place.has(j.name) ? String(place.get(j.name)) : '—',
        j.properties.fairShareGroup == null ? '—' : groupName(j.properties.fairShareGroup, a.queuePolicy),
        String((j.properties.resources || {}).instanceCount || 1),
        ago(j.systemData && j.systemData.createdAt),
        j.properties.startTime ? duration(Date.now() - new Date(j.properties.startTime).getTime()) : '—',
        j.properties.statusMessage || '',
      ],
    });
    renderGroups(a.fairShare, a.queuePolicy);
    renderQuota(quotaBox, usages, size, a.vmPriority);
    if (hist) {
      // What this page sees now is a sample too, at the server's time.
      const n = a.nodeStateCounts || {};
      const now = new Date(hist.now).getTime();
      liveSamples.push({ time: now, running: n.runningNodeCount, idle: n.idleNodeCount, preparing: n.preparingNodeCount,
        leaving: n.leavingNodeCount, unusable: n.unusableNodeCount, preempted: n.preemptedNodeCount, queued: demandNow });
      for (const arr of [serverSamples, liveSamples]) {
        while (arr.length && arr[0].time < now - KEEP_MS) arr.shift();
      }
    }
    drawChart();
  }
  return { refresh, setError: banner.set };
}

// queueText says a cluster's queue policy in words.
function queueText(p) {
  if (!p || p.kind !== 'FairShare') {
    const pre = p && p.preemption === 'LowerPriority' ? `; a waiting job preempts jobs of lower priority after ${duration((isoSeconds(p.minRuntime) ?? 600) * 1000)}` : '';
    return 'first come, first served (by priority)' + pre;
  }
  const by = p.fairShareBy === 'principal' ? 'the principal that submits' : `tag ${p.fairShareBy.slice(4)}`;
  const w = Object.entries(p.weights || {}).map(([g, x]) => `${g} ${x}`).join(', ');
  const pre = { None: '', LowerPriority: '; a waiting job preempts jobs of lower priority', OverShare: '; a group under its share preempts the groups over theirs' }[p.preemption] || '';
  const after = pre ? ` after ${duration((isoSeconds(p.minRuntime) ?? 600) * 1000)}` : '';
  return `fair share by ${by}` + (w ? ` (weights: ${w})` : '') + pre + after;
}

// groupName names a fair-share group: the jobs without the grouping tag
// are a group too.
function groupName(g, p) {
  if (g !== '') return g;
  return p && p.fairShareBy && p.fairShareBy.startsWith('tag:') ? `(no ${p.fairShareBy.slice(4)} tag)` : '(unknown principal)';
}

// remoteLoginText says whether the nodes' SSH port is public, in words.
// The server opens it only when asked (Enabled); NotSpecified keeps it
// closed, as Disabled does.
function remoteLoginText(access, cred) {
  const admin = cred && cred.adminUserName ? `; admin user ${cred.adminUserName}` : '';
  if (access === 'Enabled') return 'SSH port open to the network' + admin;
  return (access === 'Disabled' ? 'SSH port closed' : 'SSH port closed (not requested)') + admin;
}

// jobLink finds the job a node runs: listNodes gives the run's internal
// id, the job's attempts name their nodes.
function jobLink(node, jobs) {
  const j = jobs.find((x) => {
    const at = x.properties.attempts || [];
    return !['Completed', 'Failed', 'Canceled'].includes(x.properties.status) && at.length && (at[at.length - 1].nodes || []).includes(node.nodeId);
  });
  if (!j) return h('code', {}, nameFromId(node.runId));
  return h('a', { href: '#/jobs/' + encodeURIComponent(j.name) }, j.properties.displayName || j.name);
}

// renderQuota shows the usage rows that bound this cluster: its family
// (dedicated), or the low-priority pool, and the regional total.
export function renderQuota(box, usages, size, priority) {
  const rows = [];
  if (priority === 'LowPriority') {
    rows.push(...usages.filter((u) => u.type.endsWith('/lowPriorityCores/usages')));
  } else {
    if (size) rows.push(...usages.filter((u) => u.type.endsWith('/vmFamily/usages') && u.name.value.toLowerCase() === size.family.toLowerCase()));
    rows.push(...usages.filter((u) => u.type.endsWith('/dedicatedCores/usages')));
  }
  if (size && priority !== 'LowPriority' && !rows.some((u) => u.type.endsWith('/vmFamily/usages'))) {
    rows.unshift({ name: { value: size.family, localizedValue: size.family + ' (no nodes yet)' }, currentValue: 0, limit: null });
  }
  replace(box, rows.length ? rows.map(usageMeter) : h('p', { class: 'muted' }, 'No quota information.'));
}

export function usageMeter(u) {
  const id = 'm-' + u.name.value.replace(/[^A-Za-z0-9]/g, '');
  const limit = u.limit;
  const pct = limit ? Math.round((100 * u.currentValue) / limit) : 0;
  return h('div', { class: 'usage' },
    h('label', { for: id }, u.name.localizedValue || u.name.value),
    h('meter', { id, min: '0', max: String(limit || 1), value: String(u.currentValue), low: String((limit || 1) * 0.7), high: String((limit || 1) * 0.9), optimum: '0' }),
    h('span', { class: 'usage-text' }, limit === null || limit === undefined ? `${u.currentValue} cores` : `${u.currentValue} of ${limit} cores (${pct}%)`));
}

// schedulesText lists a cluster's scaling schedule and says which entry is
// in force: "nights (0 20 * * 1-5 Europe/Berlin: max 0), mornings (…:
// restore) — in force: nights since …, next change … (mornings)".
function schedulesText(list, active) {
  if (!list || list.length === 0) return '—';
  const what = (e) => {
    if (e.restore) return 'restore';
    const parts = [];
    if (e.minNodeCount != null) parts.push(`min ${e.minNodeCount}`);
    if (e.maxNodeCount != null) parts.push(`max ${e.maxNodeCount}`);
    return parts.join(', ');
  };
  const out = [list.map((e) => `${e.name} (${e.cron} ${e.timeZone || 'UTC'}: ${what(e)})`).join(', ')];
  if (active) {
    out.push(` — in force: ${active.name} (min ${active.minNodeCount}, max ${active.maxNodeCount}) since `, when(active.since));
    if (active.nextChange) out.push(', next change ', when(active.nextChange), ` (${active.nextSchedule})`);
  } else {
    out.push(' — none has fired yet: the scale settings apply');
  }
  return out;
}
