// A job's page: parameters, status history, attempts (with preemption
// reasons), outputs to download, and the log, streamed while it runs.
import * as api from './api.js';
import { h, replace, badge, pageHeader, errorBanner, syncTable, table, duration, when, nameFromId, announce, toast, openDialog, isoSeconds, plural } from './dom.js';
import { terminal, jobDuration } from './jobs.js';
import { timeline } from './events.js';
import { usagePanel, jobUsage } from './usage.js';
import { metricsPanel, sweepPanel } from './sweep.js';
import { filesPanel } from './files.js';
import { pipelinePanel, parallelPanel } from './pipeline.js';
import { dataPanel } from './jobdata.js';

const MAX_LOG = 2 << 20; // characters kept in the page
const USAGE_TAIL_MS = 20000; // how long after its end a job's samples are read again

export function render(main, [name]) {
  const banner = errorBanner();
  const cancelBtn = h('button', { type: 'button', class: 'secondary', hidden: true }, 'Cancel job');
  const deleteBtn = h('button', { type: 'button', class: 'danger-outline', hidden: true }, 'Delete job');
  const crumbs = h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ', name);
  const statusLine = h('div', { class: 'status-line', id: 'job-status-line', role: 'status', 'aria-live': 'polite' });
  const params = h('dl', { class: 'facts' });
  const envBox = h('div');
  const history = timeline('job-events', `Status history of ${name}, newest first`);
  const attemptsT = table('Attempts of the job', ['Attempt', 'Nodes', 'Started', 'Ended', 'Exit code', 'Reason']);
  const outputsBox = h('div', { id: 'job-outputs' });
  const usage = usagePanel('job', name);
  const sweep = sweepPanel(name);
  const steps = pipelinePanel(name);
  const batches = parallelPanel(name);
  const metrics = metricsPanel(name);
  const files = filesPanel(name);
  const data = dataPanel();

  // Log viewer.
  const attemptSel = h('select', { id: 'log-attempt' }, h('option', { value: '' }, 'Latest'));
  const rankSel = h('select', { id: 'log-rank' }, h('option', { value: '0' }, '0'));
  const follow = h('input', { type: 'checkbox', id: 'log-follow', checked: true });
  const logState = h('p', { class: 'muted', id: 'log-state' });
  const pre = h('pre', { class: 'log', id: 'job-log', tabindex: '0', 'aria-labelledby': 'sec-log', 'aria-describedby': 'log-state' });
  const logControls = h('div', { class: 'log-controls' },
    h('div', { class: 'field inline-field' }, h('label', { for: 'log-attempt' }, 'Attempt'), attemptSel),
    h('div', { class: 'field inline-field' }, h('label', { for: 'log-rank' }, 'Node rank'), rankSel),
    h('div', { class: 'field inline-field check' }, h('label', { for: 'log-follow' }, follow, ' Follow the end')));

  main.append(crumbs, pageHeader(name, cancelBtn, deleteBtn), banner.el, statusLine,
    h('div', { class: 'two-col' },
      h('section', { class: 'card', 'aria-labelledby': 'sec-params' }, h('h2', { id: 'sec-params' }, 'Parameters'), params, envBox),
      h('section', { class: 'card', 'aria-labelledby': 'sec-history' }, h('h2', { id: 'sec-history' }, 'Status history'), history.el,
        h('h2', { id: 'sec-outputs' }, 'Outputs'), outputsBox)),
    steps.el, batches.el, data.el, sweep.el, metrics.el,
    h('section', { class: 'card', 'aria-labelledby': 'sec-attempts' }, h('h2', { id: 'sec-attempts' }, 'Attempts'), attemptsT.el),
    usage.el, files.el,
    h('section', { class: 'card', 'aria-labelledby': 'sec-log' }, h('div', { class: 'section-header' }, h('h2', { id: 'sec-log' }, 'Log'), logControls), logState, pre));

  let job = null;
  let gone = false;
  const log = { attempt: null, rank: 0, offset: 0, size: 0, done: false, shownAttempt: null, ranks: [0] };

  function resetLog() {
    log.offset = 0;
    log.size = 0;
    log.done = false;
    pre.textContent = '';
  }
  attemptSel.addEventListener('change', () => { log.attempt = attemptSel.value === '' ? null : Number(attemptSel.value); resetLog(); pollLog(); });
  rankSel.addEventListener('change', () => { log.rank = Number(rankSel.value); resetLog(); pollLog(); });
  follow.addEventListener('change', () => { if (follow.checked) pre.scrollTop = pre.scrollHeight; });

  cancelBtn.addEventListener('click', async () => {
    cancelBtn.disabled = true;
    try {
      await api.cancelJob(name);
      toast(`Canceling job ${name}`);
      announce(`Canceling job ${name}`);
    } catch (e) {
      toast(e.message, 'error');
    } finally {
      cancelBtn.disabled = false;
    }
  });
  deleteBtn.addEventListener('click', () => confirmDelete(name));

  let polling = false;
  async function pollLog() {
    if (polling || !job) return;
    polling = true;
    try {
      for (let i = 0; i < 8; i++) {
        const chunk = await api.jobLog(name, { attempt: log.attempt, rank: log.rank, offset: log.offset });
        if (log.attempt === null && log.shownAttempt !== null && chunk.attempt !== log.shownAttempt) {
          // A new attempt started: follow it from its beginning.
          log.shownAttempt = chunk.attempt;
          resetLog();
          continue;
        }
        log.shownAttempt = chunk.attempt;
        updateRanks(chunk.ranks || []);
        if (chunk.content) {
          pre.append(document.createTextNode(chunk.content));
          if (pre.textContent.length > MAX_LOG) pre.textContent = '… earlier output trimmed …\n' + pre.textContent.slice(-MAX_LOG);
          if (follow.checked) pre.scrollTop = pre.scrollHeight;
        }
        // The server sends min(1 MiB, size - offset) bytes from the offset.
        log.offset = chunk.offset + Math.max(0, Math.min(1 << 20, chunk.size - chunk.offset));
        log.size = chunk.size;
        const ended = terminal(chunk.status);
        log.done = ended && log.offset >= chunk.size;
        logState.textContent = ended
          ? `The job ended (${chunk.status}); the log of attempt ${chunk.attempt}, rank ${log.rank} is complete (${chunk.size} bytes).`
          : (chunk.size ? `Streaming live: attempt ${chunk.attempt}, rank ${log.rank}, ${chunk.size} bytes so far.` : `Waiting for output (${chunk.status})…`);
        if (!chunk.content || log.offset >= chunk.size) break;
      }
      if (!pre.textContent && log.done) pre.textContent = '(no output)';
    } finally {
      polling = false;
    }
  }

  function updateRanks(ranks) {
    const want = ranks.length ? ranks : [0];
    if (JSON.stringify(want) === JSON.stringify(log.ranks)) return;
    log.ranks = want;
    replace(rankSel, want.map((r) => h('option', { value: String(r), selected: r === log.rank }, String(r))));
  }

  async function refresh() {
    if (gone) return;
    let j;
    try {
      j = await api.getJob(name);
    } catch (e) {
      if (e.status === 404) {
        gone = true;
        replace(statusLine, h('p', { class: 'banner banner-info' }, `Job ${name} no longer exists. `, h('a', { href: '#/jobs' }, 'Back to the jobs')));
        cancelBtn.hidden = deleteBtn.hidden = true;
        return;
      }
      throw e;
    }
    const prev = job;
    job = j;
    const p = j.properties;
    if (prev && prev.properties.status !== p.status) announce(`Job ${name} is ${p.status}`);
    cancelBtn.hidden = terminal(p.status) || p.status === 'CancelRequested';
    deleteBtn.hidden = !terminal(p.status);
    replace(statusLine, badge(p.status), ' ', h('span', { id: 'job-status-text' }, p.status),
      p.statusMessage ? h('span', { class: 'status-message' }, ' — ' + p.statusMessage) : null,
      h('span', { class: 'muted' }, ` · ${p.startTime ? 'ran ' + jobDuration(j) : 'not started yet'}`));
    renderParams(j);
    data.update(j);
    await renderHistory(p);
    renderAttempts(p);
    renderOutputs(j);
    await sweep.update(j).catch((e) => banner.set(e.message));
    steps.update(j);
    batches.update(j);
    // A sweep or a pipeline runs no command of its own: its trials or
    // steps have the attempts, utilization and logs.
    const isSweep = ['sweep', 'pipeline'].includes((p.jobType || '').toLowerCase());
    main.querySelectorAll('section[aria-labelledby="sec-attempts"], section[aria-labelledby="sec-log"], section[aria-labelledby="sec-files"]').forEach((el) => { el.hidden = isSweep; });
    if (!isSweep) files.update(j);
    if (isSweep) usage.el.hidden = true;
    await metrics.update(j).catch((e) => banner.set(e.message));
    if (p.startTime && !usage.done) {
      await jobUsage(name).then((samples) => usage.update(samples, j)).catch(() => {});
      // Samples come while the job runs, and its node reports the last
      // ones after the job ended: keep reading for a while after the end
      // (the server's time, compared with the browser's clock), then stop.
      usage.done = terminal(p.status) && (!p.endTime || Date.now() - new Date(p.endTime).getTime() > USAGE_TAIL_MS);
    }
    if (!log.done || log.attempt === null && log.shownAttempt !== null && (p.attempts || []).length && p.attempts[p.attempts.length - 1].attempt !== log.shownAttempt) {
      await pollLog();
    }
  }

  function renderParams(j) {
    const p = j.properties;
    const fact = (k, v) => (v === undefined || v === null || v === '' ? null : [h('dt', {}, k), h('dd', {}, v)]);
    const compute = nameFromId(p.computeId);
    const timeout = p.limits && p.limits.timeout ? duration((isoSeconds(p.limits.timeout) || 0) * 1000) : null;
    const dist = p.distribution ? `${p.distribution.distributionType}${p.distribution.processCountPerInstance ? ', ' + plural('process', p.distribution.processCountPerInstance, 'processes') + ' per node' : ''}` : null;
    const kind = (p.jobType || '').toLowerCase();
    const task = p.task || {};
    replace(params,
      fact('Display name', p.displayName),
      fact('Compute', compute ? h('a', { href: '#/computes/' + encodeURIComponent(compute) }, compute) : null),
      kind === 'pipeline' ? null : kind === 'parallel'
        ? [fact('Entry script', h('code', {}, task.entry_script)), fact('Arguments', task.program_arguments ? h('pre', { class: 'command' }, task.program_arguments) : null)]
        : fact(p.trial ? 'Trial command' : 'Command', h('pre', { class: 'command' }, p.command || (p.trial || {}).command)),
      fact('Environment', p.environmentId),
      fact('Code', p.codeId ? h('code', { title: p.codeId }, nameFromId(p.codeId).slice(0, 12) + '…') : null),
      kind === 'pipeline' ? fact('Steps', String(Object.keys(p.jobs || {}).length)) : fact('Nodes', String((p.resources || {}).instanceCount || 1)),
      fact('Distribution', dist),
      fact('Timeout', timeout),
      fact('Priority', p.priority ? String(p.priority) : null),
      fact('Experiment', p.experimentName),
      fact('Description', p.description),
      fact('Tags', Object.keys(p.tags || {}).length ? Object.entries(p.tags).map(([k, v]) => `${k}=${v}`).join(', ') : null),
      fact('Submitted', when(j.systemData && j.systemData.createdAt)),
      fact('Started', p.startTime ? when(p.startTime) : null),
      fact('Ended', p.endTime ? when(p.endTime) : null));
    const env = Object.entries(p.environmentVariables || {});
    replace(envBox,
      env.length ? kvTable('Environment variables', env.map(([k, v]) => [k, v])) : null,
      p.environmentNote ? h('p', { class: 'help', id: 'environment-note' }, p.environmentNote) : null);
  }

  // The history from the events API (each status change with its
  // attempt and nodes), read again only when the job has a new entry.
  let seen = -1;
  async function renderHistory(p) {
    const n = (p.statusHistory || []).length;
    if (n === seen) return;
    const evs = await api.jobEvents(name).catch(() => null);
    if (!evs) return;
    seen = n;
    history.render(evs, 'No status changes yet.');
  }

  function renderAttempts(p) {
    const at = p.attempts || [];
    syncTable(attemptsT.tbody, at, {
      key: (a) => String(a.attempt), cols: 6, empty: 'Not started yet.',
      cells: (a) => [
        String(a.attempt),
        h('span', { class: 'node-list' }, (a.nodes || []).map((n) => h('code', {}, n))),
        when(a.started),
        a.ended ? when(a.ended) : (a.started ? 'running' : '—'),
        a.exitCode === undefined || a.exitCode === null ? '—' : String(a.exitCode),
        a.reason ? h('span', { class: /preempt/i.test(a.reason) ? 'reason preempted' : 'reason' }, a.reason) : '—',
      ],
    });
    const want = ['', ...at.map((a) => String(a.attempt))];
    const have = [...attemptSel.options].map((o) => o.value);
    if (JSON.stringify(want) !== JSON.stringify(have)) {
      const keep = attemptSel.value;
      replace(attemptSel, want.map((v) => h('option', { value: v, selected: v === keep }, v === '' ? 'Latest' : v)));
    }
  }

  function renderOutputs(j) {
    const p = j.properties;
    if (!terminal(p.status)) {
      replace(outputsBox, h('p', { class: 'muted' }, 'Outputs are uploaded when the job ends.'));
      return;
    }
    const isPipeline = (p.jobType || '').toLowerCase() === 'pipeline'; // its outputs are its steps'
    const names = [...(isPipeline ? [] : ['default']), ...Object.keys(p.outputs || {}).filter((n) => n !== 'default')];
    if (!names.length) {
      replace(outputsBox, h('p', { class: 'muted' }, 'No outputs: its steps have theirs.'));
      return;
    }
    if (outputsBox.dataset.names === names.join(',')) return;
    outputsBox.dataset.names = names.join(',');
    replace(outputsBox, h('ul', { class: 'outputs' }, names.map((n) => h('li', {},
      h('a', { href: api.outputURL(name, n), download: `${name}-${n}.tar.gz` }, `Download ${n}`),
      h('span', { class: 'muted' }, n === 'default' ? ' ($CUMULUS_OUTPUT_DIR, tar.gz)' : ' (tar.gz)')))));
  }

  return { refresh, setError: banner.set, dispose: () => { metrics.dispose(); files.dispose(); } };
}

function kvTable(caption, rows) {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'kv' }, h('caption', {}, caption),
    h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, h('code', {}, v)))))));
}

function confirmDelete(name) {
  const cancel = h('button', { type: 'button', class: 'secondary', autofocus: true }, 'Cancel');
  const ok = h('button', { type: 'submit', class: 'danger' }, 'Delete job');
  const err = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  const form = h('form', { method: 'dialog', class: 'stack' }, err,
    h('p', { id: 'job-delete-desc' }, `Job ${name}, its logs and its outputs will be deleted. This cannot be undone.`),
    h('div', { class: 'dialog-actions' }, cancel, ok));
  const dialog = h('dialog', { class: 'dialog', role: 'alertdialog', 'aria-labelledby': 'job-delete-title', 'aria-describedby': 'job-delete-desc' },
    h('h2', { id: 'job-delete-title' }, `Delete job ${name}?`), form);
  cancel.addEventListener('click', () => dialog.close());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api.deleteJob(name);
      dialog.close();
      toast(`Job ${name} deleted`);
      location.hash = '#/jobs';
    } catch (e) {
      err.textContent = e.message;
      err.hidden = false;
    }
  });
  openDialog(dialog);
}
