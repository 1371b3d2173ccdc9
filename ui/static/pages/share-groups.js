// /ui/share-groups: every share group the key may describe (HTTP and Kafka), its
// state and live members.
import { h, replace, table, link, fmtInt, enc } from '../dom.js';
import { get } from '../api.js';

export default {
  path: /^\/share-groups$/,
  title: 'Share groups',
  nav: 'Queues',
  navHref: '/ui/share-groups',
  async render({ main, signal }) {
    const { share_groups: groups } = await get('/v1/share-groups', { signal });
    replace(main, h('h1', null, 'Share groups'),
      h('p', { class: 'muted' }, 'Queues on the log: any number of members share the records of the topics, each record acquired under a lock and acknowledged one by one.'),
      groups.length ? table(['Group', 'State', 'Members'],
        groups.map((g) => [link(`/ui/share-groups/${enc(g.name)}`, g.name), g.state, fmtInt(g.members)]), { id: 'share-groups' })
        : h('p', { class: 'muted', id: 'share-groups' }, 'No share groups yet (or none this key may describe).'));
  },
};
