// Drives cairn's web console in headless Chromium against a running
// `cairn serve` (CAIRN_URL, seeded by web/e2e_test.go) through every page
// and the interactions of issue 21, saving a screenshot of each step in
// CAIRN_SCREENSHOTS when it is set. Any failed expectation exits non-zero
// with a message.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BASE = process.env.CAIRN_URL;
const SHOTS = process.env.CAIRN_SCREENSHOTS;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const KUBECTL = process.env.KUBECTL || '/usr/bin/kubectl';
const seed = JSON.parse(process.env.CAIRN_SEED); // ids the Go test created
if (!BASE) throw new Error('CAIRN_URL must be set');

const T = 20_000; // generous: CI runs this beside the other packages' tests on 2 cores
let step = 0;
const started = performance.now();
const problems = [];

// A fresh profile, and no background traffic (the test machine's network is closed).
const browser = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'cairn-chromium-')), {
  executablePath: CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 900 },
  colorScheme: 'light',
});
let page = browser.pages()[0] || await browser.newPage();
// Every list of instances the console asks for is a page (limit), unless
// narrowed to one Type or a label selector: 10,000 instances are never
// fetched at once.
const unpaged = [];
function recordLists(p) {
  p.on('request', (r) => {
    const u = new URL(r.url());
    if (r.method() !== 'GET' || !u.pathname.endsWith('/apis/hub.cairn.dev/v1/typeinstances') || u.searchParams.get('watch')) return;
    const limit = Number(u.searchParams.get('limit') || 0);
    if (!(limit > 0 && limit <= 500) && !u.searchParams.get('typePath') && !u.searchParams.get('labelSelector')) unpaged.push(r.url());
  });
}
recordLists(page);
function listen(p) {
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  p.on('console', (m) => { if (m.type() === 'error' && !/404|409|422|Failed to load resource/.test(m.text())) problems.push(`console error: ${m.text()}`); });
}
listen(page);

// axe-core checks every page shot against WCAG 2.1 A and AA (labels, roles,
// names, contrast, ...). Its source is evaluated in the page through the
// DevTools protocol, which the console's Content-Security-Policy (own
// scripts only) does not govern; the console itself never loads it.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const axeFindings = [];
let axeMillis = 0;
async function axe(name) {
  const t0 = performance.now();
  if (!await page.evaluate(() => typeof window.axe !== 'undefined')) await page.evaluate(AXE);
  const found = await page.evaluate(async () => (await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }, resultTypes: ['violations'] }))
    .violations.map((v) => `${v.id} (${v.impact}): ${v.help}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`));
  for (const f of found) axeFindings.push(`${name}: ${f}`);
  axeMillis += performance.now() - t0;
}

async function shot(name) {
  await page.waitForFunction(() => document.getElementById('main').getAttribute('aria-busy') === 'false', null, { timeout: T });
  await axe(name);
  await page.evaluate(() => window.scrollTo(0, 0)); // the sticky header stays at the top of a full-page shot
  const file = SHOTS ? join(SHOTS, `${String(++step).padStart(2, '0')}-${name}.png`) : (++step, 'no screenshot');
  // A full-page shot lays the page out again at its whole height and
  // encodes a PNG: CPU that no check reads, so only for someone who asked
  // for the pictures (CAIRN_SCREENSHOTS).
  if (SHOTS) await page.screenshot({ path: file, fullPage: true });
  console.log(`ok ${name} at ${((performance.now() - started) / 1000).toFixed(1)}s (${file})`);
}
function expect(cond, what) { if (!cond) throw new Error(`expected ${what}`); }
async function text(sel) { return (await page.locator(sel).first().textContent({ timeout: T })) || ''; }
// unlabelled lists the form controls on the page that have no label.
async function unlabelled() {
  return page.evaluate(() => [...document.querySelectorAll('main input, main select, main textarea, header button')]
    .filter((el) => !(el.labels?.length || el.getAttribute('aria-label') || (el.tagName === 'BUTTON' && el.textContent.trim())))
    .map((el) => el.outerHTML.slice(0, 80)));
}
async function visit(hash, base = BASE) {
  await page.goto(`${base}/ui/${hash}`);
  await page.waitForFunction(() => document.getElementById('main').getAttribute('aria-busy') === 'false', null, { timeout: T });
}
const h1 = () => text('main h1');
function kubectl(...args) { return execFileSync(KUBECTL, ['--server', BASE, ...args], { encoding: 'utf8', input: args.includes('-') ? kubectl.input : undefined }); }

// Routes other helpers are adding to the REST API: with them the pages must
// show their answers, without them say that the server has none.
const probe = async (path) => (await fetch(`${BASE}${path}`)).status !== 404;
const served = {
  explain: await probe('/apis/hub.cairn.dev/v1/policies/default/explain?path=x'),
  check: await probe(`/apis/hub.cairn.dev/v1/backends/${seed.builtin}/check`),
};
console.log(`served: ${JSON.stringify(served)}`);

try {
  // / redirects to the console, which opens on the overview.
  await page.goto(`${BASE}/`);
  expect(page.url().startsWith(`${BASE}/ui/`), `/ to redirect to /ui/, got ${page.url()}`);
  await page.waitForSelector('main h1:text("Overview")', { timeout: T });
  await shot('overview');

  // Keyboard: the first Tab reaches the skip link, which moves focus to the content.
  await page.keyboard.press('Tab');
  expect(await page.evaluate(() => document.activeElement?.textContent) === 'Skip to content', 'the first Tab stop to be the skip link');
  await page.keyboard.press('Enter');
  expect(await page.evaluate(() => document.activeElement?.id) === 'main', 'the skip link to focus the content');
  expect((await h1()) === 'Overview', 'the route kept by the skip link');

  // The sections are reached with Tab and opened with Enter.
  await page.focus('a.brand');
  await page.keyboard.press('Tab');
  expect(await page.evaluate(() => document.activeElement?.textContent) === 'Types', 'Tab from the brand to reach the first section');
  await page.keyboard.press('Enter');
  await page.waitForSelector('main h1:text("Types")', { timeout: T });
  expect(await page.evaluate(() => document.activeElement?.id) === 'main', 'focus moved to the new page');
  expect(await page.locator('nav a[aria-current="page"]').textContent() === 'Types', 'the current section marked for assistive technology');

  // A backend that is down (files-down, stopped after db-unreachable was
  // stored in it) fails no list: lists ask for no values. The instance's
  // page shows what the hub keeps and why the value is missing.
  await visit('#/instances?type=cap.type.database.postgresql.server:0.1.0');
  expect(await page.locator('main tbody tr:has-text("default/db-unreachable")').count() === 1, `the instance of the stopped backend listed, got: ${(await text('main')).slice(0, 300)}`);
  await visit(`#/instance/${seed.unreachable}`);
  expect((await h1()) === 'default/db-unreachable', `the instance's page despite its backend, got ${await h1()}`);
  expect((await text('#value-unreachable')).includes('does not answer') && (await text('main .alert.bad')).includes('unavailable'), 'the value missing, and why');
  expect((await text('#no-edit')).includes('files-down'), 'no edit, naming the backend');
  expect((await text('main h2:has-text("History")')).includes('1 version'), 'its versions');
  await shot('backend-down');

  // Types, and one Type's schema as a form and as JSON.
  await visit('#/');
  await page.click('nav >> text=Types');
  await page.waitForSelector('main h1:text("Types")', { timeout: T });
  expect((await text('main table')).includes('cap.type.database.postgresql.server'), 'the quick-start Types listed');
  await shot('types');
  await page.click('main a:text("cap.type.database.postgresql.server")');
  await page.waitForSelector('main h2:text("Schema as a form")', { timeout: T });
  expect(await page.locator('label:has-text("port")').count() > 0, 'a form field labelled port');
  expect((await text('pre[aria-label="JSON Schema"]')).includes('"maximum": 65535'), 'the schema as JSON');
  await shot('type');

  // Create through the form: the server's schema error shows at the field.
  await visit('#/create?type=cap.type.database.postgresql.server:0.1.0');
  await page.fill('#c-name', 'db-e2e');
  await page.fill('#c-labels', 'env=e2e');
  await page.getByLabel('host', { exact: false }).first().fill('e2e.example.org');
  const port = page.locator('input[name="port"]');
  await port.fill('99999');
  await page.click('#create');
  const portErr = page.locator('.field-error[data-field="port"]');
  await portErr.filter({ hasText: '65535' }).waitFor({ timeout: T });
  expect(await port.getAttribute('aria-invalid') === 'true', 'the port field marked invalid');
  expect(await page.evaluate(() => document.activeElement?.getAttribute('name')) === 'port', 'focus moved to the field in error');
  expect((await unlabelled()).length === 0, `every control of the create form labelled: ${await unlabelled()}`);
  await shot('create-schema-error');
  // A second refusal, about no field (the name is taken), replaces the
  // marks of the first rather than leaving them beside it.
  await port.fill('5433');
  await page.fill('#c-name', 'db-server');
  await page.click('#create');
  await page.waitForSelector('#create-message .alert.bad:has-text("already exists")', { timeout: T });
  expect(await portErr.textContent() === '' && await port.getAttribute('aria-invalid') === null, 'the port\'s error of the last answer cleared');
  await page.fill('#c-name', 'db-e2e');
  await page.click('#create');
  await page.waitForSelector('main h1:text("default/db-e2e")', { timeout: T });
  await shot('created-instance');

  // Instances by kind, with a label filter.
  await visit('#/instances?labels=env%3Ddev');
  const devRows = await text('main table tbody');
  expect(devRows.includes('default/db-server') && devRows.includes('default/db-config') && !devRows.includes('db-e2e'), `the env=dev filter to keep db-server and db-config only, got: ${devRows}`);
  expect((await unlabelled()).length === 0, `every filter labelled: ${await unlabelled()}`);
  await shot('instances-label-filter');
  // One namespace, for a user who may list across the cluster: the server narrows the list.
  await visit('#/instances?ns=cairn-system');
  const systemRows = await page.locator('main tbody tr td:first-child').allTextContents();
  expect(systemRows.length > 0 && systemRows.every((r) => r.startsWith('cairn-system/')), `the instances of cairn-system only, got: ${systemRows}`);

  // Live updates: a write made with kubectl appears while the page is open.
  await visit('#/instances?type=io.flipt.flag:1.0.0-alpha.1');
  await page.waitForSelector('#live.on', { timeout: T });
  kubectl.input = JSON.stringify({ apiVersion: 'flipt.io/v1alpha1', kind: 'Flag', metadata: { name: 'live-flag', namespace: 'default', labels: { team: 'e2e' } }, spec: { enabled: false, description: 'made by kubectl during the browser test' } });
  kubectl('apply', '-f', '-');
  await page.waitForSelector('main tbody tr:has-text("default/live-flag")', { timeout: T });
  kubectl('label', 'flags', 'live-flag', 'reviewed=yes');
  await page.waitForSelector('main tbody tr:has-text("default/live-flag") >> text=reviewed=yes', { timeout: T });
  await shot('instances-live-update');

  // Paging is the server's: the flags seeded by the test span pages.
  const next = page.locator('main a:text("Next page")');
  expect(await next.count() === 1, 'a Next page link over the seeded flags');
  await next.click();
  await page.waitForSelector('main button:text("Previous page")', { timeout: T });
  expect(await page.locator('main tbody tr').count() === 50, `a page of 50 rows of the 10,000 flags, got ${await page.locator('main tbody tr').count()}`);

  // Fields the Type's schema marks x-cairn-secret (one through a $ref in an
  // array's items) are dots until asked, in the value, the form and the diff.
  await visit(`#/instance/${seed.connection}`);
  const shown = async () => text('main pre[aria-label="Value"]');
  expect((await shown()).includes('db.example.org'), 'a field not marked secret shown');
  for (const secret of ['hunter2-dsn', 's3cr3t-replica-auth']) expect(!(await page.textContent('main')).includes(secret), `${secret} hidden`);
  expect((await shown()).includes('••••••'), 'secret fields shown as dots');
  await shot('instance-secrets-hidden');
  await page.click('#reveal');
  expect((await shown()).includes('hunter2-dsn') && (await shown()).includes('s3cr3t-replica-auth'), 'the secrets shown when asked');
  await page.click('#reveal');
  expect(!(await shown()).includes('hunter2-dsn'), 'the secrets hidden again');
  await page.click('#edit');
  const dsn = page.locator('form[aria-label="Edit the value"] input[name="dsn"]');
  expect(await dsn.getAttribute('type') === 'password', 'the secret field of the edit form masked');
  await page.click('form[aria-label="Edit the value"] button[data-reveal="dsn"]');
  expect(await dsn.getAttribute('type') === 'text' && (await dsn.inputValue()).includes('hunter2-dsn'), 'the secret field shown when asked');
  await dsn.fill('postgres://app:hunter3-dsn@db.example.org/app');
  await page.click('#save');
  await page.waitForSelector('main h2:text("History (2 versions)")', { timeout: T });
  expect(!(await text('#diff')).includes('hunter'), 'the diff of a secret field masked');
  expect(await page.locator('#diff').getAttribute('data-changes') === '0', 'a change to a secret alone shows no visible difference until asked');
  await page.click('#reveal');
  expect((await text('#diff')).includes('hunter3-dsn'), 'the diff shows the secret change when asked');
  await shot('instance-secrets-shown');

  // An instance: value with secrets hidden until asked, backend, lock, relations graph.
  await visit(`#/instance/${seed.dbConfig}`);
  expect(!(await page.textContent('main')).includes('change-me-please'), 'the password hidden');
  await page.click('main button:text("Show secrets")');
  expect((await text('main pre[aria-label="Value"]')).includes('change-me-please'), 'the password shown when asked');
  await page.click('main button[role="tab"]:text("YAML")');
  expect((await text('main pre[aria-label="Value"]')).includes('defaultDBName: billing'), 'the value as YAML');
  const graph = page.locator('svg.graph[aria-label="Relations graph"]');
  await graph.waitFor({ timeout: T });
  expect(await graph.locator(`a[data-node="${seed.dbServer}"]`).count() === 1, 'db-server in the relations graph');
  expect(await graph.locator('.node.backend').count() >= 1, 'the backend in the relations graph');
  await shot('instance-relations');
  // Navigate the graph with the keyboard: focus db-server's node and press Enter.
  await graph.locator(`a[data-node="${seed.dbServer}"]`).focus();
  await page.keyboard.press('Enter');
  await page.waitForSelector('main h1:text("default/db-server")', { timeout: T });
  await page.locator(`svg.graph a[data-node="${seed.dbConfig}"]`).waitFor({ timeout: T });
  await shot('relations-navigated');

  // The delete confirmation is a modal dialog, used with the keyboard:
  // Enter opens it on its default action, Tab stays inside it, Escape
  // closes it and gives focus back to Delete.
  const focused = () => page.evaluate(() => document.activeElement?.id || document.activeElement?.textContent);
  await page.focus('#delete');
  await page.keyboard.press('Enter');
  expect(await focused() === 'confirm-delete', `focus on the dialog's Delete, got ${await focused()}`);
  for (const key of ['Tab', 'Tab', 'Shift+Tab', 'Shift+Tab']) {
    await page.keyboard.press(key);
    expect(await page.evaluate(() => !!document.activeElement?.closest('[role="alertdialog"]')), `focus kept in the dialog after ${key}, got ${await focused()}`);
  }
  await page.keyboard.press('Escape');
  expect(await page.locator('[role="alertdialog"]').isVisible() === false && await focused() === 'delete', `Escape to close the dialog and return focus to Delete, got ${await focused()}`);
  // Delete refused while used: the reason names who uses it.
  await page.click('#delete');
  await page.click('#confirm-delete');
  const refusal = page.locator('main .alert.bad');
  await refusal.waitFor({ timeout: T });
  expect(/used by/i.test(await refusal.textContent()), 'the used-by reason shown');
  await refusal.locator('a:text("default/db-config")').waitFor({ timeout: T }); // who uses it, by name, as a link
  await shot('delete-refused');

  // A projection's backend (gotemplate) computes the value from the
  // context: no form to edit a value the server would refuse, and why.
  await visit(`#/instance/${seed.projection}`);
  expect((await text('main pre[aria-label="Value"]')).includes('postgres://'), 'the projection\'s rendered value shown');
  expect(await page.locator('#edit').count() === 0 && (await text('#no-edit')).includes('computes this value'), 'no edit form for a projection, and why');
  await visit(`#/instance/${seed.dbServer}`);

  // A server that does not answer, or a proxy's 503 page instead of a
  // Status: the message names the request that failed, the lock is not
  // taken, and focus stays on the button pressed.
  await page.route('**/lockrequests', (r) => r.fulfill({ status: 503, contentType: 'text/html', body: '<html><body><h1>503 Service Temporarily Unavailable</h1><hr>nginx</body></html>' }));
  await page.click('#lock');
  const lockErr = page.locator('main .alert.bad');
  await lockErr.waitFor({ timeout: T });
  expect(/503/.test(await lockErr.textContent()) && (await lockErr.textContent()).includes('POST /apis/hub.cairn.dev/v1/lockrequests') && !(await lockErr.textContent()).includes('<html>'),
    `the proxy's 503 named with the request, got: ${await lockErr.textContent()}`);
  await page.unroute('**/lockrequests');
  await page.route('**/lockrequests', (r) => r.abort('connectionrefused'));
  await page.click('#lock');
  await page.waitForSelector('main .alert.bad:has-text("did not answer")', { timeout: T });
  expect((await text('main .alert.bad')).includes('POST /apis/hub.cairn.dev/v1/lockrequests'), 'the unanswered request named');
  expect((await text('#lock-state')) === 'Not locked', 'nothing locked');
  await page.unroute('**/lockrequests');
  // Lock and unlock; the page shows the new state with focus where it was.
  await page.click('#lock');
  await page.waitForSelector('#lock-state:text("Locked by console")', { timeout: T });
  expect(await focused() === 'lock', `focus kept on Lock after the page renders again, got ${await focused()}`);
  await page.click('#unlock');
  await page.waitForSelector('#lock-state:text("Not locked")', { timeout: T });
  // Locked by someone else meanwhile: the edit and the delete are refused
  // with who holds the lock and how to act as them, not as a value with
  // marked fields (there are none).
  const lockAs = (action, owner) => fetch(`${BASE}/apis/hub.cairn.dev/v1/lockrequests`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'hub.cairn.dev/v1', kind: 'LockRequest', spec: { action, ids: [seed.dbServer], owner } }) });
  await page.click('#edit');
  expect((await lockAs('Lock', 'alice')).ok, 'alice to lock db-server');
  await page.locator('form[aria-label="Edit the value"] input[name="port"]').fill('5439');
  await page.click('#save');
  const lockedMsg = page.locator('#edit-message .alert.bad');
  await lockedMsg.waitFor({ timeout: T });
  expect((await lockedMsg.textContent()).includes('Locked by alice') && (await lockedMsg.textContent()).includes('Nothing was saved') && !(await lockedMsg.textContent()).includes('fields marked'),
    `the lock named as the edit's refusal, got: ${await lockedMsg.textContent()}`);
  await page.click('#delete');
  await page.click('#confirm-delete');
  await page.waitForSelector('main .alert.bad:has-text("Nothing was deleted")', { timeout: T });
  expect((await text('main .alert.bad:has-text("Nothing was deleted")')).includes('Locked by alice'), 'the lock named as the delete\'s refusal');
  await shot('locked-elsewhere');
  expect((await lockAs('Unlock', 'alice')).ok, 'alice to unlock db-server');
  await visit(`#/instance/${seed.dbServer}`);
  // Cancel of an edit gives focus back to Edit.
  await page.click('#edit');
  await page.focus('form[aria-label="Edit the value"] button:text("Cancel")');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('main').getAttribute('aria-busy') === 'false', null, { timeout: T });
  expect(await focused() === 'edit', `Cancel to return focus to Edit, got ${await focused()}`);

  // Edit through the form, then diff the two versions.
  await page.click('#edit');
  await page.locator('form[aria-label="Edit the value"] input[name="port"]').fill('5440');
  await page.click('#save');
  await page.waitForSelector('#toast:text("Saved resource version 2")', { timeout: T });
  await page.waitForSelector('main h2:text("History (2 versions)")', { timeout: T });
  // Saving what is there makes no version, and says so.
  await page.click('#edit');
  await page.click('#save');
  await page.waitForSelector('#toast:text("Nothing changed: the value is as it was, no new resource version")', { timeout: T });
  // The page renders again after the toast (busy from that moment): what
  // it showed before (the history, the diff) is replaced, so wait for it.
  await page.waitForFunction(() => document.getElementById('main').getAttribute('aria-busy') === 'false', null, { timeout: T });
  await page.waitForSelector('main h2:text("History (2 versions)")', { timeout: T });
  const diff = page.locator('#diff');
  expect((await diff.locator('.del').allTextContents()).some((l) => l.includes('5432')), 'the old port as a removed line');
  expect((await diff.locator('.add').allTextContents()).some((l) => l.includes('5440')), 'the new port as an added line');
  await page.selectOption('#diff-from', '2');
  expect(await diff.getAttribute('data-changes') === '0', 'no change between a version and itself');
  await page.selectOption('#diff-from', '1');
  await diff.scrollIntoViewIfNeeded();
  await shot('history-diff');

  // A conflict: the instance changes after the form was opened.
  await page.click('#edit');
  await page.locator('form[aria-label="Edit the value"] input[name="port"]').fill('5441');
  const cur = await (await fetch(`${BASE}/apis/hub.cairn.dev/v1/typeinstances/${seed.dbServer}`)).json();
  cur.spec.value.port = 6000;
  const put = await fetch(`${BASE}/apis/hub.cairn.dev/v1/typeinstances/${seed.dbServer}`, { method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(cur) });
  expect(put.ok, `the concurrent write to succeed, got ${put.status}`);
  await page.waitForSelector('#changed:has-text("changed elsewhere")', { timeout: T }); // announced by the page's watch
  await page.click('#save');
  await page.waitForSelector('#conflict', { timeout: T });
  expect((await text('#conflict')).includes('Nothing was saved'), 'the conflict explained');
  await shot('edit-conflict');

  // Delete sends the resourceVersion it read: a change in between is a
  // conflict and deletes nothing; after a reload the delete goes through.
  const flags = await (await fetch(`${BASE}/apis/flipt.io/v1alpha1/namespaces/default/flags/live-flag`)).json();
  await visit(`#/instance/${flags.metadata.uid}`);
  kubectl('label', 'flags', 'live-flag', 'changed=after-read');
  await page.click('#delete');
  await page.click('#confirm-delete');
  await page.waitForSelector('#conflict:has-text("Nothing was deleted")', { timeout: T });
  await shot('delete-conflict');
  await page.click('#conflict button:text("Reload")');
  await page.waitForSelector('main .chip:text("changed=after-read")', { timeout: T });
  await page.click('#delete');
  await page.click('#confirm-delete');
  await page.waitForSelector('main h1:text("Instances")', { timeout: T });
  expect((await fetch(`${BASE}/apis/flipt.io/v1alpha1/namespaces/default/flags/live-flag`)).status === 404, 'live-flag deleted');

  // Backends with health and round-trip time.
  await visit('#/backends');
  await page.waitForFunction(() => ![...document.querySelectorAll('[data-health]')].some((td) => td.textContent.includes('checking')), null, { timeout: T });
  expect(await page.locator('main tbody tr').count() >= 2, 'the hub\'s backends listed');
  if (served.check) expect(await page.locator('[data-health] .badge.ok:text("SERVING")').count() >= 2, 'every in-process backend SERVING');
  else expect(await page.locator('[data-health]:has-text("no health check")').count() >= 2, 'the console to say the server has no health check');
  await shot('backends');

  // The policy with its explain box.
  await visit('#/policy');
  // PATH:REVISION, as the console writes Types everywhere and the CLI's
  // explain takes them; rules numbered as typeInstance/rules/N and the CLI
  // number them (the seeded policy's catch-all is rule 1).
  await page.fill('#explain-path', 'cap.type.database.postgresql.config:0.1.0');
  await page.click('main button:text("Explain")');
  await page.waitForSelector('#explain-result > *', { timeout: T });
  if (served.explain) {
    const said = await text('#explain-result');
    expect(said.includes('cairn-builtin') && said.includes('Rule 1 matches') && said.includes('config:0.1.0 by catch-all'), `the explanation to name rule 1 and the built-in backend, got: ${said}`);
  }
  else expect((await text('#explain-result')).includes('does not explain'), 'the console to say the server has no explain');
  await shot('policy-explain');

  // Proposals of the propose-mode Git backend, with the state the server
  // asked of the (fake) GitHub and a link to each pull request.
  await visit('#/proposals');
  await page.waitForSelector('main h1:text("Proposals")', { timeout: T });
  for (const [state, name] of Object.entries(seed.proposals)) {
    const row = page.locator(`main tbody tr:has-text("default/${name}")`);
    expect(await row.count() === 1, `the proposal of ${name} listed`);
    expect((await row.locator('.badge').textContent()) === state, `${name}'s pull request ${state}, got ${await row.locator('.badge').textContent()}`);
    const href = await row.locator('a[href^="https://"]').getAttribute('href');
    expect(/^https:\/\/github\.example\/acme\/flags\/pull\/\d+$/.test(href), `a link to ${name}'s pull request, got ${href}`);
  }
  expect((await text('#proposal-counts')).includes('1 open'), 'the proposals counted by state');
  await shot('proposals');
  await page.click(`main a:text("default/${seed.proposals.open}")`);
  await page.waitForSelector('#proposal-state:text("open")', { timeout: T }); // the instance page says so too
  expect(await page.locator('main a[href^="https://github.example/acme/flags/pull/"]').count() >= 1, 'the instance page links its pull request');

  // Stacks: installations, the dependency graph (reused vs new), a tree of children.
  await visit('#/stacks');
  expect((await text('main table[aria-label="Installations"]')).includes('default/shop'), 'the shop installation listed');
  const dep = page.locator('svg.graph[aria-label="Dependency graph"]');
  await dep.waitFor({ timeout: T });
  // Reused or new as the installer recorded it (deps.cairn.dev/root-id), not by timestamps.
  const how = async (sel) => (await page.locator(`tr[data-dependency${sel}] .badge`).allTextContents()).join(',');
  expect(await how('="shop>shared-db"') === 'reused', 'shared-db (made by hand, before) reused by shop');
  if (seed.portals) {
    expect(await how('^="web-portal>flags-env-"') === 'new', `the flags installed with web-portal new, got ${await how('^="web-portal>flags-env-"')}`);
    expect(await how('^="web-portal-v2>flags-env-"') === 'reused', `the same flags reused by web-portal-v2, got ${await how('^="web-portal-v2>flags-env-"')}`);
    expect((await text('tr[data-dependency^="web-portal-v2>"]')).includes('installed by another install'), 'why it counts as reused');
    expect(await dep.locator('path.edge.new').count() === 1 && await dep.locator('path.edge.reused').count() === 2, 'one new and two reused edges drawn');
  }
  await shot('stacks');
  await page.click('main table a:text("default/shop")');
  await page.waitForSelector('#stack-tree', { timeout: T });
  for (const child of ['shop-config', 'shop-flag']) expect(await page.locator(`#stack-tree li[data-child="${child}"]`).count() === 1, `the child ${child} in the tree`);
  expect((await text('#stack-tree')).includes('Ready='), 'each child with its Ready condition');
  await shot('stack-tree');

  // With the stack catalog and controller: the tree of a real installation,
  // what cairn trace shows (every child with backend, Synced, Ready).
  if (seed.realStack) {
    await visit(`#/stacks/${seed.realStack}`);
    await page.waitForSelector('#stack-tree li[data-child="small-infra-network"]', { timeout: T });
    const kids = await page.locator('#stack-tree li[data-child]').count();
    expect(kids === 8, `the 8 children of small-infra in the tree, got ${kids}`);
    expect(await page.locator('#stack-tree li[data-child] >> text=Synced=True').count() === 8, 'every child Synced');
    expect((await text('main')).includes('ReconcileSuccess'), 'the Synced reason of the installation');
    await shot('stack-tree-controller');
    // Saved as read, an edit changes nothing: what the value leaves out (an
    // optional object with defaults, an optional boolean) stays out, not
    // written as the form's empty inputs (credentials '' and false).
    await visit(`#/instance/${seed.realStack}`);
    await page.click('#edit');
    await page.click('#save');
    await page.waitForSelector('#toast:text("Nothing changed: the value is as it was, no new resource version")', { timeout: T });
  }
  if (seed.portals) {
    // A boolean the value leaves out shows its default (flags-env's
    // darkMode, default true) and stays out unless changed: a save does
    // not turn the team's dark mode off.
    const env = (await (await fetch(`${BASE}/apis/flags.stacks.cairn.dev/v1alpha1/namespaces/default/flagsenvs`)).json()).items[0];
    await visit(`#/instance/${env.metadata.uid}`);
    await page.click('#edit');
    expect(await page.locator('form[aria-label="Edit the value"] input[name="darkMode"]').isChecked(), 'an absent boolean shown as its default (true)');
    await page.click('#save');
    await page.waitForSelector('#toast:text("Nothing changed: the value is as it was, no new resource version")', { timeout: T });
  }

  if (seed.platform) {
    // A cluster-scoped kind (kind.scope: Cluster): its objects have no
    // namespace and are served at /apis/G/V/platformconfigs, without
    // /namespaces/. A namespace filter does not narrow them, and says so.
    const PC = 'dev.cairn.stacks.platform.platformconfig:1.0.0-alpha.1';
    await visit(`#/instances?${new URLSearchParams({ ns: 'team-a', type: PC })}`);
    expect((await text('main')).includes('PlatformConfig is cluster-scoped'), `the namespace filter said not to apply, got: ${(await text('main')).slice(0, 400)}`);
    expect(await page.locator('main tbody a:text-is("prod")').count() === 1, 'the PlatformConfig listed, by its name alone');
    await visit('#/stacks');
    expect((await text('main table[aria-label="Installations"] tr:has(a:text-is("prod"))')).includes('Synced=True'), 'its conditions, read through its cluster-scoped path');
    // Its tree: the child in the namespace the package names.
    await page.click('main table a:text-is("prod")');
    await page.waitForSelector('#stack-tree li[data-child="prod-settings"] [data-namespace="platform"]', { timeout: T });
    expect((await text('#stack-tree .row')).startsWith('PlatformConfig/prod'), `the installation read as its kind, got ${await text('#stack-tree .row')}`);
    expect(await page.locator('#stack-tree >> text=Synced=True').count() === 2, 'it and its child Synced');
    await shot('cluster-scoped-tree');
    // Created through the form, which asks for no namespace.
    await visit(`#/create?${new URLSearchParams({ type: PC, ns: 'team-a' })}`);
    expect(await page.locator('#c-ns').count() === 0 && (await text('#c-cluster-scoped')).includes('no namespace'), 'no namespace field for a cluster-scoped kind');
    await page.fill('#c-name', 'staging');
    await page.fill('input[name="region"]', 'europe-west1');
    await page.click('#create');
    await page.waitForSelector('main h1:text-is("staging")', { timeout: T });
    // The stack controller writes the installation's status after the page
    // read it: a change of nothing the page shows or writes, taken in, so
    // the delete does not conflict with the controller.
    await page.waitForFunction(async () => {
      const o = await (await fetch('/apis/platform.stacks.cairn.dev/v1alpha1/platformconfigs/staging')).json();
      return (o.status?.conditions || []).some((c) => c.type === 'Ready' && c.status === 'True') && document.getElementById('rest-rv')?.textContent === o.metadata.resourceVersion;
    }, null, { timeout: T, polling: 100 });
    expect(await page.locator('#changed').count() === 0, 'a status write not announced as a change');
    await page.click('#delete');
    await page.click('#confirm-delete');
    await page.waitForSelector('main h1:text-is("Instances")', { timeout: T });
  }
  if (seed.sqlEnv) {
    // Configuration sets: the field choosing one is an enum whose unset
    // choice names the default; choosing prod re-renders the installation,
    // and its page follows the controller to the new children.
    await visit(`#/instance/${seed.sqlEnv}`);
    await page.click('#edit');
    const tier = page.locator('form[aria-label="Edit the value"] select[name="tier"]');
    const opts = (await tier.locator('option').allTextContents()).join(',');
    expect(opts === '— (default: dev),dev,prod', `the sets offered, the default named, got ${opts}`);
    await tier.selectOption({ label: 'prod' });
    await page.click('#save');
    await page.waitForSelector('#toast:text("Saved resource version 2")', { timeout: T });
    await page.click('main a:text("Installation: tree of children")');
    await page.waitForSelector('#stack-tree li[data-child="orders-replica"]', { timeout: T });
    await page.waitForSelector('#configuration:text-is("prod")', { timeout: T });
    await shot('configuration-set-prod');
  }

  // Dark theme, from the toggle (and remembered).
  await visit('#/');
  await page.click('#theme');
  expect(await page.evaluate(() => document.documentElement.dataset.theme) === 'dark', 'the dark theme on');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(bg === 'rgb(20, 23, 26)', `a dark background, got ${bg}`);
  await shot('overview-dark');
  await visit(`#/instance/${seed.dbConfig}`);
  await page.locator('svg.graph').waitFor({ timeout: T });
  await shot('instance-dark');

  // Narrow screens: the layout reflows without a horizontal scrollbar.
  await page.setViewportSize({ width: 390, height: 844 });
  await visit('#/instances');
  expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), 'no horizontal overflow on a phone-sized screen');
  await shot('instances-narrow');
  // Every kind of page, and an instance whose name, label and value are as long as they may be.
  for (const hash of ['#/types', '#/backends', '#/stacks', `#/instance/${seed.long}`]) {
    await visit(hash);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow <= 1, `no horizontal overflow of ${hash} on a phone-sized screen, got ${overflow}px`);
  }

  // A server that requires credentials: the console asks for a bearer
  // token, sends it with every request (the watch too), shows who is signed
  // in and what the server refuses them, and forgets the token on sign-out.
  const G = seed.guarded;
  await page.setViewportSize({ width: 1280, height: 900 });
  page = await browser.newPage(); // a new tab: sessionStorage of its own
  listen(page);
  recordLists(page);
  // No theme chosen on this origin: the console follows the system's (dark here).
  await page.emulateMedia({ colorScheme: 'dark' });
  // Not signed in, the overview's refused counts ask for a token (they do
  // not mean an anonymous visitor is a user bound in a namespace).
  await visit('#/', G.url);
  await page.waitForSelector('main h1:text("Sign in")', { timeout: T });
  await visit('#/instances?type=io.flipt.flag:1.0.0-alpha.1', G.url);
  await page.waitForSelector('main h1:text("Sign in")', { timeout: T });
  const why = await text('#signin-reason');
  expect(why.includes('needs credentials') && why.includes('system:anonymous'), `the server's refusal of an anonymous caller shown, got: ${why}`);
  expect((await unlabelled()).length === 0, `the token field labelled: ${await unlabelled()}`);
  expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor) === 'rgb(20, 23, 26)', 'the dark theme of a dark system');
  expect((await text('#theme')) === 'Light theme', 'the toggle offers the other theme');
  await shot('sign-in-dark');
  await page.fill('#signin-token', 'not-a-token');
  await page.click('#signin');
  await page.waitForSelector('#signin-error:has-text("refused this token")', { timeout: T });
  expect(await page.evaluate(() => sessionStorage.getItem('cairn-token')) === null, 'a refused token not kept');
  await page.fill('#signin-token', G.viewerToken);
  await page.click('#signin');
  await page.waitForSelector('main h1:text("Instances of io.flipt.flag")', { timeout: T }); // back where the user was sent from
  expect((await text('#who')).includes('vic'), 'the header to name the signed-in user');
  expect((await text('main table tbody')).includes('default/guarded-flag'), 'the guarded server\'s flag listed');
  await page.waitForSelector('#live.on', { timeout: T }); // the watch sends the token too
  execFileSync(KUBECTL, ['--kubeconfig', G.kubeconfig, 'apply', '-f', '-'], { encoding: 'utf8',
    input: JSON.stringify({ apiVersion: 'flipt.io/v1alpha1', kind: 'Flag', metadata: { name: 'guarded-live', namespace: 'default' }, spec: { enabled: true } }) });
  await page.waitForSelector('main tbody tr:has-text("default/guarded-live")', { timeout: T });
  await shot('signed-in-viewer');
  // The viewer may read, not edit: the refusal names the user and the verb.
  await page.click('main a:text("default/guarded-flag")');
  await page.waitForSelector('main h1:text("default/guarded-flag")', { timeout: T });
  await page.waitForSelector('main h2:text("History (1 version)")', { timeout: T }); // GraphQL sends the token too
  await page.click('#edit');
  await page.click('#save');
  const refused = page.locator('#edit-message .alert.bad');
  await refused.waitFor({ timeout: T });
  const said = await refused.textContent();
  expect(said.includes('Forbidden') && said.includes('User "vic" cannot update') && said.includes('signed in as vic'), `a clear refusal of the viewer's edit, got: ${said}`);
  expect(await refused.locator('a:text("Sign in with another token")').count() === 1, 'a way to sign in as someone else');
  await shot('viewer-edit-refused');
  // A viewer (get, no reveal) gets secret values redacted by the server:
  // the page says they are withheld rather than offering to show them, and
  // offers no edit that would write the marker over the secret.
  await visit(`#/instance/${G.token}`, G.url);
  await page.waitForSelector('#secrets-withheld', { timeout: T });
  expect((await text('#secrets-withheld')).includes('may not reveal') && (await text('#secrets-withheld')).includes('vic'), `the withheld secrets explained, got: ${await text('#secrets-withheld')}`);
  expect(await page.locator('#reveal').count() === 0 && await page.locator('#edit').count() === 0, 'no Show secrets and no Edit over a redacted value');
  expect(!(await text('main')).includes('tk-s3cr3t-value') && (await page.evaluate(() => JSON.stringify(sessionStorage) + location.href)).match(/tk-s3cr3t/) === null, 'the secret nowhere in the page, the URL or sessionStorage');
  // Sign out: the token is forgotten and the pages ask for one again.
  await page.click('#sign-out');
  await page.waitForSelector('main h1:text("Sign in")', { timeout: T });
  expect(await page.evaluate(() => sessionStorage.getItem('cairn-token')) === null, 'the token forgotten on sign-out');
  await visit('#/types', G.url);
  await page.waitForSelector('#signin-reason', { timeout: T });
  // A token the server no longer accepts (401): forgotten, and the user is told.
  await page.evaluate(() => { sessionStorage.setItem('cairn-token', 'revoked-token'); sessionStorage.setItem('cairn-user', 'vic'); });
  await visit('#/types', G.url);
  await page.waitForSelector('#signin-reason:has-text("did not accept your credentials")', { timeout: T });
  expect(await page.evaluate(() => sessionStorage.getItem('cairn-token')) === null, 'a refused token forgotten');
  expect((await text('header')).includes('Sign in'), 'the header no longer names a user');

  // A user whose roles are bound in one namespace (ed: cairn-editor in
  // team-a, no cluster-wide list): told what they may not list, they name
  // their namespace and list, follow, read and edit its instances through
  // the kinds' namespaced resources and GraphQL.
  await visit('#/instances', G.url);
  await page.waitForSelector('main h1:text("Sign in")', { timeout: T });
  await page.fill('#signin-token', G.editorToken);
  await page.click('#signin');
  await page.waitForSelector('#choose-namespace', { timeout: T });
  expect((await text('main .alert.bad')).includes('User "ed" cannot list resource "typeinstances"'), 'the refusal of a cluster-wide list named');
  await page.fill('#f-ns', 'team-a');
  await page.selectOption('#f-type', 'tokens.e2e.cairn.dev/v1');
  await page.click('form[role="search"] button[type="submit"]');
  await page.waitForSelector('main h1:text("Instances of Token in team-a")', { timeout: T });
  expect((await text('main table tbody')).includes('team-a/team-token'), 'the namespace\'s Token listed');
  await page.waitForSelector('#live.on', { timeout: T }); // a namespaced watch
  execFileSync(KUBECTL, ['--kubeconfig', G.kubeconfig, 'apply', '-f', '-'], { encoding: 'utf8',
    input: JSON.stringify({ apiVersion: 'e2e.cairn.dev/v1', kind: 'Token', metadata: { name: 'team-token-2', namespace: 'team-a' }, spec: { user: 'ci' } }) });
  await page.waitForSelector('main tbody tr:has-text("team-a/team-token-2")', { timeout: T });
  await shot('namespace-instances');
  await page.click('main a:text-is("team-a/team-token")');
  await page.waitForSelector('main h2:text("History (1 version)")', { timeout: T });
  expect(!(await text('main')).includes('tk-s3cr3t-value'), 'the secret key hidden (x-cairn-secret, read from the OpenAPI schema)');
  await page.click('#reveal');
  expect((await text('main pre[aria-label="Value"]')).includes('tk-s3cr3t-value'), 'the secret shown when asked');
  await page.click('#edit');
  await page.getByLabel('user', { exact: false }).first().fill('deploy-2');
  await page.click('#save');
  await page.waitForSelector('main h2:text("History (2 versions)")', { timeout: T });
  expect((await text('#diff')).includes('deploy-2'), 'the edit made through the Token resource, a new version');
  await shot('namespace-instance-edited');
  // An instance without a value: GraphQL answers its value with an error
  // (a non-null Any!), and the page still shows it and its history.
  await visit(`#/instance/${G.noValue}`, G.url);
  await page.waitForSelector('main h2:text("History (1 version)")', { timeout: T });
  expect((await text('main pre[aria-label="Value"]')).includes('(no value'), 'the missing value said');
  await page.click('main a:text("Tokens of team-a")');
  await page.waitForSelector('main h1:text("Instances of Token in team-a")', { timeout: T });
  await page.click('main a.button:text("Create")');
  await page.waitForSelector('main h1:text("Create a Token")', { timeout: T });
  expect(await page.inputValue('#c-ns') === 'team-a', 'the namespace kept for the create');
  await page.fill('#c-name', 'team-token-3');
  await page.getByLabel('user', { exact: false }).first().fill('web');
  await page.click('#create');
  await page.waitForSelector('main h1:text("team-a/team-token-3")', { timeout: T }); // created through the Token resource
  await page.click('#delete');
  await page.click('#confirm-delete');
  await page.waitForSelector('main h1:text("Instances of Token in team-a")', { timeout: T }); // deleted through it, with its preconditions
  expect(!(await text('main table tbody')).includes('team-token-3'), 'team-token-3 deleted');
  // An installation of team-a and its tree of children, each child read
  // through its kind.
  await visit('#/instances?ns=team-a&type=minimalgcps.gcp.stacks.cairn.dev/v1alpha1', G.url);
  await page.click('main a:text("team-a/team-infra")');
  await page.click('main a:text("Installation: tree of children")');
  await page.waitForSelector('#stack-tree li[data-child="team-infra-network"]', { timeout: T });
  expect((await text('#stack-tree')).includes('Ready=True'), 'the children\'s conditions in the tree');
  await shot('namespace-stack-tree');
  // Every kind of the namespace (GraphQL answers what ed may list), and a
  // cluster-wide page that says what ed may not do instead of signing out.
  await visit('#/instances?ns=team-a', G.url);
  await page.waitForSelector('#graphql-note', { timeout: T });
  const all = await text('main table tbody');
  expect(all.includes('team-a/team-token-2') && !all.includes('guarded-flag'), `the instances of team-a only, got: ${all}`);
  await visit('#/types', G.url);
  await page.waitForSelector('main h1:text("Not allowed")', { timeout: T });
  expect((await text('main')).includes('cannot list resource "types"') && (await text('#who')).includes('ed'), 'a refusal shown, still signed in');

  if (unpaged.length) problems.push(`lists of instances not paged by the server: ${unpaged.join(', ')}`);
  if (axeFindings.length) problems.push(`accessibility (axe-core, WCAG 2.1 AA):\n  ${axeFindings.join('\n  ')}`);
  if (problems.length) throw new Error(problems.join('\n'));
  console.log(`axe-core: no WCAG 2.1 AA violation on the ${step} pages checked (${(axeMillis / 1000).toFixed(1)}s); browser ${((performance.now() - started) / 1000).toFixed(1)}s`);
  console.log('PASS');
} catch (e) {
  if (SHOTS) try { await page.screenshot({ path: join(SHOTS, 'failure.png'), fullPage: true }); } catch {}
  console.error(`FAIL at step ${step + 1} on ${page.url()}: ${e.message}`);
  if (problems.length) console.error(problems.join('\n'));
  process.exitCode = 1;
} finally {
  await browser.close();
}
