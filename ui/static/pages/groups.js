// /ui/groups: every consumer group the key may describe (HTTP and Kafka), its state,
// members and total lag.
import { h, replace, table, link, fmtInt, enc } from '../dom.js';
import { get } from '../api.js';

export default {
  path: /^\/groups$/,
  title: 'Groups',
  nav: 'Groups',
  navHref: '/ui/groups',
  async render({ main, signal }) {
    const { groups } = await get('/v1/groups', { signal });
    groups.sort((a, b) => a.name.localeCompare(b.name));
    const lagCells = groups.map(() => h('span', { class: 'muted' }, '…'));
    replace(main, h('h1', null, 'Consumer groups'),
      groups.length ? table(['Group', 'State', 'Members', 'Assignor', 'Total lag'],
        groups.map((g, i) => [link(`/ui/groups/${enc(g.name)}`, g.name), g.state, fmtInt(g.members), g.assignor || '—', lagCells[i]]), { id: 'groups' })
        : h('p', { class: 'muted', id: 'groups' }, 'No groups yet (or none this key may describe).'));
    await Promise.all(groups.map(async (g, i) => {
      try {
        const lag = await get(`/v1/groups/${enc(g.name)}/lag`, { signal });
        replace(lagCells[i], fmtInt(lag.total_lag));
        lagCells[i].className = '';
      } catch (err) { if (err.name !== 'AbortError') replace(lagCells[i], err.code || 'error'); }
    }));
  },
};
