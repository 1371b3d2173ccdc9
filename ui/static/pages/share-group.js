// /ui/share-groups/{group}: live members, per share-partition the start offset and
// the records in flight by state, the group's configs, its push subscription when it
// has one (pause, resume, delete) — members, partitions and the subscription refreshed
// every 5 s while the page is open — resetting offsets (the API refuses it while the
// group has members) and deleting.
import { h, replace, table, link, fmtInt, fmtTime, enc } from '../dom.js';
import { get, call } from '../api.js';

export default {
  path: /^\/share-groups\/([^/]+)$/,
  title: (g) => 'Share group ' + g,
  async render({ main, params: [name], signal, go, showError, onCleanup }) {
    const base = `/v1/share-groups/${enc(name)}`;
    const g = await get(base, { signal });
    const stateBox = h('div', { id: 'share-state' });
    const draw = (g) => replace(stateBox,
      h('h2', null, 'Members'),
      (g.members || []).length ? table(['Member', 'Epoch', 'Topics'],
        g.members.map((m) => [m.member_id, String(m.member_epoch), (m.topics || []).join(', ')]), { id: 'share-members' })
        : h('p', { class: 'muted', id: 'share-members' }, 'No live members.'),
      h('h2', null, 'Share-partitions'),
      (g.partitions || []).length ? table(['Topic', 'Partition', 'Start', 'Lag', 'Available', 'Acquired', 'Acknowledged', 'Archived', 'Dead-letter pending'],
        g.partitions.map((p) => [link(`/ui/topics/${enc(p.topic)}`, p.topic), String(p.partition),
          link(`/ui/topics/${enc(p.topic)}/partitions/${p.partition}?offset=${p.start_offset}`, fmtInt(p.start_offset)),
          fmtInt(p.lag), fmtInt(p.available), fmtInt(p.acquired), fmtInt(p.acknowledged), fmtInt(p.archived), fmtInt(p.dead_letter_pending)]), { id: 'share-partitions' })
        : h('p', { class: 'muted', id: 'share-partitions' }, 'Nothing acquired yet.'));
    draw(g);

    const configs = g.configs ? table(['Config', 'Value'], Object.keys(g.configs).sort().map((k) => [k, g.configs[k]]), { id: 'share-configs' }) : null;

    // The push subscription, when there is one. The push role pauses it on its own (a
    // misconfigured target), so it is refreshed with the rest; it is drawn again only
    // when it changed, so that a refresh never swallows a click or an action's error.
    const pushBox = h('div', { class: 'card', id: 'push' }, h('h2', null, 'Push delivery'), h('p', { class: 'muted' }, '…'));
    let shownPush;
    const drawPush = async () => {
      let p;
      try { p = await get(`${base}/push`, { signal }); } catch (err) {
        if (err.name === 'AbortError') return;
        if (err.status === 404) {
          if (shownPush === null) return;
          shownPush = null;
          replace(pushBox, h('h2', null, 'Push delivery'), h('p', { class: 'muted', id: 'push-none' }, 'No push subscription: members pull.'));
          return;
        }
        shownPush = undefined;
        showError(pushBox, err); return;
      }
      const key = JSON.stringify(p);
      if (key === shownPush) return;
      shownPush = key;
      const pushErr = h('div');
      const act = (label, method, path) => h('button', {
        type: 'button', class: method === 'DELETE' ? 'danger' : null,
        onclick: async () => { try { await call(method, path); await drawPush(); } catch (err) { showError(pushErr, err); } },
      }, label);
      replace(pushBox, h('h2', null, 'Push delivery'),
        table(['Target', 'Topics', 'State', 'Batch', 'Concurrency', 'Timeout', 'Acts as'],
          [[p.url || p.lambda_arn, (p.topics || []).join(', '), h('b', { id: 'push-state' }, p.state), fmtInt(p.batch_size), fmtInt(p.concurrency), `${fmtInt(p.timeout_ms)} ms`, p.principal || '—']]),
        p.last_error ? h('p', { class: 'problem', id: 'push-error' }, p.last_error) : null,
        h('p', { class: 'muted small' }, `updated ${fmtTime(p.updated_ms)}`),
        p.state === 'paused' ? act('Resume', 'POST', `${base}/push:resume`) : act('Pause', 'POST', `${base}/push:pause`), ' ',
        act('Delete subscription', 'DELETE', `${base}/push`), pushErr);
    };
    drawPush();
    const timer = setInterval(async () => {
      try { draw(await get(base, { signal })); } catch (err) { if (err.name !== 'AbortError') showError(stateBox, err); }
      drawPush();
    }, 5000);
    onCleanup(() => clearInterval(timer));

    const topics = [...new Set((g.partitions || []).map((p) => p.topic))];
    const resetErr = h('div', { id: 'share-reset-result' });
    const topicSel = h('select', { 'aria-label': 'Topic' }, topics.map((t) => h('option', { value: t }, t)));
    const toSel = h('select', { 'aria-label': 'Reset to' }, ['earliest', 'latest', 'offset', 'timestamp'].map((t) => h('option', { value: t }, t)));
    const arg = h('input', { placeholder: 'offset or time (for offset/timestamp)', 'aria-label': 'Offset or timestamp' });
    const reset = h('form', {
      class: 'card', id: 'share-reset',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(resetErr);
        const body = { topic: topicSel.value, to: toSel.value };
        if (toSel.value === 'offset') body.offset = Number(arg.value);
        if (toSel.value === 'timestamp') body.timestamp = /^\d+$/.test(arg.value) ? Number(arg.value) : arg.value;
        try { await call('POST', `${base}/offsets:reset`, body); go(location.pathname, { replaceState: true }); } catch (err) { showError(resetErr, err); }
      },
    }, h('h2', null, 'Reset offsets'), h('p', { class: 'muted small' }, 'Only while the group has no members; what was in flight is dropped.'), topicSel, ' ', toSel, ' ', arg, ' ', h('button', { type: 'submit' }, 'Reset'), resetErr);
    const delErr = h('div');
    const confirmName = h('input', { 'aria-label': 'Type the group name to confirm', placeholder: name, autocomplete: 'off' });
    const delBtn = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete share group');
    confirmName.addEventListener('input', () => { delBtn.disabled = confirmName.value !== name; });
    const del = h('form', {
      class: 'card', id: 'share-delete',
      onsubmit: async (e) => {
        e.preventDefault();
        try { await call('DELETE', base); go('/ui/share-groups'); } catch (err) { showError(delErr, err); }
      },
    }, h('h2', null, 'Delete'), h('p', null, 'Type the group name to confirm.'), confirmName, ' ', delBtn, delErr);

    replace(main, h('p', { class: 'crumbs' }, link('/ui/share-groups', 'Share groups'), ' / '), h('h1', null, name),
      h('p', { class: 'muted' }, `epoch ${g.epoch}`),
      stateBox,
      configs ? [h('h2', null, 'Configs'), configs] : null,
      h('div', { class: 'cards' }, pushBox, topics.length ? reset : null, del));
  },
};
