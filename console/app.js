// The deviceshadow web console: plain modern JavaScript, no library, no build step
// (docs/console.md). Everything it shows comes from API v1, called on this page's own origin
// with the token kept in this tab's sessionStorage only.

const TOKEN_KEY = 'deviceshadow.token';
const PAGE_SIZE = 20;
const OLD_AFTER_MS = 60 * 60 * 1000; // a leaf unchanged for an hour is marked "old"
const view = document.getElementById('view');
const signOut = document.getElementById('sign-out');
let page = new AbortController(); // aborted when the screen changes: stops its live stream
let fleetFilter = '';              // the fleet screen's current filter (for the Jobs screen)
let lastShadow = null;             // the shadow last opened: {thing, name}

// ---- API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body || {};
  }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function errorOf(res) {
  const text = await res.text().catch(() => '');
  let error = {};
  try { error = JSON.parse(text).error || {}; } catch { /* not the API's error body */ }
  return new ApiError(res.status, error.code || `http_${res.status}`, error.message || text || res.statusText, error);
}

// Calls API v1; resolves with the JSON answer, rejects with an ApiError carrying the API's message.
async function api(method, path, body) {
  const headers = authHeaders();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: page.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `the server could not be reached (${e.message})`);
  }
  if (!res.ok) {
    const error = await errorOf(res);
    if (res.status === 401) return signInNeeded(error);
    throw error;
  }
  return res.status === 204 ? null : res.json();
}

const enc = encodeURIComponent;
const shadowPath = (thing, name) => `/v1/things/${enc(thing)}/shadows/${enc(name)}`;
const query = (params) => new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== '')).toString();

// ---- DOM helpers -------------------------------------------------------------------------

// h('p', {class: 'x', onclick: f}, 'text', child…): an element; text is never parsed as HTML.
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'value') el.value = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== undefined && child !== null && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function show(...children) {
  view.replaceChildren(...children.filter((c) => c !== undefined && c !== null && c !== false));
  view.focus({ preventScroll: true });
}

const loading = (what = 'Loading…') => h('p', { class: 'loading', role: 'status' }, what);

// An API error (or any failure) as a visible alert with the server's message.
function errorBox(error, doing) {
  const where = error.status ? ` (${error.status} ${error.code})` : '';
  return h('p', { class: 'error', role: 'alert' }, `${doing ? `${doing}: ` : ''}${error.message}${where}`);
}

// Runs `load` into `box`: a loading state first (unless `quiet`: a refresh keeps what is
// shown meanwhile), then what it returns, or its error.
async function fill(box, load, doing, quiet = false) {
  box.setAttribute('aria-busy', 'true');
  if (!quiet) box.replaceChildren(loading());
  try {
    box.replaceChildren(...[await load()].flat());
  } catch (e) {
    if (e.name !== 'AbortError') box.replaceChildren(errorBox(e, doing));
  } finally {
    box.removeAttribute('aria-busy');
  }
}

function when(iso) {
  if (!iso) return '—';
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return String(iso); // past what a JavaScript date holds
  return `${t.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')} (${ago(t)})`;
}

function ago(t) {
  const s = Math.round((Date.now() - t.getTime()) / 1000);
  if (s < 60) return s <= 1 ? 'just now' : `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

const json = (v) => JSON.stringify(v);
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// The text of a JSON editor as a state (an object); throws with the reason when it is not one.
function stateOf(text) {
  const state = JSON.parse(text);
  if (!isObject(state)) throw new Error('it must be a JSON object');
  return state;
}

// ---- Sign in -----------------------------------------------------------------------------

let returnTo = '#/fleet';

function signInNeeded(error) {
  returnTo = location.hash.startsWith('#/signin') ? returnTo : location.hash || '#/fleet';
  const hadToken = Boolean(sessionStorage.getItem(TOKEN_KEY));
  sessionStorage.removeItem(TOKEN_KEY);
  signInPage(hadToken ? error : null);
  throw Object.assign(new Error('sign-in needed'), { name: 'AbortError' });
}

function signInPage(error) {
  page.abort();
  page = new AbortController();
  signOut.hidden = true;
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
  const message = h('div', {}, error ? errorBox(error, 'Sign-in failed') : null);
  const form = h('form', { class: 'card', onsubmit: async (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    message.replaceChildren(loading('Signing in…'));
    try {
      await api('GET', '/v1/things?limit=1');
      if (location.hash === returnTo) route(); else location.hash = returnTo;
    } catch (err) {
      if (err.name === 'AbortError') return;
      sessionStorage.removeItem(TOKEN_KEY); // refused (a device's token may not list things): not kept
      message.replaceChildren(errorBox(err, 'Sign-in failed'));
    }
  } },
  h('label', { for: 'token' }, 'Token'), input, h('button', { type: 'submit' }, 'Sign in'), message);
  show(h('h1', {}, 'Sign in'), h('p', {}, 'This server needs an API token. It is kept in this browser tab only.'), form);
  input.focus();
}

signOut.addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  returnTo = location.hash || '#/fleet';
  signInPage(null);
});

// ---- Fleet -------------------------------------------------------------------------------

const FILTER_START = /^\s*(and|or|not|eq|ne|gt|ge|lt|le|in|like|exists)\s*\(/;

// The text of the Filter field as a fleet-query filter: an expression as it is; any other text
// is a thing prefix (a `like` pattern, or a range when the prefix holds `*` or `?`).
function filterOf(text) {
  if (!text || FILTER_START.test(text)) return text;
  if (!/[*?]/.test(text)) return `like(thing,${json(`${text}*`)})`;
  return `and(ge(thing,${json(text)}),lt(thing,${json(`${text}\u{10FFFF}`)}))`;
}

// The Jobs screen over the shadows `filter` (the Fleet field's text) selects.
const jobsHref = (filter) => `#/jobs${filter ? `?${query({ filter })}` : ''}`;

function fleetPage(params) {
  fleetFilter = params.get('filter') || '';
  document.querySelector('nav a[data-nav="jobs"]').setAttribute('href', jobsHref(fleetFilter));
  const input = h('input', { id: 'filter', type: 'search', value: fleetFilter, spellcheck: 'false',
    'aria-describedby': 'filter-help' });
  const results = h('div', { class: 'results' });
  const form = h('form', { role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const next = `#/fleet?${query({ filter: input.value.trim() })}`;
    if (location.hash === next) route(); else location.hash = next; // the same search again: its first page anew
  } }, h('label', { for: 'filter' }, 'Filter'), input, h('button', { type: 'submit' }, 'Search'));
  show(h('h1', {}, 'Fleet'), form,
    h('p', { id: 'filter-help', class: 'hint' }, 'A filter such as ', h('code', {}, 'lt(reported/temp@ts,time:now-PT15M)'),
      ', or the start of a thing\'s name. Empty: every shadow.'),
    fleetFilter ? h('p', { class: 'links' }, h('a', { href: jobsHref(fleetFilter) }, 'Bulk job on these shadows')) : null,
    results);
  const cursors = [''];
  const load = (at) => fill(results, async () => {
    const answer = await api('GET', `/v1/shadows?${query({
      filter: filterOf(fleetFilter), fields: '_reportedVersion,_desiredVersion,_modified,_pending',
      limit: PAGE_SIZE, cursor: cursors[at], allowScan: fleetFilter ? undefined : 'true' })}`);
    cursors[at + 1] = answer.cursor;
    return fleetTable(answer.shadows, at, Boolean(answer.cursor), load);
  }, 'Search failed');
  load(0);
}

function fleetTable(shadows, at, more, load) {
  if (!shadows.length && at === 0) return h('p', { role: 'status' }, 'No shadow matches.');
  const open = (s) => `#/shadow/${enc(s.thing)}/${enc(s.name)}`;
  const rows = shadows.map((s) => h('tr', { onclick: (e) => { if (e.target.tagName !== 'A') location.hash = open(s); } },
    h('td', {}, h('a', { href: open(s) }, s.thing)), h('td', {}, s.name),
    h('td', { class: 'num' }, s._reportedVersion ?? 0), h('td', { class: 'num' }, s._desiredVersion ?? 0),
    h('td', {}, when(s._modified)), h('td', {}, s._pending ? 'yes' : 'no')));
  return [
    h('table', {}, h('caption', {}, `Shadows, page ${at + 1}`),
      h('thead', {}, h('tr', {}, ['Thing', 'Name', 'Reported version', 'Desired version', 'Last change', 'Pending']
        .map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows)),
    h('div', { class: 'pager' },
      h('button', { type: 'button', disabled: at === 0, onclick: () => load(at - 1) }, 'Previous page'),
      h('button', { type: 'button', disabled: !more, onclick: () => load(at + 1) }, 'Next page')),
  ];
}

// ---- Shadow ------------------------------------------------------------------------------

// A state as a tree: every leaf with its value and, from `times` (the section's metadata), when
// it last changed; leaves older than OLD_AFTER_MS are marked old, ones changed since `seen` new.
function tree(state, times, seen) {
  const entries = Object.entries(state || {});
  if (!entries.length) return h('p', { class: 'empty' }, '(empty)');
  return h('ul', { class: 'tree' }, entries.map(([key, value]) => {
    const time = times && times[key];
    if (isObject(value) && Object.keys(value).length && typeof time !== 'string') {
      return h('li', {}, h('span', { class: 'key' }, key), tree(value, time, seen));
    }
    const changed = typeof time === 'string' ? new Date(time) : null;
    const measured = measuredAt(value);
    const old = [changed, measured].some((t) => t && Date.now() - t.getTime() > OLD_AFTER_MS);
    const fresh = changed && seen && changed > seen;
    return h('li', { class: ['leaf', old && 'old', fresh && 'fresh'].filter(Boolean).join(' ') },
      h('span', { class: 'key' }, key), ' ', h('code', {}, json(value)),
      old ? h('span', { class: 'badge' }, 'old') : null,
      changed ? h('time', { datetime: time, title: time }, ` changed ${when(time)}`) : null,
      measured ? h('time', { datetime: measured.toISOString() }, ` measured ${when(measured.toISOString())}`) : null);
  }));
}

// A timestamped value's own time (its `ts` or `timestamp` member, the server's default keys):
// an RFC 3339 string, or epoch seconds, milliseconds, microseconds or nanoseconds by magnitude.
function measuredAt(value) {
  if (!isObject(value)) return null;
  const ts = value.ts ?? value.timestamp;
  if (typeof ts === 'string') return Number.isNaN(Date.parse(ts)) ? null : new Date(ts);
  if (typeof ts !== 'number') return null;
  const abs = Math.abs(ts);
  const ms = Number.isInteger(ts) ? (abs < 1e11 ? ts * 1000 : abs < 1e14 ? ts : abs < 1e17 ? ts / 1e3 : ts / 1e6) : ts * 1000;
  const t = new Date(ms);
  return Number.isNaN(t.getTime()) ? null : t; // past what a JavaScript date holds: not shown
}

function sectionMeta(section) {
  return h('p', { class: 'meta' }, `Version ${section.version}`, section.timestamp ? ` · last write ${when(section.timestamp)}` : '');
}

// The shadow as GET …?metadata=true answers it (as of now, or as of a past moment).
function shadowSections(shadow, seen) {
  return [
    h('section', { 'aria-labelledby': 'h-reported' }, h('h2', { id: 'h-reported' }, 'Reported'),
      sectionMeta(shadow.reported), tree(shadow.reported.state, shadow.reported.metadata, seen)),
    h('section', { 'aria-labelledby': 'h-desired' }, h('h2', { id: 'h-desired' }, 'Desired'),
      sectionMeta(shadow.desired), tree(shadow.desired.state, shadow.desired.metadata, seen)),
    h('section', { 'aria-labelledby': 'h-delta' }, h('h2', { id: 'h-delta' }, 'Delta'),
      tree(shadow.delta, shadow.desired.metadata, seen)),
  ];
}

function shadowPage(thing, name) {
  lastShadow = { thing, name };
  const path = shadowPath(thing, name);
  const live = h('p', { class: 'live', role: 'status' }, 'Live updates: connecting…');
  const body = h('div', { class: 'sections' });
  const editorBox = h('div', { class: 'editor' });
  const editButton = h('button', { type: 'button' }, 'Edit desired');
  const notice = h('div', {}); // what the last save left unsaved
  let shadow = null;
  let seen = null;

  const load = (quiet) => fill(body, async () => {
    const next = await api('GET', `${path}?metadata=true`).catch((e) => {
      if (e.status === 404) return null;
      throw e;
    });
    seen = shadow ? new Date(Math.max(...['reported', 'desired'].map((s) => Date.parse(shadow[s].timestamp || 0)))) : null;
    shadow = next;
    editButton.disabled = !shadow;
    return shadow ? shadowSections(shadow, seen) : h('p', { role: 'status' }, 'This shadow does not exist (or was deleted).');
  }, 'Reading the shadow failed', quiet);

  // A live event re-reads the shadow; events arriving during a read cause one more read.
  let reading = null;
  let again = false;
  const refresh = async () => {
    if (reading) { again = true; return; }
    do { again = false; reading = load(true); await reading; } while (again && !page.signal.aborted);
    reading = null;
  };

  editButton.addEventListener('click', () => openEditor());
  function openEditor() {
    const pinned = shadow.desired.version;
    const base = shadow.desired.state;
    const area = h('textarea', { id: 'desired-state', rows: 12, spellcheck: 'false',
      value: JSON.stringify(base, null, 2) });
    const message = h('div', {});
    const save = async () => {
      let state;
      try {
        state = stateOf(area.value);
      } catch (e) {
        message.replaceChildren(errorBox(e, 'The desired state is not valid JSON'));
        return;
      }
      message.replaceChildren(loading('Saving…'));
      try {
        // The text is the whole desired state (client_is_master): what it leaves out is removed,
        // array elements and members of timestamped values too.
        const answer = await api('POST', `${path}/desired`, { state, version: pinned, mode: 'client_is_master' });
        editorBox.replaceChildren();
        editButton.hidden = false;
        const stale = answer?.stale || [];
        notice.replaceChildren(stale.length ? h('div', { class: 'error', role: 'alert' },
          h('p', {}, `Not saved: ${stale.join(', ')}. A timestamped value is kept when the stored one is as new or newer (its ts); the rest was saved.`)) : '');
        refresh();
      } catch (e) {
        if (e.name === 'AbortError') return;
        if (e.code !== 'version_conflict') return message.replaceChildren(errorBox(e, 'Saving failed'));
        const now = e.body.current_version;
        message.replaceChildren(h('div', { class: 'error', role: 'alert' },
          h('p', {}, `Not saved: version conflict. The desired state was at version ${pinned} when you opened the editor; it is now at version ${now ?? 'another'}. Reload to edit the current state.`),
          h('button', { type: 'button', onclick: async () => { await load(true); if (shadow) openEditor(); } }, 'Reload')));
      }
    };
    editButton.hidden = true;
    editorBox.replaceChildren(h('form', { class: 'card', onsubmit: (e) => { e.preventDefault(); save(); } },
      h('label', { for: 'desired-state' }, 'Desired state'),
      h('p', { class: 'hint' }, `Saved against desired version ${pinned}: if another write changes it first, nothing is saved.`),
      area,
      h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Save'),
        h('button', { type: 'button', onclick: () => { editorBox.replaceChildren(); editButton.hidden = false; } }, 'Cancel')),
      message));
    area.focus();
  }

  show(h('h1', {}, `${thing} / ${name}`),
    h('p', { class: 'links' }, h('a', { href: `#/history/${enc(thing)}/${enc(name)}` }, 'History of this shadow')),
    live, body, editButton, notice, editorBox);
  load();
  follow(`${path}/events?include=diff`, refresh, (text) => { live.textContent = `Live updates: ${text}`; });
}

// Follows a live stream (Server-Sent Events read with fetch, so that the token goes in a
// header), calling onEvent for each change; reconnects after a drop with Last-Event-ID, so no
// event is lost. Stops when the page changes, or for good when the API refuses the stream.
async function follow(path, onEvent, status) {
  const { signal } = page;
  let lastId = null;
  let delay = 1000;
  while (!signal.aborted) {
    try {
      const headers = { ...authHeaders(), Accept: 'text/event-stream' };
      if (lastId) headers['Last-Event-ID'] = lastId;
      const res = await fetch(path, { headers, signal, cache: 'no-store' });
      if (!res.ok) {
        const error = await errorOf(res);
        if (res.status === 401) {
          try { signInNeeded(error); } catch { /* the sign-in screen is shown */ }
          return undefined;
        }
        if (res.status !== 503 && res.status !== 429) return status(`unavailable: ${error.message}`);
        throw error;
      }
      status('on');
      delay = 1000;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, '\n');
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const message = { event: 'message', data: [] };
          for (const line of buffer.slice(0, end).split('\n')) {
            const colon = line.indexOf(':');
            if (colon === 0) continue; // a comment (keep-alive)
            const field = colon < 0 ? line : line.slice(0, colon);
            const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id') lastId = val;
            else if (field === 'event') message.event = val;
            else if (field === 'data') message.data.push(val);
          }
          buffer = buffer.slice(end + 2);
          if (message.data.length && message.event !== 'overflow') onEvent(message);
        }
      }
      status('reconnecting…');
    } catch (e) {
      if (signal.aborted) return;
      status(`reconnecting (${e.message})…`);
    }
    await sleep(delay);
    delay = Math.min(delay * 2, 15000);
  }
}

// ---- History -----------------------------------------------------------------------------

function changesTable(changes, caption) {
  if (!changes.length) return h('p', {}, 'No change.');
  return h('table', { class: 'changes' }, h('caption', {}, caption),
    h('thead', {}, h('tr', {}, ['Section', 'Change', 'Path', 'Old', 'New'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, changes.map((c) => h('tr', {}, h('td', {}, c.section), h('td', {}, c.op), h('td', {}, h('code', {}, c.path)),
      h('td', {}, 'old' in c ? h('code', {}, json(c.old)) : '—'), h('td', {}, 'new' in c ? h('code', {}, json(c.new)) : '—')))));
}

function eventChanges(event) {
  return ['reported', 'desired'].flatMap((s) => (event[s]?.changes || []).map((c) => ({ section: s, ...c })));
}

function historyPicker() {
  const thing = h('input', { id: 'thing', required: true, value: lastShadow?.thing });
  const name = h('input', { id: 'name', value: lastShadow?.name || 'main', required: true });
  show(h('h1', {}, 'History'), h('p', {}, 'Open a shadow from the Fleet screen, or name one:'),
    h('form', { class: 'card', onsubmit: (e) => {
      e.preventDefault();
      location.hash = `#/history/${enc(thing.value)}/${enc(name.value)}`;
    } }, h('label', { for: 'thing' }, 'Thing'), thing, h('label', { for: 'name' }, 'Name'), name,
    h('button', { type: 'submit' }, 'Open')));
}

function historyPage(thing, name) {
  lastShadow = { thing, name };
  const path = shadowPath(thing, name);
  const asOf = h('input', { id: 'as-of', spellcheck: 'false', placeholder: '2026-11-27T10:00:00Z or an event id',
    'aria-describedby': 'as-of-help' });
  const asOfBox = h('div', { class: 'as-of' });
  const compareBox = h('div', {});
  const list = h('ol', { class: 'events' });
  const more = h('div', {});
  const picked = [];

  const showAsOf = () => fill(asOfBox, async () => {
    const text = asOf.value.trim();
    if (!text) return h('p', { class: 'error', role: 'alert' }, 'Give a time (RFC 3339, e.g. 2026-11-27T10:00:00Z) or an event id.');
    const at = /^\d{4}-\d\d-\d\d[Tt ]/.test(text) ? { asOf: text } : { asOfEvent: text };
    const then = await api('GET', `${path}?${query({ ...at, metadata: 'true' })}`);
    return [h('h2', {}, `State as of ${when(then.asOf)}`), h('p', { class: 'meta' }, `After event ${then.event}`),
      ...shadowSections(then, null)];
  }, 'Reading the state failed');

  const compare = h('button', { type: 'button', disabled: true, onclick: () => fill(compareBox, async () => {
    const [a, b] = [...picked].sort((x, y) => (x.id < y.id ? -1 : 1));
    const diff = await api('GET', `${path}/diff?${query({ from: a.id, to: b.id })}`);
    return [h('h2', {}, 'Difference'), changesTable(diff.changes, `From ${when(diff.from.timestamp)} to ${when(diff.to.timestamp)}`)];
  }, 'Comparing failed') }, 'Compare');

  const eventItem = (event) => {
    const box = h('input', { type: 'checkbox', id: `pick-${event.id}`, onchange: (e) => {
      if (e.target.checked) picked.push(event); else picked.splice(picked.indexOf(event), 1);
      while (picked.length > 2) document.getElementById(`pick-${picked.shift().id}`).checked = false;
      compare.disabled = picked.length !== 2;
    } });
    const versions = ['reported', 'desired'].filter((s) => event[s]).map((s) => `${s} v${event[s].version}`).join(', ');
    return h('li', {}, h('div', { class: 'event-head' }, box,
      h('label', { for: box.id }, `${event.op} at ${when(event.timestamp)}`), h('span', { class: 'meta' }, ` ${versions}`),
      event.clientToken ? h('span', { class: 'meta' }, ` · client token ${event.clientToken}`) : null),
    changesTable(eventChanges(event), `Changes of event ${event.id}`));
  };

  const loadEvents = (cursor) => fill(more, async () => {
    const answer = await api('GET', `${path}/history?${query({ order: 'desc', limit: PAGE_SIZE, cursor })}`);
    list.append(...answer.events.map(eventItem));
    if (!list.children.length) return h('p', { role: 'status' }, 'No history for this shadow.');
    return answer.cursor ? h('button', { type: 'button', onclick: () => loadEvents(answer.cursor) }, 'Older events') : [];
  }, 'Reading the history failed');

  show(h('h1', {}, `History of ${thing} / ${name}`),
    h('p', { class: 'links' }, h('a', { href: `#/shadow/${enc(thing)}/${enc(name)}` }, 'The shadow now')),
    h('form', { class: 'card', onsubmit: (e) => { e.preventDefault(); showAsOf(); } },
      h('label', { for: 'as-of' }, 'As of'), asOf, h('button', { type: 'submit' }, 'Show state'),
      h('p', { id: 'as-of-help', class: 'hint' }, 'An RFC 3339 time or an event id: the state right after it.')),
    asOfBox,
    h('h2', {}, 'Events, newest first'), h('p', { class: 'hint' }, 'Tick two events and Compare to see what changed between them.'),
    compare, compareBox, list, more);
  loadEvents();
}

// ---- Registrations -----------------------------------------------------------------------

function statusCells(status = {}) {
  return [status.pending ?? '—', status.lagSeconds !== undefined ? `${status.lagSeconds} s` : '—', status.delivered ?? '—',
    status.failed ?? '—', status.deadLetters ?? '—'].map((v) => h('td', { class: 'num' }, v));
}

// Where a registration delivers: its type and address (a webhook's URL, a queue, a topic).
function targetText(t = {}) {
  const where = t.url || t.queueUrl || t.topicArn || [t.broker, t.topic].filter(Boolean).join(' ');
  return where ? `${t.type} ${where}` : t.type;
}

function registrationsPage() {
  const box = h('div', {});
  show(h('h1', {}, 'Registrations'), box);
  fill(box, async () => {
    const { registrations } = await api('GET', '/v1/registrations');
    if (!registrations.length) return h('p', { role: 'status' }, 'No registrations.');
    const full = await Promise.all(registrations.map((r) => api('GET', `/v1/registrations/${enc(r.id)}`)));
    return h('table', {}, h('caption', {}, 'Registrations and their delivery status'),
      h('thead', {}, h('tr', {}, ['Id', 'Target', 'Enabled', 'Pending', 'Lag', 'Delivered', 'Failed', 'Dead letters', 'Last error']
        .map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, full.map((r) => h('tr', {}, h('td', {}, h('a', { href: `#/registrations/${enc(r.id)}` }, r.id)),
        h('td', {}, targetText(r.target)), h('td', {}, r.enabled === false ? 'no' : 'yes'), statusCells(r.status),
        h('td', {}, r.status?.lastError || '—')))));
  }, 'Reading the registrations failed');
}

function registrationPage(id) {
  const path = `/v1/registrations/${enc(id)}`;
  const statusBox = h('div', {});
  const letters = h('div', {});
  const note = h('p', { role: 'status', class: 'note' });
  const act = async (doing, method, url, body) => {
    note.textContent = `${doing}…`;
    try {
      const answer = await api(method, url, body);
      note.textContent = answer.redriven !== undefined ? `Redrive queued ${answer.redriven} dead letter(s).` : `Deleted ${answer.deleted} dead letter(s).`;
    } catch (e) {
      if (e.name === 'AbortError') return;
      note.replaceChildren(errorBox(e, `${doing} failed`));
    }
    reload();
  };
  const redrive = (ids) => act('Redriving', 'POST', `${path}/dead-letters/redrive`, ids ? { ids } : {});
  const remove = (eventId) => act('Deleting', 'DELETE', `${path}/dead-letters${eventId ? `/${enc(eventId)}` : ''}`);
  const reload = () => {
    fill(statusBox, async () => {
      const r = await api('GET', path);
      return h('table', {}, h('caption', {}, `Status of ${r.id} (${targetText(r.target)})`),
        h('thead', {}, h('tr', {}, ['Pending', 'Lag', 'Delivered', 'Failed', 'Dead letters'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, h('tr', {}, statusCells(r.status))));
    }, 'Reading the registration failed');
    fill(letters, async () => {
      const { deadLetters } = await api('GET', `${path}/dead-letters?limit=100`);
      if (!deadLetters.length) return h('p', { role: 'status' }, 'No dead letters.');
      return [h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: () => redrive() }, 'Redrive all'),
        h('button', { type: 'button', onclick: () => remove() }, 'Delete all')),
      h('table', {}, h('caption', {}, 'Dead letters'),
        h('thead', {}, h('tr', {}, ['Event', 'Shadow', 'Attempts', 'Last error', 'Failed at', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, deadLetters.map((d) => h('tr', {}, h('td', {}, h('code', {}, d.event.id)), h('td', {}, d.event.subject),
          h('td', { class: 'num' }, d.attempts), h('td', {}, d.lastError), h('td', {}, when(d.failedAt)),
          h('td', { class: 'buttons' }, h('button', { type: 'button', onclick: () => redrive([d.event.id]) }, 'Redrive'),
            h('button', { type: 'button', onclick: () => remove(d.event.id) }, 'Delete'))))))];
    }, 'Reading the dead letters failed');
  };
  show(h('h1', {}, `Registration ${id}`), h('p', { class: 'links' }, h('a', { href: '#/registrations' }, 'All registrations')),
    statusBox, h('h2', {}, 'Dead letters'), note, letters);
  reload();
}

// ---- Jobs --------------------------------------------------------------------------------

const JOB_POLL_MS = 1000; // a running job is read again this often
const SAMPLE_SHOWN = 20;  // of a dry run's sample (the API answers up to 100)

const shadowLink = (t) => h('a', { href: `#/shadow/${enc(t.thing)}/${enc(t.name)}` }, `${t.thing} / ${t.name}`);
// What a job writes on each target, for its progress line.
const jobWrite = (job) => (job.desired ? [', desired ', h('code', {}, json(job.desired))] : [`, deletes the ${job.delete} state`]);

// A job's progress, kept current by update(job) without rebuilding it (focus stays on Cancel):
// a status line, a progress bar, the counters, the reason, the first errors, and Cancel while it
// runs (its failure is shown in `note`).
function jobProgress(job, onCancel) {
  const line = h('p', { role: 'status' });
  const bar = h('progress', { 'aria-label': `Targets of job ${job.id} done` });
  const cells = ['status', 'targets', 'succeeded', 'failed', 'skipped'].map((k) => [k, h('td', { class: k === 'status' ? null : 'num' })]);
  const meta = h('p', { class: 'meta' });
  const errors = h('div', {});
  const note = h('div', {});
  const cancel = h('button', { type: 'button', onclick: () => onCancel(note) }, 'Cancel');
  let errorsShown = -1;
  const update = (j) => {
    const done = j.succeeded + j.failed + j.skipped;
    const text = `Job ${j.id} ${j.status}: ${done} of ${j.targets} targets done${j.reason ? ` (${j.reason})` : ''}.`;
    if (line.textContent !== text) line.textContent = text; // announced only when it changes
    bar.max = Math.max(j.targets, 1);
    bar.value = j.targets ? done : Number(j.status !== 'running');
    for (const [k, cell] of cells) cell.textContent = j[k];
    meta.replaceChildren('Filter ', h('code', {}, j.filter), ...jobWrite(j),
      j.ratePerSecond ? `, at most ${j.ratePerSecond} targets per second` : '', `, started ${when(j.createdAt)}`, j.finishedAt ? `, ended ${when(j.finishedAt)}` : '', '.');
    cancel.hidden = j.status !== 'running';
    const list = j.errors || [];
    if (list.length !== errorsShown) {
      errorsShown = list.length;
      errors.replaceChildren(!list.length ? [] : h('table', {}, h('caption', {}, `First errors (${list.length} of ${j.failed} failed)`),
        h('thead', {}, h('tr', {}, ['Shadow', 'Error'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, list.map((e) => h('tr', {}, h('td', {}, shadowLink(e)),
          h('td', {}, `${e.error?.message ?? ''} (${e.error?.code ?? 'error'})`))))));
    }
  };
  update(job);
  const box = h('div', { class: 'card job' }, line, bar,
    h('table', {}, h('caption', {}, `Progress of job ${job.id}`),
      h('thead', {}, h('tr', {}, ['Status', 'Targets', 'Succeeded', 'Failed', 'Skipped'].map((c, i) => h('th', { scope: 'col', class: i ? 'num' : null }, c)))),
      h('tbody', {}, h('tr', {}, cells.map(([, cell]) => cell)))),
    meta, h('div', { class: 'buttons' }, cancel), note, errors);
  return { box, update };
}

// Shows `job` in `into` and reads it again every JOB_POLL_MS until it ends, the screen changes
// or `into` is given another job; then calls onEnd(job). A failed read is shown, and retried
// unless the API refused it for good (4xx).
async function watchJob(into, job, onEnd) {
  const { signal } = page;
  const path = `/v1/jobs/${enc(job.id)}`;
  const { box, update } = jobProgress(job, async (note) => {
    note.replaceChildren(loading('Cancelling…'));
    try {
      update(await api('POST', `${path}/cancel`));
      note.replaceChildren();
    } catch (e) {
      if (e.name !== 'AbortError') note.replaceChildren(errorBox(e, 'Cancelling failed'));
    }
  });
  const problem = h('div', {});
  into.replaceChildren(box, problem);
  let current = job;
  while (current.status === 'running') {
    await sleep(JOB_POLL_MS);
    if (signal.aborted || !box.isConnected) return;
    try {
      current = await api('GET', path);
      problem.replaceChildren();
      update(current);
    } catch (e) {
      if (e.name === 'AbortError') return;
      problem.replaceChildren(errorBox(e, 'Reading the job failed'));
      if (e.status >= 400 && e.status < 500) return;
    }
  }
  if (onEnd) onEnd(current);
}

function jobsTable(jobs) {
  return h('table', {}, h('caption', {}, 'Jobs, newest first'),
    h('thead', {}, h('tr', {}, ['Job', 'Status', 'Targets', 'Outcomes', 'Started', 'Filter']
      .map((c) => h('th', { scope: 'col', class: c === 'Targets' ? 'num' : null }, c)))),
    h('tbody', {}, jobs.map((j) => h('tr', {}, h('td', {}, h('a', { href: `#/jobs/${enc(j.id)}` }, j.id)), h('td', {}, j.status),
      h('td', { class: 'num' }, j.targets), h('td', {}, `${j.succeeded} succeeded, ${j.failed} failed, ${j.skipped} skipped`),
      h('td', {}, when(j.createdAt)), h('td', {}, h('code', {}, j.filter))))));
}

function jobsPage(params) {
  const text = params.has('filter') ? params.get('filter') : fleetFilter;
  const filter = filterOf(text);
  const recent = h('div', {});
  const listJobs = (quiet) => fill(recent, async () => {
    const { jobs, cursor } = await api('GET', `/v1/jobs?${query({ limit: PAGE_SIZE })}`);
    // A token limited to some things gets the jobs of its things among the 1,000 most recent.
    if (!jobs.length) return h('p', { role: 'status' }, cursor ? 'None of your jobs is among the 1,000 most recent.' : 'No jobs yet.');
    return [jobsTable(jobs), cursor ? h('p', { class: 'hint' }, `Only the newest ${jobs.length} are listed.`) : []];
  }, 'Reading the jobs failed', quiet);

  const area = h('textarea', { id: 'job-desired', rows: 6, spellcheck: 'false', placeholder: '{"fw": "1.3.0"}',
    'aria-describedby': 'job-desired-help' });
  // What the job does to each target: write `area`'s state into desired, or delete desired.
  const areaLabel = h('label', { for: 'job-desired' }, 'Job desired state');
  const areaHelp = h('p', { id: 'job-desired-help', class: 'hint' }, 'A JSON object, merged into each target\'s desired state. Dry run counts the targets and writes nothing.');
  const onchange = () => {
    area.disabled = deletes.checked;
    for (const el of [areaLabel, area, areaHelp]) el.hidden = deletes.checked;
  };
  const writes = h('input', { type: 'radio', name: 'job-kind', checked: true, onchange });
  const deletes = h('input', { type: 'radio', name: 'job-kind', onchange });
  const rate = h('input', { id: 'job-rate', inputmode: 'decimal', spellcheck: 'false', 'aria-describedby': 'job-rate-help' });
  const message = h('div', {});
  const progress = h('div', {});
  const buttons = [];
  // Sends the job (or its dry run) once the text is a JSON object (unless the job deletes) and
  // the rate a number or empty (the API checks its range); shows what the API answers.
  const send = async (dryRun) => {
    let write;
    try {
      write = deletes.checked ? { delete: 'desired' } : { desired: stateOf(area.value) };
    } catch (e) {
      message.replaceChildren(errorBox(e, 'The job desired state is not valid JSON'));
      return;
    }
    const rateText = rate.value.trim();
    const ratePerSecond = rateText ? Number(rateText) : undefined;
    if (rateText && !/^\d+(\.\d+)?$/.test(rateText)) {
      message.replaceChildren(errorBox(new Error(`${json(rate.value)} is not a number`), 'Targets per second'));
      return;
    }
    for (const b of buttons) b.disabled = true;
    message.replaceChildren(loading(dryRun ? 'Counting the targets…' : 'Starting the job…'));
    try {
      const answer = await api('POST', '/v1/jobs', { filter, ...write, ratePerSecond, ...(dryRun ? { dryRun } : {}) });
      if (dryRun) {
        const what = write.delete ? 'would have their desired state deleted' : 'would be written';
        message.replaceChildren(h('div', {},
          h('p', { role: 'status' }, `Dry run: ${answer.targets} ${answer.targets === 1 ? 'shadow' : 'shadows'} ${what}; nothing was.`),
          answer.sample.length ? h('ul', { class: 'sample', 'aria-label': 'Targets of the dry run' },
            answer.sample.slice(0, SAMPLE_SHOWN).map((t) => h('li', {}, shadowLink(t)))) : null,
          answer.targets > SAMPLE_SHOWN ? h('p', { class: 'hint' }, `The first ${SAMPLE_SHOWN} of ${answer.targets}.`) : null));
      } else {
        message.replaceChildren();
        listJobs(true);
        watchJob(progress, answer, () => listJobs(true));
      }
    } catch (e) {
      if (e.name !== 'AbortError') message.replaceChildren(errorBox(e, dryRun ? 'The dry run failed' : 'Starting the job failed'));
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
  buttons.push(h('button', { type: 'button', onclick: () => send(true) }, 'Dry run'), h('button', { type: 'submit' }, 'Start job'));

  show(h('h1', {}, 'Jobs'),
    h('p', {}, 'A bulk job writes one desired state to every shadow a fleet filter selects, or deletes their desired states, as an ordinary desired write or delete each.'),
    !filter
      ? h('p', { class: 'card' }, 'Choose the shadows first: search ', h('a', { href: '#/fleet' }, 'the Fleet screen'),
        ' with a filter or the start of a thing\'s name, then come back here.')
      : h('form', { class: 'card', onsubmit: (e) => { e.preventDefault(); send(false); } },
        h('p', {}, 'Targets: the shadows that match ', h('code', {}, filter), ' now (',
          h('a', { href: `#/fleet?${query({ filter: text })}` }, 'the Fleet screen'), '\'s filter).'),
        h('fieldset', { class: 'choice' }, h('legend', {}, 'The job'),
          h('label', {}, writes, ' Write a desired state'), h('label', {}, deletes, ' Delete the desired state')),
        areaLabel, area, areaHelp,
        h('label', { for: 'job-rate' }, 'Targets per second'), rate,
        h('p', { id: 'job-rate-help', class: 'hint' }, 'At most this many targets are written each second (0.1 to 100,000); empty: as fast as the store takes them.'),
        h('div', { class: 'buttons' }, buttons), message),
    progress, h('h2', {}, 'Recent jobs'), recent);
  listJobs();
}

function jobPage(id) {
  const box = h('div', {});
  show(h('h1', {}, `Job ${id}`), h('p', { class: 'links' }, h('a', { href: '#/jobs' }, 'All jobs')), box);
  fill(box, async () => {
    const job = await api('GET', `/v1/jobs/${enc(id)}`);
    const into = h('div', {});
    watchJob(into, job);
    return into;
  }, 'Reading the job failed');
}

// ---- Routing -----------------------------------------------------------------------------

const routes = [
  [/^#\/fleet(?:\?(.*))?$/, (q) => fleetPage(new URLSearchParams(q || ''))],
  [/^#\/shadow\/([^/]+)\/([^/]+)$/, (t, n) => shadowPage(decodeURIComponent(t), decodeURIComponent(n))],
  [/^#\/history\/([^/]+)\/([^/]+)$/, (t, n) => historyPage(decodeURIComponent(t), decodeURIComponent(n))],
  [/^#\/history$/, historyPicker],
  [/^#\/registrations\/([^/]+)$/, (id) => registrationPage(decodeURIComponent(id))],
  [/^#\/registrations$/, registrationsPage],
  [/^#\/jobs\/([^/?]+)$/, (id) => jobPage(decodeURIComponent(id))],
  [/^#\/jobs(?:\?(.*))?$/, (q) => jobsPage(new URLSearchParams(q || ''))],
];

function route() {
  page.abort();
  page = new AbortController();
  signOut.hidden = !sessionStorage.getItem(TOKEN_KEY);
  const hash = location.hash || '#/fleet';
  const section = hash.split(/[/?]/)[1];
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.nav === section) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  for (const [pattern, render] of routes) {
    const m = hash.match(pattern);
    if (!m) continue;
    try {
      return render(...m.slice(1));
    } catch (e) {
      if (!(e instanceof URIError)) throw e;
      break; // a malformed %-escape in the address: no such screen
    }
  }
  return show(h('h1', {}, 'Not found'), h('p', {}, 'This console has no such screen. '), h('a', { href: '#/fleet' }, 'Fleet'));
}

window.addEventListener('hashchange', route);
route();
