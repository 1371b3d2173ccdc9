// /ui/connectors: each connector's and task's state, a failed task's error trace, and
// pause, resume and restart (Kafka Connect's REST API, served under /v1/connectors on
// nodes that run the connect role).
import { h, replace, table, link, enc } from '../dom.js';
import { get, call } from '../api.js';

export default {
  path: /^\/connectors$/,
  title: 'Connectors',
  nav: 'Connectors',
  navHref: '/ui/connectors',
  async render({ main, signal, go, showError }) {
    let all;
    try {
      all = await get('/v1/connectors?expand=status', { signal });
    } catch (err) {
      if (err.status === 404 || err.code === 'not_found') {
        replace(main, h('h1', null, 'Connectors'), h('p', { class: 'muted' }, 'This node does not run the connect role.'));
        return;
      }
      throw err;
    }
    const names = Object.keys(all || {}).sort();
    const act = (n, what, method = 'PUT') => async () => {
      try { await call(method, `/v1/connectors/${enc(n)}/${what}`); go(location.pathname, { replaceState: true }); } catch (err) { showError(errBox, err); }
    };
    const errBox = h('div');
    replace(main, h('h1', null, 'Connectors'), errBox,
      names.length ? names.map((n) => {
        const st = (all[n] && all[n].status) || {};
        const c = st.connector || {};
        return h('section', { class: 'card connector', 'data-name': n },
          h('h2', null, link(`/ui/connectors/${enc(n)}`, n), ' ', h('span', { class: 'state state-' + String(c.state || '').toLowerCase() }, c.state || '?')),
          c.trace ? h('pre', { class: 'trace' }, c.trace) : null,
          table(['Task', 'State', 'Worker', 'Error'], (st.tasks || []).map((t) => [String(t.id), t.state, t.worker_id || '—', t.trace ? h('pre', { class: 'trace' }, t.trace) : ''])),
          h('p', null, h('button', { type: 'button', onclick: act(n, 'pause') }, 'Pause'), ' ',
            h('button', { type: 'button', onclick: act(n, 'resume') }, 'Resume'), ' ',
            h('button', { type: 'button', onclick: act(n, 'restart?includeTasks=true', 'POST') }, 'Restart')));
      }) : h('p', { class: 'muted' }, 'No connectors.'));
  },
};
