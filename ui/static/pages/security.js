// /ui/security: the principals that hold keys or ACLs, API keys (create — the secret is
// shown once — and revoke), ACL bindings (list, add, remove) and the audit log. Each
// part is the API's answer: a key without describe on the cluster sees its 403.
import { h, replace, table, fmtTime, enc } from '../dom.js';
import { get, call } from '../api.js';

const OPS = ['read', 'write', 'create', 'delete', 'alter', 'describe', 'describe_configs', 'alter_configs', 'idempotent_write', 'all'];
const TYPES = ['topic', 'group', 'cluster', 'transactional_id', 'connector', 'subject'];

export default {
  path: /^\/security$/,
  title: 'Security',
  nav: 'Security',
  navHref: '/ui/security',
  async render({ main, query, signal, go, showError }) {
    const principals = h('div', { id: 'principals' });
    const keysBox = h('div', { id: 'keys' });
    const aclsBox = h('div', { id: 'acls' });
    const auditBox = h('div', { id: 'audit' });
    const reload = () => go(location.pathname + location.search, { replaceState: true });

    // Keys: a new key's secret is shown once, here, and never again.
    const secretBox = h('div', { id: 'new-secret' });
    const kPrincipal = h('input', { name: 'principal', placeholder: 'User:alice', required: true, 'aria-label': 'Principal' });
    const kDesc = h('input', { name: 'description', placeholder: 'what it is for', 'aria-label': 'Description' });
    const keyForm = h('form', {
      class: 'card', id: 'create-key',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(secretBox);
        try {
          const k = await call('POST', '/v1/keys', { principal: kPrincipal.value.trim(), description: kDesc.value.trim() || undefined });
          replace(secretBox, h('div', { class: 'ok' }, h('p', null, `Key ${k.id} for ${k.principal}. Its secret, shown this once — copy it now:`),
            h('pre', { class: 'secret' }, k.secret)));
        } catch (err) { showError(secretBox, err); }
      },
    }, h('h2', null, 'Create a key'), kPrincipal, ' ', kDesc, ' ', h('button', { type: 'submit' }, 'Create'), secretBox);

    const aclErr = h('div');
    const f = {
      principal: h('input', { placeholder: 'User:alice', required: true, 'aria-label': 'ACL principal' }),
      resource_type: h('select', { 'aria-label': 'Resource type' }, TYPES.map((x) => h('option', { value: x }, x))),
      resource_name: h('input', { placeholder: 'orders (empty for the cluster)', 'aria-label': 'Resource name' }),
      pattern_type: h('select', { 'aria-label': 'Pattern' }, ['literal', 'prefixed'].map((x) => h('option', { value: x }, x))),
      operation: h('select', { 'aria-label': 'Operation' }, OPS.map((x) => h('option', { value: x }, x))),
      permission: h('select', { 'aria-label': 'Permission' }, ['allow', 'deny'].map((x) => h('option', { value: x }, x))),
    };
    const aclForm = h('form', {
      class: 'card', id: 'create-acl',
      onsubmit: async (e) => {
        e.preventDefault();
        replace(aclErr);
        const b = Object.fromEntries(Object.entries(f).map(([k, el]) => [k, el.value.trim()]));
        if (!b.resource_name) delete b.resource_name;
        try { await call('POST', '/v1/acls', b); reload(); } catch (err) { showError(aclErr, err); }
      },
    }, h('h2', null, 'Add an ACL'), Object.values(f).map((el) => [el, ' ']), h('button', { type: 'submit' }, 'Add'), aclErr);

    replace(main, h('h1', null, 'Security'),
      h('h2', null, 'Principals'), principals,
      h('h2', null, 'API keys'), keysBox, keyForm,
      h('h2', null, 'ACLs'), aclsBox, aclForm,
      h('h2', null, 'Audit log'), auditBox);

    const names = new Set();
    const [keys, acls] = await Promise.allSettled([get('/v1/keys', { signal }), get('/v1/acls', { signal })]);
    if (keys.status === 'fulfilled') {
      keys.value.keys.forEach((k) => names.add(k.principal));
      replace(keysBox, table(['Key', 'Principal', 'Description', 'Created', 'Expires', 'State', ''], keys.value.keys.map((k) => [
        k.id, k.principal, k.description || '', `${fmtTime(Date.parse(k.created_at))} by ${k.created_by}`,
        k.expires_at ? fmtTime(Date.parse(k.expires_at)) : 'never', k.revoked_at ? 'revoked ' + fmtTime(Date.parse(k.revoked_at)) : 'active',
        k.revoked_at ? '' : h('button', {
          type: 'button', class: 'danger',
          onclick: async () => {
            if (!window.confirm(`Revoke ${k.id} (${k.principal})? Its connections are cut at once.`)) return;
            try { await call('DELETE', `/v1/keys/${enc(k.id)}`); reload(); } catch (err) { showError(keysBox, err); }
          },
        }, 'Revoke')])));
    } else showError(keysBox, keys.reason);
    if (acls.status === 'fulfilled') {
      acls.value.acls.forEach((a) => names.add(a.principal));
      replace(aclsBox, table(['Principal', 'Host', 'Resource', 'Pattern', 'Operation', 'Permission', ''], acls.value.acls.map((a) => [
        a.principal, a.host || '*', `${a.resource_type}${a.resource_name ? ' ' + a.resource_name : ''}`, a.pattern_type || 'literal', a.operation, a.permission || 'allow',
        h('button', {
          type: 'button', class: 'danger',
          onclick: async () => {
            const q = new URLSearchParams(Object.entries(a).filter(([, v]) => v !== undefined && v !== ''));
            try { await call('DELETE', `/v1/acls?${q}`); reload(); } catch (err) { showError(aclsBox, err); }
          },
        }, 'Remove')])));
    } else showError(aclsBox, acls.reason);
    replace(principals, names.size ? h('p', null, [...names].sort().join(' · ')) : h('p', { class: 'muted' }, 'None that this key may see.'));

    const after = /^\d+$/.test(query.get('after') || '') ? query.get('after') : '0';
    try {
      const page = await get(`/v1/audit?after=${after}&limit=100`, { signal });
      replace(auditBox, page.records.length ? table(['#', 'Time', 'Principal', 'Action', 'Resource', 'Details'], page.records.map((r) => [
        String(r.id), fmtTime(Date.parse(r.time)), r.principal, r.action, `${r.resource_type} ${r.resource}`, r.details ? JSON.stringify(r.details) : ''])) : h('p', { class: 'muted' }, 'No entries.'),
      page.records.length ? h('p', null, h('a', { class: 'btn', href: `/ui/security?after=${page.next_after}` }, 'Later entries →')) : null);
    } catch (err) { showError(auditBox, err); }
  },
};
