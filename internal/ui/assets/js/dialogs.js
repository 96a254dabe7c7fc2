// The cluster dialogs: create (the same fields as `cumulus compute
// create`), edit scale settings, delete with confirmation.
import * as api from './api.js';
import { h, replace, field, openDialog, toast, announce, money, isoSeconds, showProblems, humanize } from './dom.js';

const sizeCache = new Map(); // location → the VM size catalog
export async function sizes() {
  const loc = api.scope.location;
  if (!sizeCache.has(loc)) sizeCache.set(loc, await api.listSizes(loc));
  return sizeCache.get(loc);
}

// checkComputeName is Azure's compute name rule, as the server applies it
// (api.CheckComputeName): 3–24 characters, a letter first, then letters,
// digits and '-', not ending in '-' followed by digits.
export function checkComputeName(n) {
  const q = `Compute name "${n}"`;
  if (n.length < 3 || n.length > 24) return `${q} must be 3 to 24 characters long`;
  if (!/^[A-Za-z]/.test(n)) return `${q} must start with a letter`;
  if (!/^[A-Za-z][A-Za-z0-9-]*$/.test(n)) return `${q} may contain only letters, digits and '-'`;
  if (/-[0-9]+$/.test(n)) return `${q} may not end with '-' followed by digits`;
  return '';
}

export function linuxPrice(size, tier) {
  const vals = (size.estimatedVMPrices && size.estimatedVMPrices.values) || [];
  const p = vals.find((v) => v.vmTier === tier);
  return p ? p.retailPrice : null;
}

export function sizeSummary(s) {
  const parts = [`${s.vCPUs} vCPUs`, `${s.memoryGB} GB`];
  if (s.gpus) parts.push(`${s.gpus} GPU${s.gpus > 1 ? 's' : ''}`);
  const p = linuxPrice(s, 'Standard');
  if (p !== null) parts.push(`${money(p)}/h`);
  return parts.join(' · ');
}

// where an API error's target points in the create form.
const TARGETS = [
  [/^name$/i, 'c-name'],
  [/scaleSettings\.minNodeCount/, 'c-min'],
  [/scaleSettings\.maxNodeCount/, 'c-max'],
  [/scaleSettings(\.nodeIdleTimeBeforeScaleDown)?$/, 'c-idle'],
  [/vmSize/, 'c-size'],
  [/vmPriority/, 'c-tier-dedicated'],
  [/^tags/, 'c-tags'],
  [/^identity\.userAssignedIdentities/, 'c-user-ids'],
  [/^identity/, 'c-identity'],
  [/subnet/, 'c-subnet'],
  [/adminUserName/, 'c-admin-user'],
  [/adminUserSshPublicKey/, 'c-ssh-key'],
  [/adminUserPassword/, 'c-admin-password'],
  [/userAccountCredentials/, 'c-admin-user'],
  [/remoteLoginPortPublicAccess/, 'c-ssh-public'],
  [/location/i, 'c-location'],
  [/description/, 'c-description'],
];

// The API's field names in the words of the cluster forms, for its
// messages ("minNodeCount (3) may not exceed maxNodeCount (1)").
export const FIELD_NAMES = {
  minNodeCount: 'Minimum nodes',
  maxNodeCount: 'Maximum nodes',
  nodeIdleTimeBeforeScaleDown: 'Idle time before scale down',
  vmSize: 'VM size',
  vmPriority: 'Tier',
  adminUserName: 'Admin user name',
  adminUserSshPublicKey: 'SSH public key',
  adminUserPassword: 'Admin password',
  userAssignedIdentities: 'User-assigned identity ids',
  remoteLoginPortPublicAccess: 'Remote login',
  computeLocation: 'Location',
};

function num(input) {
  const v = input.value.trim();
  if (v === '') return undefined;
  return Number(v);
}

function parseTags(text) {
  const out = {};
  for (const kv of text.split(/\s+/).filter(Boolean)) {
    const i = kv.indexOf('=');
    if (i < 0) out[kv] = '';
    else out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return Object.keys(out).length ? out : undefined;
}

// openCreateDialog shows the "+ New" form.
export async function openCreateDialog({ onCreated }) {
  let all;
  try {
    all = await sizes();
  } catch (e) {
    toast('Cannot load the VM sizes: ' + e.message, 'error');
    return;
  }
  const F = {};
  const add = (f) => { F[f.input.id] = f; return f.el; };

  const name = h('input', { type: 'text', required: true, autocomplete: 'off', spellcheck: 'false', maxlength: '64', autofocus: true });
  const nameField = field('c-name', 'Name', name, '3–24 characters: letters, digits and \'-\', starting with a letter.');
  F['c-name'] = nameField;
  let touched = false;
  name.addEventListener('input', () => {
    touched = true;
    nameField.setError(name.value ? checkComputeName(name.value) : '');
  });
  name.addEventListener('blur', () => {
    if (touched && name.value === '') nameField.setError('Enter a name for the cluster');
  });

  // Size picker with a CPU/GPU filter and the selected size's details.
  const filterName = 'c-filter';
  const filters = ['All', 'CPU', 'GPU'].map((f, i) => h('label', { class: 'inline' },
    h('input', { type: 'radio', name: filterName, value: f, checked: i === 0, id: 'c-filter-' + f.toLowerCase() }), ' ' + f));
  const sizeSel = h('select', { required: true });
  const sizeInfo = h('p', { class: 'size-info', id: 'c-size-info', 'aria-live': 'polite' });
  const sizeField = field('c-size', 'VM size', sizeSel);
  F['c-size'] = sizeField;
  sizeSel.setAttribute('aria-describedby', 'c-size-info c-size-error');

  const tierDed = h('input', { type: 'radio', name: 'c-tier', value: 'Dedicated', id: 'c-tier-dedicated', checked: true });
  const tierLow = h('input', { type: 'radio', name: 'c-tier', value: 'LowPriority', id: 'c-tier-low' });
  const tierErr = h('p', { class: 'field-error', id: 'c-tier-dedicated-error' });
  F['c-tier-dedicated'] = { input: tierDed, errEl: tierErr, setError: (m) => { tierErr.textContent = m || ''; } };
  const tierHelp = h('p', { class: 'help', id: 'c-tier-help' });
  const tierSet = h('fieldset', { class: 'field compact', 'aria-describedby': 'c-tier-help c-tier-dedicated-error' },
    h('legend', {}, 'Tier'),
    h('label', { class: 'inline', for: 'c-tier-dedicated' }, tierDed, ' Dedicated'),
    h('label', { class: 'inline', for: 'c-tier-low' }, tierLow, ' Low priority'),
    tierHelp, tierErr);

  function fillSizes() {
    const f = (document.querySelector(`input[name="${filterName}"]:checked`) || {}).value || 'All';
    const keep = sizeSel.value || 'Standard_DS3_v2';
    const list = all.filter((s) => f === 'All' || (f === 'GPU' ? s.gpus > 0 : s.gpus === 0));
    replace(sizeSel, list.map((s) => h('option', { value: s.name, selected: s.name === keep }, `${s.name} — ${sizeSummary(s)}`)));
    if (!list.some((s) => s.name === keep) && list.length) sizeSel.value = list[0].name;
    showSize();
  }
  function showSize() {
    const s = all.find((x) => x.name === sizeSel.value);
    if (!s) { sizeInfo.textContent = ''; return; }
    const low = linuxPrice(s, 'LowPriority');
    sizeInfo.textContent = `${s.name}: family ${s.family}, ${s.vCPUs} vCPUs, ${s.memoryGB} GB memory, ` +
      `${s.gpus ? s.gpus + ' GPU(s)' : 'no GPU'}; ${money(linuxPrice(s, 'Standard'))}/h dedicated` +
      (s.lowPriorityCapable ? `, ${money(low)}/h low priority.` : '; not available as low priority.');
    tierLow.disabled = !s.lowPriorityCapable;
    if (!s.lowPriorityCapable && tierLow.checked) tierDed.checked = true;
    tierHelp.textContent = s.lowPriorityCapable
      ? 'Low-priority nodes cost less and may be preempted; their jobs are requeued.'
      : `${s.name} cannot run as low priority.`;
  }
  sizeSel.addEventListener('change', showSize);

  const min = h('input', { type: 'number', min: '0', step: '1', value: '0', inputmode: 'numeric' });
  const max = h('input', { type: 'number', min: '1', step: '1', value: '1', inputmode: 'numeric' });
  const idle = h('input', { type: 'number', min: '0', step: '1', value: '120', inputmode: 'numeric' });
  const location = h('input', { type: 'text', value: api.scope.location, spellcheck: 'false' });
  const description = h('input', { type: 'text' });

  // Advanced: SSH, identity, network, tags.
  const sshPublic = h('input', { type: 'checkbox' });
  const adminUser = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false' });
  const sshKey = h('textarea', { rows: '2', spellcheck: 'false' });
  const adminPassword = h('input', { type: 'password', autocomplete: 'new-password' });
  const identity = h('select', {},
    h('option', { value: '' }, 'None'),
    h('option', { value: 'SystemAssigned' }, 'System assigned'),
    h('option', { value: 'UserAssigned' }, 'User assigned'),
    h('option', { value: 'SystemAssigned,UserAssigned' }, 'System and user assigned'));
  const userIds = h('textarea', { rows: '2', spellcheck: 'false' });
  const vnet = h('input', { type: 'text', spellcheck: 'false' });
  const subnet = h('input', { type: 'text', spellcheck: 'false' });
  const publicIP = h('input', { type: 'checkbox', checked: true });
  const tags = h('textarea', { rows: '2', spellcheck: 'false', placeholder: 'team=ml env=dev' });

  const sshPublicField = h('div', { class: 'field check' }, h('label', { for: 'c-ssh-public' }, sshPublic, ' Open the nodes\' SSH port (remote login)'),
    h('p', { class: 'field-error', id: 'c-ssh-public-error' }));
  sshPublic.id = 'c-ssh-public';
  F['c-ssh-public'] = { input: sshPublic, setError: (m) => { sshPublicField.querySelector('.field-error').textContent = m || ''; } };
  publicIP.id = 'c-public-ip';

  const advanced = h('details', { class: 'advanced' }, h('summary', {}, 'Advanced settings'),
    h('fieldset', {}, h('legend', {}, 'SSH'),
      sshPublicField,
      add(field('c-admin-user', 'Admin user name', adminUser)),
      add(field('c-ssh-key', 'SSH public key', sshKey, 'An OpenSSH public key: ssh-ed25519 AAAA… or ssh-rsa AAAA…')),
      add(field('c-admin-password', 'Admin password', adminPassword, 'Optional; 12 to 123 characters. Never shown again.'))),
    h('fieldset', {}, h('legend', {}, 'Identity'),
      add(field('c-identity', 'Managed identity', identity)),
      add(field('c-user-ids', 'User-assigned identity ids', userIds, 'One ARM id per line: /subscriptions/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/NAME'))),
    h('fieldset', {}, h('legend', {}, 'Network'),
      add(field('c-vnet', 'Virtual network name', vnet)),
      add(field('c-subnet', 'Subnet', subnet, 'A subnet name (with the virtual network) or its full ARM id.')),
      h('div', { class: 'field check' }, h('label', { for: 'c-public-ip' }, publicIP, ' Give nodes a public IP address'))),
    add(field('c-tags', 'Tags', tags, 'key=value pairs, separated by spaces or lines.')));

  const formError = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit' }, 'Create');
  const cancel = h('button', { type: 'button', class: 'secondary', value: 'cancel' }, 'Cancel');
  const form = h('form', { method: 'dialog', novalidate: true, class: 'stack' },
    formError,
    nameField.el,
    h('div', { class: 'size-picker' },
      h('fieldset', { class: 'field compact' }, h('legend', {}, 'Show sizes'), filters),
      sizeField.el, sizeInfo),
    tierSet,
    h('div', { class: 'row3' },
      add(field('c-min', 'Minimum nodes', min)),
      add(field('c-max', 'Maximum nodes', max)),
      add(field('c-idle', 'Idle seconds before scale down', idle))),
    h('div', { class: 'row2' },
      add(field('c-location', 'Location', location)),
      add(field('c-description', 'Description', description))),
    advanced,
    h('div', { class: 'dialog-actions' }, cancel, submit));
  const dialog = h('dialog', { class: 'dialog wide', 'aria-labelledby': 'create-title' },
    h('h2', { id: 'create-title' }, 'New compute cluster'), form);
  for (const r of filters) r.querySelector('input').addEventListener('change', fillSizes);
  cancel.addEventListener('click', () => dialog.close());

  function clearErrors() {
    formError.hidden = true;
    for (const f of Object.values(F)) f.setError('');
  }
  function showProblem(p) {
    let id = null;
    for (const [re, fid] of TARGETS) if (p.target && re.test(p.target)) { id = fid; break; }
    if (!id && p.code === 'QuotaExceeded') id = 'c-min';
    if (!id && p.code === 'PreconditionFailed') {
      id = 'c-name';
      p = { ...p, message: `A cluster named ${name.value} already exists in workspace ${api.scope.workspace}.` };
    }
    const f = id && F[id];
    const msg = humanize(p.message, FIELD_NAMES);
    if (!f) {
      formError.textContent = (formError.hidden ? '' : formError.textContent + ' ') + msg;
      formError.hidden = false;
      return null;
    }
    if (f.input.closest('details')) advanced.open = true;
    // Two problems of one field both show.
    f.setError(f.errEl && f.errEl.textContent ? f.errEl.textContent + ' ' + msg : msg);
    return f.input;
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const n = name.value.trim();
    if (!n) {
      nameField.setError('Enter a name for the cluster');
      name.focus();
      return;
    }
    let subnetId;
    if (subnet.value.trim()) {
      subnetId = subnet.value.trim();
      if (!subnetId.startsWith('/')) {
        if (!vnet.value.trim()) {
          F['c-vnet'].setError('A subnet name needs the virtual network name (or give the subnet\'s full ARM id)');
          advanced.open = true;
          vnet.focus();
          return;
        }
        subnetId = `${api.groupPath()}/providers/Microsoft.Network/virtualNetworks/${vnet.value.trim()}/subnets/${subnetId}`;
      }
    }
    const creds = adminUser.value.trim() || sshKey.value.trim() || adminPassword.value
      ? { adminUserName: adminUser.value.trim(), adminUserSshPublicKey: sshKey.value.trim() || undefined, adminUserPassword: adminPassword.value || undefined }
      : undefined;
    let ident;
    if (identity.value) {
      ident = { type: identity.value };
      const ids = userIds.value.split(/\s+/).filter(Boolean);
      if (ids.length) ident.userAssignedIdentities = Object.fromEntries(ids.map((id) => [id, {}]));
    }
    const idleSecs = num(idle);
    const body = {
      location: location.value.trim() || undefined,
      tags: parseTags(tags.value),
      identity: ident,
      properties: {
        computeType: 'AmlCompute',
        description: description.value || undefined,
        properties: {
          vmSize: sizeSel.value,
          vmPriority: tierLow.checked ? 'LowPriority' : 'Dedicated',
          scaleSettings: {
            minNodeCount: num(min),
            maxNodeCount: num(max),
            nodeIdleTimeBeforeScaleDown: idleSecs === undefined ? undefined : `PT${idleSecs}S`,
          },
          remoteLoginPortPublicAccess: sshPublic.checked ? 'Enabled' : 'Disabled',
          userAccountCredentials: creds,
          subnet: subnetId ? { id: subnetId } : undefined,
          enableNodePublicIp: publicIP.checked,
        },
      },
    };
    submit.disabled = true;
    submit.textContent = 'Creating…';
    try {
      await api.putCompute(n, body);
      dialog.close();
      toast(`Creating cluster ${n}`);
      announce(`Creating cluster ${n}`);
      if (onCreated) onCreated(n);
    } catch (e) {
      showProblems(e, showProblem, formError);
    } finally {
      submit.disabled = false;
      submit.textContent = 'Create';
    }
  });

  openDialog(dialog);
  fillSizes();
}

// openScaleDialog edits a cluster's scale settings (a PATCH, applied at once).
export function openScaleDialog(c, { onDone } = {}) {
  const s = (c.properties.properties && c.properties.properties.scaleSettings) || {};
  const min = h('input', { type: 'number', min: '0', step: '1', value: String(s.minNodeCount ?? 0), inputmode: 'numeric' });
  const max = h('input', { type: 'number', min: '1', step: '1', value: String(s.maxNodeCount ?? 1), inputmode: 'numeric', autofocus: true });
  const idle = h('input', { type: 'number', min: '0', step: '1', value: String(isoSeconds(s.nodeIdleTimeBeforeScaleDown) ?? 120), inputmode: 'numeric' });
  const fMin = field('s-min', 'Minimum nodes', min);
  const fMax = field('s-max', 'Maximum nodes', max);
  const fIdle = field('s-idle', 'Idle seconds before scale down', idle);
  const formError = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit' }, 'Save');
  const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const form = h('form', { method: 'dialog', novalidate: true, class: 'stack' }, formError,
    h('div', { class: 'row3' }, fMin.el, fMax.el, fIdle.el),
    h('p', { class: 'help' }, 'Lowering the maximum removes idle nodes first; busy nodes leave when their job ends.'),
    h('div', { class: 'dialog-actions' }, cancel, submit));
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'scale-title' },
    h('h2', { id: 'scale-title' }, `Scale settings of ${c.name}`), form);
  cancel.addEventListener('click', () => dialog.close());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const f of [fMin, fMax, fIdle]) f.setError('');
    formError.hidden = true;
    const idleSecs = num(idle);
    submit.disabled = true;
    try {
      await api.patchScale(c.name, {
        minNodeCount: num(min), maxNodeCount: num(max),
        nodeIdleTimeBeforeScaleDown: idleSecs === undefined ? undefined : `PT${idleSecs}S`,
      });
      dialog.close();
      toast(`Scale settings of ${c.name} saved`);
      announce(`Scale settings of ${c.name} saved`);
      if (onDone) onDone();
    } catch (e) {
      showProblems(e, (p) => {
        const f = /minNodeCount/.test(p.target) ? fMin : /maxNodeCount/.test(p.target) ? fMax : /nodeIdle/.test(p.target) ? fIdle : null;
        const msg = humanize(p.message, FIELD_NAMES);
        if (!f) {
          formError.textContent = (formError.hidden ? '' : formError.textContent + ' ') + msg;
          formError.hidden = false;
          return null;
        }
        f.setError(f.errEl.textContent ? f.errEl.textContent + ' ' + msg : msg);
        return f.input;
      }, formError);
    } finally {
      submit.disabled = false;
    }
  });
  openDialog(dialog);
}

// openDeleteDialog asks before deleting a cluster.
export function openDeleteDialog(c, { onDone } = {}) {
  const a = c.properties.properties || {};
  const nodes = a.currentNodeCount || 0;
  const formError = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  const cancel = h('button', { type: 'button', class: 'secondary', autofocus: true }, 'Cancel');
  const confirm = h('button', { type: 'submit', class: 'danger' }, 'Delete cluster');
  const form = h('form', { method: 'dialog', class: 'stack' }, formError,
    h('p', { id: 'delete-desc' }, `Cluster ${c.name} and its ${nodes} node${nodes === 1 ? '' : 's'} will be removed; its queued and running jobs fail. This cannot be undone.`),
    h('div', { class: 'dialog-actions' }, cancel, confirm));
  const dialog = h('dialog', { class: 'dialog', role: 'alertdialog', 'aria-labelledby': 'delete-title', 'aria-describedby': 'delete-desc' },
    h('h2', { id: 'delete-title' }, `Delete ${c.name}?`), form);
  cancel.addEventListener('click', () => dialog.close());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    confirm.disabled = true;
    try {
      await api.deleteCompute(c.name);
      dialog.close();
      toast(`Deleting cluster ${c.name}`);
      announce(`Deleting cluster ${c.name}`);
      if (onDone) onDone();
    } catch (e) {
      formError.textContent = e.message;
      formError.hidden = false;
    } finally {
      confirm.disabled = false;
    }
  });
  openDialog(dialog);
}
