// The web console in a real browser (Debian's chromium driven by playwright-core), against a
// running shadowd: every screen, found by role and label as a screen reader finds it. Run by
// test_console.py, which starts shadowd and passes:
//   CONSOLE_URL     the server's base URL
//   CONSOLE_TOKEN   an admin token ('' for an open server: sign-in is then skipped)
//   CONSOLE_APP_TOKEN  an app token (with CONSOLE_TOKEN)
//   CONSOLE_LIVE    'on' when live streams are served, else the API's refusal is expected
//   CONSOLE_DEAD_URL  a webhook URL where nothing listens (for dead letters)
//   CONSOLE_SCREENSHOTS  a folder for PNGs of the main screens ('' for none)
//   PLAYWRIGHT_MODULES  the node_modules holding playwright-core (scripts/playwright.sh)
// Prints one line per step and exits 1 if any failed.
import { createRequire } from 'node:module';
import path from 'node:path';

const env = process.env;
const { chromium } = createRequire(path.join(env.PLAYWRIGHT_MODULES, 'x'))('playwright-core');
const base = env.CONSOLE_URL;
const token = env.CONSOLE_TOKEN || '';
const WAIT = 20000; // a bound on liveness, not a timing assertion

// ---- the API, for the writes the test makes "elsewhere" -------------------------------------
async function call(method, url, body) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = await res.json();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}
const shadow = (thing, name = 'main') => `/v1/things/${encodeURIComponent(thing)}/shadows/${encodeURIComponent(name)}`;
async function eventually(check, what) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((r) => { setTimeout(r, 100); });
  }
}
function assert(condition, message) {
  if (!condition) throw new Error(message);
}

// ---- the browser ----------------------------------------------------------------------------
const browser = await chromium.launch({ executablePath: env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(WAIT);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
});
const foreign = [];
page.on('request', (r) => { if (!r.url().startsWith(base)) foreign.push(r.url()); });
const jobPosts = []; // what the console sent to POST /v1/jobs
page.on('request', (r) => { if (r.method() === 'POST' && r.url() === `${base}/v1/jobs`) jobPosts.push(r.postData()); });

const role = (r, name, opts = {}) => page.getByRole(r, { name, ...opts });
const visible = (locator) => locator.first().waitFor({ state: 'visible' });
const rows = () => page.locator('tbody tr').count();
const alertWith = (text) => page.getByRole('alert').filter({ hasText: text });
async function screenshot(name) {
  if (env.CONSOLE_SCREENSHOTS) await page.screenshot({ path: path.join(env.CONSOLE_SCREENSHOTS, `${name}.png`), fullPage: false });
}

const steps = [];
const step = (name, run) => steps.push({ name, run });
const things = Array.from({ length: 25 }, (_, i) => `plant-7/sensor-${String(i).padStart(2, '0')}`);
const stamp = Math.floor(Date.now() / 1000);
let beforeDesired = '';

step('the API is seeded', async () => {
  await call('POST', '/v1/batch/update', { operations: things.map((thing, i) => ({
    thing, name: 'main', section: 'reported',
    state: { temp: { value: 20 + (i % 3), ts: i === 0 ? stamp - 7200 : stamp }, fw: '1.2', climate: { fan: { on: i % 2 === 0 } } } })) });
  await call('POST', `${shadow('other-thing')}/reported`, { state: { temp: 5 } });
  await new Promise((r) => { setTimeout(r, 20); });
  beforeDesired = new Date().toISOString();
  await new Promise((r) => { setTimeout(r, 20); });
});

step(token ? 'sign in: a wrong token shows the API\'s message, the right one opens the fleet' : 'an open server needs no sign-in', async () => {
  await page.goto(`${base}/console/`);
  if (!token) {
    await visible(role('heading', 'Fleet'));
    assert(await page.getByLabel('Token').count() === 0, 'a Token field on an open server');
    return;
  }
  await page.getByLabel('Token').fill('not-the-token');
  await role('button', 'Sign in').click();
  await visible(alertWith('Sign-in failed').filter({ hasText: 'Bearer token' }));
  await page.getByLabel('Token').fill(token);
  await page.getByLabel('Token').press('Enter');
  await visible(role('heading', 'Fleet'));
  assert(await page.evaluate(() => sessionStorage.getItem('deviceshadow.token')) === token, 'token not in sessionStorage');
  assert(await page.evaluate(() => localStorage.length) === 0, 'something in localStorage');
  assert(!page.url().includes(token), 'the token is in the URL');
});

step('fleet: a thing prefix, with paging', async () => {
  await page.getByLabel('Filter').fill('plant-7/');
  await role('button', 'Search').click();
  // The page showed every shadow before: wait for the search's answer, not that page.
  await eventually(async () => await role('link', 'other-thing').count() === 0 && await rows() === 20, 'page 1 of plant-7/');
  await visible(role('cell', 'plant-7/sensor-00'));
  await screenshot('fleet');
  await role('button', 'Next page').click();
  await visible(page.getByRole('table').filter({ hasText: 'Shadows, page 2' }));
  assert(await rows() === 5, 'page 2 does not hold 5 rows');
  assert(await role('button', 'Next page').isDisabled(), 'a next page after the last');
  await role('button', 'Previous page').click();
  await visible(page.getByRole('table').filter({ hasText: 'Shadows, page 1' }));
});

step('fleet: a filter expression, and a bad one shows the API\'s error', async () => {
  await page.getByLabel('Filter').fill('and(eq(reported/temp,21),like(thing,"plant-7/*"))');
  await role('button', 'Search').click();
  await visible(page.getByRole('table').filter({ hasText: 'Shadows, page 1' }));
  await eventually(async () => await rows() === 8, '8 shadows with temp 21');
  await page.getByLabel('Filter').fill('eq(thing');
  await role('button', 'Search').click();
  await visible(alertWith('invalid filter at offset'));
});

step('fleet: keyboard only, a row opens the shadow', async () => {
  await page.getByLabel('Filter').fill('plant-7/sensor-0');
  await page.getByLabel('Filter').press('Enter');
  await visible(role('link', 'plant-7/sensor-00'));
  await role('link', 'plant-7/sensor-00').focus();
  await page.keyboard.press('Enter');
  await visible(role('heading', 'plant-7/sensor-00 / main'));
});

step('shadow: Reported, Desired and Delta with per-leaf change times', async () => {
  for (const name of ['Reported', 'Desired', 'Delta']) await visible(role('heading', name, { exact: true }));
  const reported = page.getByRole('region', { name: 'Reported' });
  await visible(reported.locator('li', { hasText: 'temp' }).locator('time'));
  assert(/changed \d{4}-\d\d-\d\d/.test(await reported.locator('li.leaf', { hasText: 'fw' }).innerText()), 'no change time on fw');
  await visible(reported.locator('li.leaf', { hasText: 'on' }));
  await visible(reported.getByText('Version 1'));
  // temp was measured two hours ago (its own ts): old; fw was just written: not.
  const temp = reported.locator('li.leaf', { hasText: 'temp' });
  await visible(temp.locator('.badge', { hasText: 'old' }));
  assert((await temp.innerText()).includes('measured'), 'no measured time on temp');
  assert(await reported.locator('li.leaf', { hasText: 'fw' }).locator('.badge').count() === 0, 'fw marked old');
});

step(env.CONSOLE_LIVE === 'on' ? 'shadow: a write made elsewhere appears live' : 'shadow: live updates say why they are unavailable', async () => {
  const status = page.getByRole('status').filter({ hasText: 'Live updates' });
  if (env.CONSOLE_LIVE !== 'on') {
    await visible(status.filter({ hasText: 'unavailable' }));
    return;
  }
  await visible(status.filter({ hasText: 'Live updates: on' }));
  await call('POST', `${shadow('plant-7/sensor-00')}/reported`, { state: { humidity: 55 } });
  const reported = page.getByRole('region', { name: 'Reported' });
  await visible(reported.locator('li.leaf', { hasText: 'humidity' }).filter({ hasText: '55' }));
  await visible(reported.getByText('Version 2'));
});

step('shadow: Edit desired and Save', async () => {
  await role('button', 'Edit desired').click();
  await page.getByLabel('Desired state').fill('{"sp": 22, "mode": "eco"}');
  await role('button', 'Save').click();
  await visible(page.getByRole('region', { name: 'Desired' }).locator('li.leaf', { hasText: 'mode' }));
  await visible(page.getByRole('region', { name: 'Delta' }).locator('li.leaf', { hasText: 'sp' }).filter({ hasText: '22' }));
  const now = await call('GET', shadow('plant-7/sensor-00'));
  assert(now.desired.state.sp === 22 && now.desired.state.mode === 'eco', `desired is ${JSON.stringify(now.desired)}`);
  await screenshot('shadow');
});

step('shadow: a write elsewhere while editing is a conflict; Reload shows it, and Save then works', async () => {
  await role('button', 'Edit desired').click();
  await page.getByLabel('Desired state').fill('{"sp": 23}');
  await call('POST', `${shadow('plant-7/sensor-00')}/desired`, { state: { sp: 30 } });
  if (env.CONSOLE_LIVE === 'on') await visible(page.getByRole('region', { name: 'Desired' }).locator('li.leaf', { hasText: '30' }));
  await role('button', 'Save').click();
  await visible(alertWith('conflict'));
  assert((await call('GET', shadow('plant-7/sensor-00'))).desired.state.sp === 30, 'the conflicting save wrote');
  await role('button', 'Reload').click();
  await eventually(async () => (await page.getByLabel('Desired state').inputValue()).includes('30'), 'the editor shows sp 30');
  await page.getByLabel('Desired state').fill('{"sp": 24}');
  await role('button', 'Save').click();
  await visible(page.getByRole('region', { name: 'Desired' }).locator('li.leaf', { hasText: 'sp' }).filter({ hasText: '24' }));
  const now = await call('GET', shadow('plant-7/sensor-00'));
  assert(now.desired.state.sp === 24 && !('mode' in now.desired.state), `desired is ${JSON.stringify(now.desired.state)}`);
});

step('shadow: Save writes the text as the whole desired state; a stale timestamped value is said', async () => {
  const thing = 'plant-7/sensor-02';
  await call('POST', `${shadow(thing)}/desired`, { state: { sp: 20, list: [{ a: 1, x: 1 }, { b: 2 }], t: { value: 1, unit: 'C', ts: stamp } } });
  await page.evaluate((hash) => { location.hash = hash; }, `#/shadow/${encodeURIComponent(thing)}/main`);
  await visible(page.getByRole('region', { name: 'Desired' }).locator('li', { hasText: 'list' }));
  await role('button', 'Edit desired').click();
  await page.getByLabel('Desired state').fill(JSON.stringify({ sp: 24, list: [{ a: 1 }], t: { value: 1, ts: stamp + 1 } }));
  await role('button', 'Save').click();
  await eventually(async () => {
    const d = (await call('GET', shadow(thing))).desired.state;
    // Compared member by member: the order of members may differ by store.
    return Object.keys(d).length === 3 && d.sp === 24 && JSON.stringify(d.list) === '[{"a":1}]' &&
      Object.keys(d.t).length === 2 && d.t.value === 1 && d.t.ts === stamp + 1;
  }, 'desired is the text saved (an array element and a member of a timestamped value removed)');
  await visible(page.getByRole('region', { name: 'Desired' }).locator('li.leaf', { hasText: 'sp' }).filter({ hasText: '24' }));
  await role('button', 'Edit desired').click();
  await page.getByLabel('Desired state').fill(JSON.stringify({ sp: 25, list: [{ a: 1 }], t: { value: 5, ts: stamp - 100 } }));
  await role('button', 'Save').click();
  await visible(alertWith('/t'));
  const d = (await call('GET', shadow(thing))).desired.state;
  assert(d.sp === 25 && d.t.value === 1, `desired is ${JSON.stringify(d)}`);
});

step('history: events newest first, As of, and a diff of two events', async () => {
  await role('link', 'History', { exact: true }).click();
  await visible(role('heading', 'History'));
  await page.getByLabel('Thing').fill('plant-7/sensor-00');
  await role('button', 'Open').click();
  await visible(role('heading', 'History of plant-7/sensor-00 / main'));
  const events = page.locator('ol.events > li');
  await eventually(async () => await events.count() >= 4, 'four events');
  assert((await events.first().innerText()).startsWith('desire'), 'the newest event is not the last desire');
  assert((await events.last().innerText()).startsWith('report'), 'the oldest event is not the first report');
  await page.getByLabel('As of').fill(beforeDesired);
  await role('button', 'Show state').click();
  await visible(role('heading', /^State as of/));
  const then = page.locator('.as-of');
  await visible(then.getByRole('region', { name: 'Reported' }).locator('li.leaf', { hasText: 'fw' }));
  await visible(then.getByRole('region', { name: 'Desired' }).getByText('(empty)'));
  await screenshot('history');
  await events.first().getByRole('checkbox').check();
  await events.last().getByRole('checkbox').check();
  await role('button', 'Compare').click();
  await visible(role('heading', 'Difference'));
  const diff = page.getByRole('table').filter({ hasText: /^From/ });
  await visible(diff.getByRole('row').filter({ hasText: '/sp' }).filter({ hasText: '24' }));
  await page.getByLabel('As of').fill('2999-01-01T00:00:00Z');
  await role('button', 'Show state').click();
  await visible(alertWith('invalid_request'));
});

step('registrations: status, dead letters, Redrive and Delete', async () => {
  await call('PUT', '/v1/registrations/dead-hook', { target: { type: 'webhook', url: env.CONSOLE_DEAD_URL, timeoutMs: 1000 }, maxAttempts: 1 });
  await call('POST', `${shadow('plant-7/sensor-01')}/reported`, { state: { temp: 99 } });
  await eventually(async () => (await call('GET', '/v1/registrations/dead-hook/dead-letters')).deadLetters.length === 1, 'a dead letter');
  await role('link', 'Registrations', { exact: true }).click();
  const row = page.getByRole('row').filter({ hasText: 'dead-hook' });
  await visible(row);
  assert((await row.innerText()).includes('webhook'), 'no target type');
  await row.getByRole('link', { name: 'dead-hook' }).click();
  await visible(role('heading', 'Registration dead-hook'));
  const letters = page.getByRole('table').filter({ hasText: 'Dead letters' });
  await visible(letters.getByRole('row').filter({ hasText: 'plant-7/sensor-01#main' }));
  await letters.getByRole('button', { name: 'Redrive' }).first().click();
  await visible(page.getByRole('status').filter({ hasText: 'Redrive queued 1 dead letter' }));
  // Redriven to the same closed port, the event fails again and is a dead letter again.
  await eventually(async () => (await call('GET', '/v1/registrations/dead-hook')).status.failed >= 2, 'a second failed attempt');
  await eventually(async () => (await call('GET', '/v1/registrations/dead-hook/dead-letters')).deadLetters.length === 1, 'the dead letter back');
  await page.reload();
  await letters.getByRole('button', { name: 'Delete' }).first().click();
  await visible(page.getByRole('status').filter({ hasText: 'Deleted 1 dead letter' }));
  await visible(page.getByText('No dead letters.'));
  assert((await call('GET', '/v1/registrations/dead-hook/dead-letters')).deadLetters.length === 0, 'the dead letter is still there');
  await call('DELETE', '/v1/registrations/dead-hook');
});

const valves = Array.from({ length: 4 }, (_, i) => `line-4/valve-${i}`);
let jobId = '';

step('jobs: the Fleet screen\'s filter; a bad JSON is shown and nothing sent; Dry run counts the targets', async () => {
  // line-40/ shares the prefix's first characters but not the prefix: never a target.
  await call('POST', '/v1/batch/update', { operations: [...valves, 'line-40/valve-0'].map((thing) => ({
    thing, name: 'main', section: 'reported', state: { open: false } })) });
  await role('link', 'Fleet', { exact: true }).click();
  await page.getByLabel('Filter').fill('line-4/');
  await role('button', 'Search').click();
  await eventually(async () => await role('link', 'other-thing').count() === 0 && await rows() === 4, 'the 4 valves of line-4/');
  const href = await role('link', 'Jobs', { exact: true }).getAttribute('href');
  assert(href === '#/jobs?filter=line-4%2F', `the Jobs link does not carry the fleet filter: ${href}`);
  await role('link', 'Bulk job on these shadows').click();
  await visible(role('heading', 'Jobs'));
  await visible(page.locator('form code', { hasText: 'like(thing,"line-4/*")' }));
  await visible(page.getByText('No jobs yet.'));
  await page.getByLabel('Job desired state').fill('{"open": tru');
  await role('button', 'Dry run').click();
  await visible(alertWith('not valid JSON'));
  await page.getByLabel('Job desired state').fill('["open"]');
  await role('button', 'Start job').click();
  await visible(alertWith('must be a JSON object'));
  assert(jobPosts.length === 0, `a bad JSON was sent: ${jobPosts.join(', ')}`);
  await page.getByLabel('Job desired state').fill('{"open": true, "level": 3}');
  await role('button', 'Dry run').click();
  await visible(page.getByRole('status').filter({ hasText: 'Dry run: 4 shadows would be written' }));
  const sample = page.getByRole('list', { name: 'Targets of the dry run' });
  assert(await sample.getByRole('listitem').count() === 4, 'the sample does not list the 4 valves');
  for (const thing of valves) await visible(sample.getByRole('link', { name: `${thing} / main` }));
  for (const thing of [...valves, 'line-40/valve-0']) {
    assert((await call('GET', shadow(thing))).desired.version === 0, `the dry run wrote ${thing}`);
  }
});

step('jobs: Start job, its progress until it succeeded, and every target really written', async () => {
  await role('button', 'Start job').click();
  const line = page.getByRole('status').filter({ hasText: /^Job \S+ succeeded: 4 of 4 targets done/ });
  await visible(line);
  jobId = (await line.first().innerText()).split(' ')[1];
  const cells = await page.getByRole('table', { name: `Progress of job ${jobId}` }).locator('tbody td').allInnerTexts();
  assert(cells.join(' ') === 'succeeded 4 4 0 0', `progress cells: ${cells.join(' ')}`);
  assert(!(await role('button', 'Cancel').isVisible()), 'Cancel offered for an ended job');
  await visible(page.locator('.job .meta', { hasText: ', desired {"open":true,"level":3}, started' }));
  for (const thing of valves) {
    const { desired } = await call('GET', shadow(thing));
    assert(desired.state.open === true && desired.state.level === 3 && desired.clientToken === `job:${jobId}`,
      `${thing}'s desired is ${JSON.stringify(desired)}`);
  }
  assert((await call('GET', shadow('line-40/valve-0'))).desired.version === 0, 'line-40/valve-0 was written');
  const row = page.getByRole('table', { name: 'Jobs, newest first' }).getByRole('row').filter({ hasText: jobId });
  await visible(row.filter({ hasText: '4 succeeded, 0 failed, 0 skipped' }));
  await screenshot('jobs');
  await row.getByRole('link', { name: jobId }).click();
  await visible(role('heading', `Job ${jobId}`));
  await visible(page.getByRole('status').filter({ hasText: `Job ${jobId} succeeded` }));
});

step('jobs: a job that deletes the desired state: the text is not needed, Dry run, every target\'s desired deleted', async () => {
  await page.goto(`${base}/console/#/jobs?filter=line-4%2F`);
  await page.getByLabel('Delete the desired state').check();
  assert(!(await page.getByLabel('Job desired state').isVisible()), 'the desired state is still shown for a delete');
  const sent = jobPosts.length;
  await role('button', 'Dry run').click();
  await visible(page.getByRole('status').filter({ hasText: 'Dry run: 4 shadows would have their desired state deleted' }));
  for (const thing of valves) assert('open' in (await call('GET', shadow(thing))).desired.state, `the dry run deleted ${thing}'s desired`);
  await role('button', 'Start job').click();
  const line = page.getByRole('status').filter({ hasText: /^Job \S+ succeeded: 4 of 4 targets done/ });
  await visible(line);
  const id = (await line.first().innerText()).split(' ')[1];
  assert(id !== jobId, 'the page still shows the first job');
  await visible(page.locator('.job .meta', { hasText: ', deletes the desired state, started' }));
  const bodies = jobPosts.slice(sent).map((b) => JSON.parse(b));
  assert(bodies.length === 2 && bodies.every((b) => b.delete === 'desired' && !('desired' in b)), `sent ${JSON.stringify(bodies)}`);
  for (const thing of valves) {
    const { desired } = await call('GET', shadow(thing));
    assert(!('open' in (desired.state ?? {})) && !('level' in (desired.state ?? {})), `${thing}'s desired is ${JSON.stringify(desired)}`);
  }
  await page.getByLabel('Write a desired state').check();
  assert(await page.getByLabel('Job desired state').isEnabled(), 'the desired state stays hidden or disabled for a write');
});

step('jobs: an invalid filter shows the API\'s message; a failed target is listed; a running job is cancelled', async () => {
  await page.goto(`${base}/console/#/jobs?filter=${encodeURIComponent('eq(thing')}`);
  await page.getByLabel('Job desired state').fill('{"open": false}');
  await role('button', 'Start job').click();
  await visible(alertWith('Starting the job failed').filter({ hasText: 'invalid filter at offset' }));
  // A target whose desired state the job's value would make larger than the server takes fails.
  await call('POST', `${shadow('line-5/full')}/desired`, { state: { pad: 'x'.repeat(65000) } });
  await page.goto(`${base}/console/#/jobs?filter=line-5%2F`);
  await page.getByLabel('Job desired state').fill(JSON.stringify({ more: 'y'.repeat(1000) }));
  await role('button', 'Start job').click();
  await visible(page.getByRole('status').filter({ hasText: /^Job \S+ failed: 1 of 1 targets done/ }));
  const errors = page.getByRole('table', { name: 'First errors (1 of 1 failed)' });
  await visible(errors.getByRole('row').filter({ hasText: 'line-5/full / main' }).filter({ hasText: 'too_large' }));
  assert(!('more' in (await call('GET', shadow('line-5/full'))).desired.state), 'the failed target was written');
  // Paced to one target every ten seconds, the job runs until cancelled.
  await page.goto(`${base}/console/#/jobs?filter=plant-7%2F`);
  await page.getByLabel('Job desired state').fill('{"sp": 1}');
  await page.getByLabel('Targets per second').fill('fast');
  const sent = jobPosts.length;
  await role('button', 'Start job').click();
  await visible(alertWith('Targets per second').filter({ hasText: 'is not a number' }));
  assert(jobPosts.length === sent, 'a rate that is not a number was sent');
  await page.getByLabel('Targets per second').fill('0');
  await role('button', 'Start job').click();
  await visible(alertWith('Starting the job failed').filter({ hasText: 'ratePerSecond must be between' }));
  await page.getByLabel('Targets per second').fill('0.1');
  await role('button', 'Start job').click();
  const running = page.getByRole('status').filter({ hasText: /^Job \S+ running/ });
  await visible(running);
  const slow = (await running.first().innerText()).split(' ')[1];
  await role('button', 'Cancel').click();
  await visible(page.getByRole('status').filter({ hasText: `Job ${slow} cancelled` }));
  const cancelled = await call('GET', `/v1/jobs/${slow}`);
  assert(cancelled.status === 'cancelled' && cancelled.ratePerSecond === 0.1, `the job is ${JSON.stringify(cancelled)}`);
  assert(!(await role('button', 'Cancel').isVisible()), 'Cancel still offered');
  await page.goto(`${base}/console/#/jobs/0000000000000000-00000000`);
  await visible(alertWith('Reading the job failed').filter({ hasText: '404 not_found' }));
});

step('API errors are shown with their message', async () => {
  await page.goto(`${base}/console/#/history/no-such-thing/main`);
  await visible(page.getByText('No history for this shadow.'));
  await page.getByLabel('As of').fill('2020-01-01T00:00:00Z');
  await page.getByLabel('As of').press('Enter');
  await visible(alertWith('Reading the state failed').filter({ hasText: 'not_found' }));
  await page.goto(`${base}/console/#/registrations/no-such-registration`);
  await visible(alertWith('Reading the registration failed').filter({ hasText: '404 not_found' }));
});

step('Sign out forgets the token; an app token is refused the registrations with the API\'s message', async () => {
  if (!token) {
    assert(!(await role('button', 'Sign out').isVisible()), 'Sign out on an open server');
    return;
  }
  await role('button', 'Sign out').click();
  await visible(page.getByLabel('Token'));
  assert(await page.evaluate(() => sessionStorage.length) === 0, 'the token is still in sessionStorage');
  await page.getByLabel('Token').fill(env.CONSOLE_APP_TOKEN);
  await role('button', 'Sign in').click();
  await visible(role('heading', 'Registration no-such-registration'));
  await role('link', 'Registrations', { exact: true }).click();
  await visible(alertWith('Reading the registrations failed').filter({ hasText: 'forbidden' }));
  await role('link', 'Fleet', { exact: true }).click();
  await page.getByLabel('Filter').fill('other-');
  await role('button', 'Search').click();
  await visible(role('link', 'other-thing'));
});

step('a 390 px wide screen: nothing wider than the screen, every screen usable', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  const hashes = ['#/fleet?filter=plant-7%2F', '#/shadow/plant-7%2Fsensor-00/main', '#/history/plant-7%2Fsensor-00/main', '#/registrations',
    '#/jobs?filter=line-4%2F', ...(jobId ? [`#/jobs/${jobId}`] : [])];
  for (const hash of hashes) {
    await page.goto(`${base}/console/${hash}`);
    await visible(page.locator('main h1'));
    await page.waitForFunction(() => !document.querySelector('[aria-busy]'));
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert(width <= 390, `${hash} is ${width} px wide`);
    for (const name of ['Fleet', 'History', 'Registrations', 'Jobs']) assert(await role('link', name, { exact: true }).isVisible(), `${name} hidden`);
  }
  await page.goto(`${base}/console/#/shadow/plant-7%2Fsensor-00/main`);
  await visible(role('heading', 'Delta', { exact: true }));
  await screenshot('shadow-390px');
  await page.setViewportSize({ width: 1280, height: 900 });
});

step('nothing was loaded from another origin and nothing broke the page or its policy', async () => {
  assert(foreign.length === 0, `requests to other origins: ${foreign.join(', ')}`);
  assert(pageErrors.length === 0, pageErrors.join('\n'));
});

let failed = 0;
for (const { name, run } of steps) {
  try {
    await run();
    console.log(`ok - ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').slice(0, 6).join('\n  ')}`);
    if (env.CONSOLE_SCREENSHOTS_ON_FAILURE) await page.screenshot({ path: path.join(env.CONSOLE_SCREENSHOTS_ON_FAILURE, `failed-${steps.indexOf(steps.find((s) => s.name === name))}.png`) });
  }
}
await browser.close();
console.log(`${steps.length - failed} of ${steps.length} steps passed`);
process.exit(failed ? 1 : 0);
