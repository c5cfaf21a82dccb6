// The console's router and pages. Routes live in the URL fragment
// (#/instances?type=...), so the server serves one page and every view can
// be bookmarked. Every read and write goes through cairn's public REST API
// (and GraphQL where one query replaces many requests).
import { h, api, gql, HUB, ApiError, watch, labelMatcher, session, whoami, toYAML, lineDiff, pretty, maskSecrets, hasSecrets, withheldSecrets, toast, errorBox, typeName, shortID, link, conditionBadge } from './lib.js';
import { schemaForm } from './form.js';
import { drawGraph } from './graph.js';

const INSTALLATION_PARENT = 'cap.core.type.stack.installation';
const LABEL_INSTALLATION_UID = 'stacks.cairn.dev/uid';
// What the dependency installer records on the installations it creates (hub/deps.go).
const DEPS_ROOT_ID = 'deps.cairn.dev/root-id';
const DEPS_SHARING_MODE = 'deps.cairn.dev/sharing-mode';
const DEPS_SHARING_GROUP = 'deps.cairn.dev/sharing-group';
const PAGE = 50;

const main = document.getElementById('main');
let current = null; // AbortController of the page on screen

const routes = [
  [/^\/?$/, overview],
  [/^\/types$/, typesPage],
  [/^\/types\/(.+)$/, typePage],
  [/^\/instances$/, instancesPage],
  [/^\/instance\/([^/]+)$/, instancePage],
  [/^\/create$/, createPage],
  [/^\/backends$/, backendsPage],
  [/^\/policy$/, policyPage],
  [/^\/proposals$/, proposalsPage],
  [/^\/stacks$/, stacksPage],
  [/^\/stacks\/([^/]+)$/, installationPage],
  [/^\/sign-in$/, signInPage],
];

async function render(ev) {
  const navigated = ev?.type === 'hashchange';
  current?.abort();
  current = new AbortController();
  const ctx = { signal: current.signal };
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  const params = new URLSearchParams(qs || '');
  for (const a of document.querySelectorAll('#nav a')) {
    const section = a.getAttribute('href').slice(1);
    a.toggleAttribute('aria-current', path === section || path.startsWith(section + '/') || (section === '/instances' && path.startsWith('/instance')) || (section === '/types' && path === '/create'));
    if (a.hasAttribute('aria-current')) a.setAttribute('aria-current', 'page');
  }
  main.setAttribute('aria-busy', 'true');
  // A page rendered again in place (after a lock, a save, a reload) keeps
  // keyboard focus on the control of the same id rather than dropping it
  // to the top of the document.
  const focused = !navigated && main.contains(document.activeElement) ? document.activeElement : null;
  for (const [re, page] of routes) {
    const m = path.match(re);
    if (!m) continue;
    try {
      const content = await page(ctx, params, ...m.slice(1).map(decodeURIComponent));
      if (ctx.signal.aborted) return;
      main.replaceChildren(...[content].flat().filter((c) => c !== null && c !== undefined && c !== false));
    } catch (e) {
      if (ctx.signal.aborted) return;
      // A page the server will not show without (other) credentials:
      // sign in, with the server's reason, and come back here after.
      // (A 401 has already been sent there by api's hook.)
      if (e instanceof ApiError && e.code === 401) return;
      // Refused without credentials: sign in. Refused with them: the user
      // is who they are; say what they may not do and where they may look
      // (roles bound in one namespace open that namespace, not the cluster).
      if (isForbidden(e) && path !== '/sign-in' && !session.token()) { toSignIn(e); return; }
      main.replaceChildren(...(isForbidden(e) ? forbiddenPage(e) : [h('h1', {}, 'Something went wrong'), errorBox(e instanceof ApiError ? e : { message: String(e?.message || e) })]));
    }
    main.setAttribute('aria-busy', 'false');
    document.title = `${main.querySelector('h1')?.textContent || 'cairn'} · cairn console`;
    // After a navigation, focus goes to the new content and screen readers
    // hear its title (not on the first load, where the skip link comes first).
    if (navigated) {
      main.focus({ preventScroll: true });
      document.getElementById('announce').textContent = document.title;
    } else if (focused && !main.contains(document.activeElement)) {
      const again = focused.id && document.getElementById(focused.id);
      if (again && again.checkVisibility()) again.focus({ preventScroll: true });
      else main.focus({ preventScroll: true });
    }
    return;
  }
  main.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, 'No page at ', h('code', {}, path), '. ', link('#/', 'Back to the overview')));
  main.setAttribute('aria-busy', 'false');
}

// notServed tells a route this server does not have (an older cairn) from
// an object that is not found: the latter names the object.
function notServed(e) { return e instanceof ApiError && e.code === 404 && !e.status.details; }
function isForbidden(e) { return e instanceof ApiError && e.code === 403; }
// orNull answers null for a read a signed-in user may not make (403), so a
// page can show what else they may; other errors still fail the page, and
// so does a 403 without a token, which render answers with the sign-in page
// (an anonymous visitor is not a user bound in a namespace).
const orNull = (e) => { if (isForbidden(e) && session.token()) return null; throw e; };

// ---- namespaces ----------------------------------------------------------
// A user whose roles are bound in one namespace (a RoleBinding) may not list
// across the cluster: the console then works in a namespace they name,
// remembered in this browser.
const NS_KEY = 'cairn-namespace';
function rememberedNamespace() { return localStorage.getItem(NS_KEY) || ''; }
function namespaceForm(id, value, label = 'Open') {
  const input = h('input', { id, name: 'ns', value: value ?? rememberedNamespace(), spellcheck: 'false', autocomplete: 'off', placeholder: 'team-a', list: `${id}-list` });
  const list = h('datalist', { id: `${id}-list` });
  // The namespaces, where the user may list them.
  api('/api/v1/namespaces').then((l) => list.replaceChildren(...l.items.map((n) => h('option', { value: n.metadata.name }))), () => {});
  return h('form', { class: 'filters', 'aria-label': 'Choose a namespace', onsubmit: (ev) => {
    ev.preventDefault();
    const ns = input.value.trim();
    if (ns) localStorage.setItem(NS_KEY, ns);
    go(`#/instances${ns ? `?${new URLSearchParams({ ns })}` : ''}`);
  } }, h('div', { class: 'field' }, h('label', { for: id }, 'Namespace'), input, list), h('button', { type: 'submit' }, label));
}
function forbiddenPage(e) {
  return [h('h1', {}, 'Not allowed'), errorBox(e),
    h('section', { class: 'panel narrow', 'aria-label': 'Your namespace' }, h('h2', {}, 'Your namespace'),
      h('p', {}, 'Roles bound in one namespace let you read and write the instances of that namespace, not lists across the cluster (Types, backends, policy, stacks). Open your namespace:'),
      namespaceForm('forbidden-ns'))];
}

function go(hash) { if (location.hash === hash) render(); else location.hash = hash; }

// ---- session -----------------------------------------------------------
// signInReason is the refusal that sent the user to the sign-in page.
let signInReason = null;
function toSignIn(err) {
  signInReason = err;
  if (err?.code === 401) { session.signOut(); renderSession(); }
  const here = location.hash.replace(/^#/, '');
  const back = here.startsWith('/sign-in') ? new URLSearchParams(here.split('?')[1] || '').get('next') || '/' : here || '/';
  go(`#/sign-in?${new URLSearchParams({ next: back })}`);
}
session.onUnauthorized = toSignIn;

const sessionBox = document.getElementById('session');
function renderSession() {
  sessionBox.replaceChildren(...(session.token()
    ? [h('span', { class: 'who', id: 'who' }, 'Signed in as ', h('strong', {}, session.user() || 'a user')),
      h('button', { type: 'button', class: 'ghost', id: 'sign-out', onclick: () => {
        session.signOut();
        signInReason = null;
        renderSession();
        toast('Signed out');
        go('#/sign-in');
      } }, 'Sign out')]
    : [h('a', { href: '#/sign-in', id: 'sign-in-link' }, 'Sign in')]));
}
renderSession();

async function signInPage(ctx, params) {
  const next = params.get('next') || '/';
  const reason = signInReason;
  signInReason = null;
  const token = h('input', { id: 'signin-token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-required': 'true', 'aria-describedby': 'signin-token-hint signin-error' });
  const err = h('div', { id: 'signin-error', 'aria-live': 'assertive' });
  return [h('h1', {}, 'Sign in'),
    reason ? h('div', { class: 'alert warn', role: 'alert', id: 'signin-reason' },
      h('p', {}, reason.code === 401 ? 'The server did not accept your credentials. ' : session.token() ? 'Your token does not allow this page. ' : 'This server needs credentials. ',
        h('span', { class: 'muted' }, 'The server said: '), h('strong', {}, reason.reason ? `${reason.reason}: ` : ''), reason.message)) : null,
    h('form', { class: 'panel narrow', 'aria-label': 'Sign in with a bearer token', novalidate: true, onsubmit: async (ev) => {
      ev.preventDefault();
      const t = token.value.trim();
      if (!t) { err.replaceChildren(h('p', { class: 'field-error' }, 'Enter a token.')); token.setAttribute('aria-invalid', 'true'); token.focus(); return; }
      const before = [session.token(), session.user()];
      session.signIn(t, '');
      try {
        const u = await whoami({ quiet: true });
        session.signIn(t, u.username || '');
      } catch (e) {
        if (e.code === 401 || e.code === 403) {
          session.signIn(...before);
          if (!before[0]) session.signOut();
          token.setAttribute('aria-invalid', 'true');
          err.replaceChildren(h('p', { class: 'field-error' }, `The server refused this token (${e.reason || e.code}: ${e.message}).`));
          token.focus();
          return;
        }
        // An older server without SelfSubjectReview: the token is tried by the pages.
      }
      renderSession();
      toast(`Signed in as ${session.user() || 'a user'}`);
      go(`#${next}`);
    } },
    h('div', { class: 'field' }, h('label', { for: 'signin-token' }, 'Bearer token'), token,
      h('span', { class: 'hint', id: 'signin-token-hint' }, 'The admin token is in the server\'s data directory (admin.token); other tokens come from its --token-auth-file or your OIDC provider (an ID token). It is kept in this browser tab only and sent as an Authorization header with every request.')),
    err, h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'signin' }, 'Sign in'))),
    session.token() ? h('p', {}, `Signed in as ${session.user() || 'a user'}. `, link(`#${next}`, 'Go back')) : null];
}

// ---- theme -------------------------------------------------------------
const themeBtn = document.getElementById('theme');
function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
  const dark = t ? t === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  themeBtn.textContent = dark ? 'Light theme' : 'Dark theme';
  themeBtn.setAttribute('aria-pressed', String(dark));
  themeBtn.setAttribute('aria-label', dark ? 'Switch to the light theme' : 'Switch to the dark theme');
}
applyTheme(localStorage.getItem('cairn-theme'));
themeBtn.addEventListener('click', () => {
  const dark = themeBtn.getAttribute('aria-pressed') === 'true';
  const t = dark ? 'light' : 'dark';
  localStorage.setItem('cairn-theme', t);
  applyTheme(t);
});

// ---- shared reads ------------------------------------------------------
async function listTypes() { return (await api(`${HUB}/types`)).items; }
function restPath(t, ns, name) {
  const k = kindOfType(t);
  return k ? kindPath(k, ns, name) : null;
}
// A Type whose schema says "x-cairn-scope": "Cluster" is served as a
// cluster-scoped kind (a stack's kind.scope: Cluster): its instances have
// no namespace and its paths no /namespaces/.
function clusterScoped(t) { return t?.spec?.jsonSchema?.['x-cairn-scope'] === 'Cluster'; }
function instTitle(ti) { return ti.spec.namespace ? `${ti.spec.namespace}/${ti.spec.name}` : ti.spec.name || ti.metadata.name; }
function labelsCell(labels) { return Object.entries(labels || {}).map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)); }
function when(ts) { return ts ? h('time', { datetime: ts, title: ts }, new Date(ts).toLocaleString()) : ''; }
function kv(pairs) { return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])); }
function panel(title, ...body) { return h('section', { class: 'panel', 'aria-label': title }, h('h2', {}, title), ...body); }
function pre(text, label) { return h('pre', { tabindex: 0, 'aria-label': label }, text); }

// ---- overview ----------------------------------------------------------
async function overview() {
  // Each count is asked on its own: a user who may not list one (roles
  // bound in a namespace) still sees the others and where to go.
  const [types, inst, backends] = await Promise.all([listTypes().catch(orNull), api(`${HUB}/typeinstances?limit=${PAGE}&values=false`).catch(orNull), api(`${HUB}/backends`).catch(orNull)]);
  const stacks = types ? types.filter(isInstallationType) : null;
  const card = (title, n, href, text) => h('section', { class: 'panel' }, h('h2', {}, link(href, title)),
    n === null ? h('p', { class: 'muted' }, 'You may not list these across the cluster.') : h('p', { class: 'big' }, h('strong', {}, n)), h('p', { class: 'muted' }, text));
  return [h('h1', {}, 'Overview'),
    h('p', { class: 'sub' }, 'The state this hub keeps: typed, versioned instances, where they live and how they relate.'),
    h('div', { class: 'grid cards' },
      card('Types', types && String(types.length), '#/types', 'named, revisioned JSON Schemas'),
      card('Instances', inst && (inst.metadata.continue ? `over ${inst.items.length}` : String(inst.items.length)), '#/instances', 'typed values with history, relations and locks'),
      card('Backends', backends && String(backends.items.length), '#/backends', 'where values are stored'),
      card('Stacks', stacks && String(stacks.length), '#/stacks', 'installation Types and their trees of children')),
    !inst ? h('section', { class: 'panel', 'aria-label': 'Your namespace', id: 'overview-namespace' }, h('h2', {}, 'Your namespace'),
      h('p', {}, `You${session.user() ? ` (${session.user()})` : ''} may not list instances across the cluster; your roles may open a namespace. Open it:`), namespaceForm('overview-ns'))
    : h('section', { class: 'panel table-wrap', 'aria-label': 'Some instances' }, h('h2', {}, 'Some instances'), h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Type'), h('th', { class: 'opt' }, 'Created'))),
      h('tbody', {}, inst.items.filter((ti) => ti.spec.namespace !== 'cairn-system').slice(0, 8).map((ti) => h('tr', {},
        h('td', {}, link(`#/instance/${ti.metadata.name}`, instTitle(ti))), h('td', {}, h('code', {}, typeName(ti.spec.typeRef))), h('td', { class: 'opt' }, when(ti.metadata.creationTimestamp)))))), h('p', {}, link('#/instances', 'All instances, with filters and live updates')))];
}

// ---- types -------------------------------------------------------------
async function typesPage() {
  const types = await listTypes();
  return [h('h1', {}, 'Types'), h('p', { class: 'sub' }, `${types.length} Types. A Type's JSON Schema validates every value of its instances.`),
    h('div', { class: 'panel table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Path'), h('th', {}, 'Revision'), h('th', {}, 'REST kind'), h('th', { class: 'opt' }, 'Parents'), h('th', {}, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h('tbody', {}, types.map((t) => h('tr', {},
        h('td', {}, link(`#/types/${encodeURIComponent(t.metadata.name)}`, t.spec.path)),
        h('td', {}, h('code', {}, t.spec.revision)),
        h('td', {}, t.spec.rest ? h('code', {}, `${t.spec.rest.names?.kind} (${t.spec.rest.group}/${t.spec.rest.version})`) : h('span', { class: 'muted' }, '—')),
        h('td', { class: 'opt' }, (t.spec.additionalRefs || []).map((r) => h('span', { class: 'chip' }, r))),
        h('td', {}, link(`#/instances?type=${encodeURIComponent(t.metadata.name)}`, 'Instances')))))))];
}

async function typePage(ctx, params, name) {
  const t = await api(`${HUB}/types/${encodeURIComponent(name)}`);
  const schema = t.spec.jsonSchema || {};
  const form = schemaForm(schema, undefined, { readOnly: true, idPrefix: 'preview' });
  return [h('h1', {}, t.spec.path), h('p', { class: 'sub' }, `revision ${t.spec.revision}`, schema.title ? ` · ${schema.title}` : ''),
    h('div', { class: 'actions' }, h('a', { class: 'button', href: `#/create?type=${encodeURIComponent(name)}` }, 'Create an instance'),
      h('a', { class: 'button ghost', href: `#/instances?type=${encodeURIComponent(name)}` }, 'Its instances')),
    h('div', { class: 'grid' },
      panel('Details', kv([['Name', h('code', {}, t.metadata.name)], ['Created', when(t.metadata.creationTimestamp)],
        ['Parents', (t.spec.additionalRefs || []).map((r) => h('span', { class: 'chip' }, r))],
        t.spec.rest && ['REST', h('code', {}, `${t.spec.rest.group}/${t.spec.rest.version} ${t.spec.rest.names?.plural}`)]])),
      panel('Schema as a form', h('p', { class: 'muted' }, 'What the create and edit forms of this Type ask for.'), form.el),
      h('section', { class: 'panel wide', 'aria-label': 'Schema as JSON' }, h('h2', {}, 'Schema as JSON'), pre(JSON.stringify(schema, null, 2), 'JSON Schema')))];
}

// ---- instances -----------------------------------------------------------
// Lists never show values, so they ask for none (values=false): a backend
// that is down does not fail a list of instances stored in it.
// Rows of a list come from three sources, each read into the same shape:
// hub.cairn.dev typeinstances (cluster-scoped), a Type's own resource in a
// namespace (flags.flipt.io), or GraphQL's typeInstances.
function rowOfInstance(ti) {
  return { id: ti.metadata.name, namespace: ti.spec.namespace, name: ti.spec.name, typeRef: ti.spec.typeRef, labels: ti.metadata.labels,
    version: ti.metadata.generation || ti.status?.resourceVersion, lockedBy: ti.status?.lockedBy, created: ti.metadata.creationTimestamp };
}
function rowOfObject(o) {
  return { id: o.metadata.uid, namespace: o.metadata.namespace, name: o.metadata.name, typeRef: o.status?.typeRef, labels: o.metadata.labels,
    version: o.metadata.generation, lockedBy: o.status?.lockedBy, created: o.metadata.creationTimestamp };
}
function rowOfGraphQL(x) {
  return { id: x.id, namespace: x.namespace, name: x.name, typeRef: x.typeRef, labels: Object.fromEntries((x.labels || []).map((l) => [l.key, l.value])),
    version: x.latestResourceVersion?.resourceVersion, lockedBy: x.lockedBy, created: x.createdAt };
}

// kinds are the namespaced resources served for Types with REST names, from
// discovery, which every signed-in user may read: what a user who may not
// list Types picks from. Kept for a minute (Types are seldom added).
let kindsCache = null;
async function discoverKinds() {
  if (kindsCache && Date.now() - kindsCache.at < 60_000) return kindsCache.kinds;
  const groups = (await api('/apis')).groups.filter((g) => !['hub.cairn.dev', 'rbac.authorization.k8s.io'].includes(g.name));
  const lists = await Promise.all(groups.map((g) => api(`/apis/${g.preferredVersion.groupVersion}`).catch(() => ({ resources: [] }))));
  const kinds = lists.flatMap((l, i) => {
    const [group, version] = groups[i].preferredVersion.groupVersion.split('/');
    return (l.resources || []).filter((r) => !r.name.includes('/') && (r.verbs || []).includes('list'))
      .map((r) => ({ id: `${r.name}.${group}/${version}`, group, version, plural: r.name, kind: r.kind, namespaced: r.namespaced !== false }));
  });
  kindsCache = { at: Date.now(), kinds };
  return kinds;
}
function kindOfType(t) {
  const r = t?.spec?.rest;
  return r?.names?.plural ? { id: `${r.names.plural}.${r.group}/${r.version}`, group: r.group, version: r.version, plural: r.names.plural, kind: r.names.kind, namespaced: !clusterScoped(t) } : null;
}
// kindPath is where a kind's objects are served: under /namespaces/{ns}/
// for a namespaced kind, without it for a cluster-scoped one (as the API
// server serves a cluster-scoped CRD's objects; ns is then ignored).
function kindPath(k, ns, name) {
  const where = k.namespaced === false ? '' : `/namespaces/${encodeURIComponent(ns || 'default')}`;
  return `/apis/${k.group}/${k.version}${where}/${k.plural}${name ? '/' + encodeURIComponent(name) : ''}`;
}
function kindLabel(k) { return `${k.kind} (${k.plural}.${k.group}${k.namespaced === false ? ', cluster-scoped' : ''})`; }

async function instancesPage(ctx, params) {
  const asked = params.get('ns') || '';
  // Types when the user may list them; otherwise the kinds discovery names.
  const types = await listTypes().catch(orNull);
  const kinds = types ? [] : await discoverKinds();
  const typeSel = params.get('type') || '';
  const labels = params.get('labels') || '';
  const cont = params.get('continue') || '';
  const t = types?.find((x) => x.metadata.name === typeSel);
  const k = t ? kindOfType(t) : kinds.find((x) => x.id === typeSel);
  // A cluster-scoped kind's objects have no namespace: the namespace asked
  // is ignored (as kubectl get -n ignores it) and the page says so.
  const cluster = k?.namespaced === false;
  const ns = cluster ? '' : asked;
  const clusterNote = cluster ? h('p', { class: 'alert warn', id: 'cluster-scoped', role: 'status' }, `${k.kind} is cluster-scoped: its objects have no namespace${asked ? `, so the namespace ${asked} does not narrow this list` : ''}.`) : null;
  // Where the list comes from: a Type's own resource in the namespace
  // (paged, filtered and watched by the server, and open to roles bound in
  // that namespace), or a cluster-scoped kind's own resource for a user who
  // may not list Types; else typeinstances, across the cluster or narrowed
  // to the namespace; else, for a user who may not list those, GraphQL,
  // which answers only what the user may list.
  let source, list, listErr, rows, graphNote = null;
  if (k && (ns || (cluster && !types))) {
    source = 'resource';
    const q = new URLSearchParams({ limit: String(PAGE), values: 'false' });
    if (labels) q.set('labelSelector', labels);
    if (cont) q.set('continue', cont);
    try { list = await api(`${kindPath(k, ns)}?${q}`); rows = list.items.map(rowOfObject); } catch (e) { listErr = e; }
  } else {
    source = 'typeinstances';
    const q = new URLSearchParams({ limit: String(PAGE), values: 'false' });
    if (t) q.set('typePath', t.spec.path);
    if (labels) q.set('labelSelector', labels);
    if (ns) q.set('fieldSelector', `metadata.namespace=${ns}`);
    if (cont) q.set('continue', cont);
    try { list = await api(`${HUB}/typeinstances?${q}`); rows = list.items.map(rowOfInstance); } catch (e) { listErr = e; }
    if (ns && isForbidden(listErr)) {
      source = 'graphql';
      listErr = null;
      try {
        const match = labelMatcher(labels);
        const d = await gql(`query($f: TypeInstanceFilter) { typeInstances(filter: $f) { id namespace name createdAt lockedBy typeRef { path revision } labels { key value } latestResourceVersion { resourceVersion } } }`,
          { f: t ? { typeRef: { path: t.spec.path, revision: t.spec.revision } } : {} });
        const all = d.typeInstances.filter((x) => x.namespace === ns).map(rowOfGraphQL).filter((r) => match(r.labels));
        const from = Number(cont) || 0;
        rows = all.slice(from, from + PAGE);
        list = { metadata: { continue: from + PAGE < all.length ? String(from + PAGE) : '' } };
        graphNote = h('p', { class: 'muted', id: 'graphql-note' }, `You may not list instances across the cluster: these are the ${all.length} instances of ${ns} that GraphQL lets you list, filtered in this browser and not followed live. Choose a kind to have the server page, filter and follow them.`);
      } catch (e) { listErr = e; }
    }
  }

  const typeInput = h('select', { id: 'f-type', name: 'type' }, h('option', { value: '' }, types ? 'All Types' : 'All kinds'),
    types ? types.map((x) => h('option', { value: x.metadata.name, selected: x.metadata.name === typeSel }, x.metadata.name))
      : kinds.map((x) => h('option', { value: x.id, selected: x.id === typeSel }, kindLabel(x))));
  const nsInput = h('input', { id: 'f-ns', name: 'ns', value: asked, placeholder: 'all namespaces', spellcheck: 'false', autocomplete: 'off', list: 'f-ns-list' });
  const nsList = h('datalist', { id: 'f-ns-list' });
  api('/api/v1/namespaces').then((l) => nsList.replaceChildren(...l.items.map((n) => h('option', { value: n.metadata.name }))), () => {});
  const labelInput = h('input', { id: 'f-labels', name: 'labels', value: labels, placeholder: 'env=dev,app in (billing)', 'aria-describedby': 'f-labels-hint', spellcheck: 'false' });
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter instances', onsubmit: (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    const n = nsInput.value.trim();
    if (n) { p.set('ns', n); localStorage.setItem(NS_KEY, n); }
    if (typeInput.value) p.set('type', typeInput.value);
    if (labelInput.value.trim()) p.set('labels', labelInput.value.trim());
    go(`#/instances?${p}`);
  } },
  h('div', { class: 'field' }, h('label', { for: 'f-ns' }, 'Namespace'), nsInput, nsList),
  h('div', { class: 'field' }, h('label', { for: 'f-type' }, types ? 'Type' : 'Kind'), typeInput),
  h('div', { class: 'field' }, h('label', { for: 'f-labels' }, 'Label selector'), labelInput, h('span', { class: 'hint', id: 'f-labels-hint' }, 'Kubernetes syntax: k=v, k!=v, k in (a,b), k')),
  h('button', { type: 'submit' }, 'Filter'));
  const liveEl = h('span', { class: 'live', id: 'live' }, source === 'graphql' ? 'not live' : 'connecting…');
  const what = t ? t.spec.path : k ? k.kind : '';
  const createQ = new URLSearchParams({ ...(t && { type: t.metadata.name }), ...(!t && k && { type: k.id }), ...(ns && { ns }) });
  const head = [h('h1', {}, `${what ? `Instances of ${what}` : 'Instances'}${ns ? ` in ${ns}` : ''}`),
    h('div', { class: 'actions' }, liveEl, h('a', { class: 'button', href: `#/create?${createQ}` }, 'Create')),
    filters, clusterNote];
  if (listErr) {
    // Not allowed across the cluster: say so and ask for a namespace.
    if (isForbidden(listErr) && !ns && !cluster) {
      return [...head, errorBox(listErr), h('div', { class: 'alert warn', id: 'choose-namespace', role: 'status' },
        h('p', {}, 'You may not list instances across the cluster. If your roles are bound in a namespace, name it above (Namespace) and filter.'))];
    }
    return [...head, errorBox(listErr)];
  }

  const tbody = h('tbody', {});
  const rowEls = new Map();
  const row = (r) => h('tr', { 'data-id': r.id },
    h('td', {}, link(`#/instance/${r.id}`, r.namespace ? `${r.namespace}/${r.name}` : r.name || r.id)),
    h('td', {}, r.typeRef ? h('code', {}, typeName(r.typeRef)) : ''),
    h('td', {}, labelsCell(r.labels)),
    h('td', { class: 'opt' }, String(r.version || '')),
    h('td', { class: 'opt' }, r.lockedBy ? h('span', { class: 'badge warn' }, `locked by ${r.lockedBy}`) : ''),
    h('td', { class: 'opt' }, when(r.created)));
  for (const r of rows) { const el = row(r); rowEls.set(r.id, el); tbody.append(el); }
  const empty = h('p', { class: 'muted', hidden: rows.length > 0 }, 'No instances match.');
  const table = h('div', { class: 'panel table-wrap' }, h('table', { 'aria-label': 'Instances' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Type'), h('th', {}, 'Labels'), h('th', { class: 'opt' }, 'Version'), h('th', { class: 'opt' }, 'Lock'), h('th', { class: 'opt' }, 'Created'))),
    tbody), empty);
  const countEl = h('span', { class: 'muted' });
  const count = () => { countEl.textContent = `${rowEls.size} shown, ${PAGE} per page${source === 'graphql' ? '' : ' (paged by the server)'}`; };
  count();
  const keep = { ...(ns && { ns }), ...(typeSel && { type: typeSel }), ...(labels && { labels }) };
  const pager = h('div', { class: 'pager' },
    cont ? h('button', { type: 'button', class: 'ghost', onclick: () => history.back() }, 'Previous page') : null,
    list.metadata.continue ? h('a', { class: 'button ghost', href: `#/instances?${new URLSearchParams({ ...keep, continue: list.metadata.continue })}` }, 'Next page') : null,
    countEl);

  // Live updates: a watch from the list's resourceVersion. Changes to rows
  // on screen update in place; new instances appear on the first page.
  if (source !== 'graphql') {
    const wq = new URLSearchParams({ values: 'false' });
    if (labels) wq.set('labelSelector', labels);
    if (source === 'typeinstances' && ns) wq.set('fieldSelector', `metadata.namespace=${ns}`);
    const wpath = source === 'resource' ? kindPath(k, ns) : `${HUB}/typeinstances`;
    watch(`${wpath}?${wq}`, list.metadata.resourceVersion, (ev) => {
      if (source === 'typeinstances' && t && ev.object.spec?.typeRef?.path !== t.spec.path) return;
      const r = source === 'resource' ? rowOfObject(ev.object) : rowOfInstance(ev.object);
      const old = rowEls.get(r.id);
      if (ev.type === 'DELETED') { old?.remove(); rowEls.delete(r.id); count(); return; }
      if (!old && (cont || ev.type !== 'ADDED')) return;
      const el = row(r);
      el.classList.add('flash');
      if (old) old.replaceWith(el); else tbody.prepend(el);
      rowEls.set(r.id, el);
      empty.hidden = true;
      count();
    }, ctx.signal, (state) => {
      liveEl.classList.toggle('on', state === 'on');
      liveEl.textContent = state === 'on' ? 'live' : state === 'gone' ? 'stale: reload' : state === 'denied' ? 'not live: you may not watch' : 'reconnecting…';
    });
  }
  return [...head, graphNote, table, pager];
}

// ---- one instance --------------------------------------------------------
const versionsSel = (value) => `resourceVersions { resourceVersion createdBy metadata { attributes { path revision } } spec { ${value ? 'value ' : ''}backend { context } } }`;
const historyQuery = (value) => `query($id: ID!) { typeInstance(id: $id) { id ${versionsSel(value)} } }`;
const RELATED = 'id namespace name typeRef { path revision }';
const instanceQuery = (value) => `query($id: ID!) { typeInstance(id: $id) { id namespace name createdAt lockedBy typeRef { path revision } labels { key value }
  backend { id abstract } uses { ${RELATED} } usedBy { ${RELATED} } ${versionsSel(value)} } }`;

// gqlVersions runs a query of an instance's versions with their values, and
// again without them when a version has none: GraphQL's value is a non-null
// Any!, so such a version is an error (as in Capact's Local Hub) that
// would otherwise take the whole instance with it.
async function gqlVersions(query, id) {
  try { return await gql(query(true), { id }); } catch (e) {
    if (!/non-nullable field [A-Za-z]*\.value/.test(e.message)) throw e;
    return gql(query(false), { id });
  }
}

// readInstance reads an instance by id through typeinstances, or, for a
// user refused that (typeinstances is cluster-scoped; roles bound in a
// namespace do not open it), through GraphQL, which checks the instance's
// own namespace. The GraphQL answer carries the history and the related
// instances' names too.
async function readInstance(id) {
  let refused;
  try { return { ti: await api(`${HUB}/typeinstances/${encodeURIComponent(id)}`) }; } catch (e) {
    if (e instanceof ApiError && e.code === 503) return readUnreachable(id, e);
    if (!isForbidden(e)) throw e;
    refused = e;
  }
  let d;
  try { d = await gqlVersions(instanceQuery, id); } catch (e) {
    throw /forbidden/.test(e.message) ? new ApiError({ reason: 'Forbidden', message: e.message }, 403) : e;
  }
  const x = d.typeInstance;
  if (!x) throw refused;
  const versions = x.resourceVersions || [];
  const last = versions.at(-1) || {};
  const related = new Map([...x.uses, ...x.usedBy].map((r) => [r.id, r]));
  return { versions, related, ti: {
    metadata: { name: x.id, labels: Object.fromEntries(x.labels.map((l) => [l.key, l.value])), creationTimestamp: x.createdAt, resourceVersion: '' },
    spec: { namespace: x.namespace, name: x.name, typeRef: x.typeRef, value: last.spec?.value, attributes: last.metadata?.attributes || [],
      backend: { id: x.backend.id, abstract: x.backend.abstract, context: last.spec?.backend?.context } },
    status: { resourceVersion: last.resourceVersion, createdBy: versions[0]?.createdBy, lockedBy: x.lockedBy, uses: x.uses.map((r) => r.id), usedBy: x.usedBy.map((r) => r.id) } } };
}

// readUnreachable reads what the hub itself keeps of an instance whose
// backend does not answer (its value and contexts are the backend's): the
// instance without its value from a list (values=false) selected by its
// metadata.name, the id, and its versions without values. The page then
// shows all of it, says why the value is missing and offers no edit.
async function readUnreachable(id, err) {
  const l = await api(`${HUB}/typeinstances?${new URLSearchParams({ fieldSelector: `metadata.name=${id}`, values: 'false', limit: '1' })}`).catch(() => null);
  const ti = l?.items.find((o) => o.metadata.name === id);
  if (!ti) throw err;
  const history = (await api(`${HUB}/typeinstances/${encodeURIComponent(id)}/resourceversions?values=false`).catch(() => null))?.items || [];
  return { ti, unreachable: err, history };
}

// typeFromKinds stands in for the Type of an instance for a user who may not
// read Types: the resource it is served as (the kind whose object of that
// name in the namespace has the instance's id), with that kind's schema from
// the server's OpenAPI document (the Type's JSON Schema as OpenAPI, its
// x-cairn-secret marks kept). Writes then go through that resource.
async function typeFromKinds(ti) {
  const kinds = await discoverKinds();
  const found = await Promise.all(kinds.map((k) => api(kindPath(k, ti.spec.namespace, ti.spec.name), { quiet: true }).then((o) => ({ k, o }), () => null)));
  const hit = found.find((x) => x?.o?.metadata?.uid === ti.metadata.name);
  if (!hit) return {};
  return { object: hit.o, type: await kindAsType(hit.k, ti.spec.typeRef) };
}

// kindAsType is a Type as far as a kind shows it: its REST names and the
// schema of its spec from the server's OpenAPI document.
async function kindAsType(k, typeRef) {
  const doc = await api(`/openapi/v3/apis/${k.group}/${k.version}`).catch(() => null);
  const sch = Object.values(doc?.components?.schemas || {}).find((x) => (x['x-kubernetes-group-version-kind'] || []).some((g) => g.group === k.group && g.kind === k.kind));
  return { fromKind: k, metadata: { name: typeRef ? typeName(typeRef) : k.id },
    spec: { path: typeRef?.path || k.kind, revision: typeRef?.revision || '', jsonSchema: sch?.properties?.spec, rest: { group: k.group, version: k.version, names: { plural: k.plural, kind: k.kind } } } };
}

async function instancePage(ctx, params, id) {
  const [read, types, backends] = await Promise.all([readInstance(id), listTypes().catch(orNull), api(`${HUB}/backends`).catch(orNull)]);
  const { ti } = read;
  let type = types?.find((t) => t.metadata.name === typeName(ti.spec.typeRef));
  let kindObject = null;
  if (read.versions) {
    // Read through GraphQL: writes go through the resource the instance is
    // served as, whose object carries the resourceVersion a write sends
    // back. Without the Types list, the kinds are asked which one it is.
    const k = types ? { type: kindOfType(type) && { ...type, fromKind: kindOfType(type) } } : await typeFromKinds(ti);
    if (types && k.type) k.object = await api(kindPath(k.type.fromKind, ti.spec.namespace, ti.spec.name)).catch(() => null);
    if (!types || k.object) type = k.type;
    kindObject = k.object;
    if (k.object) Object.assign(ti.metadata, { resourceVersion: k.object.metadata.resourceVersion, annotations: k.object.metadata.annotations, generation: k.object.metadata.generation });
    if (k.object?.status?.alias) ti.spec.alias = k.object.status.alias;
  }
  const backend = backends?.items.find((b) => b.metadata.name === ti.spec.backend?.id);
  const installation = type?.fromKind ? Array.isArray(kindObject?.status?.resources) : type && isInstallationType(type);
  let reveal = params.get('secrets') === 'shown';

  // Value, as JSON or YAML, secrets hidden unless asked: the Type's schema
  // says which (x-cairn-secret), the backend's context schema for contexts.
  const schema = type?.spec?.jsonSchema;
  const ctxSchema = backend?.spec?.contextSchema || undefined;
  const valueBox = h('div', {});
  const contextBox = h('div', {});
  let fmt = 'json';
  const showValue = () => {
    const v = maskSecrets(ti.spec.value, reveal, schema);
    if (read.unreachable) { valueBox.replaceChildren(h('p', { id: 'value-unreachable' }, 'The value cannot be read now: its backend does not answer.'), errorBox(read.unreachable)); contextBox.replaceChildren(pre('(held by the backend)', 'Backend context')); return; }
    valueBox.replaceChildren(pre(ti.spec.value === undefined ? '(no value: this backend computes or holds it)' : fmt === 'json' ? JSON.stringify(v, null, 2) : toYAML(v), 'Value'));
    const c = ti.spec.backend?.context;
    contextBox.replaceChildren(pre(c === undefined || c === null ? '(none)' : JSON.stringify(maskSecrets(c, reveal, ctxSchema), null, 2), 'Backend context'));
  };
  const tab = (f, label) => h('button', { type: 'button', role: 'tab', 'aria-selected': String(f === fmt), onclick: (ev) => {
    fmt = f; for (const b of ev.target.parentNode.children) b.setAttribute('aria-selected', String(b === ev.target)); showValue();
  } }, label);
  showValue();

  // Versions and a diff between any two (GraphQL: every version in one query).
  const versions = read.versions || read.history || (await gqlVersions(historyQuery, id).catch(() => null))?.typeInstance?.resourceVersions || [];
  const opts = (sel) => versions.map((v) => h('option', { value: v.resourceVersion, selected: v.resourceVersion === sel }, `version ${v.resourceVersion}`));
  const last = versions.at(-1)?.resourceVersion;
  const fromSel = h('select', { id: 'diff-from', onchange: () => renderDiff() }, opts(versions.at(-2)?.resourceVersion ?? last));
  const toSel = h('select', { id: 'diff-to', onchange: () => renderDiff() }, opts(last));
  const diffBox = h('div', { class: 'diff', id: 'diff', tabindex: 0, 'aria-label': 'Differences between the two versions' });
  const snap = (rv) => { const v = versions.find((x) => String(x.resourceVersion) === String(rv)); return v ? pretty({ value: maskSecrets(v.spec?.value, reveal, schema), context: maskSecrets(v.spec?.backend?.context ?? null, reveal, ctxSchema) }) : ''; };
  const anySecret = hasSecrets(ti.spec.value, schema) || hasSecrets(ti.spec.backend?.context, ctxSchema) ||
    versions.some((v) => hasSecrets(v.spec?.value, schema) || hasSecrets(v.spec?.backend?.context, ctxSchema));
  // A caller without the reveal verb (cairn-viewer) is sent the server's
  // marker in place of each secret: nothing to show, and an edit would
  // write the marker over the secret.
  const withheld = withheldSecrets(ti.spec.value, schema) || withheldSecrets(ti.spec.backend?.context, ctxSchema);
  const secretsBtn = withheld ? h('p', { class: 'muted', id: 'secrets-withheld' }, `Secret values are withheld by the server: ${session.user() ? `you (${session.user()})` : 'you'} may not reveal them (the reveal verb, which cairn-editor grants and cairn-viewer does not).`)
    : anySecret ? h('button', { type: 'button', class: 'ghost', id: 'reveal', 'aria-pressed': String(reveal), onclick: (ev) => {
    reveal = !reveal; ev.target.setAttribute('aria-pressed', String(reveal)); ev.target.textContent = reveal ? 'Hide secrets' : 'Show secrets'; showValue(); renderDiff(); renderHistory();
  } }, reveal ? 'Hide secrets' : 'Show secrets') : null;
  // Each version's context, masked as the value is (contexts hold secrets
  // too: a backend's contextSchema marks them).
  const historyBody = h('tbody', {});
  const renderHistory = () => historyBody.replaceChildren(...versions.map((v) => h('tr', {}, h('td', {}, String(v.resourceVersion)), h('td', {}, v.createdBy || '—'),
    h('td', {}, v.spec?.backend?.context ? h('code', {}, JSON.stringify(maskSecrets(v.spec.backend.context, reveal, ctxSchema)).slice(0, 80)) : '—'))));
  renderHistory();
  function renderDiff() {
    const d = lineDiff(snap(fromSel.value), snap(toSel.value));
    const changed = d.filter((x) => x.op !== 'same').length;
    diffBox.replaceChildren(...d.map((x) => h('div', { class: x.op }, x.line)));
    diffBox.setAttribute('data-changes', String(changed));
  }
  renderDiff();

  // Backend and its context; a Git commit is a link when the repository is on the web.
  const context = ti.spec.backend?.context;
  const commit = context && (context.commit || context.sha);
  const repo = backend?.spec?.url || backend?.spec?.config?.url;
  const webRepo = typeof repo === 'string' && /^https:\/\//.test(repo) ? repo.replace(/\.git$/, '') : null;
  const proposal = context?.proposal;
  // The state is the provider's, asked through the server; it may be slow.
  const proposalState = h('span', { id: 'proposal-state', class: 'badge warn' }, 'asking…');
  if (proposal) api(`${HUB}/proposals/${encodeURIComponent(proposal.id)}`).then((p) => {
    proposalState.className = `badge ${PROPOSAL_STATE[p.status.state] || 'warn'}`;
    proposalState.textContent = p.status.state;
    if (p.status.message) proposalState.title = p.status.message;
  }, () => { proposalState.textContent = 'state unknown'; });

  // Lock and unlock, with an owner the user names (remembered).
  const owner = h('input', { id: 'lock-owner', value: localStorage.getItem('cairn-owner') || 'console', spellcheck: 'false' });
  const lockMsg = h('div', {});
  const lockAction = async (action) => {
    localStorage.setItem('cairn-owner', owner.value);
    try {
      try {
        await api(`${HUB}/lockrequests`, { method: 'POST', body: { apiVersion: 'hub.cairn.dev/v1', kind: 'LockRequest', spec: { action, ids: [id], owner: owner.value } } });
      } catch (e) {
        // lockrequests are cluster-scoped; GraphQL locks as an update of
        // the instance in its namespace, which roles bound there may grant.
        if (!isForbidden(e)) throw e;
        const m = action === 'Lock' ? 'lockTypeInstances' : 'unlockTypeInstances';
        await gql(`mutation($in: ${action}TypeInstancesInput!) { ${m}(in: $in) }`, { in: { ids: [id], ownerID: owner.value } })
          .catch((g) => { throw /forbidden/.test(g.message) ? e : new ApiError({ reason: 'Conflict', message: g.message }, 409); });
      }
      toast(`${action === 'Lock' ? 'Locked' : 'Unlocked'} by ${owner.value}`);
      render();
    } catch (e) { lockMsg.replaceChildren(errorBox(e)); }
  };

  // Delete, with the hub's reason when it refuses (used by, locked).
  const delMsg = h('div', {});
  // A modal dialog: the page behind is inert, Tab stays in it, Escape
  // closes it, and focus goes back to the Delete button that opened it.
  const confirmBox = h('dialog', { class: 'confirm', role: 'alertdialog', 'aria-labelledby': 'confirm-title', 'aria-describedby': 'confirm-text',
    onclose: () => deleteBtn.isConnected && deleteBtn.focus(),
    onkeydown: (ev) => {
      if (ev.key !== 'Tab') return;
      const stops = [...confirmBox.querySelectorAll('button')];
      const at = stops.indexOf(document.activeElement);
      const to = ev.shiftKey ? (at <= 0 ? stops.length - 1 : at - 1) : (at + 1) % stops.length;
      ev.preventDefault();
      stops[to].focus();
    } },
    h('h2', { id: 'confirm-title' }, 'Delete this instance?'),
    h('p', { id: 'confirm-text' }, `Delete ${instTitle(ti)}? Its history goes with it.`),
    h('div', { class: 'actions' }, h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: async () => {
      try {
        // With the uid and resourceVersion read as preconditions: a change
        // in between is a conflict that deletes nothing. Through the kind
        // for a user who may not write typeinstances (cluster-scoped).
        // As the owner named in the lock box, which the instance may have
        // been locked by since the page was read.
        const q = owner.value ? `?lockOwner=${encodeURIComponent(owner.value)}` : '';
        const body = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: id, resourceVersion: ti.metadata.resourceVersion } };
        const path = type?.fromKind ? kindPath(type.fromKind, ti.spec.namespace, ti.spec.name) : `${HUB}/typeinstances/${encodeURIComponent(id)}`;
        await api(path + q, { method: 'DELETE', body });
        toast(`Deleted ${instTitle(ti)}`);
        go(type?.fromKind ? `#/instances?${new URLSearchParams({ ns: ti.spec.namespace, type: type.fromKind.id })}` : '#/instances');
      } catch (e) {
        confirmBox.close();
        if (e.code === 409 && /modified|changed since|Precondition/.test(e.message)) {
          delMsg.replaceChildren(h('div', { class: 'alert bad', role: 'alert', id: 'conflict' }, h('p', {}, h('strong', {}, 'Conflict: '),
            `someone changed this instance after you opened it (you read resourceVersion ${ti.metadata.resourceVersion}). Nothing was deleted.`),
          h('button', { type: 'button', onclick: () => render() }, 'Reload')));
          return;
        }
        const locked = await lockRefusal(e, id, owner.value, 'deleted');
        if (locked) { delMsg.replaceChildren(locked); return; }
        const users = (e.causes || []).filter((c) => c.reason === 'UsedBy');
        const ids = users.length ? (ti.status.usedBy || []).slice(0, 20) : [];
        const named = await Promise.all(ids.map((u) => api(`${HUB}/typeinstances/${u}`).then(instTitle, () => shortID(u))));
        delMsg.replaceChildren(errorBox(e, ids.length ? h('p', {}, h('strong', {}, 'Used by: '), ids.map((u, i) => [link(`#/instance/${u}`, named[i]), ' '])) : null));
      }
    } }, 'Delete'), h('button', { type: 'button', class: 'ghost', onclick: () => confirmBox.close() }, 'Cancel')));
  const deleteBtn = h('button', { type: 'button', class: 'danger', id: 'delete', onclick: () => { confirmBox.showModal(); confirmBox.querySelector('#confirm-delete').focus(); } }, 'Delete');

  // Edit through the Type's form, sending the resourceVersion read.
  const editBox = h('div', { hidden: true });
  // A backend that takes no value (a gotemplate projection) computes it from
  // the context: a value sent would be refused, so there is no form.
  const computed = backend?.spec?.acceptValue === false;
  const editBtn = read.unreachable ? h('span', { class: 'muted', id: 'no-edit' }, `Not editable now: backend ${backend?.spec.alias || shortID(ti.spec.backend?.id)} does not answer, so the value cannot be read.`)
    : withheld ? h('span', { class: 'muted', id: 'no-edit' }, 'Not editable here: its secret values were withheld from you, and saving would write the placeholder over them.')
    : computed ? h('span', { class: 'muted', id: 'no-edit' }, `Not editable here: backend ${backend.spec.alias || shortID(backend.metadata.name)} computes this value from the context below (a projection renders its template); change the context with cairn update ${id} --context-file FILE.`)
    : type ? h('button', { type: 'button', id: 'edit', onclick: () => { editBox.hidden = false; editBtn.hidden = true; editBox.querySelector('input,select,textarea')?.focus(); } }, 'Edit')
    // Without the Type (a user who may not read Types, and a Type the REST
    // API does not serve as a kind) there is no schema to edit with.
    : h('span', { class: 'muted', id: 'no-edit' }, 'Not editable here: you may not read this Type, and it has no REST kind to edit through.');
  if (type && !computed && !withheld && !read.unreachable) editBox.append(editForm(ti, type, owner));

  // Changes made elsewhere while the page is open are announced at once
  // (a watch narrowed to this object).
  const changed = h('div', { 'aria-live': 'assertive' });
  const restRV = h('code', { id: 'rest-rv', title: 'the change this read reflects; writes send it back' }, ti.metadata.resourceVersion);
  const kind = type?.fromKind;
  const watched = kind ? `${kindPath(kind, ti.spec.namespace)}?fieldSelector=${encodeURIComponent(`metadata.name=${ti.spec.name}`)}` : `${HUB}/typeinstances?fieldSelector=${encodeURIComponent(`metadata.name=${id}`)}&values=false`;
  const same = (a, b) => JSON.stringify(Object.entries(a || {}).sort()) === JSON.stringify(Object.entries(b || {}).sort());
  if (!read.versions || kind) watch(watched, ti.metadata.resourceVersion, (ev) => {
    const o = ev.object;
    if ((kind ? o?.metadata?.uid : o?.metadata?.name) !== id || o.metadata.resourceVersion === ti.metadata.resourceVersion) return;
    // A change of nothing this page shows or writes (a stack controller's
    // status after each reconcile of an installation: conditions, children)
    // is taken in silently: the page is still what the server has, and an
    // edit or delete sends the new resourceVersion rather than conflicting
    // with the controller. Any change of the value (a new version), labels,
    // annotations or the lock is announced and conflicts as before.
    if (ev.type === 'MODIFIED' && (kind ? o.metadata.generation === ti.metadata.generation : o.status?.resourceVersion === ti.status.resourceVersion) &&
      (o.status?.lockedBy || '') === (ti.status.lockedBy || '') && same(o.metadata.labels, ti.metadata.labels) && same(o.metadata.annotations, ti.metadata.annotations)) {
      ti.metadata.resourceVersion = o.metadata.resourceVersion;
      restRV.textContent = o.metadata.resourceVersion;
      return;
    }
    changed.replaceChildren(h('div', { class: 'alert warn', id: 'changed' },
      h('p', {}, ev.type === 'DELETED' ? 'This instance was deleted elsewhere.' : `This instance was changed elsewhere (resourceVersion ${ev.object.metadata.resourceVersion}); what you see is resourceVersion ${ti.metadata.resourceVersion}.`),
      ev.type === 'DELETED' ? null : h('button', { type: 'button', onclick: () => render() }, 'Reload')));
  }, ctx.signal);

  const graphBox = h('div', {});
  relationsGraph(ti, backends?.items || [], read.related).then((g) => graphBox.replaceChildren(g), (e) => graphBox.replaceChildren(errorBox(e)));

  return [
    h('h1', {}, instTitle(ti)),
    h('p', { class: 'sub' }, h('code', {}, typeName(ti.spec.typeRef)), ' · ', h('code', {}, id)),
    h('div', { class: 'actions' }, editBtn, deleteBtn,
      installation && link(`#/stacks/${id}`, 'Installation: tree of children'),
      type && !kind && link(`#/types/${encodeURIComponent(type.metadata.name)}`, 'Type'),
      type && link(`#/instances?${new URLSearchParams(kind ? { ns: ti.spec.namespace, type: kind.id } : { type: type.metadata.name })}`, kind ? `${kind.kind}s of ${ti.spec.namespace}` : 'Instances of this Type')),
    changed, confirmBox, delMsg, editBox,
    h('div', { class: 'grid' },
      panel('Value', h('div', { class: 'actions' }, h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Format' }, tab('json', 'JSON'), tab('yaml', 'YAML')), secretsBtn), valueBox),
      panel('Details and lock', kv([
        ['Resource version', String(ti.status.resourceVersion)],
        ['REST resourceVersion', restRV],
        ['Alias', ti.spec.alias || '—'],
        ['Labels', labelsCell(ti.metadata.labels)],
        ['Created', when(ti.metadata.creationTimestamp)],
        ['Created by', ti.status.createdBy || '—'],
        ['Attributes', ti.spec.attributes?.length ? ti.spec.attributes.map((a) => h('span', { class: 'chip' }, typeName(a))) : '—'],
      ]), h('h3', {}, 'Lock'), ti.status.lockedBy ? h('p', {}, h('span', { class: 'badge warn', id: 'lock-state' }, `Locked by ${ti.status.lockedBy}`)) : h('p', {}, h('span', { class: 'badge ok', id: 'lock-state' }, 'Not locked')),
        h('div', { class: 'field' }, h('label', { for: 'lock-owner' }, 'Owner'), owner),
        h('div', { class: 'actions' }, h('button', { type: 'button', id: 'lock', onclick: () => lockAction('Lock') }, 'Lock'), h('button', { type: 'button', class: 'ghost', id: 'unlock', onclick: () => lockAction('Unlock') }, 'Unlock')), lockMsg),
      panel('Backend', kv([
        ['Backend', backend ? link(`#/instance/${backend.metadata.name}`, backend.spec.alias || shortID(backend.metadata.name)) : h('code', {}, ti.spec.backend?.id || '—')],
        backend && ['Type', h('code', {}, typeName(backend.spec.typeRef))],
        ti.spec.backend?.abstract && ['Abstract', 'yes (the hub picked its built-in store)'],
        commit && ['Commit', webRepo ? h('a', { href: `${webRepo}/commit/${commit}`, rel: 'noopener' }, h('code', {}, commit.slice(0, 12))) : h('code', { title: repo || '' }, commit.slice(0, 12))],
        proposal && ['Proposal', [webLink(proposal.url) ? h('a', { href: proposal.url, rel: 'noopener noreferrer', target: '_blank' }, `${proposal.provider || ''} #${proposal.number || proposal.id}`) : proposal.id, ' ', proposalState]],
      ]), h('h3', {}, 'Context'), contextBox),
      h('section', { class: 'panel wide', 'aria-label': 'Relations' }, h('h2', {}, 'Relations'),
        h('p', { class: 'muted' }, 'What this instance uses (left, its backend dashed) and what uses it (right). Select a node to go to it.'), graphBox),
      h('section', { class: 'panel wide', 'aria-label': 'History' }, h('h2', {}, `History (${versions.length} version${versions.length === 1 ? '' : 's'})`),
        h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Version'), h('th', {}, 'Created by'), h('th', {}, 'Backend context'))),
          historyBody)),
        h('div', { class: 'filters' }, h('div', { class: 'field' }, h('label', { for: 'diff-from' }, 'From'), fromSel), h('div', { class: 'field' }, h('label', { for: 'diff-to' }, 'To'), toSel)),
        diffBox)),
  ];
}

// lockRefusal is what a write refused by another owner's lock says: who
// holds it (read again: the lock may be newer than the page) and how to
// write as them. Null for any other error.
async function lockRefusal(e, id, owner, what) {
  if (!(e instanceof ApiError) || e.code !== 409 || !(e.causes.some((c) => c.reason === 'Locked') || /locked by/i.test(e.message))) return null;
  const holder = await readInstance(id).then((r) => r.ti.status.lockedBy || '', () => '');
  return h('div', { class: 'alert bad', role: 'alert', id: 'locked' },
    h('p', {}, h('strong', {}, holder ? `Locked by ${holder}: ` : 'Locked: '),
      `only the lock's owner may change this instance${owner ? `, and you wrote as ${owner}` : ''}. Nothing was ${what}.`),
    h('p', { class: 'muted' }, holder ? `To write as its owner, enter ${holder} as the Owner under Lock and try again; or unlock it as ${holder}.` : 'Reload to see who holds it.'),
    h('p', { class: 'muted' }, `The server said: ${e.message}`));
}

// webLink: whether a URL a backend reported (a pull request's) may be a
// link: only http(s), never javascript: or data:, whatever the CSP allows.
function webLink(url) {
  return typeof url === 'string' && /^https?:\/\//i.test(url);
}

function editForm(ti, type, owner) {
  const form = schemaForm(type.spec.jsonSchema || {}, ti.spec.value, { idPrefix: 'edit' });
  const msg = h('div', { id: 'edit-message' });
  return h('form', { class: 'panel', 'aria-label': 'Edit the value', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const q = owner.value ? `?lockOwner=${encodeURIComponent(owner.value)}` : '';
    try {
      const k = type.fromKind;
      // Through the resource the instance is served as, for a user who may
      // not write typeinstances (cluster-scoped): the same resourceVersion
      // precondition, and the uid read.
      const saved = k ? await api(`${kindPath(k, ti.spec.namespace, ti.spec.name)}${q}`, { method: 'PUT', body: {
        apiVersion: `${k.group}/${k.version}`, kind: k.kind,
        metadata: { name: ti.spec.name, namespace: ti.spec.namespace, uid: ti.metadata.name, resourceVersion: ti.metadata.resourceVersion, labels: ti.metadata.labels || {}, annotations: ti.metadata.annotations || {} },
        spec: form.value() } })
        : await api(`${HUB}/typeinstances/${encodeURIComponent(ti.metadata.name)}${q}`, { method: 'PUT', body: {
          apiVersion: 'hub.cairn.dev/v1', kind: 'TypeInstance',
          metadata: { name: ti.metadata.name, resourceVersion: ti.metadata.resourceVersion, labels: ti.metadata.labels || {}, annotations: ti.metadata.annotations || {} },
          spec: { typeRef: ti.spec.typeRef, attributes: ti.spec.attributes || [], value: form.value() } } });
      // A write that changes nothing makes no resource version: the
      // instance's version (a served kind's generation) is the one read.
      const version = k ? saved?.metadata?.generation : saved?.status?.resourceVersion;
      toast(version === ti.status.resourceVersion ? 'Nothing changed: the value is as it was, no new resource version'
        : `Saved resource version ${version}`);
      render();
    } catch (e) {
      if (e.code === 409 && e.reason === 'Conflict' && /modified|changed since/.test(e.message)) {
        form.showErrors([]);
        msg.replaceChildren(h('div', { class: 'alert bad', role: 'alert', id: 'conflict' },
          h('p', {}, h('strong', {}, 'Conflict: '), `someone changed this instance after you opened it (you read resourceVersion ${ti.metadata.resourceVersion}). Nothing was saved.`),
          h('p', {}, 'Reload to see their change, then make yours again.'),
          h('button', { type: 'button', onclick: () => render() }, 'Reload')));
        return;
      }
      const locked = await lockRefusal(e, ti.metadata.name, owner.value, 'saved');
      if (locked) { form.showErrors([]); msg.replaceChildren(locked); return; }
      // Every answer replaces the marks of the last one.
      const rest = form.showErrors(e.causes || []);
      msg.replaceChildren(errorBox({ ...e, causes: rest, message: rest.length < (e.causes || []).length ? 'The server refused the value; see the fields marked.' : e.message }));
    }
  } }, h('h2', {}, 'Edit'), form.el, msg, h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'save' }, 'Save'),
    // The page again (the form as read), with focus back on Edit.
    h('button', { type: 'button', class: 'ghost', onclick: async () => { await render(); document.getElementById('edit')?.focus(); } }, 'Cancel')));
}

async function relationsGraph(ti, backends, related) {
  const ids = [...new Set([...(ti.status.uses || []), ...(ti.status.usedBy || [])])].slice(0, 40);
  // GraphQL's answer named them already (for a user reading through it).
  const got = related ? ids.map((x) => related.get(x)).filter(Boolean).map((r) => ({ metadata: { name: r.id }, spec: { namespace: r.namespace, name: r.name, typeRef: r.typeRef } }))
    : await Promise.all(ids.map((x) => api(`${HUB}/typeinstances/${x}`).catch(() => null)));
  const byID = new Map(got.filter(Boolean).map((o) => [o.metadata.name, o]));
  const node = (x, col, cls) => {
    const o = byID.get(x);
    const isBackend = backends.some((b) => b.metadata.name === x);
    return { id: x, col, cls: `${cls || ''} ${isBackend ? 'backend' : ''}`, href: `#/instance/${x}`,
      label: o ? (isBackend ? `backend ${o.spec.alias || o.spec.name}` : instTitle(o)) : shortID(x), sub: o ? typeName(o.spec.typeRef) : '',
      title: o ? `${isBackend ? 'backend ' : ''}${instTitle(o)} (${typeName(o.spec.typeRef)})` : x };
  };
  const nodes = [{ id: ti.metadata.name, col: 1, cls: 'center', label: instTitle(ti), sub: typeName(ti.spec.typeRef), title: `this instance: ${instTitle(ti)}` }];
  const edges = [];
  for (const u of ti.status.uses || []) { if (!nodes.some((n) => n.id === u)) nodes.push(node(u, 0)); edges.push([u, ti.metadata.name]); }
  for (const u of ti.status.usedBy || []) { if (!nodes.some((n) => n.id === u)) nodes.push(node(u, 2)); edges.push([ti.metadata.name, u]); }
  return drawGraph({ nodes, edges, columns: ['uses', 'this instance', 'used by'], title: 'Relations graph' });
}

// ---- create --------------------------------------------------------------
async function createPage(ctx, params) {
  // A user who may not list Types (roles bound in a namespace) creates
  // through a kind's namespaced resource, with the kind's schema.
  const [types, backends] = await Promise.all([listTypes().catch(orNull), api(`${HUB}/backends`).catch(orNull)]);
  const kinds = types ? [] : await discoverKinds();
  const typeSel = params.get('type') || '';
  const nsParam = params.get('ns') || '';
  const k = kinds.find((x) => x.id === typeSel);
  const t = types ? types.find((x) => x.metadata.name === typeSel) : k ? await kindAsType(k) : null;
  const pick = h('select', { id: 'c-type', onchange: (ev) => go(`#/create?${new URLSearchParams({ type: ev.target.value, ...(nsParam && { ns: nsParam }) })}`) },
    h('option', { value: '' }, types ? 'Choose a Type…' : 'Choose a kind…'),
    types ? types.map((x) => h('option', { value: x.metadata.name, selected: x.metadata.name === typeSel }, x.metadata.name))
      : kinds.map((x) => h('option', { value: x.id, selected: x.id === typeSel }, kindLabel(x))));
  const head = [h('h1', {}, t ? `Create ${t.fromKind ? `a ${t.fromKind.kind}` : t.spec.path}` : 'Create an instance'), h('div', { class: 'field' }, h('label', { for: 'c-type' }, types ? 'Type' : 'Kind'), pick)];
  if (!t) return head;
  const name = h('input', { id: 'c-name', required: true, 'aria-required': 'true', spellcheck: 'false', autocomplete: 'off' });
  // A cluster-scoped kind's instances have no namespace: no field for one
  // (the hub refuses one on create).
  const cluster = t.fromKind ? t.fromKind.namespaced === false : clusterScoped(t);
  const ns = cluster ? null : h('input', { id: 'c-ns', value: nsParam || (types ? 'default' : rememberedNamespace() || 'default'), spellcheck: 'false' });
  const labels = h('input', { id: 'c-labels', placeholder: 'env=dev, app=billing', spellcheck: 'false', 'aria-describedby': 'c-labels-hint' });
  const backend = !backends ? null : h('select', { id: 'c-backend' }, h('option', { value: '' }, 'By policy (default)'),
    backends.items.filter((b) => b.spec.acceptValue !== false).map((b) => h('option', { value: b.metadata.name }, `${b.spec.alias || shortID(b.metadata.name)} (${b.spec.typeRef.path})`)));
  const form = schemaForm(t.spec.jsonSchema || {}, undefined, { idPrefix: 'create' });
  const msg = h('div', { id: 'create-message' });
  const metaErr = h('p', { class: 'field-error', id: 'c-name-err' });
  name.setAttribute('aria-describedby', metaErr.id);
  return [...head, h('form', { class: 'panel', novalidate: true, 'aria-label': 'New instance', onsubmit: async (ev) => {
    ev.preventDefault();
    const lab = {};
    for (const part of labels.value.split(',').map((s) => s.trim()).filter(Boolean)) { const [k, ...v] = part.split('='); lab[k.trim()] = v.join('=').trim(); }
    const doc = { apiVersion: 'hub.cairn.dev/v1', kind: 'TypeInstance', metadata: { name: name.value.trim(), ...(!cluster && { namespace: ns.value.trim() || 'default' }), labels: lab },
      spec: { typeRef: { path: t.spec.path, revision: t.spec.revision }, value: form.value() } };
    if (backend?.value) doc.spec.backend = { id: backend.value };
    try {
      const k = t.fromKind;
      const created = k ? await api(kindPath(k, doc.metadata.namespace), { method: 'POST', body: { apiVersion: `${k.group}/${k.version}`, kind: k.kind, metadata: doc.metadata, spec: doc.spec.value } })
        : await api(`${HUB}/typeinstances`, { method: 'POST', body: doc });
      toast(`Created ${cluster ? '' : `${doc.metadata.namespace}/`}${doc.metadata.name}`);
      go(`#/instance/${k ? created.metadata.uid : created.metadata.name}`);
    } catch (e) {
      // Every answer replaces the marks of the last one.
      metaErr.textContent = '';
      name.removeAttribute('aria-invalid');
      const rest = form.showErrors(e.causes || []);
      const meta = rest.filter((c) => /^metadata/.test(c.field || ''));
      if (meta.length) { metaErr.textContent = meta.map((c) => c.message).join('; '); name.setAttribute('aria-invalid', 'true'); }
      msg.replaceChildren(errorBox({ ...e, causes: rest.filter((c) => !meta.includes(c)), message: e.causes?.length ? `${e.message}` : e.message }));
    }
  } },
  h('fieldset', {}, h('legend', {}, 'Metadata'),
    h('div', { class: 'field' }, h('label', { for: 'c-name' }, 'Name', h('span', { class: 'req', 'aria-hidden': 'true' }, ' *')), name, metaErr),
    cluster ? h('p', { class: 'muted', id: 'c-cluster-scoped' }, `${t.spec.rest?.names?.kind || t.spec.path} is cluster-scoped: its instances have no namespace.`)
      : h('div', { class: 'field' }, h('label', { for: 'c-ns' }, 'Namespace'), ns),
    h('div', { class: 'field' }, h('label', { for: 'c-labels' }, 'Labels'), labels, h('span', { class: 'hint', id: 'c-labels-hint' }, 'comma-separated key=value')),
    backend ? h('div', { class: 'field' }, h('label', { for: 'c-backend' }, 'Backend'), backend) : null),
  h('fieldset', {}, h('legend', {}, 'Value'), form.el),
  msg, h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'create' }, 'Create')))];
}

// ---- backends --------------------------------------------------------------
async function backendsPage(ctx) {
  const list = await api(`${HUB}/backends`);
  const rows = list.items.map((b) => {
    const health = h('td', { 'data-health': b.metadata.name }, h('span', { class: 'muted' }, 'checking…'));
    const rtt = h('td', {}, '');
    const t0 = performance.now();
    api(`${HUB}/backends/${b.metadata.name}/check`).then((c) => {
      const ok = c.health?.status === 'SERVING';
      health.replaceChildren(h('span', { class: `badge ${ok ? 'ok' : 'bad'}` }, c.health?.status || 'unknown'), c.health?.message ? h('span', { class: 'reason' }, ` ${c.health.message}`) : '');
      const ms = (ns) => (ns < 1e6 ? `${(ns / 1e3).toFixed(1)} µs` : `${(ns / 1e6).toFixed(1)} ms`);
      rtt.replaceChildren(c.health?.roundTrip !== undefined ? `${ms(c.health.roundTrip)} (connect ${ms(c.health.connect || 0)})` : `${(performance.now() - t0).toFixed(1)} ms (HTTP)`);
    }, (e) => {
      health.replaceChildren(...(notServed(e) ? [h('span', { class: 'muted' }, 'this server has no health check (backends/{id}/check)')] : [h('span', { class: 'badge bad' }, e.reason || 'error'), ' ', h('span', { class: 'reason' }, e.message)]));
    });
    return h('tr', {},
      h('td', {}, link(`#/instance/${b.metadata.name}`, b.spec.alias || shortID(b.metadata.name))),
      h('td', {}, h('code', {}, typeName(b.spec.typeRef))),
      h('td', { class: 'opt' }, h('code', {}, b.spec.url || '—')),
      h('td', { class: 'opt' }, b.spec.acceptValue === false ? 'no' : 'yes'),
      health, rtt);
  });
  return [h('h1', {}, 'Backends'), h('p', { class: 'sub' }, 'Where values live. Health is asked of each backend now; the round trip is the second check on an open connection.'),
    h('div', { class: 'panel table-wrap' }, h('table', { 'aria-label': 'Backends' }, h('thead', {}, h('tr', {}, h('th', {}, 'Alias'), h('th', {}, 'Type'), h('th', { class: 'opt' }, 'URL'), h('th', { class: 'opt' }, 'Takes values'), h('th', {}, 'Health'), h('th', {}, 'Round trip'))),
      h('tbody', {}, rows)))];
}

// ---- policy ----------------------------------------------------------------
async function policyPage() {
  const [p, types] = await Promise.all([api(`${HUB}/policies/default`), listTypes()]);
  const path = h('input', { id: 'explain-path', list: 'type-paths', placeholder: 'cap.type.database.postgresql.config', spellcheck: 'false' });
  const out = h('div', { id: 'explain-result', 'aria-live': 'polite' });
  return [h('h1', {}, 'Policy'), h('p', { class: 'sub' }, 'Rules that choose the backend of a new instance by its Type path, and what a create injects.'),
    h('div', { class: 'grid' },
      panel('Explain', h('form', { 'aria-label': 'Explain the policy for a Type', onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          // PATH[:REVISION], as Types are written here and to cairn policy explain.
          const [p, rev] = path.value.trim().split(':');
          const ex = await api(`${HUB}/policies/default/explain?${new URLSearchParams({ path: p, ...(rev && { revision: rev }) })}`);
          out.replaceChildren(h('div', { class: `alert ${ex.matched ? 'ok' : 'warn'}` },
            h('p', {}, h('strong', {}, ex.matched ? `Rule ${ex.ruleIndex} matches. ` : 'No rule matches. '), ex.message || ''),
            ex.backendID ? h('p', {}, 'A new instance goes to the backend ', link(`#/instance/${ex.backendID}`, ex.backendAlias || shortID(ex.backendID)), '.') : null),
          h('details', {}, h('summary', {}, 'The whole answer'), pre(toYAML(ex), 'Explanation')));
        } catch (e) { out.replaceChildren(notServed(e) ? h('p', { class: 'alert warn' }, 'This server does not explain its policy yet (policies/default/explain).') : errorBox(e)); }
      } }, h('div', { class: 'field' }, h('label', { for: 'explain-path' }, 'Type path[:revision]'), path,
        h('datalist', { id: 'type-paths' }, [...new Set(types.flatMap((t) => [t.spec.path, t.metadata.name]))].map((x) => h('option', { value: x })))),
      h('button', { type: 'submit' }, 'Explain')), out),
      panel('Current policy', kv([['resourceVersion', p.metadata.resourceVersion || '(never applied)'], ['Generation', String(p.metadata.generation || 0)]]), h('h3', {}, 'Spec'), pre(toYAML(p.spec), 'Policy spec')))];
}

// ---- proposals --------------------------------------------------------------
const PROPOSAL_STATE = { open: 'warn', merged: 'ok', closed: 'bad' };
async function proposalsPage() {
  // hub.cairn.dev/v1 proposals: what each backend recorded when it proposed
  // a change, with the state the server asked of the provider now.
  let list, older = false;
  try { list = (await api(`${HUB}/proposals`)).items; } catch (e) {
    if (!notServed(e)) throw e;
    // An older server: the proposals recorded in instances' contexts, no state.
    older = true;
    list = [];
    let cont = '', pages = 0;
    do {
      const l = await api(`${HUB}/typeinstances?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`);
      for (const ti of l.items) {
        const p = ti.spec.backend?.context?.proposal;
        if (p) list.push({ metadata: { name: p.id }, spec: { ...p, instances: [{ id: ti.metadata.name, namespace: ti.spec.namespace, name: ti.spec.name, resourceVersion: ti.status.resourceVersion }] }, status: { state: 'Unknown', message: 'this server does not report proposal states' } });
      }
      cont = l.metadata.continue;
    } while (cont && ++pages < 20);
  }
  const counts = list.reduce((m, p) => ({ ...m, [p.status.state]: (m[p.status.state] || 0) + 1 }), {});
  return [h('h1', {}, 'Proposals'), h('p', { class: 'sub' }, 'Changes a backend proposed for review (a branch and a pull request) rather than applied. The value cairn shows is the proposed one until the pull request is merged or the instance written again.'),
    older ? h('p', { class: 'alert warn' }, 'This server does not serve hub.cairn.dev/v1 proposals: states are unknown (cairn proposals list asks the providers).') : null,
    list.length ? h('p', { class: 'muted', id: 'proposal-counts' }, Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(', ')) : null,
    list.length ? h('div', { class: 'panel table-wrap' }, h('table', { 'aria-label': 'Proposals' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Instance'), h('th', {}, 'Pull request'), h('th', {}, 'State'), h('th', {}, 'Branch'), h('th', { class: 'opt' }, 'Proposed'))),
      h('tbody', {}, list.map((p) => { const s = p.spec, insts = s.instances || []; return h('tr', { 'data-proposal': p.metadata.name },
        // A batch (a stack reconcile) proposes several instances in one pull request.
        h('td', {}, insts.map((inst, i) => [i ? h('br') : null, link(`#/instance/${inst.id}`, inst.namespace ? `${inst.namespace}/${inst.name}` : inst.name || shortID(inst.id)), h('span', { class: 'muted' }, ` version ${inst.resourceVersion}`)])),
        h('td', {}, webLink(s.url) ? h('a', { href: s.url, rel: 'noopener noreferrer', target: '_blank' }, `${s.provider || ''} #${s.number || p.metadata.name}`) : `${s.provider || ''} #${s.number || p.metadata.name}`),
        h('td', {}, h('span', { class: `badge ${PROPOSAL_STATE[p.status.state] || 'warn'}` }, p.status.state),
          p.status.message ? h('span', { class: 'reason' }, ` ${p.status.message}`) : null),
        h('td', {}, h('code', {}, s.branch || '—'), s.base ? h('span', { class: 'muted' }, ` → ${s.base}`) : null),
        h('td', { class: 'opt' }, when(p.metadata.creationTimestamp), insts[0]?.createdBy ? ` by ${insts[0].createdBy}` : '')); }))))
      : h('div', { class: 'panel' }, h('p', {}, 'No proposals. A Git backend in propose mode opens one for each write.'))];
}

// ---- stacks ------------------------------------------------------------------
function isInstallationType(t) { return (t.spec.additionalRefs || []).includes(INSTALLATION_PARENT); }

// served reads an instance through its Type's own REST resource when it has
// one, where status carries the conditions its controllers report.
async function served(ti, types) {
  const t = types.find((x) => x.metadata.name === typeName(ti.spec.typeRef));
  const p = restPath(t, ti.spec.namespace, ti.spec.name);
  if (!p) return null;
  return api(p).catch(() => null);
}
function cond(obj, type) { return (obj?.status?.conditions || []).find((c) => c.type === type); }
function condView(obj) {
  // As cairn trace: Synced then Ready, and the first reason of whichever is not True.
  const out = ['Synced', 'Ready'].map((k) => conditionBadge(cond(obj, k) || { type: k, status: 'Unknown' }));
  const bad = ['Synced', 'Ready', 'Deleting'].map((k) => cond(obj, k)).find((c) => c && (c.type === 'Deleting' || c.status !== 'True'));
  if (bad) out.push(h('span', { class: 'reason' }, `${bad.reason || ''}${bad.message ? `: ${bad.message.split('; ')[0]}` : ''}`));
  return out;
}

async function stacksPage() {
  const types = await listTypes();
  const stackTypes = types.filter(isInstallationType);
  // The catalog (hub.cairn.dev/v1 stacks) where the server has one;
  // otherwise the installation Types stand for the stacks.
  const catalog = await api(`${HUB}/stacks`).then((l) => l.items, (e) => { if (notServed(e)) return null; throw e; });
  const lists = await Promise.all(stackTypes.map((t) => api(`${HUB}/typeinstances?typePath=${encodeURIComponent(t.spec.path)}&typeRevision=${encodeURIComponent(t.spec.revision)}&values=false`)));
  const installs = lists.flatMap((l, i) => l.items.filter((ti) => ti.spec.typeRef.revision === stackTypes[i].spec.revision));
  const objs = await Promise.all(installs.map((ti) => served(ti, types)));
  const ids = new Set(installs.map((x) => x.metadata.name));
  const byID = new Map(installs.map((x) => [x.metadata.name, x]));
  // Dependencies: the uses edges from an installation to the installations
  // it requires. Reused or new is what the installer recorded: every
  // installation an install creates carries deps.cairn.dev/root-id, the id
  // of that install's root. A dependency created by its dependent's own
  // install (same root) is new; any other (another install's, or one made
  // by hand, without the annotation) was there already and is reused.
  const ann = (ti, k) => ti.metadata.annotations?.[k] || '';
  const rootOf = (ti) => ann(ti, DEPS_ROOT_ID) || ti.metadata.name;
  const deps = installs.flatMap((ti) => (ti.status.uses || []).filter((u) => ids.has(u)).map((u) => {
    const dep = byID.get(u);
    const created = ann(dep, DEPS_ROOT_ID) !== '' && ann(dep, DEPS_ROOT_ID) === rootOf(ti);
    return { dependent: ti, dependency: dep, how: created ? 'new' : 'reused' };
  }));
  const sharing = (ti) => {
    const mode = ann(ti, DEPS_SHARING_MODE);
    if (!mode && !ti.metadata.annotations?.[DEPS_SHARING_GROUP]) return 'not installed as a dependency';
    return mode === 'none' ? 'exclusive (sharing mode none)' : `shared in group "${ann(ti, DEPS_SHARING_GROUP)}"`;
  };
  const inGraph = new Set(deps.flatMap((d) => [d.dependent.metadata.name, d.dependency.metadata.name]));
  const nodes = installs.filter((ti) => inGraph.has(ti.metadata.name)).map((ti) => {
    const as = deps.filter((d) => d.dependency === ti);
    const reusedBy = as.filter((d) => d.how === 'reused').length, newWith = as.length - reusedBy;
    const what = !as.length ? 'requested' : [newWith ? 'new' : '', reusedBy ? `reused${as.length > 1 ? ` by ${reusedBy}` : ''}` : ''].filter(Boolean).join(', ');
    return { id: ti.metadata.name, label: instTitle(ti), sub: `${ti.spec.typeRef.path} · ${what}`,
      cls: reusedBy ? 'reused' : newWith ? 'new' : '', href: `#/stacks/${ti.metadata.name}`, title: `${instTitle(ti)}, ${what} installation` };
  });
  const edges = deps.map((d) => [d.dependency.metadata.name, d.dependent.metadata.name, d.how]);
  const typeLink = (ref) => link(`#/types/${encodeURIComponent(typeName(ref))}`, typeName(ref));
  const catalogView = catalog
    ? (catalog.length ? h('table', { 'aria-label': 'Stack catalog' }, h('thead', {}, h('tr', {}, h('th', {}, 'Stack'), h('th', {}, 'Version'), h('th', {}, 'Installation Type'), h('th', { class: 'opt' }, 'Description'))),
      h('tbody', {}, catalog.map((st) => h('tr', {}, h('td', {}, st.spec.name), h('td', {}, h('code', {}, st.spec.version)),
        h('td', {}, st.spec.installationType ? typeLink(st.spec.installationType) : '—'), h('td', { class: 'opt' }, st.spec.description || '')))))
      : h('p', { class: 'muted' }, 'The catalog is empty: add a stack with cairn stack add.'))
    : (stackTypes.length ? h('ul', {}, stackTypes.map((t) => h('li', {}, typeLink(t.spec), t.spec.rest ? h('span', { class: 'muted' }, ` kind ${t.spec.rest.names?.kind}`) : '')))
      : h('p', { class: 'muted' }, 'No stack is installed on this hub.'));
  return [h('h1', {}, 'Stacks'), h('p', { class: 'sub' }, 'Packages of resource templates. Each registers a Type for its installations; an installation owns the instances rendered from it.'),
    h('div', { class: 'panel table-wrap' }, h('h2', {}, catalog ? 'Catalog' : 'Stacks (installation Types)'), catalogView),
    h('div', { class: 'panel table-wrap' }, h('h2', {}, 'Installations'), installs.length ? h('table', { 'aria-label': 'Installations' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Installation'), h('th', {}, 'Stack'), h('th', {}, 'Conditions'))),
      h('tbody', {}, installs.map((ti, i) => h('tr', {}, h('td', {}, link(`#/stacks/${ti.metadata.name}`, instTitle(ti))), h('td', {}, h('code', {}, typeName(ti.spec.typeRef))), h('td', {}, condView(objs[i]))))))
      : h('p', { class: 'muted' }, 'No installations.')),
    deps.length ? h('section', { class: 'panel', 'aria-label': 'Dependencies' }, h('h2', {}, 'Dependencies'),
      h('p', { class: 'muted' }, 'An arrow points from a dependency to the installation that requires it. Amber, solid: new, installed by its dependent\'s install; green, dashed: an existing installation reused (from the installer\'s deps.cairn.dev/root-id annotations).'),
      h('div', { class: 'table-wrap' }, drawGraph({ nodes, edges, title: 'Dependency graph' })),
      h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Dependency edges' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Installation'), h('th', {}, 'Requires'), h('th', {}, 'New or reused'), h('th', { class: 'opt' }, 'Sharing of the dependency'))),
        h('tbody', {}, deps.map((d) => h('tr', { 'data-dependency': `${d.dependent.spec.name}>${d.dependency.spec.name}` },
          h('td', {}, link(`#/stacks/${d.dependent.metadata.name}`, instTitle(d.dependent))),
          h('td', {}, link(`#/stacks/${d.dependency.metadata.name}`, instTitle(d.dependency))),
          h('td', {}, h('span', { class: `badge ${d.how === 'new' ? 'warn' : 'ok'}` }, d.how),
            h('span', { class: 'reason' }, d.how === 'new' ? ' installed with it' : ann(d.dependency, DEPS_ROOT_ID) ? ' installed by another install' : ' made outside an install')),
          h('td', { class: 'opt' }, sharing(d.dependency)))))))) : null];
}

// installationPage shows what cairn trace shows: the installation's
// conditions and each child with its backend, Synced, Ready and reason,
// from the status the stack controller writes (status.resources). A server
// without the controller has no such status; the children are then found
// by the label that names their installation. Children that are
// installations themselves are opened in turn.
async function installationPage(ctx, params, id) {
  // A user bound in a namespace reads the installation through GraphQL and
  // its kind (as on the instance page), and each child's object through its
  // kind: one that reports children (status.resources) is an installation.
  const [read, types, backends] = await Promise.all([readInstance(id), listTypes().catch(orNull), api(`${HUB}/backends`).catch(orNull)]);
  const { ti } = read;
  const byKind = types ? null : await typeFromKinds(ti);
  const kinds = types ? [] : await discoverKinds();
  const obj = types ? await served(ti, types) : byKind.object || null;
  const schema = types ? types.find((t) => t.metadata.name === typeName(ti.spec.typeRef))?.spec?.jsonSchema : byKind.type?.spec?.jsonSchema;
  // The status names a child's backend by id (its alias is for those who
  // may list backends: then the list below names it).
  const backendName = (bid) => { const b = backends?.items.find((x) => x.metadata.name === bid); return b ? b.spec.alias || shortID(bid) : shortID(bid); };
  const typeOfKind = (apiVersion, kind) => types?.find((t) => t.spec.rest && `${t.spec.rest.group}/${t.spec.rest.version}` === apiVersion && t.spec.rest.names?.kind === kind);
  const badge = (type, b) => conditionBadge({ type, status: b === true ? 'True' : b === false ? 'False' : 'Unknown' });
  const childObject = (r, ns) => {
    const k = kinds.find((x) => `${x.group}/${x.version}` === r.apiVersion && x.kind === r.kind);
    return k ? api(kindPath(k, r.namespace || ns, r.name), { quiet: true }).catch(() => null) : null;
  };

  // A child in another namespace than the installation's (every namespaced
  // child of a cluster-scoped installation) says where it is.
  const elsewhere = (cns) => (cns && cns !== (ti.spec.namespace || '') ? h('span', { class: 'chip', 'data-namespace': cns }, `namespace ${cns}`) : null);
  async function tree(inst, o, depth) {
    const resources = o?.status?.resources;
    let kids;
    if (Array.isArray(resources)) {
      kids = await Promise.all(resources.map(async (r) => {
        let isInst, sub = null;
        if (types) {
          const t = typeOfKind(r.apiVersion, r.kind);
          isInst = t && isInstallationType(t) && r.uid && depth < 6;
          sub = isInst ? await api(`${HUB}/typeinstances/${r.uid}`).then(async (c) => tree(c, await served(c, types), depth + 1), () => null) : null;
        } else {
          const co = r.uid && depth < 6 ? await childObject(r, inst.spec?.namespace) : null;
          isInst = Array.isArray(co?.status?.resources);
          sub = isInst ? await tree({ metadata: { name: r.uid }, spec: { namespace: co.metadata.namespace } }, co, depth + 1) : null;
        }
        return h('li', { 'data-child': r.name },
          h('div', { class: 'row' }, r.uid ? link(isInst ? `#/stacks/${r.uid}` : `#/instance/${r.uid}`, `${r.kind}/${r.name}`) : `${r.kind}/${r.name}`,
            elsewhere(r.namespace), r.backend ? h('span', { class: 'chip', 'data-backend': r.backend }, r.backend === 'cairn-builtin' ? r.backend : backendName(r.backend)) : null, badge('Synced', r.synced), badge('Ready', r.ready),
            r.reason ? h('span', { class: 'reason' }, r.reason.split('; ')[0]) : null), sub);
      }));
    } else {
      const l = await api(`${HUB}/typeinstances?labelSelector=${encodeURIComponent(`${LABEL_INSTALLATION_UID}=${inst.metadata.name}`)}&values=false`).catch(orNull);
      if (!l) return h('p', { class: 'muted' }, 'Children not listed: without a status from the stack controller they are found by label across the cluster, which you may not list.');
      kids = await Promise.all(l.items.map(async (c) => {
        const co = await served(c, types);
        const t = types.find((x) => x.metadata.name === typeName(c.spec.typeRef));
        const isInst = t && isInstallationType(t) && depth < 6;
        const sub = isInst ? await tree(c, co, depth + 1) : null;
        return h('li', { 'data-child': c.spec.name },
          h('div', { class: 'row' }, link(isInst ? `#/stacks/${c.metadata.name}` : `#/instance/${c.metadata.name}`, `${co?.kind || t?.spec.rest?.names?.kind || c.spec.typeRef.path}/${c.spec.name}`),
            elsewhere(c.spec.namespace), h('span', { class: 'chip' }, backendName(c.spec.backend?.id)), condView(co)), sub);
      }));
    }
    return kids.length ? h('ul', { class: 'tree' }, kids) : null;
  }
  const children = await tree(ti, obj, 0);
  const st = obj?.status || {};
  // The page follows the installation: a spec changed (another
  // configuration set chosen) is reconciled by the stack controller after
  // the write, and its new children and conditions then appear here.
  const kind = types ? kindOfType(types.find((t) => t.metadata.name === typeName(ti.spec.typeRef))) : byKind.type?.fromKind;
  if (obj && kind) {
    watch(`${kindPath(kind, ti.spec.namespace)}?fieldSelector=${encodeURIComponent(`metadata.name=${ti.spec.name}`)}`, obj.metadata.resourceVersion, (ev) => {
      if (ev.object?.metadata?.uid === id && ev.object.metadata.resourceVersion !== obj.metadata.resourceVersion) render();
    }, ctx.signal);
  }
  const pending = obj && st.observedGeneration !== undefined && obj.metadata.generation > st.observedGeneration;
  return [h('h1', {}, instTitle(ti)), h('p', { class: 'sub' }, 'Installation of ', h('code', {}, typeName(ti.spec.typeRef)),
    st.stack ? [' from stack ', h('code', {}, `${st.stack.name}@${st.stack.version}`)] : null,
    st.configuration ? [' · configuration set ', h('strong', { id: 'configuration' }, st.configuration)] : null,
    ' · ', link(`#/instance/${id}`, 'as an instance')),
    pending ? h('p', { class: 'alert warn', id: 'reconciling', role: 'status' }, `The stack controller has not applied the latest spec yet (generation ${obj.metadata.generation}; what is shown is of generation ${st.observedGeneration}). This page follows it.`) : null,
    h('div', { class: 'grid' },
      panel('Conditions', (st.conditions || []).length ? h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': 'Conditions table' }, h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Type'), h('th', {}, 'Status'), h('th', {}, 'Reason'), h('th', {}, 'Message'))),
        h('tbody', {}, st.conditions.map((c) => h('tr', {}, h('td', {}, c.type), h('td', {}, conditionBadge(c)), h('td', {}, c.reason || ''), h('td', {}, c.message || ''))))))
        : h('p', { class: 'muted' }, 'No conditions reported yet: the stack controller reports them.')),
      panel('Parameters', pre(toYAML(maskSecrets(ti.spec.value, false, schema) ?? {}), 'Parameters'),
        h('p', { class: 'muted' }, 'Secret values are hidden here; ', link(`#/instance/${id}`, 'the instance page'), ' shows them when asked.')),
      st.outputs ? panel('Outputs', pre(toYAML(maskSecrets(st.outputs, false)), 'Outputs')) : null,
      h('section', { class: 'panel wide', 'aria-label': 'Tree of children' }, h('h2', {}, 'Tree of children'),
        h('ul', { class: 'tree root', id: 'stack-tree' }, h('li', {}, h('div', { class: 'row' }, h('strong', {}, `${obj?.kind || ti.spec.typeRef.path}/${ti.spec.name}`),
          h('span', { class: 'chip' }, backendName(ti.spec.backend?.id)), condView(obj)), children || h('p', { class: 'muted' }, 'No children.')))),
      (st.events || []).length ? h('section', { class: 'panel wide', 'aria-label': 'Events' }, h('h2', {}, 'Events'), h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Time'), h('th', {}, 'Type'), h('th', {}, 'Reason'), h('th', {}, 'Message'))),
        h('tbody', {}, st.events.slice().reverse().map((e) => h('tr', {}, h('td', {}, when(e.time)), h('td', {}, h('span', { class: `badge ${e.type === 'Warning' ? 'bad' : 'ok'}` }, e.type)), h('td', {}, e.reason), h('td', {}, e.message))))))) : null)];
}

// The skip link moves focus to the content without touching the route.
document.querySelector('.skip').addEventListener('click', (ev) => { ev.preventDefault(); main.focus(); });
window.addEventListener('hashchange', render);
if (!location.hash) history.replaceState(null, '', '#/');
render();
