// Small helpers shared by the console's pages: DOM building, the REST and
// GraphQL calls, YAML output, a line diff, and hiding secret values.

export const HUB = '/apis/hub.cairn.dev/v1';

// h builds an element. Text is always set as text, never parsed as HTML.
export function h(tag, attrs, ...children) {
  const el = tag === 'svg' || attrs?.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false || k === 'svg') continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class' && !(el instanceof SVGElement)) el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function svg(tag, attrs, ...children) { return h(tag, { ...attrs, svg: true }, ...children); }

// ApiError is a failed request: the Kubernetes Status the server sent.
export class ApiError extends Error {
  constructor(status, code) {
    super(status?.message || `HTTP ${code}`);
    this.status = status || {};
    this.code = code;
    this.reason = status?.reason || '';
    this.causes = status?.details?.causes || [];
  }
}

// The session: a bearer token the user signed in with, kept for this tab
// only (sessionStorage) and sent with every request. Without one the
// console sends no credentials, which a loopback server without an
// authenticator accepts.
const TOKEN = 'cairn-token', USER = 'cairn-user';
export const session = {
  token: () => sessionStorage.getItem(TOKEN) || '',
  user: () => sessionStorage.getItem(USER) || '',
  signIn(token, user) { sessionStorage.setItem(TOKEN, token); sessionStorage.setItem(USER, user || ''); },
  signOut() { sessionStorage.removeItem(TOKEN); sessionStorage.removeItem(USER); },
  // onUnauthorized is called with the ApiError of any 401: the token is
  // not (or no longer) valid; the app sends the user to sign in.
  onUnauthorized: null,
};
export function authHeaders(headers = {}) {
  const t = session.token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

export async function api(path, opts = {}) {
  const init = { method: opts.method || 'GET', headers: authHeaders({ Accept: 'application/json' }) };
  if (opts.body !== undefined) {
    init.body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    init.headers['Content-Type'] = opts.contentType || 'application/json';
  }
  // What failed is named by its request: a server that does not answer, or
  // a proxy's error page in place of a Status, says nothing else useful.
  const what = `${init.method} ${path.split('?')[0]}`;
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError({ reason: 'Unreachable', message: `the server did not answer ${what} (${e.message}): check that it is running and reachable, then reload to see what it holds.` }, 0);
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = res.ok ? { message: text } : null; }
  if (!res.ok && typeof data?.message !== 'string') {
    // Not a Kubernetes Status (a proxy or gateway answered): the code and
    // the request, and the body only when it is a short line of plain text.
    const plain = /^text\/plain/.test(res.headers.get('Content-Type') || '') && text.length <= 200 ? `: ${text.trim()}` : '';
    data = { reason: res.statusText || `HTTP ${res.status}`, message: `${what} answered HTTP ${res.status}${plain}` };
  }
  if (!res.ok) {
    const err = new ApiError(data, res.status);
    if (res.status === 401 && !opts.quiet) session.onUnauthorized?.(err);
    throw err;
  }
  return data;
}

// whoami asks the server who the request's credentials stand for
// (authentication.k8s.io/v1 SelfSubjectReview, as kubectl auth whoami).
export async function whoami(opts) {
  const r = await api('/apis/authentication.k8s.io/v1/selfsubjectreviews', { ...opts, method: 'POST',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } });
  return r?.status?.userInfo || {};
}

export async function gql(query, variables) {
  const data = await api('/graphql', { method: 'POST', body: { query, variables } });
  if (data.errors?.length) throw new ApiError({ message: data.errors.map((e) => e.message).join('; ') }, 200);
  return data.data;
}

// watch follows a watch stream (newline-delimited JSON events) and calls
// onEvent for each; it reconnects after a dropped stream from the last
// resourceVersion seen and stops when signal aborts.
export async function watch(path, rv, onEvent, signal, onState) {
  let since = rv;
  while (!signal.aborted) {
    try {
      const sep = path.includes('?') ? '&' : '?';
      // fetch, not EventSource: EventSource cannot send the Authorization header.
      const res = await fetch(`${path}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(since)}`, { signal, headers: authHeaders() });
      if (res.status === 410) { onState?.('gone'); return; }
      if (res.status === 401 || res.status === 403) {
        let data = null;
        try { data = await res.json(); } catch { /* not a Status */ }
        const err = new ApiError(data, res.status);
        if (res.status === 401) session.onUnauthorized?.(err);
        onState?.('denied', err);
        return;
      }
      if (!res.ok) throw new Error(`watch: HTTP ${res.status}`);
      onState?.('on');
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const ev = JSON.parse(line);
          if (ev.object?.metadata?.resourceVersion) since = ev.object.metadata.resourceVersion;
          if (ev.type !== 'BOOKMARK') onEvent(ev);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      onState?.('off');
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// Secrets are shown as dots until the user asks. A value is secret when
// its Type's schema marks it "x-cairn-secret": true (the whole value at the
// root; a property at any depth through properties, patternProperties,
// additionalProperties, unevaluatedProperties, items, prefixItems,
// unevaluatedItems, allOf/anyOf/oneOf, if/then/else, dependentSchemas and
// local $refs, every branch, as the server reads the keyword) or, without a
// schema saying so, when its key names a secret.
export const SECRET_KEYWORD = 'x-cairn-secret';
export const MASK = '••••••';
const SECRET = /pass(word)?|secret|token|private.?key|api.?key|credential/i;
export function isSecretKey(k) { return SECRET.test(k); }

function resolveRef(root, s) {
  for (let n = 0; s && typeof s.$ref === 'string' && s.$ref.startsWith('#') && n < 16; n++) {
    let t = root;
    for (const part of s.$ref.slice(1).split('/').filter(Boolean)) t = t?.[decodeURIComponent(part.replace(/~1/g, '/').replace(/~0/g, '~'))];
    if (!t || typeof t !== 'object') break;
    s = { ...t, ...Object.fromEntries(Object.entries(s).filter(([k]) => k !== '$ref')) };
  }
  return s;
}

// schemaMarksSecret reports whether schema s (within root) marks the value
// itself secret.
export function schemaMarksSecret(root, s) {
  s = resolveRef(root, s);
  if (!s || typeof s !== 'object') return false;
  return s[SECRET_KEYWORD] === true || inPlace(s).some((x) => schemaMarksSecret(root, x));
}

// inPlace are the subschemas of s that apply to the value itself, every
// branch whichever the value matches (dependentSchemas whether or not their
// property is present).
function inPlace(s) {
  const out = [];
  for (const k of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(s[k])) out.push(...s[k]);
  for (const k of ['if', 'then', 'else']) if (s[k] && typeof s[k] === 'object') out.push(s[k]);
  for (const k of ['dependentSchemas', 'dependencies']) for (const x of Object.values(s[k] || {})) if (x && typeof x === 'object' && !Array.isArray(x)) out.push(x);
  return out;
}

// subSchemas are the schemas that apply to member key (a property name or
// an array index) of a value of schema s.
function subSchemas(root, s, key, isIndex) {
  s = resolveRef(root, s);
  if (!s || typeof s !== 'object') return [];
  const out = [];
  for (const x of inPlace(s)) out.push(...subSchemas(root, x, key, isIndex));
  if (isIndex) {
    if (Array.isArray(s.prefixItems) && key < s.prefixItems.length) out.push(s.prefixItems[key]);
    else if (Array.isArray(s.items) && key < s.items.length) out.push(s.items[key]);
    else if (Array.isArray(s.items) && s.additionalItems && typeof s.additionalItems === 'object') out.push(s.additionalItems);
    else if (s.items && typeof s.items === 'object' && !Array.isArray(s.items)) out.push(s.items);
    else if (s.unevaluatedItems && typeof s.unevaluatedItems === 'object') out.push(s.unevaluatedItems);
    return out;
  }
  if (s.properties?.[key]) out.push(s.properties[key]);
  let matched = !!s.properties?.[key];
  for (const [re, x] of Object.entries(s.patternProperties || {})) {
    try { if (new RegExp(re, 'u').test(key)) { out.push(x); matched = true; } } catch { /* not a pattern this browser reads */ }
  }
  if (!matched && s.additionalProperties && typeof s.additionalProperties === 'object') out.push(s.additionalProperties);
  else if (!matched && s.unevaluatedProperties && typeof s.unevaluatedProperties === 'object') out.push(s.unevaluatedProperties);
  return out;
}

// maskSecrets returns v with secret values replaced by dots (v itself
// when reveal). schema is the Type's JSON Schema, when known.
export function maskSecrets(v, reveal, schema) {
  if (reveal) return v;
  return mask(v, schema ? [schema] : [], schema, 0);
}
function mask(v, schemas, root, depth) {
  if (v === undefined) return v;
  if (depth > 64) return MASK;
  if (schemas.some((s) => schemaMarksSecret(root, s))) return MASK;
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x, i) => mask(x, schemas.flatMap((s) => subSchemas(root, s, i, true)), root, depth + 1));
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    out[k] = isSecretKey(k) && (typeof x === 'string' || typeof x === 'number') ? MASK : mask(x, schemas.flatMap((s) => subSchemas(root, s, k, false)), root, depth + 1);
  }
  return out;
}

// maskWith masks v by sub-schema s of the document root (for $refs).
export function maskWith(v, s, root) { return mask(v, s ? [s] : [], root, 0); }

// SERVER_MARKER is what the server sends in place of a secret value to a
// caller who may not reveal it (hub.SecretMarker).
export const SERVER_MARKER = '(sensitive value)';
// withheldSecrets reports whether the server sent v with secret values
// redacted: a place the console masks holds the server's marker.
export function withheldSecrets(v, schema) {
  const masked = maskSecrets(v, false, schema);
  const walk = (a, m) => (m === MASK ? a === SERVER_MARKER
    : a !== null && typeof a === 'object' && m !== null && typeof m === 'object' && Object.keys(a).some((k) => walk(a[k], m[k])));
  return walk(v, masked);
}

export function hasSecrets(v, schema) {
  return JSON.stringify(maskSecrets(v, false, schema)) !== JSON.stringify(v);
}

// toYAML writes JSON data as block YAML, quoting strings YAML would read
// as something else.
export function toYAML(v, indent = '') {
  const scalar = (x) => {
    if (x === null) return 'null';
    if (typeof x !== 'string') return String(x);
    if (x === '' || /^[\s\-?:,[\]{}#&*!|>'"%@`]|[:#]\s|\s$|^(true|false|null|yes|no|on|off|~)$|^[-+]?[0-9.]/i.test(x) || x.includes('\n')) return JSON.stringify(x);
    return x;
  };
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return v.map((x) => {
      if (x !== null && typeof x === 'object' && Object.keys(x).length) {
        const inner = toYAML(x, indent + '  ');
        return `${indent}- ${inner.slice(indent.length + 2)}`;
      }
      return `${indent}- ${typeof x === 'object' && x !== null ? (Array.isArray(x) ? '[]' : '{}') : scalar(x)}`;
    }).join('\n');
  }
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (!keys.length) return '{}';
    return keys.map((k) => {
      const x = v[k];
      const key = scalar(k);
      if (x !== null && typeof x === 'object' && Object.keys(x).length) return `${indent}${key}:\n${toYAML(x, indent + '  ')}`;
      return `${indent}${key}: ${x !== null && typeof x === 'object' ? (Array.isArray(x) ? '[]' : '{}') : scalar(x)}`;
    }).join('\n');
  }
  return indent + scalar(v);
}

// lineDiff compares two texts line by line (longest common subsequence)
// and returns [{op: 'same'|'add'|'del', line}].
export function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  const n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push({ op: 'same', line: x[i] }); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push({ op: 'del', line: x[i++] });
    else out.push({ op: 'add', line: y[j++] });
  }
  while (i < n) out.push({ op: 'del', line: x[i++] });
  while (j < m) out.push({ op: 'add', line: y[j++] });
  return out;
}

// labelMatcher returns a test of a Kubernetes label selector, for where the
// server cannot apply it (the GraphQL list): k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b).
export function labelMatcher(sel) {
  const parts = [];
  let depth = 0, cur = '';
  for (const c of sel) {
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (c === ',' && depth === 0) { parts.push(cur); cur = ''; } else cur += c;
  }
  parts.push(cur);
  const tests = parts.map((x) => x.trim()).filter(Boolean).map((x) => {
    let m;
    if ((m = x.match(/^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/))) { const vs = m[3].split(',').map((v) => v.trim()); return (l) => (m[2] === 'in') === (m[1] in l && vs.includes(l[m[1]])); }
    if ((m = x.match(/^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/))) return m[2] === '!=' ? (l) => l[m[1]] !== m[3] : (l) => l[m[1]] === m[3];
    if ((m = x.match(/^!\s*([^=!\s]+)$/))) return (l) => !(m[1] in l);
    if ((m = x.match(/^([^=!\s(),]+)$/))) return (l) => m[1] in l;
    throw new ApiError({ reason: 'BadRequest', message: `unable to parse requirement: ${x}` }, 400);
  });
  return (labels) => tests.every((f) => f(labels || {}));
}

export function pretty(v) { return JSON.stringify(v, sortKeys, 2); }
function sortKeys(_k, v) {
  if (v && typeof v === 'object' && !Array.isArray(v)) return Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]]));
  return v;
}

export function toast(msg) {
  const t = document.getElementById('toast');
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.textContent = ''; }, 4000);
}

export function errorBox(e, extra) {
  const box = h('div', { class: 'alert bad', role: 'alert' },
    h('p', {}, h('strong', {}, e.reason ? `${e.reason}: ` : 'Error: '), e.message));
  // A refusal says who was refused and how to be someone else.
  if (e.code === 403) {
    box.append(h('p', { class: 'signed-in-as' }, session.token()
      ? [`You are signed in as ${session.user() || 'a user'}, who may not do this. `, h('a', { href: '#/sign-in' }, 'Sign in with another token')]
      : ['You are not signed in. ', h('a', { href: '#/sign-in' }, 'Sign in')]));
  }
  // A cause about no field that only repeats the message is not said twice.
  for (const c of e.causes || []) if (c.field || (c.message && !e.message?.includes(c.message))) box.append(h('p', { class: 'cause' }, c.field ? h('code', {}, c.field) : '', ' ', c.message));
  if (extra) box.append(extra);
  return box;
}

export function typeName(ref) { return `${ref.path}:${ref.revision}`; }
export function shortID(id) { return id ? id.slice(0, 8) : ''; }
export function link(href, ...children) { return h('a', { href }, ...children); }
export function conditionBadge(c) {
  if (!c) return h('span', { class: 'badge warn' }, 'Unknown');
  const cls = c.status === 'True' ? 'ok' : c.status === 'False' ? 'bad' : 'warn';
  return h('span', { class: `badge ${cls}` }, `${c.type}=${c.status}`);
}
