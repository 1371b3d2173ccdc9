// DOM helpers. Everything the console shows is built with createElement and text
// nodes: record contents and names are untrusted and never parsed as HTML (nothing here
// assigns markup), and the page's Content-Security-Policy forbids inline scripts and
// styles besides.

// h builds an element: attrs sets attributes (on* keys add listeners; class, for and
// the rest are attributes; null/false values are skipped), children are nodes, strings
// (text) or arrays of them.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// s builds an SVG element (charts).
export function s(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'style') throw new Error('inline styles are not allowed (CSP)');
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace puts children in place of el's.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// table builds a table from column headings and rows of cells.
export function table(heads, rows, attrs) {
  return h('table', attrs,
    h('thead', null, h('tr', null, heads.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, rows.map((r) => h('tr', null, r.map((c) => h('td', null, c))))));
}

export function link(href, text) { return h('a', { href }, text); }

export function fmtInt(n) { return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'); }

export function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
}

export function fmtTime(ms) {
  if (ms === null || ms === undefined) return '—';
  const d = new Date(ms);
  return isNaN(d) ? String(ms) : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null || ms === '') return '—';
  ms = Number(ms);
  if (ms < 0) return 'forever';
  const units = [['d', 86400000], ['h', 3600000], ['min', 60000], ['s', 1000]];
  for (const [u, n] of units) if (ms >= n && ms % n === 0) return ms / n + ' ' + u;
  return ms + ' ms';
}

// enc encodes a path segment (topic and group names may hold dots and dashes, and
// anything the API accepts).
export const enc = encodeURIComponent;
