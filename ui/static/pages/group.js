// /ui/groups/{group}: state, members with their assignments and epochs, committed
// offsets and lag per partition, total lag over time (sampled every 5 s while the page
// is open, kept in the tab for 10 minutes),
// resetting offsets (the API refuses it while the group has members) and deleting.
import { h, s, replace, table, link, fmtInt, fmtTime, enc } from '../dom.js';
import { get, call } from '../api.js';

const tps = (xs) => (xs || []).map((x) => `${x.topic}[${x.partitions.join(',')}]`).join(' ');

export default {
  path: /^\/groups\/([^/]+)$/,
  title: (g) => 'Group ' + g,
  async render({ main, params: [name], signal, go, showError, onCleanup }) {
    const base = `/v1/groups/${enc(name)}`;
    const g = await get(base, { signal });
    const lagBox = h('div', { id: 'lag' });
    const lagChart = h('div', { class: 'charts' });
    // Total lag over time, kept in the tab (sessionStorage) for 10 minutes, so that it
    // survives leaving the page and coming back.
    const KEY = 'strata.lag.' + name, KEEP = 10 * 60000;
    let samples;
    try { samples = JSON.parse(sessionStorage.getItem(KEY)) || []; } catch { samples = []; }
    const drawLag = (lag) => {
      replace(lagBox, h('p', null, 'Total lag ', h('b', { id: 'total-lag' }, fmtInt(lag.total_lag))),
        table(['Topic', 'Partition', 'Committed', 'Log start', 'High watermark', 'Lag', 'Owner'],
          (lag.partitions || []).map((p) => [link(`/ui/topics/${enc(p.topic)}`, p.topic), String(p.partition),
            p.committed_offset === null ? '—' : link(`/ui/topics/${enc(p.topic)}/partitions/${p.partition}?offset=${p.committed_offset}`, fmtInt(p.committed_offset)),
            fmtInt(p.log_start_offset), fmtInt(p.high_watermark), fmtInt(p.lag), p.owner || '—'])));
      samples.push([Date.now(), lag.total_lag]);
      samples = samples.filter(([t]) => t > Date.now() - KEEP);
      sessionStorage.setItem(KEY, JSON.stringify(samples));
      const W = 320, H = 90, t0 = samples[0][0], span = Math.max(1, Date.now() - t0);
      const max = Math.max(1, ...samples.map((x) => x[1]));
      replace(lagChart, h('figure', { class: 'chart' }, h('figcaption', null, h('b', null, 'Total lag, sampled while this page is open'), ' ', h('span', { class: 'muted' }, `(max ${fmtInt(max)})`)),
        s('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'lag over time' },
          s('polyline', { class: 'line s0', points: samples.map(([t, v]) => `${((t - t0) / span * W).toFixed(1)},${(H - 4 - v / max * (H - 14)).toFixed(1)}`).join(' ') }))));
    };
    drawLag(g);
    const refresh = async () => {
      try { drawLag(await get(`${base}/lag`, { signal })); } catch (err) { if (err.name !== 'AbortError') showError(lagBox, err); }
    };
    const timer = setInterval(refresh, 5000);
    onCleanup(() => clearInterval(timer));

    const topics = [...new Set((g.partitions || []).map((p) => p.topic))];
    const resetErr = h('div', { id: 'reset-result' });
    const topicSel = h('select', { 'aria-label': 'Topic' }, topics.map((t) => h('option', { value: t }, t)));
    const toSel = h('select', { 'aria-label': 'Reset to' }, ['earliest', 'latest', 'offset', 'timestamp'].map((t) => h('option', { value: t }, t)));
    const arg = h('input', { placeholder: 'offset or time (for offset/timestamp)', 'aria-label': 'Offset or timestamp' });
    const reset = h('form', {
      class: 'card', id: 'reset',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(resetErr);
        const body = { topic: topicSel.value, to: toSel.value };
        if (toSel.value === 'offset') body.offset = Number(arg.value);
        if (toSel.value === 'timestamp') body.timestamp = /^\d+$/.test(arg.value) ? Number(arg.value) : arg.value;
        try { await call('POST', `${base}/offsets:reset`, body); go(location.pathname, { replaceState: true }); } catch (err) { showError(resetErr, err); }
      },
    }, h('h2', null, 'Reset offsets'), h('p', { class: 'muted small' }, 'Only while the group has no members.'), topicSel, ' ', toSel, ' ', arg, ' ', h('button', { type: 'submit' }, 'Reset'), resetErr);
    const delErr = h('div');
    const confirmName = h('input', { 'aria-label': 'Type the group name to confirm', placeholder: name, autocomplete: 'off' });
    const delBtn = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete group');
    confirmName.addEventListener('input', () => { delBtn.disabled = confirmName.value !== name; });
    const del = h('form', {
      class: 'card',
      onsubmit: async (e) => {
        e.preventDefault();
        try { await call('DELETE', base); go('/ui/groups'); } catch (err) { showError(delErr, err); }
      },
    }, h('h2', null, 'Delete'), h('p', null, 'Type the group name to confirm.'), confirmName, ' ', delBtn, delErr);

    replace(main, h('p', { class: 'crumbs' }, link('/ui/groups', 'Groups'), ' / '), h('h1', null, name),
      h('p', { class: 'muted' }, `state ${g.state} · assignor ${g.assignor || '—'} · epoch ${g.epoch} · created ${fmtTime(Date.parse(g.created_at))}`),
      h('h2', null, 'Members'),
      (g.members || []).length ? table(['Member', 'Epoch', 'Topics', 'Assignment', 'Revoking', 'Pending', 'Lease until'],
        g.members.map((m) => [m.member_id, String(m.member_epoch), (m.topics || []).join(', '), tps(m.assignment), tps(m.revoking), tps(m.pending), fmtTime(Date.parse(m.lease_expires_at))]), { id: 'members' })
        : h('p', { class: 'muted', id: 'members' }, 'No members.'),
      h('h2', null, 'Offsets and lag'), lagBox, lagChart,
      h('div', { class: 'cards' }, topics.length ? reset : null, del));
  },
};
