// A small informer, as client-go's: list, then watch from the list's
// resourceVersion through the same watch API kubectl uses, resume from the
// last resourceVersion seen (bookmarks included) when a stream ends, and
// relist on 410 Gone.

import { api, AuthError, waitForToken, sleep } from './api.js';

// The server ends each watch after this many seconds and the informer
// re-watches from the last resourceVersion; a stream still open well past
// it is a dead connection (no FIN), so it is treated as stale.
const WATCH_SECONDS = 30;
const STALL_GRACE_MS = 10000;

export class Informer extends EventTarget {
  constructor(path) {
    super();
    this.path = path;
    this.items = new Map(); // "ns/name" -> object
    this.rv = '';
    // state: connecting | live | stale | auth | unavailable
    this.state = 'connecting';
    this.staleSince = null;
    this.error = '';
    this.synced = false; // a list has succeeded at least once
    this.lists = 0; // relists done, for diagnostics and tests
    this.ctl = null; // aborts the current watch
  }

  start() { this.run(); return this; }

  setState(state, error = '') {
    if (state === 'stale' && this.state !== 'stale') this.staleSince = Date.now();
    if (state !== 'stale') this.staleSince = null;
    const changed = state !== this.state || error !== this.error;
    this.state = state;
    this.error = error;
    if (changed) this.dispatchEvent(new Event('state'));
  }

  async run() {
    let backoff = 500;
    for (;;) {
      try {
        if (!this.rv) await this.relist();
        if (await this.watch() === 'gone') this.rv = '';
        backoff = 500;
      } catch (e) {
        if (e instanceof AuthError) {
          this.setState('auth', e.message);
          await waitForToken();
          continue;
        }
        if (e.status === 404) {
          // The server does not serve this resource (version): not an
          // outage, so say so and check again rarely.
          this.setState('unavailable', e.message);
          await sleep(60000);
          continue;
        }
        this.setState('stale', e.message || String(e));
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  async relist() {
    const items = new Map();
    let cont = '';
    let rv = '';
    do {
      const q = new URLSearchParams({ limit: '500' });
      if (cont) q.set('continue', cont);
      const res = await api(`${this.path}?${q}`);
      if (!res.ok) throw await statusError(res);
      const list = await res.json();
      for (const o of list.items || []) items.set(key(o), o);
      cont = list.metadata?.continue || '';
      rv = list.metadata?.resourceVersion || rv;
    } while (cont);
    this.items = items;
    this.rv = rv;
    this.synced = true;
    this.lists++;
    this.dispatchEvent(new Event('sync'));
  }

  // watch streams one watch; it returns 'gone' on 410 and 'ended' when the
  // server closed the stream normally.
  async watch() {
    const ctl = this.ctl = new AbortController();
    const stall = setTimeout(() => ctl.abort(new Error('watch stalled')), WATCH_SECONDS * 1000 + STALL_GRACE_MS);
    try {
      const q = new URLSearchParams({
        watch: '1', resourceVersion: this.rv, allowWatchBookmarks: 'true', timeoutSeconds: String(WATCH_SECONDS),
      });
      const res = await api(`${this.path}?${q}`, { signal: ctl.signal });
      if (res.status === 410) return 'gone';
      if (!res.ok) throw await statusError(res);
      this.setState('live');
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i).trim();
          buf = buf.slice(i + 1);
          if (line && this.apply(JSON.parse(line)) === 'gone') {
            ctl.abort();
            return 'gone';
          }
        }
      }
      return 'ended';
    } finally {
      clearTimeout(stall);
    }
  }

  // apply handles one watch event.
  apply(ev) {
    const o = ev.object || {};
    if (ev.type === 'ERROR') {
      if (o.code === 410) return 'gone';
      throw Object.assign(new Error(o.message || 'watch error'), { status: o.code });
    }
    if (o.metadata?.resourceVersion) this.rv = o.metadata.resourceVersion;
    if (ev.type === 'BOOKMARK') return '';
    const k = key(o);
    const old = this.items.get(k);
    if (ev.type === 'DELETED') this.items.delete(k);
    else this.items.set(k, o);
    this.dispatchEvent(new CustomEvent('change', { detail: { type: ev.type, obj: o, old } }));
    return '';
  }
}

const key = (o) => `${o.metadata?.namespace}/${o.metadata?.name}`;

async function statusError(res) {
  const body = await res.json().catch(() => null);
  return Object.assign(new Error(body?.message || `HTTP ${res.status}`), { status: res.status });
}
