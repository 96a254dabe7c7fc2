// The budgets of the workspace, on the cost page: a table with what each
// has spent this period, "New budget" and delete with confirmation.
// Writing needs a writing role; a Reader's refusal shows in the dialog
// and the table stays.
import * as api from './api.js';
import { h, field, openDialog, toast, announce, badge, syncTable, table, when, showProblems } from './dom.js';

const ACTIONS = [
  ['Alert', 'Alert only', 'Events, metrics and the webhook; nothing else changes.'],
  ['StopScaleUp', 'Stop scale-up', 'At 100 %, no new nodes: jobs queue, running jobs finish.'],
  ['ScaleToMin', 'Scale to minimum', 'At 100 %, no new nodes, and idle nodes above the minimum go at once.'],
];
const actionText = (a) => (ACTIONS.find((x) => x[0] === a) || [a, a])[1];

// checkBudgetName is the server's rule for budget names (the job name
// rule): 1–255 letters, digits, '-' and '_', a letter or digit first.
export function checkBudgetName(n) {
  if (!n) return 'Enter a name for the budget';
  if (n.length > 255) return 'A budget name has at most 255 characters';
  if (!/^[A-Za-z0-9]/.test(n)) return `Budget name "${n}" must start with a letter or digit`;
  if (!/^[A-Za-z0-9_-]+$/.test(n)) return `Budget name "${n}" may contain only letters, digits, '-' and '_'`;
  return '';
}

export function scopeText(p) {
  if (p.compute) return `Compute ${p.compute}`;
  if (p.tag) return `Computes tagged ${p.tag.key}=${p.tag.value}`;
  return 'Whole workspace';
}

const amountText = (v, cur) => `${Number(v || 0).toFixed(2)}${cur ? ' ' + cur : ''}`;

// budgetsPanel is the budgets card; refresh reads the list again.
export function budgetsPanel() {
  let currency = '';
  let list = [];
  const error = h('p', { class: 'banner banner-error', id: 'budgets-error', role: 'alert', hidden: true });
  const newBtn = h('button', { type: 'button', id: 'new-budget' }, h('span', { 'aria-hidden': 'true' }, '+ '), 'New budget');
  const t = table('Budgets of the workspace', ['Name', 'Scope', 'Amount', 'Spent this period', 'Action at 100 %', 'In force', 'Actions'], 'budgets');
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-budgets' },
    h('div', { class: 'section-header' }, h('h2', { id: 'sec-budgets' }, 'Budgets'), newBtn),
    error, t.el,
    h('p', { class: 'help' }, 'A budget is judged within seconds of a change, then every minute, against the cost of its period (a calendar month or a week from Monday, UTC); ',
      'its thresholds raise events and call its webhook. ', h('code', {}, 'cumulus budget list'), ' shows the same.'));

  function setError(msg) {
    error.textContent = msg || '';
    error.hidden = !msg;
  }

  function spentCell(b) {
    const p = b.properties, st = p.status;
    if (!st) return h('span', { class: 'muted' }, 'not judged yet (within seconds)');
    const cur = st.currency || currency;
    const m = h('meter', { min: '0', max: String(p.amount), value: String(Math.min(st.spent, p.amount)), low: String(p.amount * 0.8),
      high: String(p.amount * 0.9999), optimum: '0', 'aria-label': `${b.name}: ${amountText(st.spent, cur)} of ${amountText(p.amount, cur)} spent` });
    return h('div', { class: 'usage' }, m,
      h('span', { class: 'usage-text' }, `${amountText(st.spent, cur)} (${Math.round(st.percent)} %)`,
        st.reached && st.reached.length ? ` · reached ${st.reached.map((x) => x + ' %').join(', ')}` : '',
        ' · since ', when(st.periodStart)));
  }

  async function refresh() {
    try {
      list = await api.listBudgets();
    } catch (e) {
      setError('Could not read the budgets: ' + e.message);
      return;
    }
    if (!error.dataset.sticky) setError('');
    list.sort((a, b) => a.name.localeCompare(b.name));
    syncTable(t.tbody, list, {
      key: (b) => b.name, cols: 7, empty: 'No budget in this workspace. Create one with “+ New budget”.',
      sig: (b) => [b.properties, currency],
      cells: (b) => {
        const p = b.properties, st = p.status;
        const cur = (st && st.currency) || currency;
        return [
          b.name,
          scopeText(p),
          `${amountText(p.amount, cur)} / ${p.period === 'Week' ? 'week' : 'month'}`,
          spentCell(b),
          actionText(p.action),
          st && st.actionActive ? badge('In force', 'bad') : badge(p.action === 'Alert' ? 'Alerts only' : 'No', 'plain'),
        ];
      },
      actions: (item) => [
        h('button', { type: 'button', class: 'small danger-outline', onclick: () => openDeleteBudget(item(), { onDone: refresh, onError: showWriteError }) }, 'Delete'),
      ],
    });
    for (const tr of t.tbody.rows) {
      if (tr._item) tr._actions.querySelector('button').setAttribute('aria-label', `Delete budget ${tr._item.name}`);
    }
  }

  function showWriteError(msg) {
    error.dataset.sticky = '1';
    setError(msg);
    setTimeout(() => { delete error.dataset.sticky; }, 10000);
  }

  newBtn.addEventListener('click', () => openBudgetDialog({ currency, existing: list.map((b) => b.name), onDone: refresh }));
  return { el, refresh, setCurrency(c) { currency = c || currency; } };
}

// where an API error's target points in the budget form.
const TARGETS = [
  [/^name$/i, 'b-name'],
  [/amount/, 'b-amount'],
  [/period/, 'b-period'],
  [/tag/, 'b-tag-key'],
  [/compute/, 'b-compute'],
  [/thresholds/, 'b-thresholds'],
  [/action/, 'b-action'],
  [/webhook/, 'b-webhook'],
];

// openBudgetDialog is the "New budget" form; the server checks it and its
// errors appear next to their fields.
export async function openBudgetDialog({ currency, existing = [], onDone }) {
  let computes = [];
  try {
    computes = (await api.listComputes()).map((c) => c.name).sort();
  } catch {
    computes = [];
  }
  const F = {};
  const add = (f) => { F[f.input.id] = f; return f.el; };
  const name = h('input', { type: 'text', required: true, autocomplete: 'off', spellcheck: 'false', maxlength: '255', autofocus: true });
  const amount = h('input', { type: 'number', step: '0.01', min: '0', inputmode: 'decimal', required: true });
  const period = h('select', {}, h('option', { value: 'Month' }, 'Month (calendar, UTC)'), h('option', { value: 'Week' }, 'Week (from Monday, UTC)'));
  const scopeRadios = [['workspace', 'Whole workspace'], ['compute', 'One compute'], ['tag', 'Computes with a tag']].map(([v, t], i) =>
    h('label', { class: 'inline', for: 'b-scope-' + v }, h('input', { type: 'radio', name: 'b-scope', value: v, id: 'b-scope-' + v, checked: i === 0 }), ' ' + t));
  const compute = h('select', {}, computes.length ? computes.map((c) => h('option', { value: c }, c)) : h('option', { value: '' }, 'No compute in this workspace'));
  const tagKey = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'team' });
  const tagValue = h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', placeholder: 'ml' });
  const thresholds = h('input', { type: 'text', value: '50 80 100', spellcheck: 'false', inputmode: 'decimal' });
  const action = h('select', {}, ACTIONS.map(([v, t]) => h('option', { value: v }, t)));
  const actionHelp = h('p', { class: 'help', id: 'b-action-what', 'aria-live': 'polite' });
  const webhook = h('input', { type: 'url', spellcheck: 'false', autocomplete: 'off', placeholder: 'https://hooks.example.com/cumulus' });

  const nameField = field('b-name', 'Name', name, 'Letters, digits, \'-\' and \'_\', starting with a letter or digit.');
  F['b-name'] = nameField;
  const computeField = field('b-compute', 'Compute', compute);
  const tagKeyField = field('b-tag-key', 'Tag key', tagKey);
  const tagValueField = field('b-tag-value', 'Tag value', tagValue);
  F['b-compute'] = computeField;
  F['b-tag-key'] = tagKeyField;
  F['b-tag-value'] = tagValueField;
  const computeBox = h('div', { class: 'scope-detail' }, computeField.el);
  const tagBox = h('div', { class: 'row2 scope-detail' }, tagKeyField.el, tagValueField.el);
  const scopeSet = h('fieldset', { class: 'field' }, h('legend', {}, 'Scope'), scopeRadios, computeBox, tagBox);
  const scopeOf = () => (scopeSet.querySelector('input[name="b-scope"]:checked') || {}).value || 'workspace';
  function showScope() {
    computeBox.hidden = scopeOf() !== 'compute';
    tagBox.hidden = scopeOf() !== 'tag';
  }
  for (const r of scopeRadios) r.querySelector('input').addEventListener('change', showScope);
  const showAction = () => { actionHelp.textContent = (ACTIONS.find((x) => x[0] === action.value) || [])[2] || ''; };
  action.addEventListener('change', showAction);

  const formError = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit' }, 'Create');
  const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const actionField = field('b-action', 'Action at 100 %', action);
  F['b-action'] = actionField;
  action.setAttribute('aria-describedby', 'b-action-what b-action-error');
  const form = h('form', { method: 'dialog', novalidate: true, class: 'stack' },
    formError,
    nameField.el,
    h('div', { class: 'row2' },
      add(field('b-amount', `Amount${currency ? ' (' + currency + ')' : ''}`, amount, 'What the scope may spend per period.')),
      add(field('b-period', 'Period', period))),
    scopeSet,
    add(field('b-thresholds', 'Thresholds (%)', thresholds, 'Percentages of the amount at which to alert, separated by spaces.')),
    h('div', {}, actionField.el, actionHelp),
    add(field('b-webhook', 'Webhook (optional)', webhook, 'An http or https URL that is POSTed a JSON notice at each threshold.')),
    h('div', { class: 'dialog-actions' }, cancel, submit));
  const dialog = h('dialog', { class: 'dialog wide', 'aria-labelledby': 'budget-title' }, h('h2', { id: 'budget-title' }, 'New budget'), form);
  cancel.addEventListener('click', () => dialog.close());
  name.addEventListener('input', () => nameField.setError(name.value ? checkBudgetName(name.value) : ''));

  function clearErrors() {
    formError.hidden = true;
    formError.textContent = '';
    for (const f of Object.values(F)) f.setError('');
  }
  function showProblem(p) {
    let id = null;
    let msg = p.message;
    // "compute: compute X does not exist …" names its field in the message.
    const m = /^(compute): (.*)$/.exec(msg || '');
    if (m) { id = 'b-compute'; msg = m[2]; }
    for (const [re, fid] of TARGETS) if (!id && p.target && re.test(p.target)) { id = fid; break; }
    const f = id && F[id];
    if (!f || f.input.closest('[hidden]')) {
      formError.textContent = (formError.textContent ? formError.textContent + ' ' : '') + msg;
      formError.hidden = false;
      return null;
    }
    f.setError(msg);
    return f.input;
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const n = name.value.trim();
    const bad = checkBudgetName(n) || (existing.includes(n) ? `A budget named ${n} already exists in workspace ${api.scope.workspace}` : '');
    if (bad) {
      nameField.setError(bad);
      name.focus();
      return;
    }
    const ths = thresholds.value.split(/[\s,;]+/).filter(Boolean).map((x) => Number(x.replace(/%$/, '')));
    if (ths.some((x) => Number.isNaN(x))) {
      F['b-thresholds'].setError('Thresholds are numbers: percentages of the amount, such as 50 80 100');
      thresholds.focus();
      return;
    }
    const sc = scopeOf();
    const body = {
      properties: {
        // An empty or unreadable amount goes as 0, which the server refuses
        // next to the field.
        amount: amount.value.trim() === '' || Number.isNaN(Number(amount.value)) ? 0 : Number(amount.value),
        period: period.value,
        compute: sc === 'compute' ? compute.value || undefined : undefined,
        tag: sc === 'tag' ? { key: tagKey.value.trim(), value: tagValue.value.trim() } : undefined,
        thresholds: ths.length ? ths : undefined,
        action: action.value,
        webhook: webhook.value.trim() || undefined,
      },
    };
    if (sc === 'compute' && !compute.value) {
      computeField.setError('This workspace has no compute yet');
      return;
    }
    submit.disabled = true;
    submit.textContent = 'Creating…';
    try {
      await api.putBudget(n, body);
      dialog.close();
      toast(`Budget ${n} created`);
      announce(`Budget ${n} created`);
      if (onDone) onDone(n);
    } catch (e) {
      showProblems(e, showProblem, formError);
    } finally {
      submit.disabled = false;
      submit.textContent = 'Create';
    }
  });

  openDialog(dialog);
  showScope();
  showAction();
}

// openDeleteBudget asks before deleting a budget.
export function openDeleteBudget(b, { onDone, onError } = {}) {
  const formError = h('p', { class: 'banner banner-error', role: 'alert', hidden: true });
  const cancel = h('button', { type: 'button', class: 'secondary', autofocus: true }, 'Cancel');
  const confirm = h('button', { type: 'submit', class: 'danger' }, 'Delete budget');
  const form = h('form', { method: 'dialog', class: 'stack' }, formError,
    h('p', { id: 'delete-budget-desc' }, `Budget ${b.name} (${scopeText(b.properties)}) will no longer be judged; `,
      b.properties.status && b.properties.status.actionActive ? 'its action stops, so its scope may scale up again.' : 'its alerts stop.'),
    h('div', { class: 'dialog-actions' }, cancel, confirm));
  const dialog = h('dialog', { class: 'dialog', role: 'alertdialog', 'aria-labelledby': 'delete-budget-title', 'aria-describedby': 'delete-budget-desc' },
    h('h2', { id: 'delete-budget-title' }, `Delete budget ${b.name}?`), form);
  cancel.addEventListener('click', () => dialog.close());
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    confirm.disabled = true;
    try {
      await api.deleteBudget(b.name);
      dialog.close();
      toast(`Budget ${b.name} deleted`);
      announce(`Budget ${b.name} deleted`);
      if (onDone) onDone();
    } catch (e) {
      formError.textContent = e.message;
      formError.hidden = false;
      if (onError && e.status === 403) onError(e.message);
    } finally {
      confirm.disabled = false;
    }
  });
  openDialog(dialog);
}
