// A job's outputs and logs as files, on its page: folders to open, each
// file to read in the page or download on its own. An output is the
// tar.gz the job's node uploaded (./outputs, and each named output),
// unpacked here in the browser; the logs are those of each attempt and
// node rank.
import * as api from './api.js';
import { h, replace, syncTable, table, plural } from './dom.js';
import { terminal } from './jobs.js';

const KEEP_FILE = 2 << 20; // a file up to this size is kept when an output is read
const KEEP_ALL = 64 << 20; // and the files kept of one output, in all
const SHOW = 512 << 10; // what the viewer shows of a file
const MAX_LOG = 64 << 20; // a log read whole for the viewer or a download

// size writes bytes for people: "812 B", "4.2 KiB".
export function size(n) {
  if (n === undefined || n === null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// folder and file are the tree's nodes. A folder's children may come
// later: load() fills them (an output's archive, an attempt's logs).
const folder = (name, load) => ({ kind: 'folder', name, children: load ? null : new Map(), load });
const file = (name, bytes, get, extra = {}) => ({ kind: 'file', name, size: bytes, get, ...extra });

// bytesReader reads exact counts from a stream.
function bytesReader(stream) {
  const reader = stream.getReader();
  let buf = new Uint8Array(0);
  let done = false;
  async function fill(n) {
    while (buf.length < n && !done) {
      const r = await reader.read();
      if (r.done) { done = true; break; }
      const next = new Uint8Array(buf.length + r.value.length);
      next.set(buf);
      next.set(r.value, buf.length);
      buf = next;
    }
  }
  return {
    async read(n) {
      await fill(n);
      if (buf.length < n) return null;
      const out = buf.slice(0, n);
      buf = buf.subarray(n);
      return out;
    },
    async skip(n) {
      while (n > 0) {
        await fill(Math.min(n, 1 << 20));
        if (!buf.length) return;
        const k = Math.min(n, buf.length);
        buf = buf.subarray(k);
        n -= k;
      }
    },
    cancel() { reader.cancel().catch(() => {}); },
  };
}

const text = (b) => new TextDecoder().decode(b);
const cstr = (b) => { const i = b.indexOf(0); return text(i < 0 ? b : b.subarray(0, i)); };
function octal(b) {
  if (b[0] & 0x80) { // base-256, for sizes past 8 GiB
    let n = 0;
    for (let i = 1; i < b.length; i++) n = n * 256 + b[i];
    return n;
  }
  return parseInt(cstr(b).trim() || '0', 8);
}

// untar walks a tar.gz stream: onEntry({path, type, size, data}) for each
// entry, data only when keep(size) says so (else the bytes are skipped).
export async function untar(stream, onEntry, keep) {
  const r = bytesReader(stream.pipeThrough(new DecompressionStream('gzip')));
  let pax = {};
  let longName = null;
  try {
    for (;;) {
      const hdr = await r.read(512);
      if (!hdr || hdr.every((x) => x === 0)) return;
      const type = String.fromCharCode(hdr[156] || 48);
      let path = cstr(hdr.subarray(0, 100));
      const prefix = text(hdr.subarray(257, 262)) === 'ustar' ? cstr(hdr.subarray(345, 500)) : '';
      if (prefix) path = prefix + '/' + path;
      let n = octal(hdr.subarray(124, 136));
      const padded = Math.ceil(n / 512) * 512;
      if (type === 'x' || type === 'g' || type === 'L') {
        const data = await r.read(padded);
        if (!data) return;
        if (type === 'L') longName = cstr(data.subarray(0, n));
        if (type === 'x') pax = paxRecords(text(data.subarray(0, n)));
        continue;
      }
      if (pax.path) path = pax.path;
      if (longName) path = longName;
      if (pax.size) n = Number(pax.size);
      pax = {};
      longName = null;
      const entry = { path: path.replace(/^\.\//, ''), type: type === '5' ? 'dir' : (type === '0' || type === '\0' || type === '7' ? 'file' : 'other'), size: n };
      const size = Math.ceil(n / 512) * 512;
      if (entry.type === 'file' && keep(n)) {
        const data = await r.read(size);
        if (!data) return;
        entry.data = data.subarray(0, n);
      } else {
        await r.skip(size);
      }
      if (onEntry(entry) === false) return;
    }
  } finally {
    r.cancel();
  }
}

function paxRecords(s) {
  const out = {};
  let i = 0;
  while (i < s.length) {
    const sp = s.indexOf(' ', i);
    if (sp < 0) break;
    const len = Number(s.slice(i, sp));
    if (!len) break;
    const rec = s.slice(sp + 1, i + len - 1);
    const eq = rec.indexOf('=');
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    i += len;
  }
  return out;
}

async function fetchOutput(job, output) {
  const r = await fetch(api.outputURL(job, output), { credentials: 'same-origin', cache: 'no-store' });
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(`output ${output}: ${r.status} ${r.statusText}`);
  return r.body;
}

// outputFolder is an output's archive as a folder, read when opened.
function outputFolder(job, output) {
  return folder(output, async (self) => {
    const body = await fetchOutput(job, output);
    self.children = new Map();
    if (!body) { self.note = 'This output has no files.'; return; }
    let kept = 0;
    await untar(body, (e) => {
      const parts = e.path.split('/').filter(Boolean);
      if (!parts.length) return;
      let dir = self;
      for (const p of parts.slice(0, e.type === 'dir' ? parts.length : -1)) {
        if (!dir.children.has(p)) dir.children.set(p, folder(p));
        dir = dir.children.get(p);
      }
      if (e.type === 'dir') return;
      const name = parts[parts.length - 1];
      if (e.data) kept += e.data.length;
      dir.children.set(name, file(name, e.size, e.data ? async () => e.data : async () => extract(job, output, e.path), { link: e.type === 'other' }));
    }, (n) => n <= KEEP_FILE && kept + n <= KEEP_ALL);
  });
}

// extract reads one file of an output again, for one too big to keep.
async function extract(job, output, path) {
  const body = await fetchOutput(job, output);
  let found = null;
  if (body) await untar(body, (e) => { if (e.path === path) { found = e.data; return false; } return true; }, () => true);
  if (!found) throw new Error(`${path} is no longer in output ${output}`);
  return found;
}

// logsFolder lists an attempt's logs: a file per node rank.
function attemptFolder(job, attempt) {
  return folder(`attempt ${attempt}`, async (self) => {
    const end = Number.MAX_SAFE_INTEGER;
    const first = await api.jobLog(job, { attempt, rank: 0, offset: end });
    self.children = new Map();
    for (const rank of (first.ranks && first.ranks.length ? first.ranks : [0])) {
      const c = rank === 0 ? first : await api.jobLog(job, { attempt, rank, offset: end });
      const name = `rank-${rank}.log`;
      self.children.set(name, file(name, c.size, () => readLog(job, attempt, rank)));
    }
  });
}

async function readLog(job, attempt, rank) {
  const parts = [];
  let offset = 0, got = 0;
  for (;;) {
    const c = await api.jobLog(job, { attempt, rank, offset });
    if (!c.content) break;
    const b = new TextEncoder().encode(c.content);
    parts.push(b);
    got += b.length;
    offset += c.content.length ? Math.min(1 << 20, c.size - c.offset) : 0;
    if (offset >= c.size || got >= MAX_LOG) break;
  }
  const out = new Uint8Array(got);
  let i = 0;
  for (const p of parts) { out.set(p, i); i += p.length; }
  return out;
}

// isText says whether bytes read as UTF-8 text (no NUL in the start).
function isText(b) {
  const head = b.subarray(0, 64 << 10);
  if (head.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head.length < b.length ? head.subarray(0, head.length - 4) : head);
    return true;
  } catch {
    return false;
  }
}

// filesPanel is the job page's Files card.
export function filesPanel(name) {
  const crumbs = h('nav', { class: 'crumbs files-path', id: 'files-path', 'aria-label': 'Folder' });
  const note = h('p', { class: 'muted', id: 'files-note', 'aria-live': 'polite' });
  const t = table('Files of the folder', ['Name', 'Size'], 'files');
  const viewTitle = h('h3', { id: 'file-view-title' });
  const viewInfo = h('p', { class: 'muted', id: 'file-view-info' });
  const viewPre = h('pre', { class: 'log file-view', id: 'file-view', tabindex: '0', 'aria-labelledby': 'file-view-title' });
  const viewer = h('div', { class: 'file-viewer', hidden: true }, viewTitle, viewInfo, viewPre);
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-files' },
    h('h2', { id: 'sec-files' }, 'Files'),
    h('p', { class: 'help' }, 'What the job wrote to ', h('code', {}, './outputs'), ' (collected when it ends, as in Azure ML) and its logs, as files.'),
    crumbs, note, t.el, viewer);
  const root = folder('Files');
  root.children.set('outputs', folder('outputs'));
  root.children.set('logs', folder('logs'));
  let path = []; // names from the root to the folder in view
  let blobURL = null;
  let shownSig = '';

  const at = (names) => names.reduce((f, n) => (f && f.children ? f.children.get(n) : null), root);

  async function open(names) {
    const f = at(names);
    if (!f) return;
    path = names;
    if (!f.children && f.load) {
      note.textContent = `Reading ${names.join('/')}…`;
      try {
        await f.load(f);
      } catch (e) {
        f.children = null;
        note.textContent = e.message;
        return;
      }
    }
    draw();
  }

  function draw() {
    const f = at(path);
    replace(crumbs, [root.name, ...path].map((n, i) => {
      const last = i === path.length;
      return [i ? h('span', { 'aria-hidden': 'true' }, ' / ') : null,
        last ? h('span', { 'aria-current': 'location' }, n) : h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); open(path.slice(0, i)); } }, n)];
    }));
    const items = [...(f.children || new Map()).values()].sort((a, b) => (a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind === 'folder' ? -1 : 1));
    note.textContent = f.note || (items.length ? plural('item', items.length) : 'Empty.');
    syncTable(t.tbody, items, {
      key: (x) => x.kind + ':' + x.name, cols: 2, empty: f.note || 'Empty.',
      sig: (x) => [x.kind, x.name, x.size, x.children ? x.children.size : null, path],
      cells: (x) => [
        x.kind === 'folder'
          ? h('button', { type: 'button', class: 'linklike folder', onclick: () => open([...path, x.name]) }, x.name + '/')
          : h('button', { type: 'button', class: 'linklike file', onclick: () => view([...path, x.name]) }, x.name),
        x.kind === 'folder' ? (x.children ? plural('item', x.children.size) : '—') : size(x.size),
      ],
    });
  }

  async function view(names) {
    const f = at(names);
    if (!f) return;
    viewer.hidden = false;
    viewTitle.textContent = names.join('/');
    viewInfo.textContent = 'Reading…';
    viewPre.textContent = '';
    let data;
    try {
      data = await f.get();
    } catch (e) {
      viewInfo.textContent = e.message;
      return;
    }
    if (blobURL) URL.revokeObjectURL(blobURL);
    blobURL = URL.createObjectURL(new Blob([data]));
    const dl = h('a', { href: blobURL, download: f.name, id: 'file-download' }, `Download ${f.name}`);
    if (isText(data)) {
      viewPre.textContent = text(data.subarray(0, SHOW));
      replace(viewInfo, `${size(data.length)}${data.length > SHOW ? `; the first ${size(SHOW)} shown` : ''}. `, dl);
    } else {
      viewPre.textContent = '';
      replace(viewInfo, `${size(data.length)} of binary data. `, dl);
    }
    viewPre.focus({ preventScroll: true });
  }

  // update follows the job: its outputs once it ended, a folder per
  // attempt of its logs.
  function update(j) {
    const p = j.properties;
    const outs = root.children.get('outputs');
    const logs = root.children.get('logs');
    const ended = terminal(p.status);
    const names = ['default', ...Object.keys(p.outputs || {}).filter((n) => n !== 'default' && n !== 'checkpoint')];
    const attempts = (p.attempts || []).map((a) => a.attempt);
    const sig = JSON.stringify([ended, names, attempts]);
    if (sig === shownSig) return;
    shownSig = sig;
    outs.note = ended ? '' : 'Outputs are uploaded when the job ends.';
    if (ended) for (const n of names) if (!outs.children.has(n)) outs.children.set(n, outputFolder(name, n));
    // An attempt's logs (which ranks, how big) are read again when opened
    // after a change of the job.
    for (const a of attempts) logs.children.set(`attempt ${a}`, attemptFolder(name, a));
    logs.note = attempts.length ? '' : 'No attempt has run yet.';
    const inView = at(path);
    if (!inView) open([]);
    else if (!inView.children && inView.load) open(path);
    else draw();
  }

  draw();
  return { el, update, open, dispose: () => { if (blobURL) URL.revokeObjectURL(blobURL); } };
}
