// Requests to the server: the bearer token and the server clock.

const TOKEN_KEY = 'leasehold.token';

// The token lives in sessionStorage: it survives a reload but not the tab,
// and it only ever travels in the Authorization header, never in a URL.
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || '',
  set(v) {
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    else sessionStorage.removeItem(TOKEN_KEY);
    window.dispatchEvent(new Event('leasehold:token'));
  },
};

// AuthError is a 401: the UI asks for a token and retries.
export class AuthError extends Error {}

// api fetches a same-origin path with the token, and reports a 401 to the
// page (which opens the token dialog) before throwing AuthError.
export async function api(path, opts = {}) {
  const headers = { Accept: 'application/json', ...(opts.headers || {}) };
  const t = token.get();
  if (t) headers.Authorization = `Bearer ${t}`;
  const t0 = Date.now();
  const res = await fetch(path, { ...opts, headers, cache: 'no-store', credentials: 'omit' });
  if (!precise) fromDateHeader(res, t0);
  if (res.status === 401) {
    window.dispatchEvent(new Event('leasehold:unauthorized'));
    throw new AuthError('the server wants a token');
  }
  return res;
}

// getJSON fetches and decodes, turning a Kubernetes Status into an Error.
export async function getJSON(path) {
  const res = await api(path);
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const e = new Error(body?.message || `HTTP ${res.status}`);
    e.status = res.status;
    throw e;
  }
  return body;
}

// waitForToken resolves when a token is entered.
export function waitForToken() {
  return new Promise((resolve) => window.addEventListener('leasehold:token', resolve, { once: true }));
}

// Clock skew: countdowns compare lease times written by the server's clock
// with the browser's, so the offset between the two is measured and used.
let offset = 0;
let precise = false;

// now is the current server time in epoch milliseconds.
export const now = () => Date.now() + offset;
export const clockOffset = () => offset;

// syncClock measures the offset from the system endpoint's serverTime
// (millisecond precision), halving the round trip.
export function syncClock(system, t0, t1) {
  const server = Date.parse(system.serverTime.replace(/(\.\d{3})\d+/, '$1'));
  if (Number.isNaN(server)) return;
  offset = server - (t0 + t1) / 2;
  precise = true;
}

// fromDateHeader is the fallback until syncClock has run: the Date header
// has whole seconds, so it is only trusted for skews above two seconds.
function fromDateHeader(res, t0) {
  const d = Date.parse(res.headers.get('Date') || '');
  if (Number.isNaN(d)) return;
  const est = d + 500 - (t0 + Date.now()) / 2;
  if (Math.abs(est) > 2000) offset = est;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
