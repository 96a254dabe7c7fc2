// The studio's shell: sign-in, session, workspace switcher, routing and
// the 2-second refresh of the page in view.
import * as api from './api.js';
import { h, replace, announce } from './dom.js';
import * as computes from './computes.js';
import * as compute from './compute.js';
import * as jobs from './jobs.js';
import * as job from './job.js';
import * as quota from './quota.js';
import * as cost from './cost.js';
import * as submit from './submit.js';
import * as compare from './compare.js';
import * as data from './data.js';

const REFRESH_MS = 2000;
const main = document.getElementById('main');
const topbar = document.getElementById('topbar');
let session = null;
let page = null; // {refresh, dispose} of the page in view
let timer = null;

const routes = [
  { re: /^#\/computes\/?$/, nav: 'computes', mod: computes },
  { re: /^#\/computes\/([^/]+)$/, nav: 'computes', mod: compute },
  { re: /^#\/jobs\/?$/, nav: 'jobs', mod: jobs },
  { re: /^#\/jobs\/([^/]+)$/, nav: 'jobs', mod: job },
  { re: /^#\/quota\/?$/, nav: 'quota', mod: quota },
  { re: /^#\/cost\/?$/, nav: 'cost', mod: cost },
  { re: /^#\/submit\/?$/, nav: 'jobs', mod: submit },
  { re: /^#\/compare\/sweep\/([^/]+)$/, nav: 'jobs', mod: { render: compare.renderSweep } },
  { re: /^#\/compare\/?([^/]*)$/, nav: 'jobs', mod: compare },
  { re: /^#\/data\/?$/, nav: 'data', mod: { render: data.renderList } },
  { re: /^#\/data\/([^/]+)$/, nav: 'data', mod: { render: data.renderAsset } },
];

async function start() {
  try {
    const r = await fetch('/ui/session', { credentials: 'same-origin', cache: 'no-store' });
    if (r.ok) {
      await signedIn(await r.json());
      return;
    }
  } catch {
    // fall through to the sign-in form
  }
  showSignIn('');
}

// showSignIn replaces the studio with the sign-in form.
function showSignIn(reason, note = '') {
  session = null;
  stopPage();
  topbar.hidden = true;
  document.title = 'Sign in · Cumulus studio';
  const err = h('p', { class: 'field-error', id: 'token-error', role: 'alert' }, reason || '');
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'current-password', required: true,
    'aria-describedby': 'token-help token-error', spellcheck: 'false',
  });
  const button = h('button', { type: 'submit' }, 'Sign in');
  // Where the server wrote its token depends on its data directory.
  const configPath = h('code', { id: 'config-path' }, '~/.cumulus/config.yaml');
  fetch('/ui/signin', { credentials: 'same-origin', cache: 'no-store' }).then((r) => (r.ok ? r.json() : null))
    .then((v) => { if (v && v.configPath) configPath.textContent = v.configPath; }).catch(() => {});
  const form = h('form', { class: 'signin-form', method: 'post', action: '/ui/login', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'token' }, 'API token'),
      input,
      h('p', { class: 'help', id: 'token-help' },
        'The token line of ', configPath, ', which ', h('code', {}, 'cumulus serve'), ' writes on the server on first start. ',
        'Or run ', h('code', {}, 'cumulus ui'), ' to open the studio already signed in.'),
      err),
    button);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    input.removeAttribute('aria-invalid');
    button.disabled = true;
    try {
      const r = await fetch('/ui/login', {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
        body: new URLSearchParams({ token: input.value }),
      });
      const data = await r.json().catch(() => ({}));
      if (!r.ok) {
        err.textContent = (data.error && data.error.message) || 'Sign-in failed.';
        input.setAttribute('aria-invalid', 'true');
        input.focus();
        return;
      }
      input.value = '';
      await signedIn(data);
    } catch {
      err.textContent = 'Cannot reach the Cumulus server.';
    } finally {
      button.disabled = false;
    }
  });
  replace(main, h('section', { class: 'signin-card', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, h('span', { 'aria-hidden': 'true' }, '☁ '), 'Cumulus studio'),
    h('p', { class: 'lead' }, 'Sign in to see and drive your compute clusters and jobs.'),
    h('p', { class: 'signin-note', role: 'status' }, note),
    form));
  main.classList.add('signin-page');
  input.focus();
}

async function signedIn(info) {
  session = info;
  api.scope.subscription = info.subscription;
  api.scope.resourceGroup = info.resourceGroup;
  api.scope.location = info.location;
  api.setSession(info, (msg) => {
    if (session) showSignIn(msg || 'Your session ended; sign in again.');
  });
  main.classList.remove('signin-page');
  topbar.hidden = false;
  document.getElementById('principal').textContent = 'Signed in as ' + info.principal;
  await loadWorkspaces(info.workspace);
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    history.replaceState(null, '', '#/computes');
  }
  route();
}

// loadWorkspaces fills the workspace switcher (again each time it gets
// focus, so a workspace made with the CLI shows up without a reload).
async function loadWorkspaces(fallback) {
  const sel = document.getElementById('workspace-select');
  let list = [];
  try {
    list = await api.listWorkspaces();
  } catch {
    list = [];
  }
  const names = list.map((w) => w.name);
  const saved = localStorage.getItem('cumulus.workspace');
  const current = names.includes(saved) ? saved : (names.includes(fallback) ? fallback : (names[0] || fallback));
  replace(sel, (names.length ? names : [current]).map((n) => h('option', { value: n, selected: n === current }, n)));
  api.scope.workspace = current;
  const ws = list.find((w) => w.name === current);
  if (ws && ws.location) api.scope.location = ws.location;
  sel.onfocus = async () => {
    try {
      const fresh = await api.listWorkspaces();
      const now = fresh.map((w) => w.name);
      if (JSON.stringify(now) === JSON.stringify([...sel.options].map((o) => o.value))) return;
      list = fresh;
      api.scope.workspaces = list;
      const keep = sel.value;
      replace(sel, now.map((n) => h('option', { value: n, selected: n === keep }, n)));
    } catch {
      // keep the list we have
    }
  };
  sel.onchange = () => {
    const w = list.find((x) => x.name === sel.value);
    api.scope.workspace = sel.value;
    if (w && w.location) api.scope.location = w.location;
    localStorage.setItem('cumulus.workspace', sel.value);
    announce('Workspace ' + sel.value);
    // A page of one cluster, job, comparison or data asset has no meaning
    // in another workspace: its list does.
    if (/^#\/(computes|jobs|compare|data)\/.+/.test(location.hash)) {
      location.hash = location.hash.startsWith('#/compare') ? '#/jobs' : location.hash.replace(/^(#\/[a-z]+)\/.*$/, '$1');
    } else route();
  };
  api.scope.workspaces = list;
}

// The menu folds the top bar's links and workspace on narrow screens.
const menuToggle = document.getElementById('menu-toggle');
const menu = document.getElementById('topbar-menu');
function setMenu(open) {
  menu.classList.toggle('open', open);
  menuToggle.setAttribute('aria-expanded', String(open));
}
menuToggle.addEventListener('click', () => {
  const open = menuToggle.getAttribute('aria-expanded') !== 'true';
  setMenu(open);
  if (open) menu.querySelector('a').focus();
});
menu.addEventListener('click', (ev) => { if (ev.target.closest('a')) setMenu(false); });
menu.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape' && menuToggle.getAttribute('aria-expanded') === 'true') {
    setMenu(false);
    menuToggle.focus();
  }
});

function stopPage() {
  clearInterval(timer);
  timer = null;
  if (page && page.dispose) page.dispose();
  page = null;
}

function route() {
  if (!session) return;
  stopPage();
  setMenu(false);
  const hash = location.hash || '#/computes';
  const r = routes.find((x) => x.re.test(hash));
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (r && a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!r) {
    replace(main, h('h1', { tabindex: '-1' }, 'Not found'), h('p', {}, 'No page at ', h('code', {}, hash), '. ',
      h('a', { href: '#/computes' }, 'Go to the compute clusters')));
    return;
  }
  const params = (hash.match(r.re) || []).slice(1).map(decodeURIComponent);
  main.replaceChildren();
  page = r.mod.render(main, params, { navigate: (to) => { location.hash = to; } });
  const heading = main.querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: true });
    document.title = heading.textContent + ' · Cumulus studio';
  }
  tick(true);
  timer = setInterval(tick, REFRESH_MS);
}

// tick refreshes the page in view, one refresh at a time, not while
// hidden, and less often when a refresh is slow (a big workspace), so the
// page never spends more than a fifth of its time refreshing.
async function tick(force) {
  const p = page;
  if (!p || p.busy || document.visibilityState === 'hidden') return;
  if (force !== true && Date.now() - (p.lastStart || 0) < Math.max(REFRESH_MS, 5 * (p.lastTook || 0)) - 50) return;
  p.busy = true;
  p.lastStart = Date.now();
  try {
    await p.refresh();
    if (p.setError) p.setError('');
  } catch (e) {
    if (p.setError && page === p) p.setError('Could not refresh: ' + e.message);
  } finally {
    p.busy = false;
    p.lastTook = Date.now() - p.lastStart;
  }
}

document.getElementById('sign-out').addEventListener('click', async () => {
  await fetch('/ui/logout', { method: 'POST', credentials: 'same-origin', headers: api.csrfHeaders() }).catch(() => {});
  localStorage.removeItem('cumulus.workspace');
  showSignIn('', 'You signed out.');
});
// The skip link moves focus to the page without touching the hash, which
// the router owns.
document.querySelector('.skip-link').addEventListener('click', (ev) => {
  ev.preventDefault();
  main.focus();
});
window.addEventListener('hashchange', route);
document.addEventListener('visibilitychange', () => tick(true));
start();
