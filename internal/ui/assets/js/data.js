// The data pages: the workspace's data assets, and one asset's versions,
// each a file or folder in a datastore that jobs read as
// azureml:<name>:<version> or azureml:<name>@latest.
import * as api from './api.js';
import { h, pageHeader, errorBanner, syncTable, table, when } from './dom.js';

// listPage is #/data: every data asset with its latest version.
export function renderList(main) {
  const banner = errorBanner();
  const t = table('Data assets of the workspace', ['Name', 'Latest version', 'Type', 'Versions', 'Description'], 'data-assets');
  main.append(pageHeader('Data'), banner.el,
    h('p', { class: 'help' }, 'Register a file or folder with ', h('code', {}, 'cumulus data create --name NAME --path ./folder'),
      ' or the SDK; a job reads it as ', h('code', {}, 'azureml:NAME@latest'), '.'),
    t.el);
  async function refresh() {
    const list = await api.listDataAssets();
    syncTable(t.tbody, list, {
      key: (a) => a.name, cols: 5, empty: 'No data assets yet.',
      sig: (a) => [a.properties.latestVersion, a.properties.versionCount, a.properties.description],
      cells: (a) => [
        h('a', { href: '#/data/' + encodeURIComponent(a.name) }, a.name),
        a.properties.latestVersion || '—',
        a.properties.dataType || '—',
        String(a.properties.versionCount || 0),
        a.properties.description || '',
      ],
    });
  }
  return { refresh, setError: banner.set };
}

// renderAsset is #/data/NAME: the asset's versions, newest first.
export function renderAsset(main, [name]) {
  const banner = errorBanner();
  const crumbs = h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/data' }, 'Data'), ' / ', name);
  const t = table(`Versions of data asset ${name}, newest first`, ['Version', 'Type', 'Path', 'Created', 'Description'], 'data-versions');
  const use = h('p', { class: 'help' }, 'A job reads it as ', h('code', {}, `azureml:${name}@latest`), ' (the newest version) or ',
    h('code', {}, `azureml:${name}:<version>`), '.');
  main.append(crumbs, pageHeader(name), banner.el, use, t.el);
  async function refresh() {
    const list = await api.listDataVersions(name);
    syncTable(t.tbody, list, {
      key: (v) => v.name, cols: 5, empty: 'This data asset has no versions.',
      sig: (v) => [v.properties.dataUri, v.properties.description],
      cells: (v) => [
        v.name,
        v.properties.dataType,
        h('code', { class: 'path' }, v.properties.dataUri),
        when(v.systemData && v.systemData.createdAt),
        v.properties.description || '',
      ],
    });
  }
  return { refresh, setError: banner.set };
}
