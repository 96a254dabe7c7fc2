// A job's inputs and outputs: what each is, how the job gets it, and
// where it is in the workspace's datastores (the path a later job or a
// download reads an output from).
import { h, replace, table } from './dom.js';

const MODES = { ReadOnlyMount: 'ro_mount (copied in)', Download: 'download', Direct: 'direct (the URI)', ReadWriteMount: 'rw_mount (uploaded at the end)', Upload: 'upload (at the end)' };

// assetLink links azureml:NAME:VERSION, azureml:NAME@latest and a data
// version's id to the asset's page.
function source(uri, description) {
  const m = /^azureml:([^:@/]+)(?::([^:]+)|@latest)$/.exec(uri || '') || /\/data\/([^/]+)\/versions\/([^/]+)$/.exec(uri || '');
  if (m) {
    const name = m[1].replace(/^azureml:/, '');
    return h('a', { href: '#/data/' + encodeURIComponent(name) }, uri);
  }
  if ((uri || '').startsWith('cumulus://blobs/')) {
    const from = /^uploaded from (.+)$/.exec(description || '');
    if (from) return h('code', {}, `${from[1]} (uploaded)`);
    // A pipeline step's input that another step's output became.
    if (/^output .+ of step .+$/.test(description || '')) return h('code', {}, description);
    return h('code', {}, 'an uploaded folder');
  }
  return h('code', { class: 'path' }, uri || '—');
}

// dataPanel is the section; update draws a job into it.
export function dataPanel() {
  const t = table('Inputs and outputs of the job', ['Name', 'Kind', 'Type', 'Mode', 'Source or destination', 'Datastore path'], 'job-data');
  const el = h('section', { class: 'card', 'aria-labelledby': 'sec-data', id: 'job-data-section' }, h('h2', { id: 'sec-data' }, 'Inputs and outputs'), t.el);
  let drawn = '';
  function update(j) {
    const p = j.properties;
    const rows = [];
    for (const [k, v] of Object.entries(p.inputs || {}).sort()) {
      if ((v.jobInputType || '').toLowerCase() === 'literal') {
        rows.push([k, 'input', 'literal', '—', h('code', {}, v.value || ''), '—']);
        continue;
      }
      const b = v.blobPath;
      rows.push([k, 'input', v.jobInputType, MODES[v.mode] || (v.mode ? v.mode : 'ro_mount (copied in)'), source(v.uri, v.description),
        b && b.datastore ? h('code', { class: 'path' }, `azureml://datastores/${b.datastore}/paths/${b.path}`) : '—']);
    }
    for (const [k, v] of Object.entries(p.outputs || {}).sort()) {
      const b = v.blobPath;
      rows.push([k, 'output', v.jobOutputType || 'uri_folder', MODES[v.mode] || 'rw_mount (uploaded at the end)', h('code', { class: 'path' }, v.uri || 'set per trial'),
        b && b.datastore ? h('code', { class: 'path' }, `azureml://datastores/${b.datastore}/paths/${b.path}`) : '—']);
    }
    el.hidden = rows.length === 0;
    const sig = JSON.stringify([p.inputs, p.outputs]);
    if (sig === drawn) return;
    drawn = sig;
    replace(t.tbody, rows.map((r) => h('tr', {}, h('th', { scope: 'row' }, r[0]), r.slice(1).map((c) => h('td', {}, c)))));
  }
  return { el, update };
}
