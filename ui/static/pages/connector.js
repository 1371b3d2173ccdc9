// /ui/connectors/{name}: one connector — its state and its tasks' (a failed task's
// error trace), its config, the topics it has used, its offsets; pause, resume,
// restart and delete (behind a confirmation).
import { h, replace, table, link, enc } from '../dom.js';
import { get, call } from '../api.js';

export default {
  path: /^\/connectors\/([^/]+)$/,
  title: (n) => 'Connector ' + n,
  async render({ main, params: [name], signal, go, showError }) {
    const base = `/v1/connectors/${enc(name)}`;
    const [status, config] = await Promise.all([get(`${base}/status`, { signal }), get(`${base}/config`, { signal })]);
    const errBox = h('div');
    const act = (what, method = 'PUT') => async () => {
      replace(errBox);
      try { await call(method, `${base}/${what}`); go(location.pathname, { replaceState: true }); } catch (err) { showError(errBox, err); }
    };
    const offsetsBox = h('div', { id: 'offsets' });
    const topicsBox = h('div', { id: 'connector-topics' });
    const confirmName = h('input', { 'aria-label': 'Type the connector name to confirm', placeholder: name, autocomplete: 'off' });
    const delBtn = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete connector');
    confirmName.addEventListener('input', () => { delBtn.disabled = confirmName.value !== name; });
    const c = status.connector || {};
    replace(main, h('p', { class: 'crumbs' }, link('/ui/connectors', 'Connectors'), ' / '),
      h('h1', null, name, ' ', h('span', { class: 'state state-' + String(c.state || '').toLowerCase() }, c.state || '?')),
      h('p', { class: 'muted' }, `${status.type || ''} connector on worker ${c.worker_id || '—'}`),
      c.trace ? h('pre', { class: 'trace' }, c.trace) : null,
      h('p', null, h('button', { type: 'button', onclick: act('pause') }, 'Pause'), ' ',
        h('button', { type: 'button', onclick: act('resume') }, 'Resume'), ' ',
        h('button', { type: 'button', onclick: act('restart?includeTasks=true', 'POST') }, 'Restart')), errBox,
      h('h2', null, 'Tasks'),
      table(['Task', 'State', 'Worker', 'Error'], (status.tasks || []).map((t) => [String(t.id), t.state, t.worker_id || '—', t.trace ? h('pre', { class: 'trace' }, t.trace) : '']), { id: 'tasks' }),
      h('h2', null, 'Config'), table(['Key', 'Value'], Object.keys(config).sort().map((k) => [k, config[k]]), { id: 'config' }),
      h('h2', null, 'Topics'), topicsBox,
      h('h2', null, 'Offsets'), offsetsBox,
      h('form', {
        class: 'card',
        onsubmit: async (e) => {
          e.preventDefault();
          try { await call('DELETE', base); go('/ui/connectors'); } catch (err) { showError(errBox, err); }
        },
      }, h('h2', null, 'Delete'), h('p', null, 'Type the connector name to confirm.'), confirmName, ' ', delBtn));
    await Promise.all([
      get(`${base}/topics`, { signal }).then((t) => {
        const ts = (t[name] && t[name].topics) || [];
        replace(topicsBox, ts.length ? h('p', null, ts.map((x, i) => [i ? ', ' : '', link(`/ui/topics/${enc(x)}`, x)])) : h('p', { class: 'muted' }, 'None yet.'));
      }).catch((err) => showError(topicsBox, err)),
      get(`${base}/offsets`, { signal }).then((o) => {
        const os = (o && o.offsets) || [];
        replace(offsetsBox, os.length ? table(['Partition', 'Offset'], os.map((x) => [JSON.stringify(x.partition), JSON.stringify(x.offset)])) : h('p', { class: 'muted' }, 'None yet.'));
      }).catch((err) => showError(offsetsBox, err)),
    ]);
  },
};
