// The page: routing, the header (connection, token, theme) and the 1 Hz
// ticker that drives every countdown.

import { token, api, getJSON, syncClock as setClock } from './api.js';
import { h, setText } from './dom.js';
import { clock } from './format.js';
import * as store from './store.js';
import { overview } from './overview.js';
import { detail } from './detail.js';
import { system } from './system.js';

const main = document.getElementById('main');
let view = null;
let viewKey = '';

// route parses the hash: #/, #/?q=..., #/lease/<ns>/<name>, #/system.
function route() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, query] = raw.split('?');
  const params = new URLSearchParams(query || '');
  const seg = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (seg[0] === 'lease' && seg.length === 3) return { name: 'detail', key: path, args: [seg[1], seg[2]] };
  if (seg[0] === 'system') return { name: 'system', key: 'system', args: [] };
  return { name: 'overview', key: 'overview', args: [params] };
}

const views = { overview, detail, system };

function navigate() {
  const r = route();
  document.querySelectorAll('[data-nav]').forEach((a) => {
    if (a.dataset.nav === r.name || (r.name === 'detail' && a.dataset.nav === 'overview')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  if (r.key === viewKey && view?.params) {
    view.params(...r.args); // same view, new filter/sort from the URL
    return;
  }
  // Move focus to the new view only when the user was in the old one
  // (a link), so screen readers start there; never on first load.
  const moveFocus = main.contains(document.activeElement);
  view?.destroy?.();
  main.replaceChildren();
  viewKey = r.key;
  view = views[r.name](main, ...r.args);
  document.title = `${r.name === 'detail' ? `${r.args[1]} · ` : r.name === 'system' ? 'System · ' : ''}leasehold`;
  refresh();
  if (moveFocus) main.focus({ preventScroll: true });
}

// refresh re-renders the current view with the current data; changes are
// coalesced to one render per frame.
let pending = false;
function refresh() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    const conn = store.connection();
    renderConn(conn);
    document.body.classList.toggle('is-stale', conn.state !== 'live');
    view?.update(conn);
  });
}

const connEl = document.getElementById('conn');
const connText = document.getElementById('conn-text');
function renderConn(c) {
  connEl.dataset.state = c.state;
  let text = 'Live';
  if (c.state === 'connecting') text = 'Connecting…';
  if (c.state === 'auth') text = 'Token needed';
  if (c.state === 'stale') text = c.synced && c.since ? `Disconnected · stale since ${clock(c.since)}` : 'Cannot reach server';
  setText(connText, text);
  connEl.title = c.error || '';
}

// Theme: auto follows the system (and its changes); the choice is kept.
const THEMES = ['auto', 'light', 'dark'];
const themeBtn = document.getElementById('theme-btn');
const darkQuery = matchMedia('(prefers-color-scheme: dark)');
const theme = () => localStorage.getItem('leasehold.theme') || 'auto';
function applyTheme(t) {
  document.documentElement.dataset.theme = t === 'auto' ? (darkQuery.matches ? 'dark' : 'light') : t;
  themeBtn.textContent = `Theme: ${t}`;
}
themeBtn.addEventListener('click', () => {
  const next = THEMES[(THEMES.indexOf(theme()) + 1) % THEMES.length];
  localStorage.setItem('leasehold.theme', next);
  applyTheme(next);
});
darkQuery.addEventListener('change', () => applyTheme(theme()));
applyTheme(theme());

// Token dialog: opened by the button or by any 401.
const dlg = document.getElementById('token-dialog');
const input = document.getElementById('token-input');
const why = document.getElementById('token-why');
function openToken(reason) {
  if (dlg.open) return;
  why.textContent = reason || tokenHelp;
  input.value = token.get();
  dlg.showModal();
  input.focus();
}
document.getElementById('token-btn').addEventListener('click', () => openToken());
document.getElementById('token-cancel').addEventListener('click', () => dlg.close());
document.getElementById('token-clear').addEventListener('click', () => { token.set(''); dlg.close(); });
document.getElementById('token-form').addEventListener('submit', () => token.set(input.value.trim()));
const tokenHelp = why.textContent;
window.addEventListener('leasehold:unauthorized', () => openToken(`The server answered 401 Unauthorized. ${tokenHelp}`));

// The clock offset is re-measured every minute (device clocks drift and
// NTP may step them).
async function syncClock() {
  try {
    const t0 = Date.now();
    const sys = await getJSON('/ui/api/v1/system');
    setClock(sys, t0, Date.now());
  } catch { /* the Date header fallback stays in use */ }
}

for (const inf of [store.leases, store.candidates]) {
  for (const ev of ['sync', 'change', 'state']) inf.addEventListener(ev, refresh);
}
window.addEventListener('hashchange', navigate);
document.addEventListener('keydown', (e) => {
  if (e.key === '/' && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName)) {
    const q = document.getElementById('q');
    if (q) { e.preventDefault(); q.focus(); }
  }
});
setInterval(refresh, 1000);
setInterval(syncClock, 60000);

// Exposed for the browser tests and for debugging from the console.
window.leasehold = { store, api, h };

syncClock().finally(() => { store.start(); navigate(); });
