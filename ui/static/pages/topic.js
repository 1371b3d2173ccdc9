// /ui/topics/{topic}: the partitions (log start, high watermark, last stable offset,
// bytes, last record's time), the groups reading the topic with their lag, its Iceberg
// table when it is a table topic (lag per partition, partitions stopped on a record that
// does not fit, the current snapshot's records, files and bytes), the configs (alter), adding partitions, and deleting the topic
// behind a confirmation.
import { h, replace, table, link, fmtInt, fmtBytes, fmtTime, enc } from '../dom.js';
import { get, call } from '../api.js';

// parseConfigs reads "key=value" lines; "key=" (nothing after =) resets a config to its
// default (JSON null).
export function parseConfigs(text) {
  const out = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const i = line.indexOf('=');
    if (i < 0) { out[line] = null; continue; }
    const v = line.slice(i + 1).trim();
    out[line.slice(0, i).trim()] = v === '' ? null : v;
  }
  return out;
}

// groupsReading finds the groups with committed offsets or members on topic, and
// their lag on its partitions.
export async function groupsReading(topic, signal) {
  const { groups } = await get('/v1/groups', { signal });
  const out = [];
  await Promise.all(groups.map(async (g) => {
    try {
      const lag = await get(`/v1/groups/${enc(g.name)}/lag`, { signal });
      const ps = (lag.partitions || []).filter((p) => p.topic === topic);
      if (ps.length) out.push({ group: g, partitions: ps, lag: ps.reduce((n, p) => n + p.lag, 0) });
    } catch (err) { if (err.name === 'AbortError') throw err; } // a group the key may not describe
  }));
  return out.sort((a, b) => a.group.name.localeCompare(b.group.name));
}

// tableCard shows a table topic's table: how far it has come (the API) and its current
// snapshot (its metadata, through the Iceberg REST catalog engines use).
async function tableCard(box, topic, signal, showError) {
  let st;
  try { st = await get(`/v1/topics/${enc(topic)}/table`, { signal }); } catch (err) {
    if (err.name !== 'AbortError') showError(box, err);
    return;
  }
  let snap = null;
  let stopped = [];
  if (st.metadata_location) {
    try {
      const { metadata: m } = await get(`/iceberg/v1/namespaces/strata/tables/${enc(topic)}`, { signal });
      snap = (m.snapshots || []).find((s) => s['snapshot-id'] === m['current-snapshot-id']) || null;
      // A partition whose record does not fit the table's schema stops there (README
      // "Table schema"): the table says so in a property per partition.
      stopped = Object.entries(m.properties || {}).filter(([k]) => k.startsWith('strata.stopped.'))
        .map(([k, v]) => [k.slice('strata.stopped.'.length), v]).sort((a, b) => Number(a[0]) - Number(b[0]));
    } catch (err) { if (err.name === 'AbortError') return; } // the catalog is off on this node: the API's part alone
  }
  const sum = (snap && snap.summary) || {};
  replace(box,
    h('p', { id: 'table-summary' }, st.metadata_location
      ? [`Lag ${fmtInt(st.lag)}`, snap ? ` · ${fmtInt(Number(sum['total-records'] || 0))} rows in ${fmtInt(Number(sum['total-data-files'] || 0))} data files, ${fmtBytes(Number(sum['total-files-size'] || 0))} · snapshot of ${fmtTime(snap['timestamp-ms'])}` : '']
      : 'No snapshot yet: the tables role has not committed this table.'),
    stopped.map(([p, why]) => h('p', { class: 'problem table-stopped' }, `Partition ${p} stopped at ${why}`)),
    table(['Partition', 'In the table below', 'Last stable', 'Lag'],
      st.partitions.map((p) => [String(p.partition), fmtInt(p.next_offset), fmtInt(p.last_stable_offset), fmtInt(p.lag)]), { id: 'table-partitions' }),
    st.metadata_location ? h('p', { class: 'muted small' }, 'Metadata: ', h('code', null, st.metadata_location)) : null);
}

export default {
  path: /^\/topics\/([^/]+)$/,
  title: (t) => 'Topic ' + t,
  async render({ main, params: [topic], signal, go, showError }) {
    const base = `/v1/topics/${enc(topic)}`;
    const [t, { partitions }] = await Promise.all([get(base, { signal }), get(base + '/partitions', { signal })]);
    const lastCells = partitions.map(() => h('span', { class: 'muted' }, '…'));
    const ptable = table(['Partition', 'Log start', 'High watermark', 'Last stable', 'Records', 'Bytes', 'Last record'],
      partitions.map((p, i) => [
        link(`/ui/topics/${enc(topic)}/partitions/${p.partition}`, String(p.partition)),
        fmtInt(p.log_start_offset), fmtInt(p.high_watermark), fmtInt(p.last_stable_offset),
        fmtInt(p.high_watermark - p.log_start_offset), fmtBytes(p.bytes), lastCells[i]]), { id: 'partitions' });

    const groupsBox = h('div', { id: 'groups' }, h('p', { class: 'muted' }, 'Looking for groups…'));
    const ec = t.effective_configs || {};
    const tableBox = ec['iceberg.enabled'] === 'true' ? h('div', { id: 'table' }, h('p', { class: 'muted' }, '…')) : null;
    const cfgRows = Object.keys(ec).sort().map((k) => [k, ec[k], k in (t.configs || {}) ? 'set' : 'default']);

    const alterErr = h('div');
    const cfgText = h('textarea', { rows: 3, placeholder: 'retention.ms=3600000\n(key= resets to the default)', 'aria-label': 'Configs to change' });
    const alter = h('form', {
      class: 'card', id: 'alter',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(alterErr);
        try {
          await call('PATCH', base, { configs: parseConfigs(cfgText.value) });
          go(location.pathname, { replaceState: true });
        } catch (err) { showError(alterErr, err); }
      },
    }, h('h2', null, 'Change configs'), cfgText, h('button', { type: 'submit' }, 'Apply'), alterErr);

    const partErr = h('div');
    const count = h('input', { type: 'number', min: t.partitions + 1, value: t.partitions + 1, 'aria-label': 'New partition count' });
    const grow = h('form', {
      class: 'card', id: 'grow',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(partErr);
        try {
          await call('PATCH', base, { partitions: Number(count.value) });
          go(location.pathname, { replaceState: true });
        } catch (err) { showError(partErr, err); }
      },
    }, h('h2', null, 'Add partitions'), h('label', null, 'Partition count ', count), ' ', h('button', { type: 'submit' }, 'Set'), partErr);

    const delErr = h('div');
    const confirmName = h('input', { 'aria-label': 'Type the topic name to confirm', placeholder: topic, autocomplete: 'off' });
    const delBtn = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete topic');
    confirmName.addEventListener('input', () => { delBtn.disabled = confirmName.value !== topic; });
    const del = h('form', {
      class: 'card', id: 'delete',
      onsubmit: async (e) => {
        e.preventDefault();
        if (confirmName.value !== topic) return;
        replace(delErr);
        try {
          await call('DELETE', base);
          go('/ui/topics');
        } catch (err) { showError(delErr, err); }
      },
    }, h('h2', null, 'Delete'), h('p', null, 'Deleting removes every record of ', h('b', null, topic), '. Type its name to confirm.'),
    confirmName, ' ', delBtn, delErr);

    replace(main,
      h('p', { class: 'crumbs' }, link('/ui/topics', 'Topics'), ' / '),
      h('h1', null, topic),
      h('p', { class: 'muted' }, `${t.partitions} partition(s), created ${fmtTime(Date.parse(t.created_at))}`),
      h('h2', null, 'Partitions'), ptable,
      h('h2', null, 'Groups reading it'), groupsBox,
      tableBox ? [h('h2', null, 'Iceberg table'), tableBox] : null,
      h('h2', null, 'Configs'), cfgRows.length ? table(['Config', 'Value', ''], cfgRows, { id: 'configs' }) : h('p', { class: 'muted' }, 'None.'),
      h('div', { class: 'cards' }, alter, grow, del));

    const tableShown = tableBox ? tableCard(tableBox, topic, signal, showError) : null;
    const lastTimes = Promise.all(partitions.map(async (p, i) => {
      if (p.high_watermark <= p.log_start_offset) { replace(lastCells[i], '—'); return; }
      try {
        const r = await get(`${base}/partitions/${p.partition}/records?offset=${p.high_watermark - 1}&max_records=1&isolation=read_uncommitted`, { signal });
        replace(lastCells[i], r.records.length ? fmtTime(r.records[0].timestamp) : '—');
      } catch (err) { if (err.name !== 'AbortError') replace(lastCells[i], err.code || 'error'); }
    }));
    try {
      const gs = await groupsReading(topic, signal);
      replace(groupsBox, gs.length ? table(['Group', 'State', 'Lag', 'Partitions'], gs.map((g) => [
        link(`/ui/groups/${enc(g.group.name)}`, g.group.name), g.group.state, fmtInt(g.lag),
        g.partitions.map((p) => `${p.partition}: ${fmtInt(p.lag)}`).join(', ')])) : h('p', { class: 'muted' }, 'No group has offsets on this topic.'));
    } catch (err) { showError(groupsBox, err); }
    await Promise.all([lastTimes, tableShown]);
  },
};
