// The job submit page: a form with the fields of `cumulus job create`, or
// an `az ml job` YAML file pasted as it is. Both build the same command
// job and submit it through the public API (PUT …/jobs/{name}), signed in
// by the page's session; the server checks it as it checks the CLI's.
import * as api from './api.js';
import { h, replace, field, announce, toast, humanize, showProblems, errorBanner } from './dom.js';

// The API's names in the form's words, for the server's messages.
const FORM_NAMES = {
  'limits.timeout': 'Timeout', instanceCount: 'Nodes', processCountPerInstance: 'Processes per node', computeId: 'Compute',
  environmentVariables: 'Environment variables', environmentId: 'Environment image', distributionType: 'Distribution',
  displayName: 'Display name', experimentName: 'Experiment',
};
// … and in the words of a job file, for a pasted one.
const YAML_NAMES = {
  'limits.timeout': 'limits.timeout', 'limits.maxCost': 'limits.max_cost', instanceCount: 'resources.instance_count',
  processCountPerInstance: 'distribution.process_count_per_instance', computeId: 'compute', environmentVariables: 'environment_variables',
  environmentId: 'environment', distributionType: 'distribution.type', displayName: 'display_name', experimentName: 'experiment_name',
  workerCount: 'distribution.worker_count', parameterServerCount: 'distribution.parameter_server_count', jobInputType: 'type', jobOutputType: 'type',
};
// where an API error's target points in the form.
const TARGETS = [
  [/^name$/i, 'j-name'],
  [/command/, 'j-command'],
  [/computeId/, 'j-compute'],
  [/instanceCount/, 'j-nodes'],
  [/processCountPerInstance/, 'j-procs'],
  [/distribution/, 'j-dist'],
  [/limits\.timeout/, 'j-timeout'],
  [/environmentVariables/, 'j-env'],
  [/environmentId/, 'j-image'],
  [/displayName/, 'j-display'],
  [/experimentName/, 'j-experiment'],
  [/tags/, 'j-tags'],
];

const ADJECTIVES = ['amber', 'bold', 'brave', 'calm', 'clever', 'crisp', 'eager', 'gentle', 'happy', 'keen', 'lively', 'lucid', 'mellow', 'nimble', 'quiet', 'sharp', 'sunny', 'swift', 'tidy', 'witty'];
const NOUNS = ['apple', 'brook', 'cloud', 'comet', 'falcon', 'fern', 'harbor', 'lagoon', 'maple', 'meadow', 'orchid', 'otter', 'pepper', 'pine', 'river', 'saddle', 'spruce', 'tiger', 'willow', 'yarn'];

// newJobName makes a readable unique name, as the CLI does (calm_river_3f9k2a7b).
export function newJobName() {
  const b = crypto.getRandomValues(new Uint8Array(6));
  const hex = [...b.slice(2)].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${ADJECTIVES[b[0] % ADJECTIVES.length]}_${NOUNS[b[1] % NOUNS.length]}_${hex}`;
}

// SpecError lists every problem of a job file, as the API's errors do.
class SpecError extends Error {
  constructor(list) {
    super(list.join('; '));
    this.list = list;
  }
  problems() { return this.list.map((message) => ({ target: 'yaml', message })); }
}

const TOP = ['$schema', 'type', 'name', 'display_name', 'experiment_name', 'description', 'tags', 'command', 'code', 'environment',
  'compute', 'resources', 'distribution', 'environment_variables', 'limits', 'inputs', 'outputs', 'priority'];
const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isLocal = (p) => !p.includes('://') && !p.startsWith('azureml:');

// jobFromSpec maps an `az ml` command job file (read as JSON) to the ARM
// job, field by field as `cumulus job create --file` does. A local folder
// (code:, a local input path) needs the CLI, which uploads it: a browser
// cannot read the folder, so the page says so instead of guessing.
export function jobFromSpec(spec, computeId) {
  const bad = [];
  const unknown = (obj, allowed, at) => {
    for (const k of Object.keys(obj)) if (!allowed.includes(k)) bad.push(`${at}${k} is not a field of a command job file`);
  };
  const mapOf = (v, at) => {
    if (v === undefined || v === null) return undefined;
    if (!isMap(v)) { bad.push(`${at} must be a mapping of names to values`); return undefined; }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x === null ? '' : String(x)]));
  };
  const int = (v, at) => {
    if (v === undefined || v === null) return undefined;
    if (!Number.isInteger(v)) { bad.push(`${at} must be a whole number, got ${JSON.stringify(v)}`); return undefined; }
    return v;
  };
  unknown(spec, TOP, '');
  if (spec.type && String(spec.type).toLowerCase() !== 'command') bad.push(`type ${spec.type} is not supported: Cumulus runs command jobs`);
  if (typeof spec.command !== 'string' || !spec.command.trim()) bad.push('command is required: the command line the job runs');
  if (!spec.compute) bad.push('compute is required: compute: azureml:<cluster>');
  if (spec.code) bad.push(`code: ${spec.code} is a local folder; upload it with 'cumulus job create --file', which packs it`);
  const name = spec.name ? String(spec.name) : newJobName();
  const p = {
    jobType: 'Command',
    command: spec.command,
    displayName: spec.display_name ? String(spec.display_name) : name,
    experimentName: spec.experiment_name ? String(spec.experiment_name) : 'Default',
    description: spec.description ? String(spec.description) : undefined,
    tags: mapOf(spec.tags, 'tags'),
    environmentVariables: mapOf(spec.environment_variables, 'environment_variables'),
    priority: int(spec.priority, 'priority'),
    computeId: spec.compute ? computeId(String(spec.compute).replace(/^azureml:/, '')) : undefined,
  };
  const env = spec.environment;
  if (typeof env === 'string') p.environmentId = env;
  else if (isMap(env)) {
    unknown(env, ['image', 'name'], 'environment.');
    if (!env.image) bad.push('environment: an inline environment needs image:');
    else p.environmentId = 'image:' + env.image;
  } else if (env !== undefined && env !== null) bad.push('environment must be azureml:<name>:<version> or {image: …}');
  if (isMap(spec.resources)) {
    unknown(spec.resources, ['instance_count', 'instance_type', 'shm_size'], 'resources.');
    const r = spec.resources;
    p.resources = { instanceCount: int(r.instance_count, 'resources.instance_count'), instanceType: r.instance_type, shmSize: r.shm_size };
  }
  if (isMap(spec.distribution)) {
    const d = spec.distribution;
    unknown(d, ['type', 'process_count_per_instance', 'worker_count', 'parameter_server_count'], 'distribution.');
    const types = { mpi: 'Mpi', pytorch: 'PyTorch', tensorflow: 'TensorFlow' };
    p.distribution = {
      distributionType: types[String(d.type).toLowerCase()] || d.type,
      processCountPerInstance: int(d.process_count_per_instance, 'distribution.process_count_per_instance'),
      workerCount: int(d.worker_count, 'distribution.worker_count'),
      parameterServerCount: int(d.parameter_server_count, 'distribution.parameter_server_count'),
    };
  }
  if (isMap(spec.limits)) {
    unknown(spec.limits, ['timeout', 'max_cost'], 'limits.');
    const t = spec.limits.timeout;
    const c = spec.limits.max_cost;
    if (t !== undefined && (!Number.isInteger(t) || t <= 0)) bad.push('limits.timeout must be a positive number of seconds');
    if (c !== undefined && (typeof c !== 'number' || c <= 0)) bad.push('limits.max_cost must be a positive amount');
    if (t || c) p.limits = { jobLimitsType: 'Command', timeout: t > 0 ? `PT${t}S` : undefined, maxCost: c > 0 ? c : undefined };
  }
  if (isMap(spec.inputs)) {
    p.inputs = {};
    for (const [k, v] of Object.entries(spec.inputs)) {
      if (!isMap(v)) { p.inputs[k] = { jobInputType: 'literal', value: String(v) }; continue; }
      const path = String(v.path || '');
      if (path && isLocal(path)) {
        bad.push(`inputs.${k}: ${path} is a local folder; upload it with 'cumulus job create --file', which packs it`);
        continue;
      }
      p.inputs[k] = { jobInputType: v.type || 'uri_folder', uri: path || undefined, mode: v.mode, description: v.description };
    }
  }
  if (isMap(spec.outputs)) {
    p.outputs = {};
    for (const [k, o] of Object.entries(spec.outputs)) {
      const v = isMap(o) ? o : {};
      p.outputs[k] = { jobOutputType: v.type || 'uri_folder', uri: v.path, mode: v.mode };
    }
  }
  if (bad.length) throw new SpecError(bad);
  return { name, body: { properties: p } };
}

// keyValues reads KEY=VALUE pairs, one a line (or separated by spaces).
function keyValues(text, sep = /\n/) {
  const out = {};
  for (const line of text.split(sep).map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf('=');
    if (i < 0) out[line] = '';
    else out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return Object.keys(out).length ? out : undefined;
}

function num(input) {
  const v = input.value.trim();
  return v === '' ? undefined : Number(v);
}

const EXAMPLE = `$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python -c "print('hello')"
environment:
  image: python:3.12-slim
compute: azureml:cpu-cluster
display_name: hello
experiment_name: studio
resources:
  instance_count: 1
limits:
  timeout: 600`;

export function render(main) {
  const banner = h('p', { class: 'banner banner-error', role: 'alert', hidden: true, id: 'submit-error' });
  const crumbs = h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ', 'Submit');
  const tabForm = h('button', { type: 'button', role: 'tab', id: 'tab-form', 'aria-controls': 'panel-form', 'aria-selected': 'true' }, 'Form');
  const tabYAML = h('button', { type: 'button', role: 'tab', id: 'tab-yaml', 'aria-controls': 'panel-yaml', 'aria-selected': 'false', tabindex: '-1' }, 'YAML');
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'How to describe the job' }, tabForm, tabYAML);

  // The form.
  const F = {};
  const add = (f) => { F[f.input.id] = f; return f.el; };
  const compute = h('select', { required: true });
  const command = h('textarea', { rows: '3', required: true, spellcheck: 'false', placeholder: 'python train.py --epochs 3' });
  const image = h('input', { type: 'text', spellcheck: 'false', placeholder: 'python:3.12-slim' });
  const nodes = h('input', { type: 'number', min: '1', step: '1', value: '1', inputmode: 'numeric' });
  const dist = h('select', {}, h('option', { value: '' }, 'None'),
    h('option', { value: 'PyTorch' }, 'PyTorch'), h('option', { value: 'Mpi' }, 'MPI'), h('option', { value: 'TensorFlow' }, 'TensorFlow'));
  const procs = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric' });
  const timeout = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric' });
  const display = h('input', { type: 'text' });
  const experiment = h('input', { type: 'text', placeholder: 'Default' });
  const envVars = h('textarea', { rows: '2', spellcheck: 'false', placeholder: 'EPOCHS=3' });
  const tags = h('input', { type: 'text', spellcheck: 'false', placeholder: 'team=ml owner=me' });
  const jobName = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'generated, like calm_river_3f9k2a7b' });
  const submitForm = h('button', { type: 'submit' }, 'Submit job');
  const form = h('form', { class: 'stack submit-form', novalidate: true, id: 'job-form' },
    add(field('j-compute', 'Compute', compute)),
    add(field('j-command', 'Command', command, 'What each node runs, in a shell. Outputs go to $CUMULUS_OUTPUT_DIR.')),
    add(field('j-image', 'Environment image', image, 'A container image for the job; empty: the nodes\' own environment.')),
    h('div', { class: 'row3' },
      add(field('j-nodes', 'Nodes', nodes)),
      add(field('j-dist', 'Distribution', dist)),
      add(field('j-procs', 'Processes per node', procs))),
    h('div', { class: 'row2' },
      add(field('j-display', 'Display name', display)),
      add(field('j-experiment', 'Experiment', experiment))),
    add(field('j-env', 'Environment variables', envVars, 'NAME=value, one a line.')),
    h('div', { class: 'row2' },
      add(field('j-timeout', 'Timeout in seconds', timeout, 'Empty: no limit.')),
      add(field('j-tags', 'Tags', tags, 'key=value pairs separated by spaces.'))),
    add(field('j-name', 'Job name', jobName, 'Optional; letters, digits, \'-\' and \'_\'.')),
    h('div', { class: 'form-actions' }, submitForm));
  const panelForm = h('section', { role: 'tabpanel', id: 'panel-form', 'aria-labelledby': 'tab-form' }, form);

  // The YAML.
  const yaml = h('textarea', { class: 'yaml', rows: '16', spellcheck: 'false', placeholder: EXAMPLE, autocomplete: 'off' });
  const yamlField = field('j-yaml', 'Job YAML', yaml,
    'A command job file as for az ml job create or cumulus job create --file. Folders on your computer (code:, local input paths) need the CLI, which uploads them.');
  const yamlErrors = h('ul', { class: 'banner banner-error', id: 'j-yaml-problems', role: 'alert', hidden: true });
  const submitYAML = h('button', { type: 'submit' }, 'Submit job');
  const yamlForm = h('form', { class: 'stack submit-form', novalidate: true, id: 'yaml-form' },
    yamlField.el, yamlErrors, h('div', { class: 'form-actions' }, submitYAML,
      h('span', { class: 'help' }, 'Ctrl+Enter submits from the text.')));
  const panelYAML = h('section', { role: 'tabpanel', id: 'panel-yaml', 'aria-labelledby': 'tab-yaml', hidden: true }, yamlForm);

  const refreshBanner = errorBanner(); // the compute list could not be read
  main.append(crumbs, h('div', { class: 'page-header' }, h('h1', {}, 'Submit a job')), refreshBanner.el, banner, tabs,
    h('div', { class: 'card' }, panelForm, panelYAML));

  function choose(which, focus) {
    const yamlOn = which === 'yaml';
    tabForm.setAttribute('aria-selected', String(!yamlOn));
    tabYAML.setAttribute('aria-selected', String(yamlOn));
    tabForm.tabIndex = yamlOn ? -1 : 0;
    tabYAML.tabIndex = yamlOn ? 0 : -1;
    panelForm.hidden = yamlOn;
    panelYAML.hidden = !yamlOn;
    sessionStorage.setItem('cumulus.submit.tab', which);
    if (focus) (yamlOn ? tabYAML : tabForm).focus();
  }
  tabForm.addEventListener('click', () => choose('form'));
  tabYAML.addEventListener('click', () => choose('yaml'));
  tabs.addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight' || ev.key === 'Home' || ev.key === 'End') {
      ev.preventDefault();
      choose(tabYAML.getAttribute('aria-selected') === 'true' ? 'form' : 'yaml', true);
    }
  });
  choose(sessionStorage.getItem('cumulus.submit.tab') === 'yaml' ? 'yaml' : 'form');

  async function send(name, body, button) {
    button.disabled = true;
    try {
      await api.putJob(name, body);
      toast(`Job ${name} submitted`);
      announce(`Job ${name} submitted`);
      location.hash = '#/jobs/' + encodeURIComponent(name);
    } finally {
      button.disabled = false;
    }
  }

  function clearErrors() {
    banner.hidden = true;
    banner.textContent = '';
    for (const f of Object.values(F)) f.setError('');
  }
  function showProblem(p) {
    let id = null;
    for (const [re, fid] of TARGETS) if (p.target && re.test(p.target)) { id = fid; break; }
    const msg = humanize(p.message, FORM_NAMES);
    const f = id && F[id];
    if (!f) {
      banner.textContent = (banner.hidden ? '' : banner.textContent + ' ') + msg;
      banner.hidden = false;
      return null;
    }
    f.setError(f.errEl.textContent ? f.errEl.textContent + ' ' + msg : msg);
    return f.input;
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const name = jobName.value.trim() || newJobName();
    const t = num(timeout);
    const p = {
      jobType: 'Command',
      command: command.value.trim(),
      computeId: compute.value ? api.computePath(compute.value) : undefined,
      environmentId: image.value.trim() ? 'image:' + image.value.trim() : undefined,
      resources: { instanceCount: num(nodes) },
      distribution: dist.value ? { distributionType: dist.value, processCountPerInstance: num(procs) } : undefined,
      displayName: display.value.trim() || name,
      experimentName: experiment.value.trim() || 'Default',
      environmentVariables: keyValues(envVars.value),
      tags: keyValues(tags.value, /\s+/),
      limits: t === undefined ? undefined : { jobLimitsType: 'Command', timeout: `PT${t}S` },
    };
    if (!dist.value && num(procs) !== undefined) {
      F['j-procs'].setError('Processes per node needs a distribution (PyTorch, MPI or TensorFlow)');
      procs.focus();
      return;
    }
    try {
      await send(name, { properties: p }, submitForm);
    } catch (e) {
      showProblems(e, showProblem, banner);
    }
  });

  function showYAMLProblems(list) {
    replace(yamlErrors, list.map((m) => h('li', {}, m)));
    yamlErrors.hidden = !list.length;
    yamlField.setError(list.length ? `${list.length} problem${list.length === 1 ? '' : 's'} in the YAML, listed below` : '');
  }
  yamlForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showYAMLProblems([]);
    banner.hidden = true;
    if (!yaml.value.trim()) {
      showYAMLProblems(['Paste a job file first.']);
      yaml.focus();
      return;
    }
    try {
      const spec = await api.yamlToJSON(yaml.value);
      const { name, body } = jobFromSpec(spec, (c) => api.computePath(c));
      await send(name, body, submitYAML);
    } catch (e) {
      const ps = e.problems ? e.problems() : [{ message: e.message }];
      showYAMLProblems(ps.map((p) => humanize(p.message, YAML_NAMES, { asIs: true })));
      yaml.focus();
    }
  });
  yaml.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      yamlForm.requestSubmit();
    }
  });

  let loaded = '';
  async function refresh() {
    const list = (await api.listComputes()).map((c) => c.name).sort();
    const sig = api.scope.workspace + ':' + list.join(',');
    if (sig === loaded) return;
    loaded = sig;
    const keep = compute.value;
    replace(compute, list.length ? list.map((n) => h('option', { value: n, selected: n === keep }, n))
      : h('option', { value: '' }, 'No cluster in this workspace yet'));
    F['j-compute'].setError(list.length ? '' : 'Create a compute cluster first, on the Compute clusters page.');
  }
  return { refresh, setError: refreshBanner.set };
}
