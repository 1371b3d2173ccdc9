// /ui/topics: every topic the key may describe, with partitions, records, bytes,
// retention and compaction; a form to create one.
import { h, replace, table, link, fmtInt, fmtBytes, fmtDuration, enc } from '../dom.js';
import { get, call } from '../api.js';
import { parseConfigs } from './topic.js';

// partitionTotals sums a topic's partitions: records (high watermark minus log start,
// an upper bound once compaction has removed some) and bytes.
export async function partitionTotals(name, signal) {
  const { partitions } = await get(`/v1/topics/${enc(name)}/partitions`, { signal });
  let records = 0, bytes = 0;
  for (const p of partitions) { records += p.high_watermark - p.log_start_offset; bytes += p.bytes; }
  return { records, bytes };
}

// limited runs fns at most n at a time.
async function limited(n, fns) {
  let i = 0;
  await Promise.all(Array.from({ length: n }, async () => { while (i < fns.length) await fns[i++](); }));
}

export default {
  path: /^\/topics$/,
  title: 'Topics',
  nav: 'Topics',
  navHref: '/ui/topics',
  async render({ main, signal, go, showError }) {
    const { topics } = await get('/v1/topics', { signal });
    topics.sort((a, b) => a.name.localeCompare(b.name));
    const cells = new Map();
    const rows = topics.map((t) => {
      const ec = t.effective_configs || t.configs || {};
      const rec = h('span', { class: 'muted' }, '…'), byt = h('span', { class: 'muted' }, '…');
      cells.set(t.name, [rec, byt]);
      return [link(`/ui/topics/${enc(t.name)}`, t.name), fmtInt(t.partitions), rec, byt,
        fmtDuration(ec['retention.ms']), ec['cleanup.policy'] || '—'];
    });
    const errBox = h('div');
    const name = h('input', { name: 'name', required: true, placeholder: 'orders', 'aria-label': 'Topic name' });
    const parts = h('input', { name: 'partitions', type: 'number', min: 1, value: 1, 'aria-label': 'Partitions' });
    const configs = h('textarea', { name: 'configs', rows: 3, placeholder: 'retention.ms=86400000\ncleanup.policy=compact', 'aria-label': 'Configs' });
    const form = h('form', {
      class: 'card',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(errBox);
        try {
          const body = { name: name.value.trim(), partitions: Number(parts.value) };
          const cf = parseConfigs(configs.value);
          if (Object.keys(cf).length) body.configs = cf;
          await call('POST', '/v1/topics', body);
          go(`/ui/topics/${enc(body.name)}`);
        } catch (err) { showError(errBox, err); }
      },
    }, h('h2', null, 'Create a topic'),
    h('label', null, 'Name ', name), ' ', h('label', null, 'Partitions ', parts),
    h('label', { class: 'block' }, 'Configs (key=value, one a line) ', configs),
    h('button', { type: 'submit' }, 'Create'), errBox);
    replace(main, h('h1', null, 'Topics'),
      topics.length ? table(['Topic', 'Partitions', 'Records', 'Bytes', 'Retention', 'Cleanup'], rows, { id: 'topics' })
        : h('p', { class: 'muted', id: 'topics' }, 'No topics yet (or none this key may describe).'),
      form);
    // Sizes come from each topic's partitions, a few at a time.
    await limited(6, topics.map((t) => async () => {
      const [rec, byt] = cells.get(t.name);
      try {
        const s = await partitionTotals(t.name, signal);
        replace(rec, fmtInt(s.records)); replace(byt, fmtBytes(s.bytes));
        rec.className = byt.className = '';
      } catch (err) { if (err.name !== 'AbortError') replace(rec, err.code || 'error'); }
    }));
  },
};
