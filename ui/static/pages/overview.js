// /ui/: the cluster's live nodes (the registry, GET /v1/nodes), this node and its roles,
// and charts of this node's own metrics over the last minutes —
// produce and fetch rates, produce latency percentiles, object PUTs and catalog commits
// per second, the block cache's hit ratio. The node's /metrics is read every few
// seconds while the page is open; the history is kept in the tab (sessionStorage), so
// it survives moving between pages and reloads.
import { h, s, replace, table, fmtInt, fmtTime } from '../dom.js';
import { metrics, get } from '../api.js';

const STORE = 'strata.metrics';
const EVERY = 3000;        // ms between samples
const KEEP = 10 * 60000;   // ms of history kept

// parse reads Prometheus text into name -> [{labels, value}].
export function parse(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const lm of (m[3] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: Number(m[4]) });
  }
  return out;
}

const sum = (ms, name, f = () => true) => (ms.get(name) || []).filter((x) => f(x.labels)).reduce((n, x) => n + x.value, 0);

// sample reduces a scrape to the counters the charts need.
function sample(ms) {
  const produceRoute = (l) => l.method === 'POST' && /\/records$/.test(l.route || '');
  const fetchRoute = (l) => l.method === 'GET' && /partitions\/\{partition\}\/records$/.test(l.route || '');
  const buckets = {};
  for (const b of ms.get('strata_http_request_seconds_bucket') || []) {
    if (!/^\/v1\/topics\/\{topic\}\/records$/.test(b.labels.route || '') && b.labels.route !== '/v1/records') continue;
    buckets[b.labels.le] = (buckets[b.labels.le] || 0) + b.value;
  }
  return {
    t: Date.now(),
    produceReq: sum(ms, 'strata_http_requests_total', produceRoute) + sum(ms, 'strata_kafka_requests_total', (l) => l.api === 'Produce'),
    fetchReq: sum(ms, 'strata_http_requests_total', fetchRoute) + sum(ms, 'strata_kafka_requests_total', (l) => l.api === 'Fetch'),
    records: sum(ms, 'strata_writer_flush_records_sum'),
    puts: sum(ms, 'strata_writer_puts_total'),
    commits: sum(ms, 'strata_writer_commits_total'),
    hits: sum(ms, 'strata_reader_cache_hits_total'),
    misses: sum(ms, 'strata_reader_cache_misses_total'),
    buckets,
  };
}

// quantile estimates the q-quantile from the difference of two cumulative histograms.
function quantile(q, a, b) {
  const les = Object.keys(b).filter((k) => k !== '+Inf').map(Number).sort((x, y) => x - y);
  const total = (b['+Inf'] || 0) - (a['+Inf'] || 0);
  if (total <= 0) return null;
  for (const le of les) if ((b[String(le)] || 0) - (a[String(le)] || 0) >= q * total) return le;
  return les.length ? les[les.length - 1] : null;
}

function series(hist) {
  const out = { produce: [], fetch: [], records: [], puts: [], commits: [], hit: [], p50: [], p99: [] };
  for (let i = 1; i < hist.length; i++) {
    const a = hist[i - 1], b = hist[i], dt = (b.t - a.t) / 1000;
    if (dt <= 0) continue;
    const rate = (k) => Math.max(0, (b[k] - a[k]) / dt);
    out.produce.push([b.t, rate('produceReq')]);
    out.fetch.push([b.t, rate('fetchReq')]);
    out.records.push([b.t, rate('records')]);
    out.puts.push([b.t, rate('puts')]);
    out.commits.push([b.t, rate('commits')]);
    const lookups = (b.hits - a.hits) + (b.misses - a.misses);
    out.hit.push([b.t, lookups > 0 ? 100 * (b.hits - a.hits) / lookups : null]);
    const p50 = quantile(0.5, a.buckets, b.buckets), p99 = quantile(0.99, a.buckets, b.buckets);
    out.p50.push([b.t, p50 === null ? null : p50 * 1000]);
    out.p99.push([b.t, p99 === null ? null : p99 * 1000]);
  }
  return out;
}

// chart draws one or two series as an SVG line chart over the kept window.
function chart(title, unit, lines) {
  const W = 320, H = 110, now = Date.now();
  const pts = lines.flatMap((l) => l.data).filter((p) => p[1] !== null);
  const max = Math.max(1e-9, ...pts.map((p) => p[1]));
  // The x axis spans the history there is, up to the window kept.
  const t0 = Math.min(...lines.flatMap((l) => l.data.map((p) => p[0])), now);
  const span = Math.max(1, Math.min(KEEP, now - t0));
  const x = (t) => W - ((now - t) / span) * W;
  const y = (v) => H - 4 - (v / max) * (H - 14);
  const last = (l) => { const d = l.data.filter((p) => p[1] !== null); return d.length ? d[d.length - 1][1] : null; };
  const fmt = (v) => v === null ? '—' : v >= 100 ? fmtInt(Math.round(v)) : v.toFixed(v >= 10 ? 1 : 2);
  return h('figure', { class: 'chart' },
    h('figcaption', null, h('b', null, title), ' ', lines.map((l, i) => h('span', { class: 'series s' + i }, `${l.name} ${fmt(last(l))} ${unit}`)),
      h('span', { class: 'muted' }, pts.length ? `(max ${fmt(max)}, last ${Math.round(span / 1000)} s)` : '(collecting…)')),
    s('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': title },
      s('line', { x1: 0, x2: W, y1: H - 4, y2: H - 4, class: 'axis' }),
      lines.map((l, i) => s('polyline', { class: 'line s' + i, points: l.data.filter((p) => p[1] !== null).map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ') }))));
}

function load() {
  try { return JSON.parse(sessionStorage.getItem(STORE)) || []; } catch { return []; }
}

export default {
  path: /^\/$/,
  title: 'Overview',
  nav: 'Overview',
  navHref: '/ui/',
  async render({ main, signal, onCleanup, showError }) {
    const nodeBox = h('div', { id: 'node' });
    const registry = h('div', { id: 'registry' }, h('p', { class: 'muted' }, 'Reading the registry…'));
    const charts = h('div', { class: 'charts', id: 'charts' });
    const err = h('div');
    const summary = h('div', { id: 'summary' });
    replace(main, h('h1', null, 'Overview'), summary, h('h2', null, 'Nodes'), registry,
      h('h2', null, 'This node'), nodeBox, h('h3', null, 'Its metrics, sampled while this page is open (up to 10 minutes kept)'), err, charts);

    let hist = load();
    let roles = [];
    const tick = async () => {
      try {
        const ms = parse(await metrics({ signal }));
        roles = ['writer', 'reader', 'compactor', 'connect', 'kafka'].filter((r) => [...ms.keys()].some((k) => k.startsWith(`strata_${r}_`)));
        hist.push(sample(ms));
        hist = hist.filter((x) => x.t > Date.now() - KEEP);
        sessionStorage.setItem(STORE, JSON.stringify(hist));
        replace(err);
      } catch (e) { if (e.name !== 'AbortError') showError(err, e); return; }
      const sr = series(hist);
      replace(nodeBox, table(['HTTP address', 'Roles (from its metrics)', 'Samples'], [[location.host, roles.join(', ') || '—', `${hist.length} every ${EVERY / 1000} s`]], { id: 'this-node' }));
      replace(charts,
        chart('Produce requests', '/s', [{ name: 'produce', data: sr.produce }]),
        chart('Records written', '/s', [{ name: 'records', data: sr.records }]),
        chart('Fetch requests', '/s', [{ name: 'fetch', data: sr.fetch }]),
        chart('Produce latency (HTTP)', 'ms', [{ name: 'p50', data: sr.p50 }, { name: 'p99', data: sr.p99 }]),
        chart('Object store PUTs and catalog commits', '/s', [{ name: 'PUTs', data: sr.puts }, { name: 'commits', data: sr.commits }]),
        chart('Block cache hit ratio', '%', [{ name: 'hits', data: sr.hit }]));
    };
    await tick();
    const timer = setInterval(tick, EVERY);
    onCleanup(() => clearInterval(timer));
    try {
      const { nodes } = await get('/v1/nodes', { signal });
      replace(registry, nodes.length ? table(['Node id', 'Kafka address', 'Lease until'], nodes.map((n) => [String(n.id), n.address, fmtTime(Date.parse(n.lease_until))]), { id: 'nodes' })
        : h('p', { class: 'muted', id: 'nodes' }, 'No node serves the Kafka protocol, so none is registered.'));
    } catch (e) { showError(registry, e); }
    try {
      const [{ topics }, { groups }] = await Promise.all([get('/v1/topics', { signal }), get('/v1/groups', { signal })]);
      replace(summary, h('p', null, h('a', { href: '/ui/topics' }, `${topics.length} topic(s)`), ' · ', h('a', { href: '/ui/groups' }, `${groups.length} group(s)`)));
    } catch (e) { showError(summary, e); }
  },
};
