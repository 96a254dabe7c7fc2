// The studio's client of the public ARM API: the same paths as the CLI,
// signed in by the session cookie. State-changing calls carry the
// session's CSRF value; the bearer token never reaches the page.

export const API_VERSION = '2024-04-01';
const PROVIDER = 'Microsoft.MachineLearningServices';

const state = { csrf: '', csrfHeader: 'X-Cumulus-CSRF', onUnauthorized: () => {} };

export const scope = { subscription: 'local', resourceGroup: 'local', workspace: 'default', location: 'local' };

export function setSession(info, onUnauthorized) {
  state.csrf = info.csrf;
  state.csrfHeader = info.csrfHeader || state.csrfHeader;
  if (onUnauthorized) state.onUnauthorized = onUnauthorized;
}

export function csrfHeaders() {
  return { [state.csrfHeader]: state.csrf };
}

// ApiError is an ARM error answer: code, message, target and details.
export class ApiError extends Error {
  constructor(status, err) {
    super(err && err.message ? err.message : 'HTTP ' + status);
    this.status = status;
    this.code = (err && err.code) || String(status);
    this.target = (err && err.target) || '';
    this.details = (err && err.details) || [];
  }
  // problems lists every field problem: the details, or the error itself.
  problems() {
    if (this.details.length) return this.details.map((d) => ({ code: d.code, target: d.target || '', message: d.message }));
    return [{ code: this.code, target: this.target, message: this.message }];
  }
}

export function withVersion(path) {
  if (path.includes('api-version=')) return path;
  return path + (path.includes('?') ? '&' : '?') + 'api-version=' + API_VERSION;
}

// call sends one request and decodes the JSON answer.
export async function call(method, path, body, headers = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') Object.assign(h, csrfHeaders());
  let resp;
  try {
    resp = await fetch(withVersion(path), {
      method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin', cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, { code: 'NetworkError', message: 'cannot reach the Cumulus server (is `cumulus serve` running?)' });
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (resp.status === 401) {
    state.onUnauthorized(data && data.error ? data.error.message : '');
  }
  if (!resp.ok) throw new ApiError(resp.status, data && data.error);
  return { status: resp.status, headers: resp.headers, body: data };
}

export async function get(path) {
  return (await call('GET', path)).body;
}

// listAll follows nextLink to the last page.
export async function listAll(path, method = 'GET', key = 'value') {
  const out = [];
  while (path) {
    const page = (await call(method, path)).body || {};
    out.push(...(page[key] || []));
    path = page.nextLink;
    method = 'GET';
  }
  return out;
}

const enc = encodeURIComponent;

export function groupPath() {
  return `/subscriptions/${enc(scope.subscription)}/resourceGroups/${enc(scope.resourceGroup)}`;
}
export function wsPath() {
  return `${groupPath()}/providers/${PROVIDER}/workspaces/${enc(scope.workspace)}`;
}
export function locPath(loc) {
  return `/subscriptions/${enc(scope.subscription)}/providers/${PROVIDER}/locations/${enc(loc || scope.location)}`;
}
export function computePath(name) { return `${wsPath()}/computes/${enc(name)}`; }
export function jobPath(name) { return `${wsPath()}/jobs/${enc(name)}`; }

export const listWorkspaces = () => listAll(`${groupPath()}/providers/${PROVIDER}/workspaces`);
export const getWorkspace = () => get(wsPath());
export const listComputes = () => listAll(`${wsPath()}/computes`);
export const getCompute = (name) => get(computePath(name));
// getQueue reads a cluster's queue in the order its scheduler will start
// it, each job with why it waits (a Cumulus extension).
export const getQueue = (name, top = 100) => get(`${computePath(name)}/queue?$top=${top}`);
export const listNodes = (name) => listAll(`${computePath(name)}/listNodes`, 'POST', 'nodes');
export const listJobs = (status) => listAll(`${wsPath()}/jobs` + (status ? '?status=' + enc(status) : ''));
export const getJob = (name) => get(jobPath(name));
export const listDataAssets = () => listAll(`${wsPath()}/data`);
export const listDataVersions = (name) => listAll(`${wsPath()}/data/${enc(name)}/versions?$orderBy=${enc('createdtime desc')}`);
// computeEvents reads the newest events of a cluster and its nodes (one
// page); jobEvents every status change of a job; both newest first.
export const computeEvents = (name, top = 50) => get(`${computePath(name)}/events?$top=${top}`).then((r) => (r && r.value) || []);
export const jobEvents = (name) => listAll(`${jobPath(name)}/events`);
// costs reads what the workspace's nodes cost in [since, until) grouped
// by compute, job, workspace or tag:KEY (a Cumulus extension).
export function costs({ by, since, until } = {}) {
  const q = new URLSearchParams();
  if (by) q.set('by', by);
  if (since) q.set('since', since);
  if (until) q.set('until', until);
  return get(`${wsPath()}/costs?${q}`);
}
export function budgetPath(name) { return `${wsPath()}/budgets/${enc(name)}`; }
export const listBudgets = () => listAll(`${wsPath()}/budgets`);
export const putBudget = (name, body) => call('PUT', budgetPath(name), body);
export const deleteBudget = (name) => call('DELETE', budgetPath(name));
export const listSizes = (loc) => get(`${locPath(loc)}/vmSizes`).then((r) => (r && r.value) || []);
export const listUsages = (loc) => listAll(`${locPath(loc)}/usages`);
export const listQuotas = (loc) => listAll(`${locPath(loc)}/quotas`);

// putCompute creates a compute; ifNoneMatch makes it create-only.
export const putCompute = (name, body) => call('PUT', computePath(name), body, { 'If-None-Match': '*' });
export const patchScale = (name, scaleSettings) =>
  call('PATCH', computePath(name), { properties: { properties: { scaleSettings } } });
export const deleteCompute = (name) => call('DELETE', computePath(name) + '?underlyingResourceAction=Delete');
export const putJob = (name, body) => call('PUT', jobPath(name), body);
export const cancelJob = (name) => call('POST', jobPath(name) + '/cancel');
export const deleteJob = (name) => call('DELETE', jobPath(name));

export function jobLog(name, { attempt, rank = 0, offset = 0 } = {}) {
  const q = new URLSearchParams({ rank: String(rank), offset: String(offset) });
  if (attempt !== undefined && attempt !== null) q.set('attempt', String(attempt));
  return get(`${jobPath(name)}/logs?${q}`);
}

export function outputURL(job, output) {
  return withVersion(`${jobPath(job)}/outputs/${enc(output)}`);
}

// yamlToJSON is the studio's own endpoint: a YAML document (a pasted job
// file) read by the server's YAML parser, as JSON.
export async function yamlToJSON(text) {
  const r = await fetch('/ui/api/yaml', {
    method: 'POST', credentials: 'same-origin', cache: 'no-store',
    headers: { 'Content-Type': 'application/yaml', Accept: 'application/json', ...csrfHeaders() }, body: text,
  });
  const data = await r.json().catch(() => ({}));
  if (r.status === 401) state.onUnauthorized(data.error ? data.error.message : '');
  if (!r.ok) throw new ApiError(r.status, data.error);
  return data;
}

// history is the studio's own endpoint: recent node counts of a cluster.
// after: only samples taken after that time (RFC 3339), for a page that
// already holds the earlier ones.
export async function history(computeId, { seconds, after } = {}) {
  const q = new URLSearchParams({ compute: computeId });
  if (seconds) q.set('seconds', String(seconds));
  if (after) q.set('after', after);
  const r = await fetch('/ui/api/history?' + q, { credentials: 'same-origin', cache: 'no-store' });
  if (!r.ok) throw new ApiError(r.status, (await r.json().catch(() => ({}))).error);
  return r.json();
}
