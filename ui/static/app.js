// The console's shell: the router (one page module per route, listed in pages.js), the
// navigation, the key box, and error display. Links under /ui/ are followed without a
// reload; every page is also its own URL, so a link can be shared and reloaded.
import { h, replace } from './dom.js';
import { APIError, getKey, setKey } from './api.js';
import pages from './pages.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const keybox = document.getElementById('keybox');
let current = null; // { abort: AbortController, cleanups: [] }

function route(pathname) {
  const rest = pathname.replace(/^\/ui/, '').replace(/\/+$/, '') || '/';
  for (const p of pages) {
    const m = rest.match(p.path);
    if (m) return { page: p, params: m.slice(1).map(decodeURIComponent) };
  }
  return null;
}

export function go(href, { replaceState = false } = {}) {
  if (replaceState) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  render();
}

// showError renders an API problem (or any error) in el: its title, detail, code and
// request id as the API sent them; a 401 asks for a key.
export function showError(el, err) {
  if (err && err.name === 'AbortError') return;
  const p = err instanceof APIError ? err.problem : { title: 'Error', detail: String(err && err.message || err) };
  const box = h('div', { class: 'problem', role: 'alert' },
    h('strong', null, p.title || 'Error'), ' ',
    p.status ? h('span', { class: 'muted' }, `(${p.status}${p.code ? ' ' + p.code : ''})`) : null,
    h('p', { class: 'detail' }, p.detail || ''),
    p.hint ? h('p', { class: 'muted' }, p.hint) : null,
    p.request_id ? h('p', { class: 'muted small' }, 'request id ' + p.request_id) : null);
  if (err instanceof APIError && err.status === 401) box.append(keyForm());
  replace(el, box);
}

function keyForm() {
  const input = h('input', { type: 'password', name: 'key', autocomplete: 'off', placeholder: 'API key', 'aria-label': 'API key', required: true });
  return h('form', {
    class: 'keyform',
    onsubmit: (e) => { e.preventDefault(); setKey(input.value.trim()); drawKeybox(); render(); },
  }, h('p', null, 'This node requires an API key. It is kept in this tab only and sent as a bearer token.'), input, ' ', h('button', { type: 'submit' }, 'Use key'));
}

function drawKeybox() {
  if (getKey()) {
    replace(keybox, h('span', { class: 'muted' }, 'key set '),
      h('button', { type: 'button', class: 'link', onclick: () => { setKey(''); drawKeybox(); render(); } }, 'forget key'));
  } else {
    replace(keybox, h('button', { type: 'button', class: 'link', onclick: () => replace(main, keyForm()) }, 'use a key'));
  }
}

function drawNav(pathname) {
  replace(nav, pages.filter((p) => p.nav).map((p) => {
    const active = p.navHref === '/ui/' ? pathname === '/ui/' || pathname === '/ui' : pathname.startsWith(p.navHref);
    return h('a', { href: p.navHref, 'aria-current': active ? 'page' : null }, p.nav);
  }));
}

async function render() {
  if (current) {
    current.abort.abort();
    for (const f of current.cleanups) f();
  }
  const ctx = { abort: new AbortController(), cleanups: [] };
  current = ctx;
  const { pathname, search } = location;
  drawNav(pathname);
  const r = route(pathname);
  if (!r) {
    document.title = 'Not found · Strata';
    replace(main, h('h1', null, 'Not found'), h('p', null, 'No console page at ', pathname, '. ', h('a', { href: '/ui/' }, 'Overview')));
    return;
  }
  const title = typeof r.page.title === 'function' ? r.page.title(...r.params) : r.page.title;
  document.title = title + ' · Strata';
  replace(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    performance.mark('strata:render-start');
    await r.page.render({
      main,
      params: r.params,
      query: new URLSearchParams(search),
      signal: ctx.abort.signal,
      onCleanup: (f) => ctx.cleanups.push(f),
      go,
      showError,
      current: () => current === ctx,
    });
    // When the page's data is on screen, for anyone measuring (the tests do).
    if (current === ctx) performance.mark('strata:rendered', { detail: pathname });
  } catch (e) {
    if (current === ctx) showError(main, e);
  }
}

document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/ui/') && url.pathname !== '/ui') return;
  e.preventDefault();
  if (url.pathname + url.search !== location.pathname + location.search) go(url.pathname + url.search);
  main.focus({ preventScroll: true });
});
window.addEventListener('popstate', render);
drawKeybox();
render();
