// The overview: one row per Lease in every namespace, filterable and
// sortable, with the filter and sort kept in the URL.

import { h, setText } from './dom.js';
import { now, getJSON } from './api.js';
import { sparkline } from './timeline.js';
import { dur, ago, abs, clock } from './format.js';
import { leaseState, expiresText, candidatesOf, STATES } from './lease.js';
import * as store from './store.js';

const COLS = [
  { key: 'name', label: 'Lease' },
  { key: 'holder', label: 'Holder' },
  { key: 'state', label: 'State' },
  { key: 'expires', label: 'Expires' },
  { key: 'renewed', label: 'Renewed' },
  { key: 'transitions', label: 'Transitions', num: true },
  { key: 'strategy', label: 'Strategy' },
  { key: 'candidates', label: 'Candidates', num: true },
];

// Sort keys; leases that cannot expire sort after those that can.
const ORDER = { expired: 0, expiring: 1, handover: 2, held: 3, vacant: 4 };
const sortVal = {
  name: (r) => `${r.ns}/${r.name}`,
  holder: (r) => r.st.holder || '\uffff',
  state: (r) => ORDER[r.st.key],
  expires: (r) => r.st.holder && r.st.remaining != null ? r.st.remaining : Infinity,
  renewed: (r) => r.st.renew == null ? Infinity : -r.st.renew,
  transitions: (r) => r.st.transitions,
  strategy: (r) => r.st.strategy || '\uffff',
  candidates: (r) => r.cands,
};

export function overview(root, params) {
  let f = readParams(params);
  const rows = new Map(); // "ns/name" -> row elements

  const q = h('input', { id: 'q', type: 'search', placeholder: 'Filter by name, namespace or holder  ( / )', autocomplete: 'off', spellcheck: 'false' });
  const nsSel = h('select', { id: 'ns' }, h('option', { value: '' }, 'All namespaces'));
  const stateSel = h('select', { id: 'state' }, h('option', { value: '' }, 'Any state'),
    Object.entries(STATES).map(([k, v]) => h('option', { value: k }, v)));
  const summary = h('p', { class: 'summary', id: 'summary', 'aria-live': 'polite' });
  const chips = h('div', { class: 'chips', role: 'group', 'aria-label': 'Leases by state' });
  const stale = h('p', { class: 'banner', id: 'stale-banner', role: 'alert', hidden: true });
  const heads = COLS.map((c) => {
    const b = h('button', { type: 'button', class: 'sort', 'data-col': c.key }, c.label, h('span', { class: 'arrow', 'aria-hidden': 'true' }));
    b.addEventListener('click', () => {
      const dir = f.sort === c.key && f.dir === 'asc' ? 'desc' : 'asc';
      write({ ...f, sort: c.key, dir });
    });
    return h('th', { scope: 'col', class: `w-${c.key}${c.num ? ' num' : ''}` }, b);
  });
  const tbody = h('tbody');
  const empty = h('div', { class: 'empty', hidden: true });
  const table = h('table', { class: 'leases', id: 'leases' },
    h('caption', { class: 'sr-only' }, 'Leases; activate a column header to sort'),
    h('thead', {}, h('tr', {}, heads)), tbody);

  root.append(
    h('h1', {}, 'Leases'),
    stale,
    h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => e.preventDefault() },
      h('label', { class: 'grow' }, h('span', { class: 'sr-only' }, 'Filter'), q),
      h('label', {}, h('span', { class: 'sr-only' }, 'Namespace'), nsSel),
      h('label', {}, h('span', { class: 'sr-only' }, 'State'), stateSel)),
    h('div', { class: 'summary-row' }, chips, summary),
    h('div', { class: 'table-wrap' }, table),
    empty,
  );

  q.addEventListener('input', () => write({ ...f, q: q.value }));
  nsSel.addEventListener('change', () => write({ ...f, ns: nsSel.value }));
  stateSel.addEventListener('change', () => write({ ...f, state: stateSel.value }));

  // write puts the filter in the URL (replaceState: typing must not fill
  // the history) and renders.
  function write(nf) {
    f = nf;
    const p = new URLSearchParams();
    for (const k of ['q', 'ns', 'state']) if (f[k]) p.set(k, f[k]);
    if (f.sort !== 'expires' || f.dir !== 'asc') { p.set('sort', f.sort); p.set('dir', f.dir); }
    const s = p.toString();
    history.replaceState(null, '', s ? `#/?${s}` : '#/');
    update(store.connection());
  }

  function row(k) {
    let r = rows.get(k);
    if (r) return r;
    const [ns, name] = k.split('/');
    const cell = (col) => h('td', { 'data-label': COLS.find((c) => c.key === col).label, class: `c-${col}` });
    r = { tr: h('tr', { 'data-key': k }), cells: {} };
    for (const c of COLS) r.cells[c.key] = cell(c.key);
    // Long names are cut with an ellipsis; the full name is in the
    // tooltip and on the detail page.
    r.link = h('a', { href: `#/lease/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, class: 'clip', title: `${ns}/${name}` },
      h('span', { class: 'ns' }, `${ns}/`), name);
    r.cells.name.append(r.link);
    r.holder = h('code', { class: 'clip' });
    r.pref = h('span', { class: 'pref clip' });
    r.last = h('span', { class: 'lastholder' }, 'last holder');
    r.cells.holder.append(h('span', { class: 'cellwrap' }, r.holder, r.pref, r.last));
    r.spark = h('span', { class: 'spark' });
    r.cells.transitions.append(h('span', { class: 'cellwrap' }, r.count = h('span'), r.spark));
    r.badge = h('span', { class: 'badge' });
    r.cells.state.append(r.badge);
    r.exp = h('span', { class: 'exp' });
    r.bar = h('span', { class: 'bar', 'aria-hidden': 'true' }, h('span'));
    r.cells.expires.append(h('span', { class: 'expwrap' }, r.exp, r.bar));
    r.tr.append(...COLS.map((c) => r.cells[c.key]));
    rows.set(k, r);
    return r;
  }

  function update(conn) {
    // While disconnected, time stands still at the moment the data was
    // last known to be true: ticking on would show fiction.
    const live = conn.state === 'live';
    const t = live || !conn.since ? now() : conn.since;
    stale.hidden = live || !conn.synced;
    if (!stale.hidden) {
      setText(stale, conn.state === 'auth' ? 'The server wants a token: the data below may be out of date.'
        : `Disconnected from the server since ${conn.since ? clock(conn.since) : 'start'}: the data below is stale and times are frozen. Reconnecting…`);
    }
    const all = [];
    const nss = new Set();
    // The chips count what the search and namespace filters let through,
    // out of all leases in that state.
    const zero = () => Object.fromEntries(Object.keys(STATES).map((k) => [k, 0]));
    const counts = zero();
    const totals = zero();
    const needle = f.q.toLowerCase();
    const match = (r) => (!f.ns || r.ns === f.ns) && (!needle || `${r.ns}/${r.name} ${r.st.holder}`.toLowerCase().includes(needle));
    for (const [k, l] of store.leases.items) {
      const ns = l.metadata.namespace;
      nss.add(ns);
      const r = { k, ns, name: l.metadata.name, st: leaseState(l, t), cands: candidatesOf(store.candidates.items, ns, l.metadata.name).length };
      totals[r.st.key]++;
      if (match(r)) counts[r.st.key]++;
      all.push(r);
    }
    const shown = all.filter((r) => match(r) && (!f.state || r.st.key === f.state));
    const sv = sortVal[f.sort] || sortVal.expires;
    const sign = f.dir === 'desc' ? -1 : 1;
    shown.sort((a, b) => {
      const x = sv(a), y = sv(b);
      return (x < y ? -1 : x > y ? 1 : 0) * sign || sortVal.name(a).localeCompare(sortVal.name(b));
    });

    syncOptions(nsSel, [...nss].sort(), f.ns);
    if (document.activeElement !== q && q.value !== f.q) q.value = f.q;
    stateSel.value = f.state;
    for (const th of heads) {
      const col = th.firstChild.dataset.col;
      if (col === f.sort) th.setAttribute('aria-sort', f.dir === 'asc' ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    }
    renderChips(counts, totals, !!(f.ns || needle));
    setText(summary, all.length === shown.length ? `${all.length} lease${all.length === 1 ? '' : 's'}` : `${shown.length} of ${all.length} leases`);

    const keep = new Set();
    let prev = null;
    for (const r of shown) {
      const el = row(r.k);
      keep.add(r.k);
      fill(el, r, live, t);
      // Move only rows out of place, so focus and selection survive.
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== el.tr) tbody.insertBefore(el.tr, want);
      prev = el.tr;
    }
    for (const [k, el] of rows) {
      if (!keep.has(k)) { el.tr.remove(); if (!store.leases.items.has(k)) rows.delete(k); }
    }
    table.hidden = shown.length === 0;
    empty.hidden = shown.length !== 0;
    if (!empty.hidden) renderEmpty(all.length, conn);
  }

  function fill(el, r, live, t) {
    const st = r.st;
    setText(el.holder, st.holder || '—');
    el.holder.title = st.holder;
    // An expired lease names whoever held it last, not a current holder.
    el.last.hidden = st.key !== 'expired';
    // A coordinated lease whose preferredHolder is not its holder is being
    // handed over.
    const to = st.holder && st.preferred !== st.holder && st.preferred;
    setText(el.pref, to ? `handing over to ${to}` : '');
    el.pref.title = to ? `handing over to ${to}` : '';
    el.pref.hidden = !to;
    el.badge.className = `badge s-${st.key}`;
    setText(el.badge, st.label);
    setText(el.exp, expiresText(st, dur) + (live ? '' : ' (stale)'));
    el.exp.title = st.expiresAt ? `expires ${abs(st.expiresAt)}` : '';
    el.bar.hidden = st.fraction == null || !st.holder || st.key === 'expired';
    el.bar.firstChild.style.width = `${Math.round((st.fraction || 0) * 100)}%`;
    el.bar.dataset.state = st.key;
    setText(el.cells.renewed, ago(st.renew, t));
    el.cells.renewed.title = st.renew ? abs(st.renew) : '';
    setText(el.count, String(st.transitions));
    sparkline(el.spark, sparks?.leases?.[r.k], sparks?.bucketSeconds);
    setText(el.cells.strategy, st.strategy || '—');
    el.cells.strategy.title = st.strategy;
    setText(el.cells.candidates, r.cands ? String(r.cands) : '—');
    // Phones hide empty optional cells to keep each card short.
    el.cells.strategy.toggleAttribute('data-empty', !st.strategy);
    el.cells.candidates.toggleAttribute('data-empty', !r.cands);
    el.tr.dataset.state = st.key;
  }

  let chipKey = '';
  function renderChips(counts, totals, filtered) {
    const k = JSON.stringify([counts, totals, filtered, f.state]);
    if (k === chipKey) return;
    chipKey = k;
    chips.replaceChildren(...Object.entries(STATES).map(([s, label]) => h('button', {
      type: 'button', class: `chip s-${s}`, 'aria-pressed': String(f.state === s),
      onclick: () => write({ ...f, state: f.state === s ? '' : s }),
    }, `${label} `, h('b', {}, String(counts[s])), filtered ? ` of ${totals[s]}` : '')));
  }

  function renderEmpty(total, conn) {
    const k = `${total}/${conn.state}/${conn.synced}`;
    if (empty.dataset.k === k) return;
    empty.dataset.k = k;
    if (total) {
      empty.replaceChildren(h('p', {}, 'No lease matches the filter. '),
        h('button', { type: 'button', class: 'ghost', onclick: () => write({ ...f, q: '', ns: '', state: '' }) }, 'Clear filter'));
    } else if (!conn.synced) {
      empty.replaceChildren(h('p', { class: 'muted' }, conn.state === 'auth' ? 'Waiting for a token…' : 'Loading leases…'));
    } else {
      empty.replaceChildren(h('p', {}, 'No leases yet. Programs using client-go leader election create them; by hand:'),
        h('pre', {}, 'kubectl create -f - <<EOF\napiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: my-app, namespace: default}\nspec: {holderIdentity: device-1, leaseDurationSeconds: 15}\nEOF'));
    }
  }

  // The sparklines: changes of hands per hour over the last day, re-read
  // every half minute. A user not allowed to list every lease's history
  // gets a 403 and simply no sparklines.
  let sparks = null;
  let sparkTimer = null;
  let stopped = false;
  async function loadSparks() {
    try {
      sparks = await getJSON('/ui/api/v1/transitions');
      update(store.connection());
    } catch (e) {
      if (e.status === 403) return;
    }
    if (!stopped) sparkTimer = setTimeout(loadSparks, 30000);
  }
  loadSparks();

  return {
    update,
    params(p) { f = readParams(p); update(store.connection()); },
    destroy() { stopped = true; clearTimeout(sparkTimer); },
  };
}

function readParams(p) {
  return {
    q: p.get('q') || '', ns: p.get('ns') || '', state: p.get('state') || '',
    sort: sortVal[p.get('sort')] ? p.get('sort') : 'expires', dir: p.get('dir') === 'desc' ? 'desc' : 'asc',
  };
}

function syncOptions(sel, values, current) {
  const want = ['', ...values, ...(current && !values.includes(current) ? [current] : [])];
  const have = [...sel.options].map((o) => o.value);
  if (want.join('\n') !== have.join('\n')) {
    sel.replaceChildren(...want.map((v) => h('option', { value: v }, v || 'All namespaces')));
  }
  sel.value = current;
}
