// End-to-end tests of the Cumulus web studio in a real browser: Debian's
// Chromium driven by playwright-core, against a real `cumulus serve` on a
// free loopback port with its own data directory (and real agent
// processes for the nodes).
//
//   node --test test/ui/          (builds ./cmd/cumulus unless CUMULUS_BIN is set)
//
// Screenshots go to test-output/ui/ at the repository root;
// CUMULUS_UI_DOC_SHOTS=1 also copies the main ones to docs/img/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const shots = path.join(root, 'test-output', 'ui');
const docShots = process.env.CUMULUS_UI_DOC_SHOTS === '1' ? path.join(root, 'docs', 'img') : null;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CLUSTER = 'ui-cluster';
const JOB = 'ui-job-1';
const JOB2 = 'ui-job-2';

let bin, dataDir, base, token, server, browser, context, page;
const pageErrors = [];

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// env is a clean environment for the server and the CLI: the test's data
// directory and home, no CUMULUS_* from the caller.
function env() {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CUMULUS_')));
  return { ...e, HOME: dataDir, CUMULUS_DATA_DIR: dataDir, CUMULUS_CONFIG: path.join(dataDir, 'config.yaml') };
}

async function cli(...args) {
  const { stdout } = await run(bin, args, { env: env(), cwd: dataDir, timeout: 120000 });
  return stdout;
}

// waitFor polls fn until it returns a truthy value.
async function waitFor(what, fn, timeoutMs = 30000, everyMs = 250) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ': ' + last.message : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

async function shot(name, opts = {}) {
  const file = path.join(shots, name + '.png');
  const { doc, ...shotOpts } = opts;
  await page.screenshot({ path: file, ...shotOpts });
  if (docShots && opts.doc) fs.copyFileSync(file, path.join(docShots, 'studio-' + name + '.png'));
}

// nodesDir holds the local nodes' folders: <data dir>-nodes, beside the
// data directory (the server keeps jobs away from its state).
const nodesDir = () => dataDir + '-nodes';

function agentPids() {
  const dir = nodesDir();
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).map((n) => {
    try {
      return Number(fs.readFileSync(path.join(dir, n, 'agent.pid'), 'utf8').trim());
    } catch {
      return 0;
    }
  }).filter((p) => p > 0);
}

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  for (const f of fs.readdirSync(shots)) if (f.endsWith('.png')) fs.rmSync(path.join(shots, f));
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cumulus-ui-'));
  bin = process.env.CUMULUS_BIN;
  if (!bin) {
    bin = path.join(dataDir, 'cumulus');
    await run('go', ['build', '-o', bin, './cmd/cumulus'], { cwd: root, timeout: 600000 });
  }
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(dataDir, 'serve.log'), 'a');
  // Agents sample utilization every second, so a short job has samples.
  server = spawn(bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir, '--usage-interval', '1s'], { env: env(), stdio: ['ignore', log, log] });
  await waitFor('cumulus serve to write its CLI config', async () => {
    const cfg = fs.readFileSync(path.join(dataDir, 'config.yaml'), 'utf8');
    const m = /^token:\s*(\S+)/m.exec(cfg);
    if (!m) return false;
    token = m[1];
    const r = await fetch(base + '/ui/session');
    return r.status === 401;
  }, 30000);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  context = await browser.newContext({ viewport: { width: 1366, height: 860 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    // A 401 while signed out is the expected answer, not a page error.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push('console: ' + m.text());
  });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => { server.once('exit', r); setTimeout(r, 15000); });
  }
  for (const pid of agentPids()) {
    try { process.kill(-pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  if (dataDir) {
    fs.copyFileSync(path.join(dataDir, 'serve.log'), path.join(shots, 'serve.log'));
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(nodesDir(), { recursive: true, force: true });
  }
});

// mainNav is a link of the top bar (a breadcrumb may have the same name).
const mainNav = (name) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true });

// step runs one subtest; after a failure the later ones are skipped (they
// build on it), and the page at the failure is saved as a screenshot.
let failed = false;
async function step(t, name, fn) {
  await t.test(name, { skip: failed ? 'an earlier step failed' : false }, async () => {
    try {
      await fn();
    } catch (e) {
      failed = true;
      await page.screenshot({ path: path.join(shots, 'failure.png'), fullPage: true }).catch(() => {});
      throw e;
    }
  });
}

test('the studio, end to end in Chromium', async (t) => {
  await step(t, 'shows the sign-in form and refuses a wrong token', async () => {
    await page.goto(base + '/');
    const tokenInput = page.getByLabel('API token');
    await tokenInput.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement && document.activeElement.id), 'token', 'the token field has focus');
    // The help names the file this server wrote its token to (its data
    // directory's, here), in words, not Markdown.
    await waitFor('the config path', async () => (await page.locator('#config-path').textContent()) === path.join(dataDir, 'config.yaml'));
    assert.ok(!(await page.locator('#token-help').textContent()).includes('`'), 'no literal backticks');
    await tokenInput.fill('cml_not-a-real-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#token-error', { hasText: 'not valid' }).waitFor();
    assert.equal(await tokenInput.getAttribute('aria-invalid'), 'true');
    await shot('signin');
  });

  await step(t, 'signs in with a token into an HttpOnly, SameSite=Strict session', async () => {
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
    await page.getByText('No clusters in this workspace yet').waitFor();
    const cookies = await context.cookies(base);
    const c = cookies.find((x) => x.name === 'cumulus_session');
    assert.ok(c, 'session cookie set');
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Strict');
    assert.ok(!c.value.includes(token), 'the cookie is not the token');
    const html = await page.content();
    assert.ok(!html.includes(token), 'the page does not hold the token');
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
    assert.ok(!stored.includes(token), 'nor does storage readable by scripts');
    assert.equal(await page.locator('#workspace-select').inputValue(), 'default');
  });

  await step(t, 'the API takes the cookie for reads but wants the CSRF header for changes', async () => {
    const res = await page.evaluate(async () => {
      const ws = '/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default';
      const get = await fetch(ws + '/computes?api-version=2024-04-01');
      const put = await fetch(ws + '/computes/csrf-probe?api-version=2024-04-01', {
        method: 'PUT', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ properties: { computeType: 'AmlCompute' } }),
      });
      return { get: get.status, put: put.status, code: (await put.json()).error.code };
    });
    assert.deepEqual(res, { get: 200, put: 403, code: 'AuthorizationFailed' });
    // Without any session the API still answers 401.
    const anon = await fetch(base + '/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default/computes?api-version=2024-04-01');
    assert.equal(anon.status, 401);
  });

  await step(t, '`cumulus ui --print-url` signs in the browser that opens it, and no other', async () => {
    // The command prints the sign-in address and waits for the browser.
    const ui = spawn(bin, ['ui', '--print-url'], { env: env(), cwd: dataDir, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((resolve) => ui.on('exit', resolve));
    const url = await new Promise((resolve, reject) => {
      let out = '';
      ui.stdout.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out.trim());
      });
      ui.on('exit', () => reject(new Error('cumulus ui ended before printing the address')));
    });
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/ui\/login\/begin\?port=\d+&state=/);
    assert.ok(!url.includes(token), 'the address does not carry the token');
    const other = await browser.newContext();
    const p2 = await other.newPage();
    const seen = [];
    p2.on('request', (r) => seen.push(r.url()));
    await p2.goto(url);
    await p2.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor({ timeout: 15000 });
    assert.equal(await exited, 0, 'cumulus ui ends once the browser is signed in');
    const link = seen.find((u) => u.includes('/ui/login?code=cuc_'));
    assert.ok(link, 'the browser went through a one-time link');
    // The same link in another browser signs nothing in (it works once, and
    // only in the browser that asked for it: the Go tests open an unused
    // link in another browser).
    const third = await browser.newContext();
    const again = await third.newPage();
    const resp = await again.goto(link);
    assert.equal(resp.status(), 401, 'the link signs in no other browser');
    await again.getByText('works once').waitFor();
    assert.ok(!(await third.cookies()).some((c) => c.name === 'cumulus_session'), 'no session in the other browser');
    await third.close();
    await other.close();
  });

  await step(t, 'creates a cluster through the form, with a rejected name first', async () => {
    const newBtn = page.getByRole('button', { name: 'New' });
    // Keyboard: Enter opens the dialog, Escape closes it, focus returns.
    await newBtn.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'New compute cluster' });
    await dialog.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.id), 'c-name', 'the name field has focus');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    assert.equal(await page.evaluate(() => document.activeElement.id), 'new-cluster', 'focus back on + New');

    await newBtn.click();
    await dialog.waitFor();
    const name = dialog.getByLabel('Name', { exact: true });
    await name.fill('9-lives');
    await dialog.locator('#c-name-error', { hasText: 'must start with a letter' }).waitFor();
    assert.equal(await name.getAttribute('aria-invalid'), 'true');
    await name.fill('cluster-42');
    await dialog.locator('#c-name-error', { hasText: "may not end with '-' followed by digits" }).waitFor();
    // Enter submits the form; the server refuses the name and the dialog stays.
    await name.press('Enter');
    await dialog.locator('#c-name-error', { hasText: "may not end with '-'" }).waitFor();
    assert.equal(await dialog.isVisible(), true, 'a rejected name keeps the dialog open');
    await waitFor('focus on the name', async () => (await page.evaluate(() => document.activeElement.id)) === 'c-name');
    await shot('create-rejected-name');

    await name.fill(CLUSTER);
    assert.equal(await dialog.locator('#c-name-error').textContent(), '');
    // The CPU/GPU filter narrows the size picker; the catalog shows vCPUs, memory, GPUs and price.
    await dialog.getByLabel('GPU', { exact: true }).check();
    const gpuSizes = await dialog.getByLabel('VM size').locator('option').allTextContents();
    assert.ok(gpuSizes.length > 0 && gpuSizes.every((s) => /GPU/.test(s)), 'only GPU sizes: ' + gpuSizes.join(' | '));
    await dialog.getByLabel('CPU', { exact: true }).check();
    await dialog.getByLabel('VM size').selectOption('Standard_DS3_v2');
    await dialog.locator('#c-size-info', { hasText: '4 vCPUs' }).waitFor();
    assert.match(await dialog.locator('#c-size-info').textContent(), /\$[0-9.]+\/h dedicated/);
    // An error from the API appears next to its field.
    // Every error from the API appears at once, next to its field, in the
    // form's words.
    await dialog.getByLabel('Minimum nodes').fill('-1');
    await dialog.getByLabel('Maximum nodes').fill('0');
    await dialog.getByLabel('Idle seconds before scale down').fill('600');
    await dialog.getByText('Advanced settings').click();
    await dialog.getByLabel('Tags').fill('team=studio env=test');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await dialog.locator('#c-max-error', { hasText: 'Maximum nodes must be at least 1' }).waitFor();
    await dialog.locator('#c-min-error', { hasText: 'Minimum nodes may not be negative' }).waitFor();
    assert.equal(await dialog.getByLabel('Maximum nodes').getAttribute('aria-invalid'), 'true');
    assert.equal(await dialog.getByLabel('Minimum nodes').getAttribute('aria-invalid'), 'true');
    assert.doesNotMatch(await dialog.textContent(), /NodeCount/, 'no API field names');
    await shot('create-form', { doc: true });
    await dialog.getByLabel('Minimum nodes').fill('0');

    await dialog.getByLabel('Maximum nodes').fill('2');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await dialog.waitFor({ state: 'detached' });
    const row = page.locator('table.clusters tbody tr', { has: page.getByRole('link', { name: CLUSTER }) });
    await row.waitFor();
    await row.getByText('Succeeded').waitFor({ timeout: 30000 });
    const text = await row.textContent();
    assert.match(text, /Standard_DS3_v2/);
    assert.match(text, /Dedicated/);
    assert.match(text, /0 – 2/);
    assert.match(text, /10 min/);
    assert.match(text, /team=studio/);
    const shown = JSON.parse(await cli('compute', 'show', '-n', CLUSTER));
    assert.equal(shown.max_instances, 2);
    assert.equal(shown.tags.team, 'studio');
  });

  await step(t, 'jobs submitted with the CLI run; the log streams live and the job completes', async () => {
    const cmd = 'echo hello from the studio test; for i in 1 2 3 4 5 6; do echo line $i; sleep 1; done; echo done > $CUMULUS_OUTPUT_DIR/result.txt';
    await cli('job', 'create', '--compute', CLUSTER, '--name', JOB, '--command', cmd, '--display-name', 'studio smoke test');
    // A second job, so that the cluster grows to two nodes.
    await cli('job', 'create', '--compute', CLUSTER, '--name', JOB2, '--command', 'echo second; sleep 4', '--experiment-name', 'studio');
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
    await page.getByRole('link', { name: JOB, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: JOB }).waitFor();
    const status = page.locator('#job-status-text');
    const log = page.locator('#job-log');
    // Live: the first lines show while the job still runs.
    await waitFor('the log while the job runs', async () => {
      const s = await status.textContent();
      const l = await log.textContent();
      if (s === 'Completed') throw new Error('the job completed before its log was seen live');
      return s === 'Running' && l.includes('hello from the studio test');
    }, 90000, 200);
    await shot('job-running');
    await waitFor('the job to complete', async () => (await status.textContent()) === 'Completed', 90000);
    await waitFor('the whole log', async () => (await log.textContent()).includes('line 6'), 10000);
    await page.locator('#log-state', { hasText: 'complete' }).waitFor();
    const attempts = await page.locator('section[aria-labelledby="sec-attempts"] tbody tr').allTextContents();
    assert.equal(attempts.length, 1);
    assert.match(attempts[0], /tvm-ui-cluster/);
    // The status history comes from the events API: newest first, the run
    // naming its attempt and node.
    const history = page.locator('#job-events li.event');
    await waitFor('the history to end Completed', async () => (await history.first().getAttribute('data-type')) === 'JobCompleted', 10000);
    assert.match(await history.first().textContent(), /JobCompleted.*attempt 1 on tvm-ui-cluster/);
    assert.equal(await history.last().getAttribute('data-type'), 'JobNotStarted');
    const dl = page.getByRole('link', { name: 'Download default' });
    await dl.waitFor();
    const resp = await page.request.get(new URL(await dl.getAttribute('href'), base).toString());
    assert.equal(resp.status(), 200);
    assert.equal(resp.headers()['content-type'], 'application/gzip');
    // Its utilization, sampled on its node while it ran: a CPU line and
    // its memory; no GPU, so no word about idle GPUs.
    const usage = page.locator('section[aria-labelledby="sec-usage-job"]');
    const cpu = usage.locator('svg.usage-chart[data-chart="cpu"]');
    await waitFor("the job's CPU line", async () => (await cpu.locator('.usage-line').count()) >= 1, 30000);
    assert.match(await cpu.getAttribute('aria-label'), /^CPU utilization of job ui-job-1: latest tvm-ui-cluster\S* \d+ %\.$/);
    await usage.locator('svg.usage-chart[data-chart="memory"] .usage-line').first().waitFor();
    assert.match(await usage.locator('svg.usage-chart[data-chart="memory"]').getAttribute('aria-label'), /latest tvm-ui-cluster\S* [\d.]+ (KiB|MiB|GiB)/);
    assert.equal(await usage.locator('svg.usage-chart[data-chart="gpu"]').count(), 0, 'no GPU chart without GPUs');
    assert.equal(await page.locator('#usage-gpu-hint').isHidden(), true);
    assert.match(await page.locator('#usage-note-job').textContent(), /\d+ samples? of 1 node/);
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot('job', { fullPage: true, doc: true });
  });

  await step(t, 'the cluster page shows its nodes, the chart and quota', async () => {
    await page.getByRole('link', { name: CLUSTER }).click();
    await page.getByRole('heading', { level: 1, name: CLUSTER }).waitFor();
    const nodes = page.locator('section[aria-labelledby="sec-nodes"] tbody tr');
    await waitFor('two idle nodes', async () => (await nodes.filter({ hasText: 'idle' }).count()) === 2, 60000);
    assert.match(await nodes.first().textContent(), /tvm-ui-cluster/);
    await page.locator('svg.chart path.area-idle').first().waitFor({ timeout: 20000 });
    assert.match(await page.locator('svg.chart').getAttribute('aria-label'), /Nodes of ui-cluster over the last (1|5) min: now 2 \(0 running, 2 idle/);
    assert.match(await page.locator('#chart-caption').textContent(), /times in [A-Za-z_]+(\/[A-Za-z_]+)*\.$/, 'the axis names its zone');
    await page.locator('section[aria-labelledby="sec-quota"] meter').first().waitFor();
    // What isolation the nodes have is said, not implied by a stored subnet.
    assert.match(await page.locator('section[aria-labelledby="sec-settings"]').textContent(), /Network isolationnone: the nodes share the network of the machines the local provider runs them on/);
    assert.match(await page.locator('section[aria-labelledby="sec-quota"]').textContent(), /8 of 400 cores/);
    // Utilization: a line per node for CPU and memory.
    const usage = page.locator('section[aria-labelledby="sec-usage-compute"]');
    const cpu = usage.locator('svg.usage-chart[data-chart="cpu"]');
    await waitFor('a CPU line of each node', async () => (await cpu.getAttribute('data-series')) === '2' && (await cpu.locator('.usage-line').count()) === 2, 30000);
    assert.match(await cpu.getAttribute('aria-label'), /^CPU utilization of the nodes of ui-cluster: latest tvm-ui-cluster\S* \d+ %, tvm-ui-cluster\S* \d+ %\.$/);
    assert.equal(await usage.locator('svg.usage-chart[data-chart="memory"] .usage-line').count(), 2);
    assert.equal(await usage.locator('ul.legend li').count(), 2);
  });

  await step(t, 'the utilization charts fit a phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const cpu = page.locator('section[aria-labelledby="sec-usage-compute"] svg.usage-chart[data-chart="cpu"]');
      await cpu.scrollIntoViewIfNeeded();
      const box = await cpu.boundingBox();
      assert.ok(box && box.width > 200 && box.x >= 0 && box.x + box.width <= 390, 'the chart is within the screen: ' + JSON.stringify(box));
      await shot('cluster-usage-phone');
    } finally {
      await page.setViewportSize({ width: 1366, height: 860 });
    }
  });

  await step(t, 'the jobs list filters by status and text', async () => {
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByRole('link', { name: JOB2 }).waitFor();
    await waitFor('both jobs completed', async () => (await page.locator('table.jobs tbody tr', { hasText: 'Completed' }).count()) === 2, 30000);
    await page.getByLabel('Status').selectOption('Failed');
    await page.getByText('No job is Failed.').waitFor();
    await page.getByLabel('Status').selectOption('Completed');
    await page.getByRole('link', { name: JOB, exact: true }).waitFor();
    await page.getByLabel('Search', { exact: true }).fill('smoke');
    await waitFor('the text filter', async () => (await page.locator('table.jobs tbody tr').count()) === 1);
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('Search', { exact: true }).fill('');
    await waitFor('both jobs again', async () => (await page.locator('table.jobs tbody tr').count()) === 2);
    await page.evaluate(() => document.activeElement.blur());
    await shot('jobs');
  });

  await step(t, 'the display name links to the job', async () => {
    await page.getByRole('link', { name: 'studio smoke test' }).click();
    await page.getByRole('heading', { level: 1, name: JOB }).waitFor();
    // Times carry their date or "today", and their zone.
    const submitted = await page.locator('.facts dd time').first().textContent();
    assert.match(submitted, /^(today \d|[A-Z][a-z]{2} \d).*(UTC|GMT)/, submitted);
    await page.goBack();
    await page.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
  });

  await step(t, 'submits a job from the form, errors first, with Enter', async () => {
    await page.getByRole('link', { name: 'Submit job' }).click();
    await page.getByRole('heading', { level: 1, name: 'Submit a job' }).waitFor();
    await page.getByLabel('Compute', { exact: true }).selectOption(CLUSTER);
    await page.getByLabel('Nodes', { exact: true }).fill('-1');
    await page.getByLabel('Job name').fill('ui-form-job');
    await page.getByLabel('Job name').press('Enter');
    // The server's problems, all at once, each at its field.
    await page.locator('#j-command-error', { hasText: /command is required/i }).waitFor();
    await page.locator('#j-nodes-error', { hasText: 'Nodes must be at least 1' }).waitFor();
    assert.equal(await page.getByLabel('Command').getAttribute('aria-invalid'), 'true');
    await shot('submit-form-errors');
    await page.getByLabel('Command').fill('echo from the form: $GREETING');
    await page.getByLabel('Nodes', { exact: true }).fill('1');
    await page.getByLabel('Environment variables').fill('GREETING=hello');
    await page.getByLabel('Display name').fill('form job');
    await page.getByLabel('Display name').press('Enter');
    await page.getByRole('heading', { level: 1, name: 'ui-form-job' }).waitFor();
    await waitFor('the form job to complete', async () => (await page.locator('#job-status-text').textContent()) === 'Completed', 60000);
    await waitFor('its log', async () => (await page.locator('#job-log').textContent()).includes('from the form: hello'), 10000);
    assert.match(await page.locator('section[aria-labelledby="sec-params"]').textContent(), /Display nameform job/);
  });

  await step(t, 'submits a job from pasted YAML; problems are listed together', async () => {
    await mainNav('Jobs').click();
    await page.getByRole('link', { name: 'Submit job' }).click();
    // The tabs follow the arrow keys.
    await page.getByRole('tab', { name: 'Form' }).focus();
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.getByRole('tab', { name: 'YAML' }).getAttribute('aria-selected'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'tab-yaml');
    const yaml = page.getByLabel('Job YAML');
    await yaml.fill(['code: ./src', 'compute: azureml:' + CLUSTER, 'resources:', '  instance_count: 1', 'colour: blue'].join('\n'));
    await page.getByRole('button', { name: 'Submit job' }).click();
    const problems = page.locator('#j-yaml-problems li');
    await waitFor('three problems', async () => (await problems.count()) === 3);
    const text = (await problems.allTextContents()).join('\n');
    assert.match(text, /command is required/);
    assert.match(text, /code: \.\/src is a local folder/);
    assert.match(text, /colour is not a field/);
    await yaml.fill('command: [unclosed');
    await page.getByRole('button', { name: 'Submit job' }).click();
    await page.locator('#j-yaml-problems', { hasText: 'line 1' }).waitFor();
    // The server's own checks come back in the file's words.
    await yaml.fill(['command: echo x', 'compute: azureml:' + CLUSTER, 'resources:', '  instance_count: -2'].join('\n'));
    await yaml.press('Control+Enter');
    await page.locator('#j-yaml-problems', { hasText: 'resources.instance_count must be at least 1' }).waitFor();
    await yaml.fill([
      '$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json',
      'name: ui-yaml-job',
      'display_name: yaml job',
      'experiment_name: studio',
      'command: >-',
      '  echo from the YAML: $GREETING',
      'compute: azureml:' + CLUSTER,
      'environment_variables:',
      '  GREETING: bonjour',
      'limits:',
      '  timeout: 300',
    ].join('\n'));
    await shot('submit-yaml');
    await page.getByRole('button', { name: 'Submit job' }).click();
    await page.getByRole('heading', { level: 1, name: 'ui-yaml-job' }).waitFor();
    await waitFor('the YAML job to complete', async () => (await page.locator('#job-status-text').textContent()) === 'Completed', 60000);
    await waitFor('its log', async () => (await page.locator('#job-log').textContent()).includes('from the YAML: bonjour'), 10000);
    assert.match(await page.locator('section[aria-labelledby="sec-params"]').textContent(), /Timeout5 min/);
    // The page maps a job file's fields as `cumulus job create --file` does.
    const mapped = await page.evaluate(async () => {
      const m = await import('/ui/static/js/submit.js');
      return m.jobFromSpec({
        name: 'n1', command: 'python train.py', compute: 'azureml:gpu', environment: { image: 'pytorch/pytorch:2.3' },
        resources: { instance_count: 2 }, distribution: { type: 'pytorch', process_count_per_instance: 4 },
        limits: { timeout: 90, max_cost: 2.5 }, inputs: { lr: 0.01, data: { type: 'uri_folder', path: 'https://example.com/d' } },
        outputs: { model: { type: 'uri_folder' } }, tags: { team: 'ml' },
      }, (c) => '/computes/' + c);
    });
    assert.deepEqual(JSON.parse(JSON.stringify(mapped)), {
      name: 'n1',
      body: { properties: {
        jobType: 'Command', command: 'python train.py', displayName: 'n1', experimentName: 'Default', tags: { team: 'ml' },
        computeId: '/computes/gpu', environmentId: 'image:pytorch/pytorch:2.3', resources: { instanceCount: 2 },
        distribution: { distributionType: 'PyTorch', processCountPerInstance: 4 },
        limits: { jobLimitsType: 'Command', timeout: 'PT90S', maxCost: 2.5 },
        inputs: { lr: { jobInputType: 'literal', value: '0.01' }, data: { jobInputType: 'uri_folder', uri: 'https://example.com/d' } },
        outputs: { model: { jobOutputType: 'uri_folder' } },
      } },
    });
    // Both show up in the jobs list.
    await mainNav('Jobs').click();
    await page.getByRole('link', { name: 'ui-yaml-job', exact: true }).waitFor();
    await page.getByRole('link', { name: 'ui-form-job', exact: true }).waitFor();
  });

  await step(t, 'a CLI job\'s uploaded input shows the path it came from', async () => {
    fs.mkdirSync(path.join(dataDir, 'proj', 'data'), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'proj', 'data', 'x.txt'), 'x\n');
    fs.writeFileSync(path.join(dataDir, 'proj', 'job.yml'), ['command: ls ${{inputs.data}}', `compute: azureml:${CLUSTER}`, 'name: ui-input-job',
      'inputs:', '  data:', '    type: uri_folder', '    path: ./data'].join('\n'));
    await cli('job', 'create', '--file', path.join(dataDir, 'proj', 'job.yml'));
    await page.goto(base + '/#/jobs/ui-input-job');
    const inputs = page.locator('table.job-data');
    await inputs.waitFor();
    assert.match(await inputs.locator('tbody tr', { hasText: 'data' }).textContent(), /^datainputuri_folder.*\.\/data \(uploaded\)/);
    assert.doesNotMatch(await inputs.textContent(), /[0-9a-f]{16}/, 'no content hash');
    await waitFor('the input job to end', async () => ['Completed', 'Failed'].includes(await page.locator('#job-status-text').textContent()), 60000);
  });

  await step(t, 'data assets have pages; a job shows where its inputs come from and its outputs go', async () => {
    fs.mkdirSync(path.join(dataDir, 'proj', 'numbers'), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'proj', 'numbers', 'n.txt'), '7\n');
    await cli('data', 'create', '--name', 'ui-numbers', '--path', path.join(dataDir, 'proj', 'numbers'), '--description', 'seven');
    await mainNav('Data').click();
    await page.getByRole('heading', { level: 1, name: 'Data' }).waitFor();
    const row = page.locator('table.data-assets tbody tr', { hasText: 'ui-numbers' });
    await waitFor('the data asset listed', async () => /ui-numbers1uri_folder1seven/.test(await row.textContent()));
    await row.getByRole('link', { name: 'ui-numbers', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'ui-numbers' }).waitFor();
    const version = page.locator('table.data-versions tbody tr').first();
    await waitFor('its version', async () => /^1uri_folderazureml:\/\/datastores\/workspaceblobstore\/paths\/LocalUpload\/[0-9a-f]+\/numbers\//.test(await version.textContent()));
    await shot('data-asset', { doc: true });

    fs.writeFileSync(path.join(dataDir, 'proj', 'data-job.yml'), ['command: cp ${{inputs.n}}/n.txt ${{outputs.out}}/copy.txt', `compute: azureml:${CLUSTER}`,
      'name: ui-data-job', 'inputs:', '  n:', '    type: uri_folder', '    path: azureml:ui-numbers@latest', 'outputs:', '  out:', '    type: uri_folder'].join('\n'));
    await cli('job', 'create', '--file', path.join(dataDir, 'proj', 'data-job.yml'));
    await page.goto(base + '/#/jobs/ui-data-job');
    const rows = page.locator('table.job-data tbody tr');
    await waitFor('the input and the output', async () => (await rows.count()) === 2);
    const input = rows.filter({ hasText: 'input' });
    assert.equal(await input.getByRole('link', { name: 'azureml:ui-numbers@latest' }).getAttribute('href'), '#/data/ui-numbers');
    assert.match(await input.textContent(), /LocalUpload\/[0-9a-f]+\/numbers\//);
    assert.match(await rows.filter({ hasText: 'output' }).textContent(), /azureml:\/\/datastores\/workspaceblobstore\/paths\/azureml\/ui-data-job\/out\//);
    await waitFor('the data job to complete', async () => (await page.locator('#job-status-text').textContent()) === 'Completed', 60000);
    await page.locator('#job-data-section').scrollIntoViewIfNeeded();
    await shot('job-data');
  });

  await step(t, 'the jobs list pages; both lists search', async () => {
    for (let i = 1; i <= 6; i++) await cli('job', 'create', '--compute', CLUSTER, '--name', `ui-page-${i}`, '--command', 'true');
    await mainNav('Jobs').click();
    const rows = page.locator('table.jobs tbody tr');
    const info = page.locator('#jobs-pager-info');
    await waitFor('12 jobs on one page of 25', async () => (await info.textContent()) === '1–12 of 12');
    await page.getByLabel('Per page').selectOption('10');
    await waitFor('a page of 10', async () => (await rows.count()) === 10 && (await info.textContent()) === '1–10 of 12');
    assert.equal(await page.getByRole('button', { name: 'Previous' }).isDisabled(), true);
    await page.getByRole('button', { name: 'Next' }).click();
    await waitFor('the second page', async () => (await rows.count()) === 2 && (await info.textContent()) === '11–12 of 12');
    // The oldest job is on the last page.
    await page.getByRole('link', { name: JOB, exact: true }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Next' }).isDisabled(), true);
    // A search starts from the first page.
    await page.getByLabel('Search', { exact: true }).fill('ui-page');
    await waitFor('the six ui-page jobs', async () => (await rows.count()) === 6);
    assert.equal(await page.locator('#jobs-pager').isHidden(), true, 'no pages for six jobs');
    await page.getByLabel('Search', { exact: true }).fill('');
    await page.getByLabel('Per page').selectOption('25');
    await waitFor('all on one page', async () => (await rows.count()) === 12);
    // The cluster list searches its names, sizes, states and tags.
    await mainNav('Compute clusters').click();
    await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
    const search = page.locator('#compute-filter');
    await search.fill('team=studio');
    await page.locator('table.clusters tbody tr', { hasText: CLUSTER }).waitFor();
    await search.fill('nothing-like-this');
    await page.getByText('No cluster matches the search.').waitFor();
    assert.match(await page.locator('#clusters-summary').textContent(), /0 match/);
    await search.fill('');
    await page.locator('table.clusters tbody tr', { hasText: CLUSTER }).waitFor();
  });

  await step(t, 'the cost page shows what the cluster cost, by compute and by job', async () => {
    await page.getByRole('link', { name: 'Cost', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Cost' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Cost', exact: true }).getAttribute('aria-current'), 'page');
    assert.equal(await page.getByLabel('Period', { exact: true }).inputValue(), 'month');
    const rows = page.locator('#cost-table tbody tr');
    const row = rows.filter({ hasText: CLUSTER });
    await row.waitFor({ timeout: 20000 });
    const cost = Number(await row.locator('td[data-cost]').getAttribute('data-cost'));
    assert.ok(cost > 0, `the cluster's cost is above 0: ${cost}`);
    assert.match(await row.locator('td[data-cost]').textContent(), /^(< 0\.01|\d+\.\d\d) USD$/);
    assert.match(await page.locator('#cost-table tfoot').textContent(), /Total.*USD/);
    // The chart: a bar per day of the month so far, labelled with the totals.
    const chart = page.locator('svg.cost-chart');
    await chart.locator('rect.bar').first().waitFor();
    const label = await chart.getAttribute('aria-label');
    assert.match(label, /^Cost per (day|hour|\d+ hours) by compute, this month: total (< 0\.01|\d+\.\d\d) USD; ui-cluster (< 0\.01|\d+\.\d\d) USD\.$/);
    assert.equal(await chart.getAttribute('role'), 'img');
    assert.ok(Number(await chart.getAttribute('data-bars')) >= 1);
    assert.match(await page.locator('#cost-chart ~ ul.legend, figure ul.legend').first().textContent(), /ui-cluster/);
    assert.equal(await page.locator('#cost-unpriced').isHidden(), true, 'the catalogue prices every size');
    // The CSV is built in the page.
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download CSV' }).click()]);
    assert.match(download.suggestedFilename(), /^cost-default-compute-\d{4}-\d\d-\d\d-\d{4}-\d\d-\d\d\.csv$/);
    const csv = fs.readFileSync(await download.path(), 'utf8').split('\r\n');
    assert.equal(csv[0], 'key,workspace,compute,nodeHours,busyNodeHours,idleNodeHours,cost,busyCost,idleCost,currency');
    assert.ok(csv.some((l) => l.startsWith(`${CLUSTER},default,${CLUSTER},`)), csv.join('\n'));
    assert.ok(csv.some((l) => l.startsWith('total,')));

    // Grouped by job: both jobs, and the nodes' idle time as its own row.
    await page.getByLabel('Group by', { exact: true }).selectOption('job');
    await page.locator('#cost-table thead', { hasText: 'Job' }).waitFor();
    await rows.filter({ hasText: JOB2 }).waitFor();
    await rows.filter({ hasText: JOB }).first().waitFor();
    assert.match(await rows.filter({ hasText: JOB2 }).textContent(), new RegExp(CLUSTER));
    await rows.filter({ hasText: 'no job' }).waitFor();
    assert.match(await page.locator('svg.cost-chart').getAttribute('aria-label'), /by compute, this month: .*ui-cluster/);
    // A tag key is asked for before grouping by tag.
    await page.getByLabel('Group by', { exact: true }).selectOption('tag');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'cost-tag');
    await page.getByLabel('Tag key').fill('team');
    await page.getByLabel('Tag key').press('Enter');
    await page.locator('#cost-table thead', { hasText: 'Tag team' }).waitFor();
    await rows.filter({ hasText: 'studio' }).first().waitFor();
    assert.match(await page.locator('svg.cost-chart').getAttribute('aria-label'), /by tag team, this month: .*studio/);
    await page.getByLabel('Group by', { exact: true }).selectOption('compute');
    await row.waitFor();
    // A custom day: a bar per hour.
    const today = new Date().toISOString().slice(0, 10);
    await page.getByLabel('Period', { exact: true }).selectOption('custom');
    await page.getByLabel('From', { exact: true }).fill(today);
    await page.getByLabel('To', { exact: true }).fill(today);
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await waitFor('the custom day', async () => new RegExp(`^Cost per hour by compute, ${today}: .*ui-cluster`).test(await page.locator('svg.cost-chart').getAttribute('aria-label')));
    assert.ok(Number(await page.locator('svg.cost-chart').getAttribute('data-bars')) <= 24);
    await shot('cost-hourly');
    await row.waitFor();
    await page.getByLabel('Period', { exact: true }).selectOption('7d');
    await waitFor('the last 7 days', async () => /last 7 days/.test(await page.locator('svg.cost-chart').getAttribute('aria-label')));
    assert.equal(await page.locator('svg.cost-chart').getAttribute('data-bars'), '7');
  });

  await step(t, 'budgets: created through the dialog, shown with what they spent, deleted', async () => {
    const newBtn = page.getByRole('button', { name: 'New budget' });
    await newBtn.click();
    const dialog = page.getByRole('dialog', { name: 'New budget' });
    await dialog.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.id), 'b-name');
    await dialog.getByLabel('Name', { exact: true }).fill('ui-budget');
    await dialog.getByLabel(/^Amount/).fill('-5');
    await dialog.getByLabel('One compute').check();
    await dialog.getByLabel('Compute', { exact: true }).selectOption(CLUSTER);
    await dialog.getByLabel('Action at 100 %').selectOption('StopScaleUp');
    await dialog.getByRole('button', { name: 'Create' }).click();
    // The server refuses the amount; its message shows next to the field.
    await dialog.locator('#b-amount-error', { hasText: 'amount must be positive' }).waitFor();
    assert.equal(await dialog.getByLabel(/^Amount/).getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'b-amount');
    await shot('budget-rejected-amount');
    await dialog.getByLabel(/^Amount/).fill('250');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await dialog.waitFor({ state: 'detached' });
    const row = page.locator('table.budgets tbody tr', { hasText: 'ui-budget' });
    await row.waitFor();
    assert.match(await row.textContent(), /Compute ui-cluster/);
    assert.match(await row.textContent(), /250\.00 USD \/ month/);
    assert.match(await row.textContent(), /Stop scale-up/);
    // The controllers judge it within seconds of its creation: what it spent, as a meter.
    await row.locator("meter").waitFor({ timeout: 20000 });
    assert.match(await row.locator('meter').getAttribute('aria-label'), /^ui-budget: \d+\.\d\d USD of 250\.00 USD spent$/);
    assert.equal(await row.locator('meter').getAttribute('max'), '250');
    assert.match(await row.textContent(), /\d+\.\d\d USD \(\d+ %\)/);
    assert.match(await row.textContent(), /No/);
    await page.locator('#toast').waitFor({ state: 'hidden', timeout: 10000 });
    await page.evaluate(() => { document.activeElement.blur(); window.scrollTo(0, 0); });
    await shot('cost', { fullPage: true });

    // A Reader sees the cost and the budgets; the server refuses their
    // writes, and the page says so without hiding anything.
    await cli('auth', 'principal', 'create', '-n', 'ui-reader');
    await cli('auth', 'role', 'assign', '--principal', 'ui-reader', '--role', 'Reader');
    const readerToken = JSON.parse(await cli('auth', 'token', 'create', '--principal', 'ui-reader', '-o', 'json')).token;
    assert.ok(readerToken, 'a token for the reader');
    const other = await browser.newContext({ viewport: { width: 1366, height: 860 } });
    try {
      const p2 = await other.newPage();
      p2.on('pageerror', (e) => pageErrors.push('reader pageerror: ' + e.message));
      await p2.goto(base + '/#/cost');
      await p2.getByLabel('API token').fill(readerToken);
      await p2.getByRole('button', { name: 'Sign in' }).click();
      await p2.getByRole('heading', { level: 1, name: 'Cost' }).waitFor();
      await p2.locator('#cost-table tbody tr', { hasText: CLUSTER }).waitFor();
      await p2.locator('table.budgets tbody tr', { hasText: 'ui-budget' }).locator('meter').waitFor();
      await p2.getByRole('button', { name: 'New budget' }).click();
      const d2 = p2.getByRole('dialog', { name: 'New budget' });
      await d2.getByLabel('Name', { exact: true }).fill('reader-budget');
      await d2.getByLabel(/^Amount/).fill('10');
      await d2.getByRole('button', { name: 'Create' }).click();
      await d2.getByRole('alert').filter({ hasText: /ui-reader|not allowed|authoriz/i }).waitFor();
      await p2.keyboard.press('Escape');
      await p2.getByRole('button', { name: 'Delete budget ui-budget' }).click();
      const c2 = p2.getByRole('alertdialog', { name: 'Delete budget ui-budget?' });
      await c2.getByRole('button', { name: 'Delete budget' }).click();
      await c2.getByRole('alert').filter({ hasText: /ui-reader|not allowed|authoriz/i }).waitFor();
      await p2.keyboard.press('Escape');
      await p2.locator('#budgets-error', { hasText: /ui-reader|not allowed|authoriz/i }).waitFor();
      assert.equal(await p2.locator('table.budgets tbody tr', { hasText: 'ui-budget' }).count(), 1, 'the budget stays in the table');
    } finally {
      await other.close();
    }

    await page.getByRole('button', { name: 'Delete budget ui-budget' }).click();
    const confirm = page.getByRole('alertdialog', { name: 'Delete budget ui-budget?' });
    await confirm.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Cancel', 'Cancel has focus, not Delete');
    await confirm.getByRole('button', { name: 'Delete budget' }).click();
    await confirm.waitFor({ state: 'detached' });
    await page.getByText('No budget in this workspace').waitFor();
    assert.deepEqual(JSON.parse(await cli('budget', 'list', '-o', 'json')) || [], []);
  });

  await step(t, 'the cost page fits a phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.locator('svg.cost-chart').waitFor();
      const w = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: innerWidth }));
      assert.ok(w.scroll <= w.inner, `no horizontal page scroll: ${JSON.stringify(w)}`);
      const box = await page.locator('svg.cost-chart').boundingBox();
      assert.ok(box && box.x >= 0 && box.x + box.width <= 390, 'the chart is within the screen: ' + JSON.stringify(box));
      await shot('cost-phone', { fullPage: true });
    } finally {
      await page.setViewportSize({ width: 1366, height: 860 });
    }
  });

  await step(t, 'every page works on a phone: no sideways scroll, the menu, the status in view', async () => {
    // A cluster that cannot grow for its job: why shows as text.
    await cli('compute', 'create', '-n', 'ui-blocked', '--max-instances', '1');
    await cli('job', 'create', '--compute', 'ui-blocked', '--name', 'ui-blocking-job', '--command', 'sleep 300');
    await cli('job', 'create', '--compute', 'ui-blocked', '--name', 'ui-blocked-job', '--command', 'true');
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(base + '/#/computes');
      await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
      const menu = page.getByRole('button', { name: 'Menu' });
      assert.equal(await mainNav('Jobs').isVisible(), false, 'the links fold behind Menu');
      const blocked = page.locator('table.clusters tbody tr', { has: page.getByRole('link', { name: 'ui-blocked' }) });
      await blocked.locator('.row-problem', { hasText: /Queued jobs wait: .*maximum nodes 1/ }).waitFor({ timeout: 30000 });
      const problem = await blocked.locator('.row-problem').boundingBox();
      assert.ok(problem && problem.x >= 0 && problem.x + problem.width <= 390, 'the reason is on screen: ' + JSON.stringify(problem));
      await shot('clusters-phone', { fullPage: true });
      const pages = [
        ['#/computes', 'Compute clusters', 'table.clusters', 'State'],
        [`#/computes/${CLUSTER}`, CLUSTER, 'section[aria-labelledby="sec-nodes"] table', null],
        ['#/jobs', 'Jobs', 'table.jobs', 'Status'],
        [`#/jobs/${JOB}`, JOB, 'section[aria-labelledby="sec-attempts"] table', 'Exit code'],
        ['#/quota', 'Quota and usage', 'section[aria-labelledby="sec-usage"] table', 'In use'],
        ['#/cost', 'Cost', '#cost-table', 'Cost'],
        ['#/submit', 'Submit a job', null, null],
      ];
      for (const [hash, title, tableSel, col] of pages) {
        // Reach each page through the menu where the nav has it.
        const link = { computes: 'Compute clusters', jobs: 'Jobs', quota: 'Quota and usage', cost: 'Cost' }[hash.slice(2)];
        if (link) {
          await menu.click();
          assert.equal(await menu.getAttribute('aria-expanded'), 'true');
          await mainNav(link).click();
          assert.equal(await menu.getAttribute('aria-expanded'), 'false', 'the menu folds after a choice');
        } else {
          await page.goto(base + '/' + hash);
        }
        await page.getByRole('heading', { level: 1, name: title }).waitFor();
        if (tableSel) await page.locator(`${tableSel} tbody tr`).first().waitFor();
        await page.waitForTimeout(300);
        const w = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(w <= 390, `${hash}: the page is ${w} px wide at 390`);
        if (col) {
          // The key column of the first row is on screen, under its name.
          const cell = page.locator(`${tableSel} tbody tr`).first().locator(`[data-label="${col}"]`);
          const box = await cell.boundingBox();
          assert.ok(box && box.x >= 0 && box.x + box.width <= 390 && box.width > 100, `${hash}: ${col} on screen: ${JSON.stringify(box)}`);
          assert.ok((await cell.textContent()).trim(), `${hash}: ${col} has a value`);
        }
        await shot('phone-' + (hash.slice(2).replace(/\W+/g, '-') || 'home'), { fullPage: true });
      }
      // The node chart is drawn at the phone's width: its labels keep their size.
      await page.goto(base + `/#/computes/${CLUSTER}`);
      const label = page.locator('svg.chart text.axis').first();
      await label.waitFor();
      const size = await label.evaluate((el) => el.getBoundingClientRect().height);
      assert.ok(size >= 10, `chart labels ${size} px tall`);
      // Escape folds the menu and gives focus back to its button.
      await menu.click();
      await page.keyboard.press('Escape');
      assert.equal(await menu.getAttribute('aria-expanded'), 'false');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'menu-toggle');
    } finally {
      await page.setViewportSize({ width: 1366, height: 860 });
    }
    await cli('job', 'cancel', '-n', 'ui-blocked-job');
    await cli('job', 'cancel', '-n', 'ui-blocking-job');
    await cli('compute', 'delete', '-n', 'ui-blocked', '--yes');
  });

  await step(t, 'keyboard: Tab goes from the skip link through the nav to the page', async () => {
    await page.goto(base + '/#/computes');
    await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
    const skip = page.getByRole('link', { name: 'Skip to content' });
    await skip.focus();
    const seen = ['Skip to content'];
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      seen.push(await page.evaluate(() => (document.activeElement.id === 'workspace-select' ? 'Workspace' : document.activeElement.textContent.trim())));
    }
    const at = (n) => seen.indexOf(n);
    const order = ['Skip to content', 'Compute clusters', 'Jobs', 'Quota and usage', 'Cost', 'Workspace', 'Sign out', '+ New'].map(at);
    assert.ok(order.every((i) => i >= 0), 'every stop is reached: ' + seen.join(' | '));
    assert.deepEqual([...order].sort((a, b) => a - b), order, 'in order: ' + seen.join(' | '));
    // The skip link jumps over the nav.
    await skip.focus();
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.textContent.trim()), '+ New');
  });

  await step(t, 'dark mode follows the system: dark backgrounds, readable text', async () => {
    const contrastOf = (sel) => page.evaluate((sel) => {
      const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
      const lum = ([r, g, b]) => {
        const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
      };
      const el = document.querySelector(sel);
      if (!el) return null;
      let bgEl = el;
      let bg = getComputedStyle(bgEl).backgroundColor;
      while (bgEl && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) { bgEl = bgEl.parentElement; bg = bgEl ? getComputedStyle(bgEl).backgroundColor : 'rgb(255, 255, 255)'; }
      const a = lum(rgb(getComputedStyle(el).color)), b = lum(rgb(bg));
      return { bg: lum(rgb(bg)), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) };
    }, sel);
    await page.emulateMedia({ colorScheme: 'dark' });
    try {
      await page.goto(base + '/#/jobs');
      await page.locator('table.jobs tbody tr').first().waitFor();
      const checks = ['main h1', 'table.jobs tbody td', 'table.jobs thead th', 'table.jobs tbody th a', '.badge', '#submit-job', '.help', '.topbar nav a'];
      for (const sel of checks) {
        const c = await contrastOf(sel);
        assert.ok(c, sel + ' is on the page');
        assert.ok(c.ratio >= 4.5, `${sel}: contrast ${c.ratio.toFixed(2)} under 4.5`);
      }
      const body = await contrastOf('main');
      assert.ok(body.bg < 0.05, `the background is dark: luminance ${body.bg}`);
      const card = await contrastOf('table.jobs tbody td');
      assert.ok(card.bg < 0.05, `tables are dark: luminance ${card.bg}`);
      await shot('jobs-dark');
      await page.goto(base + `/#/computes/${CLUSTER}`);
      await page.locator('svg.chart').waitFor();
      assert.ok((await contrastOf('section[aria-labelledby="sec-settings"] dd')).ratio >= 4.5);
      assert.ok((await contrastOf('section[aria-labelledby="sec-settings"] dt')).ratio >= 4.5);
      await shot('cluster-dark', { fullPage: true });
    } finally {
      await page.emulateMedia({ colorScheme: 'light' });
    }
    assert.ok((await contrastOf('main')).bg > 0.8, 'light again');
  });

  await step(t, 'the quota page shows usage per location', async () => {
    await page.getByRole('link', { name: 'Quota and usage' }).click();
    await page.getByRole('heading', { level: 1, name: 'Quota and usage' }).waitFor();
    const usage = page.locator('section[aria-labelledby="sec-usage"] tbody');
    await usage.getByText('Total Cluster Dedicated Regional vCPUs').waitFor();
    const dsv2 = usage.locator('tr', { hasText: 'Standard DSv2 Family Cluster Dedicated vCPUs' });
    await dsv2.waitFor();
    assert.match(await dsv2.textContent(), /8 of 400 cores/);
    assert.equal(await usage.getByText('Standard NCSv3 Family Cluster Dedicated vCPUs').count(), 0, 'families not in use are folded');
    await page.getByLabel('Show VM families with no cores in use').check();
    await usage.getByText('Standard NCSv3 Family Cluster Dedicated vCPUs').waitFor();
    await page.getByLabel('Show VM families with no cores in use').uncheck();
    await page.locator('section[aria-labelledby="sec-qclusters"] tbody').getByRole('link', { name: CLUSTER }).waitFor();
    await shot('quota', { doc: true });
  });

  await step(t, 'changes max nodes (and the idle time) from the clusters page', async () => {
    await page.getByRole('link', { name: 'Compute clusters' }).click();
    const row = page.locator('table.clusters tbody tr', { has: page.getByRole('link', { name: CLUSTER }) });
    await row.getByText('2 idle').waitFor();
    await shot('clusters', { doc: true });
    await page.getByRole('button', { name: `Edit scale settings of ${CLUSTER}` }).click();
    const dialog = page.getByRole('dialog', { name: `Scale settings of ${CLUSTER}` });
    await dialog.waitFor();
    assert.equal(await dialog.getByLabel('Maximum nodes').inputValue(), '2');
    await dialog.getByLabel('Minimum nodes').fill('3');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.locator('#s-min-error', { hasText: 'Minimum nodes (3) may not exceed maximum nodes (2)' }).waitFor();
    await dialog.getByLabel('Minimum nodes').fill('0');
    await dialog.getByLabel('Maximum nodes').fill('4');
    await dialog.getByLabel('Idle seconds before scale down').fill('5');
    await dialog.getByLabel('Idle seconds before scale down').press('Enter'); // Enter saves
    await dialog.waitFor({ state: 'detached' });
    await row.getByText('0 – 4').waitFor();
    const shown = JSON.parse(await cli('compute', 'show', '-n', CLUSTER));
    assert.equal(shown.max_instances, 4);
    assert.equal(shown.idle_time_before_scale_down, 5);
  });

  await step(t, 'the chart shows the cluster grow and shrink back', async () => {
    await page.getByRole('link', { name: CLUSTER }).click();
    await page.getByRole('heading', { level: 1, name: CLUSTER }).waitFor();
    await page.getByText('No nodes: the cluster grows when jobs are queued.').waitFor({ timeout: 60000 });
    await waitFor('the chart to end at zero nodes', async () => /now 0 /.test(await page.locator('svg.chart').getAttribute('aria-label')), 10000);
    assert.match(await page.locator('svg.chart').getAttribute('aria-label'), /peak 2/);
    await page.getByRole('button', { name: '15 min', exact: true }).click();
    assert.match(await page.locator('svg.chart').getAttribute('aria-label'), /over the last 15 min/);
    await page.getByRole('button', { name: '1 min', exact: true }).click();
    // The cluster's events tell the same story, newest first: two nodes
    // requested and ready, idle after their jobs, removed after their idle
    // time, and the resizes.
    const events = page.locator('#compute-events li.event');
    await waitFor('the nodes removed in the events', async () => (await events.filter({ hasText: 'NodeRemoved' }).count()) === 2, 20000);
    const types = await events.evaluateAll((els) => els.map((e) => e.dataset.type));
    for (const want of ['NodeRequested', 'NodeReady', 'NodeIdle', 'NodeLeaving', 'ResizeStarted', 'ResizeEnded']) {
      assert.ok(types.includes(want), `no ${want} in the cluster's events: ${types.join(', ')}`);
    }
    assert.ok(types.indexOf('NodeRemoved') < types.lastIndexOf('NodeRequested'), `newest first: ${types.join(', ')}`);
    assert.match(await events.filter({ hasText: 'NodeReady' }).first().textContent(), /ready \S+ after it was requested/);
    await page.locator('#toast').waitFor({ state: 'hidden', timeout: 10000 });
    await page.evaluate(() => document.activeElement.blur());
    await shot('cluster', { fullPage: true, doc: true });
  });

  await step(t, 'deletes the cluster after confirmation', async () => {
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    const dialog = page.getByRole('alertdialog', { name: `Delete ${CLUSTER}?` });
    await dialog.waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Cancel', 'Cancel has focus, not Delete');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await dialog.getByRole('button', { name: 'Delete cluster' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.getByText(`Cluster ${CLUSTER} no longer exists`).waitFor({ timeout: 60000 });
    await page.getByRole('link', { name: 'Back to the compute clusters' }).click();
    await page.getByText('No clusters in this workspace yet').waitFor();
    await assert.rejects(cli('compute', 'show', '-n', CLUSTER));
  });

  await step(t, 'a sweep shows its trials, the best highlighted, and a chart of the metric per trial', async () => {
    // The trial logs acc = x·(k+1)/3 at steps k = 0, 1, 2 through MLflow's
    // REST API, as mlflow.log_metric does, with the variables every job gets.
    const code = path.join(dataDir, 'sweep-code');
    fs.mkdirSync(code, { recursive: true });
    fs.writeFileSync(path.join(code, 'trial.mjs'), `
const x = Number(process.argv[2]);
const env = process.env;
for (let k = 0; k < 3; k++) {
  const r = await fetch(env.MLFLOW_TRACKING_URI + '/api/2.0/mlflow/runs/log-metric', {
    method: 'POST', headers: { Authorization: 'Bearer ' + env.MLFLOW_TRACKING_TOKEN, 'Content-Type': 'application/json' },
    body: JSON.stringify({ run_id: env.MLFLOW_RUN_ID, key: 'acc', value: x * (k + 1) / 3, step: k, timestamp: Date.now() }) });
  if (!r.ok) { console.error(r.status, await r.text()); process.exit(1); }
}
`);
    fs.writeFileSync(path.join(dataDir, 'sweep.yml'), `$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
type: sweep
name: ui-sweep
trial:
  code: ./sweep-code
  command: node trial.mjs \${{search_space.x}}
compute: azureml:sweep-cpu
sampling_algorithm: grid
search_space:
  x:
    type: choice
    values: [0.2, 0.9, 0.5]
objective:
  goal: maximize
  primary_metric: acc
limits:
  max_total_trials: 3
  max_concurrent_trials: 2
`);
    await cli('compute', 'create', '-n', 'sweep-cpu', '--max-instances', '2', '--idle-time-before-scale-down', '5');
    await cli('job', 'create', '--file', path.join(dataDir, 'sweep.yml'));
    await page.goto(base + '/#/jobs/ui-sweep');
    await page.getByRole('heading', { name: 'Trials' }).waitFor();
    await page.locator('#sweep-best', { hasText: 'Best: ui-sweep_1, acc 0.9' }).waitFor({ timeout: 90000 });
    const rows = page.locator('table.trials tbody tr');
    await waitFor('three completed trials', async () => (await rows.filter({ hasText: 'Completed' }).count()) === 3, 60000);
    assert.equal(await page.locator('tr.best-row').getAttribute('data-key'), 'ui-sweep_1');
    assert.match(await page.locator('tr.best-row').textContent(), /0\.9.*0\.9/);
    assert.equal(await page.locator('#sweep-chart circle').count(), 3);
    assert.equal(await page.locator('#sweep-chart circle.best').count(), 1);
    const trials = await cli('job', 'list', '--parent', 'ui-sweep', '-o', 'table');
    assert.match(trials, /ui-sweep_1\s+Completed\s+0\.9\s+0\.9\s+\*/);
    await shot('sweep', { fullPage: true });
    // A trial's page charts its metric over steps.
    await page.getByRole('link', { name: 'ui-sweep_1', exact: true }).click();
    await page.getByRole('heading', { name: 'Metrics' }).waitFor();
    assert.equal(await page.locator('#job-metrics circle').count(), 3);
    await cli('compute', 'delete', '-n', 'sweep-cpu', '--yes', '--no-wait').catch(() => {});
    await page.goto(base + '/#/computes');
    await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
  });

  await step(t, 'a fair-share cluster shows where each group stands and the queue in the order it will start', async () => {
    const shared = 'ui-shared';
    await cli('compute', 'create', '-n', shared, '--max-instances', '1', '--queue-policy', 'fair', '--fair-share-by', 'tag:team',
      '--fair-share-weight', 'vision=2');
    // vision's first job holds the only node; then vision and speech queue.
    await cli('job', 'create', '--compute', shared, '--name', 'ui-share-v1', '--command', 'sleep 600', '--tags', 'team=vision');
    await waitFor("vision's first job to start", async () => /Preparing|Running/.test(await cli('job', 'show', '-n', 'ui-share-v1', '--query', 'status', '-o', 'tsv')), 90000);
    for (const [n, team] of [['ui-share-v2', 'vision'], ['ui-share-s1', 'speech'], ['ui-share-s2', 'speech']]) {
      await cli('job', 'create', '--compute', shared, '--name', n, '--command', 'true', '--tags', `team=${team}`);
    }
    await page.goto(base + `/#/computes/${shared}`);
    await page.getByRole('heading', { level: 1, name: shared }).waitFor();
    const settings = page.locator('section[aria-labelledby="sec-settings"]');
    await waitFor('the settings', async () => /Queue/.test(await settings.textContent()), 30000);
    assert.match(await settings.textContent(), /Queuefair share by tag team \(weights: vision 2\)/);
    const groups = page.locator('section[aria-labelledby="sec-groups"] tbody tr');
    await waitFor('both groups', async () => (await groups.count()) === 2 && /speech/.test(await groups.allTextContents()), 30000);
    const cells = async (row) => row.locator('th, td').allTextContents();
    const byGroup = {};
    for (let i = 0; i < 2; i++) {
      const c = await cells(groups.nth(i));
      byGroup[c[0]] = c; // Group, Weight, Usage, Held lately, Nodes now, Share, Waiting jobs
    }
    assert.equal(byGroup.vision[1], '2', 'vision weighs 2');
    assert.equal(byGroup.vision[4], '1', 'vision holds the node');
    assert.equal(byGroup.speech[6], '2 (2 nodes)');
    // speech holds nothing: its first job comes first; then vision, which
    // weighs 2 and holds 1 node, stands as low as speech with one.
    const jobs = page.locator('section[aria-labelledby="sec-jobs"] tbody tr');
    await waitFor('the queue in order', async () => (await jobs.count()) === 4 && /Queued1/.test(await jobs.allTextContents()), 30000);
    const order = (await jobs.allTextContents()).map((r) => r.match(/ui-share-[a-z]\d/)[0]);
    assert.deepEqual(order, ['ui-share-v1', 'ui-share-s1', 'ui-share-v2', 'ui-share-s2']);
    const first = await cells(jobs.nth(1)); // Job, Status, Place in queue, Group, Nodes, Submitted, Running for, Message
    assert.equal(first[2], '1');
    assert.equal(first[3], 'speech');
    assert.match(first[7], /speech is within its share/);
    await shot('cluster-fair-share', { fullPage: true });
    await cli('compute', 'delete', '-n', shared, '--yes');
  });

  await step(t, 'run views: metric charts to read and zoom, runs side by side, outputs and logs as files, the tier in the list', async () => {
    // Two runs that log loss and acc over 40 steps the MLflow way, with
    // their learning rate as a parameter, and write ./outputs; a job too
    // short for a utilization sample; on a low-priority cluster.
    const code = path.join(dataDir, 'runs-code');
    fs.mkdirSync(code, { recursive: true });
    fs.writeFileSync(path.join(code, 'train.mjs'), `
import fs from 'node:fs';
const lr = Number(process.argv[2]);
const env = process.env;
const call = async (what, body) => {
  const r = await fetch(env.MLFLOW_TRACKING_URI + '/api/2.0/mlflow/runs/' + what, { method: 'POST',
    headers: { Authorization: 'Bearer ' + env.MLFLOW_TRACKING_TOKEN, 'Content-Type': 'application/json' },
    body: JSON.stringify({ run_id: env.MLFLOW_RUN_ID, ...body }) });
  if (!r.ok) { console.error(r.status, await r.text()); process.exit(1); }
};
await call('log-parameter', { key: 'lr', value: String(lr) });
const metrics = [];
for (let k = 0; k < 40; k++) {
  metrics.push({ key: 'loss', value: Math.exp(-lr * k), step: k, timestamp: Date.now() });
  metrics.push({ key: 'acc', value: 1 - Math.exp(-lr * k) / 2, step: k, timestamp: Date.now() });
}
await call('log-batch', { metrics });
fs.mkdirSync('outputs/model', { recursive: true });
fs.writeFileSync('outputs/report.txt', 'final loss ' + Math.exp(-lr * 39) + '\\n');
fs.writeFileSync('outputs/model/weights.txt', 'lr=' + lr + '\\n');
console.log('trained with lr', lr);
`);
    await cli('compute', 'create', '-n', 'runs-lp', '--tier', 'low_priority', '--max-instances', '2', '--idle-time-before-scale-down', '5');
    for (const [n, lr] of [['run-a', '0.1'], ['run-b', '0.3']]) {
      await cli('job', 'create', '--compute', 'runs-lp', '--name', n, '--code', code, '--command', `node train.mjs ${lr}`);
    }
    await cli('job', 'create', '--compute', 'runs-lp', '--name', 'run-quick', '--command', 'true');

    // The tier stays in the cluster list at 1280 px and on a phone.
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 860 });
      await page.goto(base + '/#/computes');
      const row = page.locator('table.clusters tbody tr', { has: page.getByRole('link', { name: 'runs-lp', exact: true }) });
      const tier = row.locator('.tier-low');
      await tier.waitFor({ timeout: 20000 });
      assert.equal(await tier.textContent(), 'Low priority');
      assert.ok(await tier.isVisible(), `the tier is shown at ${width} px`);
      const box = await tier.boundingBox();
      assert.ok(box && box.x >= 0 && box.x + box.width <= width, `the tier is on screen at ${width} px: ${JSON.stringify(box)}`);
    }
    await page.setViewportSize({ width: 1366, height: 860 });

    for (const n of ['run-a', 'run-b', 'run-quick']) {
      await waitFor(`${n} to complete`, async () => JSON.parse(await cli('job', 'show', '-n', n)).status === 'Completed', 180000, 1000);
    }

    // A metric's chart is as wide as its card, with round ticks and named
    // axes at a readable size.
    await page.goto(base + '/#/jobs/run-a');
    await page.getByRole('heading', { name: 'Metrics' }).waitFor();
    const loss = page.locator('figure.metric-figure[data-metric="loss"] svg.metric-chart');
    const acc = page.locator('figure.metric-figure[data-metric="acc"] svg.metric-chart');
    await loss.waitFor();
    await loss.scrollIntoViewIfNeeded();
    const lb = await loss.boundingBox();
    assert.ok(lb.width >= 700 && lb.height >= 250, 'the chart is big: ' + JSON.stringify(lb));
    const vb = await loss.evaluate((el) => el.viewBox.baseVal.width);
    assert.ok(Math.abs(lb.width / vb - 1) < 0.05, `drawn at its width (${lb.width} px for ${vb})`);
    assert.ok(await loss.locator('.tick-y').count() >= 4 && await loss.locator('.tick-x').count() >= 5, 'ticks on both axes');
    assert.deepEqual(await loss.locator('.axis-title').allTextContents(), ['step', 'loss']);
    const tick = await loss.locator('.tick-x').first().evaluate((el) => el.getBoundingClientRect().height);
    assert.ok(tick >= 12, `tick labels ${tick} px tall`);
    assert.equal(await loss.getAttribute('data-x1'), '39');
    assert.match(await loss.getAttribute('aria-label'), /^loss by step: latest run-a 0\.0\d+ at step 39\.$/);
    // The values under the pointer.
    await page.mouse.move(lb.x + lb.width / 2, lb.y + lb.height / 2);
    assert.match(await page.locator('figure.metric-figure[data-metric="loss"] .chart-readout').textContent(), /^step \d+: 0\.\d+/);
    // Zoom: a drag across one chart shows those steps on every chart.
    await page.mouse.move(lb.x + lb.width * 0.3, lb.y + lb.height / 2);
    await page.mouse.down();
    await page.mouse.move(lb.x + lb.width * 0.45, lb.y + lb.height / 2, { steps: 4 });
    await page.mouse.move(lb.x + lb.width * 0.6, lb.y + lb.height / 2, { steps: 4 });
    await page.mouse.up();
    const zoomed = async (el) => [Number(await el.getAttribute('data-x0')), Number(await el.getAttribute('data-x1'))];
    let [z0, z1] = await zoomed(loss);
    assert.ok(z0 > 5 && z1 < 30 && z1 > z0, `zoomed to steps ${z0}–${z1}`);
    assert.deepEqual(await zoomed(acc), [z0, z1], 'the other chart shows the same steps');
    assert.equal(await page.locator('#metrics-zoom-from').inputValue(), String(Math.round(z0)));
    await page.getByRole('button', { name: 'Reset zoom' }).click();
    assert.deepEqual(await zoomed(loss), [0, 39]);
    await page.locator('#metrics-zoom-from').fill('10');
    await page.locator('#metrics-zoom-to').fill('20');
    await page.locator('#metrics-zoom-to').press('Enter');
    await page.locator('#metrics-zoom-from').focus();
    await waitFor('the typed steps', async () => JSON.stringify(await zoomed(acc)) === '[10,20]', 5000, 100);
    await shot('job-metrics', { fullPage: true });

    // The job's outputs and logs, as files.
    const files = page.locator('section[aria-labelledby="sec-files"]');
    const open = async (name) => files.getByRole('button', { name, exact: true }).click();
    await open('outputs/');
    await open('default/');
    await files.getByRole('button', { name: 'report.txt', exact: true }).waitFor();
    // Folders first, named with a slash as ls -F does.
    assert.deepEqual(await files.locator('table.files tbody th').allTextContents(), ['model/', 'report.txt']);
    await open('report.txt');
    await waitFor('report.txt in the viewer', async () => (await page.locator('#file-view').textContent()).startsWith('final loss 0.0'));
    assert.equal(await page.locator('#file-download').getAttribute('download'), 'report.txt');
    await open('model/');
    await open('weights.txt');
    await waitFor('weights.txt in the viewer', async () => (await page.locator('#file-view').textContent()) === 'lr=0.1\n');
    await files.locator('#files-path').getByRole('link', { name: 'Files' }).click();
    await open('logs/');
    await open('attempt 1/');
    await open('rank-0.log');
    await waitFor('the log in the viewer', async () => (await page.locator('#file-view').textContent()).includes('trained with lr 0.1'));
    assert.equal(await page.locator('#file-view-title').textContent(), 'logs/attempt 1/rank-0.log');
    await shot('job-files', { fullPage: true });

    // A short job that ran is not said to have never run.
    await page.goto(base + '/#/jobs/run-quick');
    await page.locator('#job-status-text', { hasText: 'Completed' }).waitFor();
    await waitFor('the utilization note', async () => /ran for|samples? of 1 node/.test(await page.locator('#usage-note-job').textContent()), 20000);
    assert.doesNotMatch(await page.locator('#usage-note-job').textContent(), /has not run/);

    // Runs picked from the list, side by side and overlaid.
    await page.goto(base + '/#/jobs');
    await page.getByRole('checkbox', { name: 'Compare run-a' }).check();
    await page.getByRole('checkbox', { name: 'Compare run-b' }).check();
    await page.getByRole('button', { name: 'Compare selected (2)' }).click();
    await page.getByRole('heading', { level: 1, name: 'Compare runs' }).waitFor();
    const ct = page.locator('#compare-table');
    await ct.waitFor();
    assert.deepEqual(await ct.locator('thead th').allTextContents(), ['Run', 'run-a', 'run-b']);
    const lrRow = ct.locator('tbody tr', { has: page.getByRole('rowheader', { name: 'lr', exact: true }) });
    assert.deepEqual(await lrRow.locator('td').allTextContents(), ['0.1', '0.3']);
    assert.match(await lrRow.getAttribute('class'), /differs/);
    const cLoss = page.locator('#compare-charts figure[data-metric="loss"]');
    await waitFor('two loss lines', async () => (await cLoss.locator('path.series').count()) === 2, 20000);
    assert.deepEqual(await cLoss.locator('ul.legend li').allTextContents(), ['run-a', 'run-b']);
    assert.match(await cLoss.locator('svg').getAttribute('aria-label'), /^loss by step, 2 runs: latest run-a .* at step 39; run-b .* at step 39\.$/);
    await cLoss.locator('svg').scrollIntoViewIfNeeded();
    const cb = await cLoss.locator('svg').boundingBox();
    await page.mouse.move(cb.x + cb.width * 0.2, cb.y + cb.height / 2);
    await page.mouse.down();
    await page.mouse.move(cb.x + cb.width * 0.5, cb.y + cb.height / 2, { steps: 5 });
    await page.mouse.up();
    [z0, z1] = await zoomed(page.locator('#compare-charts figure[data-metric="acc"] svg'));
    assert.ok(z1 < 30, `the compared runs zoom together: ${z0}–${z1}`);
    await shot('compare', { fullPage: true });
    // On a phone the page does not scroll sideways and the chart fits.
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.waitForTimeout(300);
      const w = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(w <= 390, `the compare page is ${w} px wide at 390`);
      const pb = await cLoss.locator('svg').boundingBox();
      assert.ok(pb.x >= 0 && pb.x + pb.width <= 390 && pb.width >= 300, 'the chart fits the phone: ' + JSON.stringify(pb));
      const t12 = await cLoss.locator('.tick-x').first().evaluate((el) => el.getBoundingClientRect().height);
      assert.ok(t12 >= 12, `tick labels ${t12} px tall on a phone`);
      await shot('compare-phone', { fullPage: true });
      await page.goto(base + '/#/jobs/run-b');
      const jl = page.locator('figure.metric-figure[data-metric="loss"] svg.metric-chart');
      await jl.waitFor();
      const jb = await jl.boundingBox();
      assert.ok(jb.x >= 0 && jb.x + jb.width <= 390 && jb.width >= 300, 'the job\'s chart fits the phone: ' + JSON.stringify(jb));
      assert.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= 390, 'the job page fits the phone');
    } finally {
      await page.setViewportSize({ width: 1366, height: 860 });
    }

    // A sweep's trials, from the sweep's page.
    await page.goto(base + '/#/jobs/ui-sweep');
    await page.getByRole('link', { name: 'Compare trials' }).click();
    await page.getByRole('heading', { level: 1, name: 'Trials of ui-sweep' }).waitFor();
    await waitFor('three trial lines', async () => (await page.locator('#compare-charts figure[data-metric="acc"] path.series').count()) === 3, 20000);
    assert.equal(await page.locator('#compare-table thead th').count(), 4);
    assert.deepEqual(await page.locator('#compare-table tbody tr', { has: page.getByRole('rowheader', { name: 'x', exact: true }) }).locator('td').allTextContents(), ['0.2', '0.9', '0.5']);
    await cli('compute', 'delete', '-n', 'runs-lp', '--yes');
    await page.goto(base + '/#/computes');
    await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
  });

  await step(t, 'a pipeline shows its steps as a graph with their status; its parallel step its mini-batches and the failed one', async () => {
    const dir = path.join(dataDir, 'pipe');
    for (const d of ['make', 'score']) fs.mkdirSync(path.join(dir, d), { recursive: true });
    fs.writeFileSync(path.join(dir, 'make', 'make.py'), `import os, sys
for i in range(12):
    open(os.path.join(sys.argv[1], "doc_%02d.txt" % i), "w").write("%d\\n" % i)
`);
    fs.writeFileSync(path.join(dir, 'score', 'score.py'), `import os
def init():
    pass
def run(mini_batch):
    if any(p.endswith("doc_07.txt") for p in mini_batch):
        raise ValueError("doc_07 is unreadable")
    return [os.path.basename(p) + " ok" for p in mini_batch]
`);
    fs.writeFileSync(path.join(dir, 'pipeline.yml'), `type: pipeline
name: ui-pipeline
settings:
  default_compute: azureml:pipe-cpu
jobs:
  make_docs:
    code: ./make
    command: python3 make.py \${{outputs.docs}}
    outputs:
      docs: {type: uri_folder}
  score_docs:
    type: parallel
    inputs:
      docs:
        type: uri_folder
        path: \${{parent.jobs.make_docs.outputs.docs}}
    outputs:
      scores: {type: uri_folder}
    input_data: \${{inputs.docs}}
    mini_batch_size: "2"
    mini_batch_error_threshold: 1
    retry_settings: {max_retries: 1, timeout: 30}
    resources: {instance_count: 2}
    max_concurrency_per_instance: 2
    task:
      type: run_function
      code: ./score
      entry_script: score.py
      append_row_to: \${{outputs.scores}}
  report:
    command: wc -l \${{inputs.scores}}/parallel_run_step.txt
    inputs:
      scores: \${{parent.jobs.score_docs.outputs.scores}}
`);
    await cli('compute', 'create', '-n', 'pipe-cpu', '--max-instances', '2', '--idle-time-before-scale-down', '5');
    await cli('job', 'create', '--file', path.join(dir, 'pipeline.yml'));
    await page.goto(base + '/#/jobs/ui-pipeline');
    await page.getByRole('heading', { name: 'Steps' }).waitFor();
    const graph = page.locator('#pipeline-graph');
    await graph.waitFor();
    assert.equal(await graph.locator('g.pipeline-step').count(), 3);
    assert.equal(await graph.locator('path.pipeline-edge').count(), 2);
    await page.locator('#pipeline-graph g.step-ok').nth(2).waitFor({ timeout: 120000 });
    await page.locator('#job-status-text', { hasText: 'Completed' }).waitFor({ timeout: 30000 });
    assert.match(await graph.getAttribute('aria-label'), /make_docs Completed, score_docs Completed, report Completed/);
    assert.match(await page.locator('table.steps tbody').textContent(), /score_docs\s*parallel\s*Completed\s*ui-pipeline_score_docs/);
    await shot('pipeline', { fullPage: true, doc: true });
    // The parallel step's page, through its box in the graph.
    await graph.locator('g[data-step="score_docs"]').click();
    await page.getByRole('heading', { name: 'Mini-batches', exact: true }).waitFor();
    await page.locator('#parallel-summary', { hasText: '5 of 6 mini-batches done, 1 failed' }).waitFor();
    assert.equal(await page.locator('#parallel-progress').getAttribute('aria-valuenow'), '6');
    assert.match(await page.locator('table.failures tbody').textContent(), /doc_06\.txt, doc_07\.txt.*ValueError: doc_07 is unreadable/);
    assert.match(await page.locator('dl.facts').first().textContent(), /Entry script\s*score\.py/);
    await page.locator('table.job-data').getByText('azureml://datastores/workspaceblobstore/paths/azureml/ui-pipeline_make_docs/docs', { exact: false }).first().waitFor();
    await page.locator('#sec-parallel').evaluate((el) => { el.scrollIntoView({ block: 'start' }); window.scrollBy(0, -90); });
    await shot('parallel', { doc: true });
    await cli('compute', 'delete', '-n', 'pipe-cpu', '--yes', '--no-wait').catch(() => {});
    // The jobs list of later steps shows the first page: these go.
    for (const j of ['ui-pipeline', 'ui-pipeline_make_docs', 'ui-pipeline_score_docs', 'ui-pipeline_report']) await cli('job', 'delete', '-n', j);
    await page.goto(base + '/#/computes');
    await page.getByRole('heading', { level: 1, name: 'Compute clusters' }).waitFor();
  });

  await step(t, 'switches workspaces', async () => {
    await cli('workspace', 'create', '-n', 'team-b');
    await cli('compute', 'create', '-n', 'team-b-cpu', '-w', 'team-b', '--max-instances', '1');
    const sel = page.getByLabel('Workspace');
    await sel.focus(); // the list refreshes on focus
    await waitFor('team-b in the switcher', async () => (await sel.locator('option').allTextContents()).includes('team-b'));
    await sel.selectOption('team-b');
    await page.getByRole('link', { name: 'team-b-cpu' }).waitFor();
    await page.getByText('1 cluster in workspace team-b').waitFor();
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByText('No jobs yet.').waitFor();
    await sel.selectOption('default');
    await page.getByRole('link', { name: JOB, exact: true }).waitFor();
  });

  await step(t, 'signs out', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    const status = await page.evaluate(async () => (await fetch('/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces?api-version=2024-04-01')).status);
    assert.equal(status, 401);
  });

  await step(t, 'no script errors in the page', async () => {
    assert.deepEqual(pageErrors, []);
  });
});
