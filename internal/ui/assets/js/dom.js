// Small DOM and formatting helpers shared by the pages.

// h builds an element: h('a', {href: '#/x', class: 'y'}, 'text', child).
// Attributes starting with "on" become listeners; true/false toggle
// boolean attributes; null and undefined are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.className = v;
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// replace swaps an element's children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// announce says something to screen readers through the live region.
export function announce(text) {
  const el = document.getElementById('announcer');
  if (!el) return;
  el.textContent = '';
  setTimeout(() => { el.textContent = text; }, 30);
}

let toastTimer;
// toast shows a short message at the bottom of the page.
export function toast(text, kind = 'info') {
  const el = document.getElementById('toast');
  el.textContent = text;
  el.className = 'toast toast-' + kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

// ago renders how long ago a time was: "12 s ago", "3 min ago".
export function ago(t, now = Date.now()) {
  if (!t) return '—';
  const ms = now - new Date(t).getTime();
  return duration(Math.max(0, ms)) + ' ago';
}

// duration renders milliseconds for people: "45 s", "3 min 5 s", "2 h 10 min".
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + ' h' + (m % 60 ? ' ' + (m % 60) + ' min' : '');
  return Math.floor(hr / 24) + ' d ' + (hr % 24) + ' h';
}

// when renders a timestamp with its date and time zone, in the browser's
// zone ("25 Nov 2026, 17:20:31 GMT+1"); today's drop the date but keep
// the zone. The full ISO time (UTC) is in its datetime and title.
export function when(t) {
  if (!t) return '—';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, whenText(d));
}

export function whenText(d, now = new Date()) {
  const zone = { timeZoneName: 'short' };
  if (d.toDateString() === now.toDateString()) {
    return 'today ' + d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', ...zone });
  }
  return d.toLocaleString([], { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', ...zone });
}

// zoneName is the browser's time zone, which chart axes use: "Europe/Berlin".
export function zoneName() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
}

// plural says "1 process", "2 processes": plural('process', n, 'processes').
export function plural(word, n, many = word + 's') {
  return `${n} ${n === 1 ? word : many}`;
}

// isoSeconds parses an ISO-8601 duration such as PT120S or PT2M into seconds.
export function isoSeconds(s) {
  if (!s) return null;
  const m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/i.exec(s);
  if (!m) return null;
  return (+(m[1] || 0)) * 86400 + (+(m[2] || 0)) * 3600 + (+(m[3] || 0)) * 60 + (+(m[4] || 0));
}

// badge is a status label whose colour comes from its kind; the text
// always says the state, colour is never the only cue.
export function badge(text, kind) {
  return h('span', { class: 'badge badge-' + (kind || statusKind(text)) }, text || '—');
}

export function statusKind(s) {
  switch ((s || '').toLowerCase()) {
    case 'succeeded': case 'completed': case 'steady': case 'idle': case 'success':
      return 'ok';
    case 'running': case 'resizing': case 'preparing': case 'starting': case 'finalizing': case 'creating': case 'updating':
      return 'busy';
    case 'queued': case 'notstarted': case 'leaving': case 'cancelrequested': case 'deleting':
      return 'wait';
    case 'failed': case 'unusable': case 'canceled': case 'preempted':
      return 'bad';
  }
  return 'plain';
}

export function nameFromId(id) {
  if (!id) return '';
  return id.slice(id.lastIndexOf('/') + 1);
}

export function money(v) {
  if (v === null || v === undefined) return '—';
  return '$' + v.toFixed(v < 1 ? 3 : 2);
}

// pageHeader is a page's title row with its actions.
export function pageHeader(title, ...actions) {
  return h('div', { class: 'page-header' }, h('h1', {}, title), h('div', { class: 'actions' }, actions));
}

// errorBanner is where a page says that a refresh failed.
export function errorBanner() {
  const el = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  return {
    el,
    set(msg) {
      if (!msg) { el.hidden = true; el.textContent = ''; return; }
      if (el.textContent !== msg) el.textContent = msg;
      el.hidden = false;
    },
  };
}

// field wraps an input with its label, help text and error line, wired
// with aria-describedby so a screen reader reads all three.
export function field(id, label, input, help) {
  input.id = id;
  const helpEl = help ? h('p', { class: 'help', id: id + '-help' }, help) : null;
  const errEl = h('p', { class: 'field-error', id: id + '-error' });
  input.setAttribute('aria-describedby', [helpEl ? id + '-help' : '', id + '-error'].filter(Boolean).join(' '));
  const wrap = h('div', { class: 'field', dataset: { field: id } }, h('label', { for: id }, label), input, helpEl, errEl);
  return {
    el: wrap, input, errEl,
    setError(msg) {
      errEl.textContent = msg || '';
      if (msg) input.setAttribute('aria-invalid', 'true');
      else input.removeAttribute('aria-invalid');
    },
  };
}

// openDialog shows a modal dialog and gives focus back to what opened it
// when it closes. Escape closes it (the browser's own dialog behaviour).
export function openDialog(dialog) {
  const opener = document.activeElement;
  document.body.appendChild(dialog);
  dialog.addEventListener('close', () => {
    dialog.remove();
    if (opener && opener.isConnected && opener.focus) opener.focus();
  });
  dialog.showModal();
  const first = dialog.querySelector('[autofocus]') || dialog.querySelector('input, select, textarea, button');
  if (first) first.focus();
}

// syncTable keeps one row per key in tbody and rebuilds a row's cells
// only when what it shows changed; the actions cell of a row is built
// once. Focus and selection therefore survive the 2-second refresh.
// cells(item) returns the contents of each cell; sig(item) what they
// depend on (default: the whole item).
export function syncTable(tbody, items, { key, cells, sig, actions, empty, cols }) {
  // Each cell carries its column's name (data-label), which a phone shows
  // when the table reflows to one card per row.
  const head = tbody.parentElement && tbody.parentElement.tHead;
  const labels = head && head.rows[0] ? [...head.rows[0].cells].map((c) => c.textContent) : [];
  const byKey = new Map();
  for (const tr of [...tbody.rows]) byKey.set(tr.dataset.key, tr);
  const rows = [];
  if (!items.length) {
    let tr = byKey.get('__empty');
    if (!tr) tr = h('tr', { dataset: { key: '__empty' } }, h('td', { colspan: String(cols), class: 'empty' }));
    if (tr.cells[0].textContent !== empty) tr.cells[0].textContent = empty;
    rows.push(tr);
  }
  for (const it of items) {
    const k = key(it);
    let tr = byKey.get(k);
    if (!tr) {
      tr = h('tr', { dataset: { key: k } });
      if (actions) {
        tr._actions = h('td', { class: 'row-actions', dataset: { label: labels[labels.length - 1] || '' } }, actions(() => tr._item));
        tr.appendChild(tr._actions);
      }
    }
    tr._item = it;
    const s = JSON.stringify(sig ? sig(it) : it);
    if (tr._sig !== s) {
      tr._sig = s;
      while (tr.firstChild && tr.firstChild !== tr._actions) tr.removeChild(tr.firstChild);
      const tds = cells(it).map((c, i) => (c instanceof HTMLTableCellElement ? c : h(i === 0 ? 'th' : 'td', i === 0 ? { scope: 'row' } : {}, c)));
      tds.forEach((td, i) => {
        if (labels[i] && !td.dataset.label) td.dataset.label = labels[i];
        tr.insertBefore(td, tr._actions || null);
      });
    }
    rows.push(tr);
  }
  const keep = new Set(rows);
  for (const tr of [...tbody.rows]) if (!keep.has(tr)) tr.remove();
  rows.forEach((tr, i) => {
    if (tbody.rows[i] !== tr) tbody.insertBefore(tr, tbody.rows[i] || null);
  });
}

// table builds a table with a caption and column headers.
export function table(caption, headers, cls = '') {
  const tbody = h('tbody');
  const el = h('div', { class: 'table-wrap' }, h('table', { class: (cls + ' cards').trim() },
    h('caption', { class: caption.visible ? '' : 'visually-hidden' }, caption.text || caption),
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    tbody));
  return { el, tbody };
}

// showProblems puts each problem of an API error next to its field
// (showProblem marks it and returns its input, or null when it went to the
// form's banner) and focuses the first; with none placed, the banner comes
// into view.
export function showProblems(e, showProblem, formError) {
  let first = null;
  for (const p of (e.problems ? e.problems() : [{ message: e.message }])) {
    const el = showProblem(p);
    if (!first && el) first = el;
  }
  if (first) first.focus();
  else formError.scrollIntoView({ block: 'nearest' });
}

// humanize rewrites an API message in the words of the form it is shown
// in: names maps API field names (minNodeCount) to the form's labels
// (Minimum nodes). "minNodeCount (3) may not exceed maxNodeCount (1)"
// becomes "Minimum nodes (3) may not exceed maximum nodes (1)".
export function humanize(message, names, { asIs = false } = {}) {
  let out = String(message || '');
  for (const [api, label] of Object.entries(names)) {
    out = out.replace(new RegExp(`\\b${api.replace(/\./g, '\\.')}\\b`, 'g'), asIs ? label : label.toLowerCase());
  }
  return out && !asIs ? out[0].toUpperCase() + out.slice(1) : out;
}

// pager shows one page of a long list: "1–25 of 80", Previous and Next,
// and a page size. slice(items) returns the page in view (and keeps the
// page within the list as it shrinks); reset() goes back to the first.
export function pager(id, what, onChange) {
  let pageNo = 0;
  let size = Number(sessionStorage.getItem('cumulus.pageSize')) || 25;
  const info = h('span', { class: 'pager-info', id: id + '-info', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', class: 'small secondary', 'aria-describedby': id + '-info' }, 'Previous');
  const next = h('button', { type: 'button', class: 'small secondary', 'aria-describedby': id + '-info' }, 'Next');
  const sizeSel = h('select', { id: id + '-size' }, [10, 25, 50, 100].map((n) => h('option', { value: String(n), selected: n === size }, String(n))));
  const el = h('nav', { class: 'pager', id, 'aria-label': `Pages of ${what}` }, prev, info, next,
    h('span', { class: 'field inline-field' }, h('label', { for: id + '-size' }, 'Per page'), sizeSel));
  prev.addEventListener('click', () => { pageNo--; onChange(); });
  next.addEventListener('click', () => { pageNo++; onChange(); });
  sizeSel.addEventListener('change', () => {
    size = Number(sizeSel.value);
    sessionStorage.setItem('cumulus.pageSize', String(size));
    pageNo = 0;
    onChange();
  });
  return {
    el,
    reset() { pageNo = 0; },
    slice(items) {
      const pages = Math.max(1, Math.ceil(items.length / size));
      pageNo = Math.min(Math.max(0, pageNo), pages - 1);
      const from = pageNo * size;
      const shown = items.slice(from, from + size);
      info.textContent = items.length ? `${from + 1}–${from + shown.length} of ${items.length}` : '0 of 0';
      prev.disabled = pageNo === 0;
      next.disabled = pageNo >= pages - 1;
      el.hidden = items.length <= 10; // one page even at the smallest size
      return shown;
    },
  };
}
