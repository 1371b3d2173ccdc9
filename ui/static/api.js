// The console's only way to the node: its HTTP API, same origin. With a key the user
// gave (kept in this tab's sessionStorage, which ends with the tab), every call carries
// it as a bearer token — never in a URL, which would leak into logs and history.

const KEY = 'strata.apiKey';

export function getKey() { return sessionStorage.getItem(KEY) || ''; }
export function setKey(k) { if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY); }

// APIError is an answer other than 2xx: its problem detail (RFC 9457) as the API sent
// it, or one made up for a network failure.
export class APIError extends Error {
  constructor(problem) {
    super(problem.detail || problem.title || 'request failed');
    this.problem = problem;
    this.status = problem.status;
    this.code = problem.code;
  }
}

function headers(extra) {
  const hs = { Accept: 'application/json', ...extra };
  const k = getKey();
  if (k) hs.Authorization = 'Bearer ' + k;
  return hs;
}

async function problemOf(res) {
  let p;
  try { p = await res.json(); } catch { p = null; }
  if (!p || typeof p !== 'object') p = { title: res.statusText, detail: `HTTP ${res.status}` };
  // Kafka Connect's REST API (/v1/connectors) answers {error_code, message}.
  if (!p.detail && typeof p.message === 'string') { p.detail = p.message; p.title = p.title || res.statusText || 'Error'; }
  p.status = p.status || res.status;
  return new APIError(p);
}

// call sends a JSON request and returns the decoded answer (null for 204).
export async function call(method, path, body, opts = {}) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: opts.signal,
      cache: 'no-store',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new APIError({ title: 'Network error', detail: String(e.message || e), status: 0, code: 'network' });
  }
  if (!res.ok) throw await problemOf(res);
  if (res.status === 204) return null;
  const ct = res.headers.get('Content-Type') || '';
  return ct.includes('json') ? res.json() : res.text();
}

export const get = (path, opts) => call('GET', path, undefined, opts);

// metrics reads the node's Prometheus metrics as text.
export async function metrics(opts = {}) {
  const res = await fetch('/metrics', { headers: headers({ Accept: 'text/plain' }), signal: opts.signal, cache: 'no-store' });
  if (!res.ok) throw await problemOf(res);
  return res.text();
}

// tail reads a partition's Server-Sent Events with fetch and a stream reader
// (EventSource cannot send the Authorization header), calling onRecord for each record
// until signal aborts or the stream ends; an "error" event's problem is thrown.
export async function tail(path, onRecord, signal) {
  const res = await fetch(path, { headers: headers({ Accept: 'text/event-stream' }), signal, cache: 'no-store' });
  if (!res.ok) throw await problemOf(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (!data.length) continue; // a comment or heartbeat
      const obj = JSON.parse(data.join('\n'));
      if (event === 'error') throw new APIError(obj);
      onRecord(obj);
    }
  }
}
