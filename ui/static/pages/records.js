// /ui/topics/{topic}/partitions/{p}?offset=N or ?timestamp=T: a record browser. Pages
// of records both ways, a jump to an offset or a time, a search by key or by text
// (?key=K or ?contains=T, from offset to end_offset) that the node does — the browser
// gets only the matches, asking again from where each scan stopped — a live tail the user starts
// (the page holds no stream open by itself), and a form to produce a record. Record
// contents are untrusted: they are shown as text only (dom.js never parses HTML).
import { h, replace, link, fmtInt, fmtTime, enc } from '../dom.js';
import { get, call, tail } from '../api.js';

const SIZES = [20, 50, 100, 500];

// show renders a key or value: JSON pretty-printed, strings as they are, base64 marked.
function show(v, encoding) {
  if (v === null || v === undefined) return h('span', { class: 'muted' }, 'null');
  if (encoding === 'base64') return h('span', null, h('span', { class: 'tag' }, 'base64'), ' ', String(v));
  if (typeof v === 'string') return h('pre', null, v);
  return h('pre', null, JSON.stringify(v, null, 2));
}

function headersCell(hs) {
  if (!hs || !hs.length) return '';
  return h('dl', { class: 'headers' }, hs.map((x) => [h('dt', null, x.key), h('dd', null, x.value === null ? 'null' : x.value)]));
}

function recordRow(r, mark) {
  return h('tr', { 'data-offset': r.offset, class: mark ? 'mark' : null },
    h('td', { class: 'num' }, String(r.offset)),
    h('td', { class: 'nowrap' }, fmtTime(r.timestamp)),
    h('td', { class: 'key' }, show(r.key, r.key_encoding)),
    h('td', { class: 'value' }, show(r.value, r.value_encoding)),
    h('td', null, headersCell(r.headers)));
}

function recordTable(id, rows) {
  return h('table', { id, class: 'records' },
    h('thead', null, h('tr', null, ['Offset', 'Timestamp', 'Key', 'Value', 'Headers'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, rows));
}

// parseTime reads unix milliseconds or anything Date.parse reads (RFC 3339, or a
// local "YYYY-MM-DD HH:MM") into unix milliseconds.
function parseTime(s) {
  if (/^\d+$/.test(s)) return Number(s);
  const ms = Date.parse(s);
  return isNaN(ms) ? null : ms;
}

export default {
  path: /^\/topics\/([^/]+)\/partitions\/(\d+)$/,
  title: (t, p) => `${t} / ${p} records`,
  async render({ main, params: [topic, part], query, signal, go, showError, onCleanup }) {
    const base = `/v1/topics/${enc(topic)}/partitions/${part}`;
    const here = `/ui/topics/${enc(topic)}/partitions/${part}`;
    const size = SIZES.includes(Number(query.get('size'))) ? Number(query.get('size')) : 50;
    const withSize = (q) => `${here}?${q}${size !== 50 ? '&size=' + size : ''}`;
    const [topicInfo, { partitions }] = await Promise.all([get(`/v1/topics/${enc(topic)}`, { signal }), get(`/v1/topics/${enc(topic)}/partitions`, { signal })]);
    const pinfo = partitions.find((p) => String(p.partition) === part);
    const status = h('div', { id: 'browse-status' });

    // Where to start: ?offset, else ?timestamp (the first offset at or after it), else
    // the newest page.
    let start, since = null;
    if (query.has('offset')) {
      start = query.get('offset');
    } else if (query.has('timestamp')) {
      since = parseTime(query.get('timestamp'));
      const ts = since === null ? query.get('timestamp') : String(since);
      const ans = await get(`${base}/offsets?timestamp=${enc(ts)}`, { signal });
      start = String(ans.offset ?? (pinfo ? pinfo.high_watermark : 0));
    } else {
      start = String(pinfo ? Math.max(pinfo.log_start_offset, pinfo.high_watermark - size) : 0);
    }

    const offsetIn = h('input', { name: 'offset', inputmode: 'numeric', value: query.has('offset') ? start : '', placeholder: 'offset', 'aria-label': 'Offset', size: 10 });
    const timeIn = h('input', { name: 'timestamp', value: query.get('timestamp') || '', placeholder: '2026-01-01T00:00:00Z or ms', 'aria-label': 'Timestamp', size: 24 });
    const sizeSel = h('select', { 'aria-label': 'Records per page' }, SIZES.map((n) => h('option', { value: n, selected: n === size }, `${n} per page`)));
    const jump = h('form', {
      class: 'toolbar',
      onsubmit: (e) => {
        e.preventDefault();
        const sz = Number(sizeSel.value) !== 50 ? '&size=' + sizeSel.value : '';
        if (offsetIn.value.trim()) go(`${here}?offset=${enc(offsetIn.value.trim())}${sz}`);
        else if (timeIn.value.trim()) go(`${here}?timestamp=${enc(timeIn.value.trim())}${sz}`);
        else go(`${here}${sz ? '?' + sz.slice(1) : ''}`);
      },
    }, h('label', null, 'Offset ', offsetIn), h('label', null, 'or time ', timeIn), sizeSel, h('button', { type: 'submit' }, 'Go'));

    const searching = query.has('contains') || query.has('key');
    const kfmt = (topicInfo.effective_configs || {})['key.format'] || 'string';
    const kindSel = h('select', { name: 'kind', 'aria-label': 'Search by' },
      h('option', { value: 'contains', selected: !query.has('key') }, 'text'), h('option', { value: 'key', selected: query.has('key') }, 'key'));
    const termIn = h('input', { name: 'term', value: query.get('key') ?? query.get('contains') ?? '', placeholder: 'text or key to find', 'aria-label': 'Search for', size: 24 });
    const endIn = h('input', { name: 'end_offset', inputmode: 'numeric', value: query.get('end_offset') || '', placeholder: 'to offset (end)', 'aria-label': 'Search up to offset', size: 12 });
    const searchForm = h('form', {
      class: 'toolbar', id: 'search',
      onsubmit: (e) => {
        e.preventDefault();
        if (!termIn.value) return;
        const q = new URLSearchParams();
        let term = termIn.value;
        // A json-keyed topic stores a key as its JSON text: a key typed as plain text
        // is looked for as the JSON string it would have been produced as.
        if (kindSel.value === 'key' && kfmt === 'json') { try { JSON.parse(term); } catch { term = JSON.stringify(term); } }
        q.set(kindSel.value, term);
        if (offsetIn.value.trim()) q.set('offset', offsetIn.value.trim());
        if (endIn.value.trim()) q.set('end_offset', endIn.value.trim());
        go(`${here}?${q}`);
      },
    }, h('label', null, 'Search by ', kindSel), termIn, h('label', null, 'up to ', endIn),
    h('button', { type: 'submit' }, 'Search'), searching ? h('a', { href: here }, 'clear') : null,
    h('span', { class: 'muted small' }, 'done by the node from the offset above (default: the log start)'));

    const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of records' });
    const body = h('div', { id: 'browse' });

    // The live tail: started and stopped by the user, ended when the page is left.
    let tailAbort = null;
    const tailRows = h('tbody');
    const tailStatus = h('span', { class: 'muted', id: 'tail-status' }, 'off');
    const tailBtn = h('button', { type: 'button', id: 'tail-toggle', 'aria-pressed': 'false' }, 'Start live tail');
    const stopTail = () => { if (tailAbort) { tailAbort.abort(); tailAbort = null; } tailBtn.textContent = 'Start live tail'; tailBtn.setAttribute('aria-pressed', 'false'); };
    onCleanup(stopTail);
    tailBtn.addEventListener('click', () => {
      if (tailAbort) { stopTail(); replace(tailStatus, 'off'); return; }
      tailAbort = new AbortController();
      const mine = tailAbort;
      tailBtn.textContent = 'Stop live tail';
      tailBtn.setAttribute('aria-pressed', 'true');
      replace(tailStatus, 'tailing from the high watermark…');
      tail(`${base}/records?offset=latest`, (r) => {
        tailRows.prepend(recordRow(r));
        while (tailRows.childElementCount > 500) tailRows.lastElementChild.remove();
        replace(tailStatus, `live: last offset ${r.offset}`);
      }, mine.signal).then(() => { if (tailAbort === mine) { stopTail(); replace(tailStatus, 'the stream ended'); } })
        .catch((err) => { if (err.name !== 'AbortError') { stopTail(); showError(tailStatus, err); } });
    });

    const produceErr = h('div', { id: 'produce-result' });
    const keyIn = h('input', { name: 'key', placeholder: 'key (empty: null)', 'aria-label': 'Key' });
    const valueIn = h('textarea', { name: 'value', rows: 3, placeholder: '{"amount": 42} or text', 'aria-label': 'Value' });
    const headersIn = h('textarea', { name: 'headers', rows: 2, placeholder: 'header=value, one a line', 'aria-label': 'Headers' });
    const vfmt = (topicInfo.effective_configs || {})['value.format'] || 'json';
    const produce = h('form', {
      class: 'card', id: 'produce',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(produceErr);
        const rec = { partition: Number(part), value: valueIn.value };
        if (vfmt === 'json') { try { rec.value = JSON.parse(valueIn.value); } catch { /* sent as a JSON string */ } }
        if (keyIn.value !== '') rec.key = keyIn.value;
        const hs = {};
        for (const line of headersIn.value.split('\n')) {
          const i = line.indexOf('=');
          if (line.trim()) hs[(i < 0 ? line : line.slice(0, i)).trim()] = i < 0 ? null : line.slice(i + 1);
        }
        if (Object.keys(hs).length) rec.headers = hs;
        try {
          const ans = await call('POST', `/v1/topics/${enc(topic)}/records`, { records: [rec] });
          const o = ans.offsets[0];
          replace(produceErr, h('p', { class: 'ok' }, 'Produced at offset ', link(withSize(`offset=${o.offset}`), String(o.offset)), '.'));
        } catch (err) { showError(produceErr, err); }
      },
    }, h('h2', null, 'Produce a record'), h('p', { class: 'muted small' }, `value.format ${vfmt}: `,
      vfmt === 'json' ? 'a value that parses as JSON is sent as that JSON, anything else as a string.' : 'the value is sent as a string.'),
    h('label', { class: 'block' }, 'Key ', keyIn), h('label', { class: 'block' }, 'Value ', valueIn), h('label', { class: 'block' }, 'Headers ', headersIn),
    h('button', { type: 'submit' }, 'Produce'), produceErr);

    // runSearch asks the node for matches from the start offset, again from where each
    // scan stopped, until a page of matches is found or the range is searched whole;
    // each answer carries only matches. Leaving the page stops it.
    const runSearch = async () => {
      const from = query.has('offset') ? query.get('offset') : 'earliest';
      const filter = query.has('key') ? 'key=' + enc(query.get('key')) : 'contains=' + enc(query.get('contains'));
      const end = query.get('end_offset');
      const tbody = h('tbody');
      replace(body, recordTable('records', tbody));
      let at = from, found = 0, t0 = performance.now(), calls = 0;
      for (;;) {
        let res;
        try {
          res = await get(`${base}/records?${filter}&offset=${enc(at)}&max_records=${size - found}${end ? '&end_offset=' + enc(end) : ''}`, { signal });
        } catch (err) { showError(status, err); return; }
        calls++;
        for (const r of res.records) tbody.append(recordRow(r));
        found += res.records.length;
        const stop = end ? Math.min(Number(end), res.high_watermark) : res.high_watermark;
        const done = res.next_offset >= stop;
        replace(status, h('p', { class: 'muted', id: 'search-status', 'data-done': done || found >= size ? 'true' : 'false' },
          `${found} match(es) from offset ${from} · searched up to ${fmtInt(res.next_offset)} of ${fmtInt(stop)} · ${calls} request(s), ${((performance.now() - t0) / 1000).toFixed(2)} s`));
        if (done || found >= size) {
          replace(pager, done ? null : h('a', { class: 'btn', rel: 'next', href: (() => { const q = new URLSearchParams(query); q.set('offset', res.next_offset); return `${here}?${q}`; })() }, 'More matches →'));
          return;
        }
        at = String(res.next_offset);
      }
    };

    replace(main,
      h('p', { class: 'crumbs' }, link('/ui/topics', 'Topics'), ' / ', link(`/ui/topics/${enc(topic)}`, topic), ' / '),
      h('h1', null, `${topic} · partition ${part}`),
      pinfo ? h('p', { class: 'muted' }, `log start ${fmtInt(pinfo.log_start_offset)} · high watermark ${fmtInt(pinfo.high_watermark)} · last stable ${fmtInt(pinfo.last_stable_offset)}`) : null,
      jump, searchForm, status, pager, body,
      h('section', { class: 'card' }, h('h2', null, 'Live tail'), tailBtn, ' ', tailStatus, recordTable('tail', tailRows)),
      produce);

    if (searching) { await runSearch(); return; }

    let res;
    try {
      res = await get(`${base}/records?offset=${enc(start)}&max_records=${size}`, { signal });
    } catch (err) { showError(status, err); return; }
    const first = res.records.length ? res.records[0].offset : Number(start);
    const markFrom = since === null ? null : res.records.find((r) => r.timestamp >= since);
    replace(status, h('p', { class: 'muted' }, res.records.length
      ? `Offsets ${fmtInt(first)}–${fmtInt(res.records[res.records.length - 1].offset)} of ${fmtInt(res.log_start_offset)}–${fmtInt(res.high_watermark - 1)}`
      : `No records from offset ${fmtInt(Number(start))} (log start ${fmtInt(res.log_start_offset)}, high watermark ${fmtInt(res.high_watermark)}).`));
    const older = Math.max(res.log_start_offset, first - size);
    replace(pager,
      h('a', { href: withSize(`offset=${res.log_start_offset}`), class: 'btn' }, '⇤ Earliest'),
      first > res.log_start_offset ? h('a', { href: withSize(`offset=${older}`), class: 'btn', rel: 'prev' }, '← Older') : h('span', { class: 'btn disabled' }, '← Older'),
      res.next_offset < res.high_watermark ? h('a', { href: withSize(`offset=${res.next_offset}`), class: 'btn', rel: 'next' }, 'Newer →') : h('span', { class: 'btn disabled' }, 'Newer →'),
      h('a', { href: here + (size !== 50 ? '?size=' + size : ''), class: 'btn' }, 'Latest ⇥'));
    replace(body, recordTable('records', res.records.map((r) => recordRow(r, markFrom && r.offset === markFrom.offset))));
  },
};
