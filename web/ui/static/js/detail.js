// The Lease detail: every field, the candidates, why the holder was chosen
// (the election decision history), the transitions, raw YAML/JSON and the
// kubectl command lines that show the same truth.

import { h, setText, copyButton } from './dom.js';
import { now, getJSON } from './api.js';
import { dur, ago, abs, parseTime } from './format.js';
import { leaseState, expiresText, candidatesOf } from './lease.js';
import { toYAML } from './yaml.js';
import * as store from './store.js';
import { actionsPanel } from './actions.js';
import { holderStrip } from './timeline.js';
import { drainsOf, openDrainDialog } from './drain.js';

// Upstream's leaseCandidateValidDuration: older candidates are ignored.
const CANDIDATE_VALIDITY_MS = 30 * 60 * 1000;

export function detail(root, ns, name) {
  const k = `${ns}/${name}`;
  const enc = (s) => encodeURIComponent(s);
  let decisions = null; // {available, items} | {error}
  // drains maps the namespace's drained identities to their records
  // (drain.js); null when the server keeps none or may not be asked.
  let drains = new Map();
  let decidedRV = null;
  let rawMode = 'yaml';
  let showManaged = false;

  const badge = h('span', { class: 'badge' });
  const big = h('p', { class: 'countdown', id: 'countdown' });
  const bar = h('span', { class: 'bar big', 'aria-hidden': 'true' }, h('span'));
  const missing = h('p', { class: 'banner', hidden: true });
  const fields = h('dl', { class: 'fields', id: 'fields' });
  const cands = h('div', { id: 'candidates' });
  const decided = h('div', { id: 'decided' });
  const timeline = h('div', { id: 'timeline' });
  const history = h('div', { id: 'decisions' });
  const events = h('div', { id: 'events' });
  // The decision history is filtered in place: every cell's text is
  // searched, so "fallback", a candidate or a reason all work.
  const historyQ = h('input', { id: 'history-q', type: 'search', placeholder: 'Search decisions (candidate, action, reason, module…)', autocomplete: 'off', spellcheck: 'false' });
  const historyCount = h('span', { class: 'muted', id: 'history-count', 'aria-live': 'polite' });
  historyQ.addEventListener('input', filterHistory);
  const raw = h('pre', { class: 'raw', id: 'raw', tabindex: '0', 'aria-label': 'Raw lease' });
  const tabs = ['yaml', 'json'].map((m) => h('button', {
    type: 'button', role: 'tab', id: `tab-${m}`, 'aria-controls': 'raw', 'aria-selected': String(m === rawMode),
    onclick: () => { rawMode = m; tabs.forEach((t) => t.setAttribute('aria-selected', String(t.id === `tab-${m}`))); renderRaw(); },
  }, m.toUpperCase()));
  const managed = h('input', { type: 'checkbox', id: 'managed' });
  managed.addEventListener('change', () => { showManaged = managed.checked; renderRaw(); });
  const acts = actionsPanel(ns, name, () => loadDecisions());
  const strip = holderStrip();
  const kubectl = [
    `kubectl get lease -n ${ns} ${name} -o yaml`,
    `kubectl get lease -n ${ns} ${name} -o wide --watch`,
    `kubectl get leasecandidates -n ${ns}  # the LEASENAME column shows ${name}`,
  ];

  root.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/' }, 'Leases'), ' / ', ns, ' / '),
    h('div', { class: 'head' }, h('h1', { title: `${ns}/${name}` }, name), badge),
    missing,
    h('div', { class: 'hero' }, big, bar),
    h('section', { 'aria-labelledby': 'h-strip' }, h('h2', { id: 'h-strip' }, 'Holder over time'), strip.el),
    h('section', { 'aria-labelledby': 'h-actions' }, h('h2', { id: 'h-actions' }, 'Actions'), acts.el),
    h('section', { 'aria-labelledby': 'h-fields' }, h('h2', { id: 'h-fields' }, 'Fields'), fields),
    h('section', { 'aria-labelledby': 'h-kubectl' }, h('h2', { id: 'h-kubectl' }, 'kubectl'),
      h('ul', { class: 'cmds', id: 'kubectl' }, kubectl.map((c) => h('li', {}, h('code', {}, c), copyButton(() => c, `Copy: ${c}`))))),
    h('section', { 'aria-labelledby': 'h-cands' }, h('h2', { id: 'h-cands' }, 'Candidates'), cands),
    h('section', { 'aria-labelledby': 'h-decided' }, h('h2', { id: 'h-decided' }, 'Why this holder'), decided),
    h('section', { 'aria-labelledby': 'h-timeline' }, h('h2', { id: 'h-timeline' }, 'Transitions'), timeline),
    h('section', { 'aria-labelledby': 'h-history' }, h('h2', { id: 'h-history' }, 'Decision history'),
      h('div', { class: 'toolbar' }, h('label', { class: 'grow' }, h('span', { class: 'sr-only' }, 'Search the decision history'), historyQ), historyCount),
      history),
    h('section', { 'aria-labelledby': 'h-events' }, h('h2', { id: 'h-events' }, 'Events'), events),
    h('section', { 'aria-labelledby': 'h-raw' }, h('h2', { id: 'h-raw' }, 'Raw object'),
      h('div', { class: 'rawbar' }, h('div', { role: 'tablist', 'aria-label': 'Format' }, tabs),
        h('label', { class: 'check' }, managed, ' managedFields'), copyButton(() => raw.textContent, 'Copy raw object')),
      raw),
  );

  async function loadDrains() {
    try {
      drains = await drainsOf(ns);
    } catch {
      drains = null;
    }
    delete cands.dataset.k;
    update(store.connection());
  }

  async function loadDecisions() {
    loadDrains();
    try {
      decisions = await getJSON(`/ui/api/v1/namespaces/${enc(ns)}/leases/${enc(name)}/decisions`);
    } catch (e) {
      decisions = { error: e.message };
    }
    renderDecisions();
  }

  let lastRV = '';
  let lastRaw = '';
  function update(conn) {
    const l = store.leases.items.get(k);
    const live = conn.state === 'live';
    const t = live || !conn.since ? now() : conn.since;
    missing.hidden = !!l || !conn.synced;
    setText(missing, `Lease ${ns}/${name} does not exist (any more). It appears here as soon as it is created.`);
    acts.update(l, candidatesOf(store.candidates.items, ns, name));
    if (!l) { badge.hidden = true; big.textContent = ''; bar.hidden = true; return; }
    badge.hidden = false;
    const st = leaseState(l, t);
    badge.className = `badge s-${st.key}`;
    setText(badge, st.label);
    const handover = st.key === 'handover' ? ` · handing over to ${st.preferred}` : '';
    let head = 'No holder';
    // An expired lease has no current holder: name the last one as such.
    if (st.key === 'expired') head = `Last holder ${st.holder} · ${expiresText(st, dur)}`;
    else if (st.holder) head = `${st.holder} · expires ${expiresText(st, dur)}${handover}`;
    setText(big, head + (live ? '' : ' (stale)'));
    bar.hidden = st.fraction == null || !st.holder;
    bar.firstChild.style.width = `${Math.round((st.fraction || 0) * 100)}%`;
    bar.dataset.state = st.key;
    renderFields(l, st, t);
    renderCandidates(l, st, t);
    renderTimeline(l, st, t);
    if (decisions && !decisions.error) strip.tick(t);
    const rv = l.metadata.resourceVersion;
    if (rv !== lastRV) {
      lastRV = rv;
      renderRaw();
      // The controller records its decision before it writes the lease,
      // so a new resourceVersion is the moment to re-read the history.
      if (decidedRV !== rv) { decidedRV = rv; loadDecisions(); loadEvents(); }
    }
  }

  // The lease's Events, as "kubectl describe lease" lists them: the
  // server's own (Elected, HandedOver, ...) and those electors record.
  async function loadEvents() {
    const sel = enc(`involvedObject.kind=Lease,involvedObject.name=${name}`);
    let list;
    try {
      list = await getJSON(`/api/v1/namespaces/${enc(ns)}/events?fieldSelector=${sel}`);
    } catch (e) {
      events.replaceChildren(h('p', { class: 'muted' }, e.status === 404 ? 'This server does not serve Events.' : `Cannot read the events: ${e.message}`));
      return;
    }
    const seen = (e) => parseTime(e.lastTimestamp || e.series?.lastObservedTime || e.eventTime || e.firstTimestamp || e.metadata.creationTimestamp);
    const items = (list.items || []).slice().sort((a, b) => (seen(a) ?? 0) - (seen(b) ?? 0));
    if (!items.length) {
      events.replaceChildren(h('p', { class: 'muted' }, 'No events for this lease.'));
      return;
    }
    const t = now();
    events.replaceChildren(table(['Type', 'Reason', 'Last seen', 'From', 'Count', 'Message'], items.map((e) => [
      e.type || '—', e.reason || '—', ago(seen(e), t), e.source?.component || e.reportingComponent || '—',
      String(e.count || e.series?.count || 1), e.message || '',
    ]), 'events'));
  }

  function renderFields(l, st, t) {
    const m = l.metadata;
    const rel = (x) => (x == null ? '—' : `${ago(x, t)} (${abs(x)})`);
    const rows = [
      ['Holder', !st.holder ? '— (vacant)' : st.key === 'expired' ? `${st.holder} (last holder: the lease expired)` : st.holder],
      ['Preferred holder', st.preferred || '—'],
      ['State', st.label],
      ['Expires', st.expiresAt ? `${expiresText(st, dur)} (${abs(st.expiresAt)})` : expiresText(st, dur)],
      ['Duration', st.durMs ? `${st.durMs / 1000}s` : '—'],
      ['Renewed', rel(st.renew)],
      ['Acquired', rel(st.acquire)],
      ['Transitions', String(st.transitions)],
      ['Strategy', st.strategy || '— (clients elect themselves)'],
      ['Created', rel(parseTime(m.creationTimestamp))],
      ['resourceVersion', m.resourceVersion],
      ['uid', m.uid],
      ['Labels', m.labels],
      ['Annotations', m.annotations],
    ];
    // Update in place: relative times change every second, and rebuilding
    // the list would drop the reader's text selection.
    if (!fields.firstChild) fields.append(...rows.flatMap(([dt]) => [h('dt', {}, dt), h('dd', { 'data-f': dt })]));
    for (const [dt, dd] of rows) {
      const el = fields.querySelector(`dd[data-f="${dt}"]`);
      if (typeof dd === 'string') setText(el, dd);
      else renderMap(el, dd);
    }
  }

  // Labels and annotations, one a line. Long values (kubectl apply's
  // last-applied-configuration is the whole object again) are folded, as
  // other dashboards do; the raw object below has them whole.
  const opened = new Set();
  function renderMap(dd, m = {}) {
    const key = JSON.stringify(m);
    if (key === dd.dataset.k) return;
    dd.dataset.k = key;
    const e = Object.entries(m);
    dd.replaceChildren(...(e.length ? e.map(([a, v]) => {
      if (v.length <= 200 && a !== 'kubectl.kubernetes.io/last-applied-configuration') return h('div', {}, `${a}=${v}`);
      const d = h('details', { open: opened.has(a), ontoggle: () => (d.open ? opened.add(a) : opened.delete(a)) },
        h('summary', {}, `${a} (${new TextEncoder().encode(v).length} bytes)`), h('pre', { class: 'raw' }, v));
      return d;
    }) : ['—']));
  }

  function renderCandidates(l, st, t) {
    const list = candidatesOf(store.candidates.items, ns, name);
    const last = lastDecision();
    const rank = (n) => { const i = last?.ranking?.indexOf(n) ?? -1; return i >= 0 ? String(i + 1) : '—'; };
    const drainedText = (id) => { const d = drains?.get(id); return d ? `drained by ${d.by}${d.forced ? ' (forced)' : ''}` : '—'; };
    const rows = list.map((c) => {
      const s = c.spec || {};
      const renew = parseTime(s.renewTime);
      const ping = parseTime(s.pingTime);
      const valid = renew != null && t - renew < CANDIDATE_VALIDITY_MS;
      const pingText = ping == null ? '—' : renew != null && renew >= ping ? `answered (${ago(ping, t)})` : `outstanding since ${ago(ping, t)}`;
      return [c.metadata.name + (c.metadata.name === st.holder ? ' (holder)' : ''), s.binaryVersion || '—', s.emulationVersion || '—',
        s.strategy || '—', ago(renew, t), pingText, valid ? 'fresh' : 'expired', rank(c.metadata.name), drainedText(c.metadata.name)];
    });
    const key = JSON.stringify([rows, st.holder, drains == null]);
    if (cands.dataset.k === key) return;
    cands.dataset.k = key;
    // Drain and Undrain per identity (drain.js); the server decides who
    // may, and records it.
    const drainButton = (id) => drains == null ? '—' : h('button', {
      type: 'button', class: 'ghost small', 'data-drain': id,
      onclick: () => openDrainDialog(ns, id, { undrain: drains.has(id), onDone: loadDecisions }),
    }, drains.has(id) ? 'Undrain' : 'Drain');
    if (!rows.length) {
      cands.replaceChildren(h('p', { class: 'muted' }, store.candidates.state === 'unavailable'
        ? 'No data: this server does not serve LeaseCandidates.'
        : 'No LeaseCandidates name this lease: its clients elect themselves (client-go leader election).'),
      st.holder ? h('p', { id: 'holder-drain' }, `Holder ${st.holder}: ${drainedText(st.holder)} `, drainButton(st.holder)) : null);
      return;
    }
    cands.replaceChildren(table(['Identity', 'Binary version', 'Emulation version', 'Strategy', 'Renewed', 'Ping', 'Freshness', 'Rank', 'Drained', ''],
      rows.map((r, i) => [...r, drainButton(list[i].metadata.name)]), 'cands'));
  }

  // The controller's last decision: operator actions explain no ranking.
  const lastDecision = () => (decisions?.items || []).findLast((r) => r.trigger !== 'operator') || null;

  function renderDecisions() {
    const d = lastDecision();
    if (decisions?.error) {
      decided.replaceChildren(h('p', { class: 'banner' }, `Cannot read the decision history: ${decisions.error}`));
      history.replaceChildren();
    } else if (!decisions?.available) {
      const msg = 'No data: this server records no election decisions (coordinated leader election is not wired).';
      decided.replaceChildren(h('p', { class: 'muted' }, msg));
      history.replaceChildren(h('p', { class: 'muted' }, 'No data.'));
    } else if (!decisions.items.length) {
      decided.replaceChildren(h('p', { class: 'muted' }, 'No election decision recorded for this lease: leases without spec.strategy are elected by their own clients.'));
      history.replaceChildren(h('p', { class: 'muted' }, 'No decisions yet.'));
    } else {
      const mod = d?.module || {};
      if (!d) decided.replaceChildren(h('p', { class: 'muted' }, 'No election decision recorded for this lease.'));
      else decided.replaceChildren(h('dl', { class: 'fields' }, [
        ['Decision', `${d.action}${d.chosen ? ` → ${d.chosen}` : ''}`],
        ['Reason', d.reason || '—'],
        ['When', `${ago(parseTime(d.time), now())} (${abs(parseTime(d.time))})`],
        ['Trigger', d.trigger || '—'],
        ['Strategy', d.strategy || '—'],
        ['Module', `${mod.name || '—'}${mod.version ? ` ${mod.version}` : ''}${mod.builtin ? ' (built-in)' : ''}${d.fallback ? ' — fallback' : ''}`],
        ['Module sha256', mod.sha256 || '—'],
        ['Ranking', (d.ranking || []).join(' > ') || '—'],
        ['Candidates seen', (d.candidates || []).map((c) => `${c.name} (${c.state || (c.acked ? 'acked' : 'not acked')})`).join(', ') || '—'],
        ['Outcome', d.outcome || '—'],
      ].flatMap(([dt, dd]) => [h('dt', {}, dt), h('dd', {}, dd)])));
      history.replaceChildren(table(['Time', 'Trigger', 'Action', 'Chosen', 'Decided by', 'Reason', 'Outcome'],
        [...decisions.items].reverse().map((r) => [abs(parseTime(r.time)), r.trigger || '—', r.action, r.chosen || '—',
          `${r.module?.name || '—'}${r.fallback ? ' (fallback)' : ''}`, r.reason || '—', r.outcome || '—']), 'history'));
    }
    filterHistory();
    strip.set(decisions?.timeline);
    lastTimeline = '';
    update(store.connection());
  }

  // The timeline: the holder changes the server saw, each explained by
  // the controller's grant if one matches, plus the grants from before the
  // server's watch began. A release answered by a grant is one hand-over;
  // tenure runs to the next change.
  let lastTimeline = '';
  function renderTimeline(l, st, t) {
    const hs = decisions?.holders;
    const since = parseTime(hs?.since) ?? Infinity;
    const ev = (hs?.items || []).map((e) => ({ ...e, time: parseTime(e.time), cause: e.to ? (e.from ? 'holder changed' : 'acquired') : 'released' }));
    for (const r of decisions?.items || []) {
      if (r.action !== 'grant' || !r.chosen || (r.outcome && r.outcome !== 'ok')) continue;
      const at = parseTime(r.time);
      const cause = `elected by ${r.module?.name || r.strategy || 'strategy'}${r.reason ? `: ${r.reason}` : ''}`;
      // The controller records a grant just before writing it.
      const m = ev.find((e) => !e.elected && e.to === r.chosen && e.time > at - 1000 && e.time - at < 30000);
      if (m) Object.assign(m, { cause, elected: 1 });
      else if (at < since) ev.push({ time: at, from: r.holder, to: r.chosen, cause, elected: 1 });
    }
    ev.sort((a, b) => a.time - b.time);
    const holder = l.spec?.holderIdentity;
    const acq = parseTime(l.spec?.acquireTime);
    const last = ev.at(-1);
    if (holder && acq != null && last?.to !== holder) {
      // Holders before the first one known are unknown: "?", not "∅".
      ev.push({ time: Math.max(acq, last?.time ?? acq), from: last ? last.to : st.transitions ? '?' : '', to: holder, cause: 'acquired (spec.acquireTime)' });
    }
    const out = [];
    for (const e of ev) {
      const p = out.at(-1);
      if (p?.from && !p.to && !e.from && e.to && e.time - p.time < 10000) {
        out[out.length - 1] = { ...e, from: p.from, cause: `${p.from} released, then ${e.cause}` };
        continue;
      }
      // A grant known only from the decisions follows the last holder.
      if (!e.from && e.elected && p) e.from = p.to;
      out.push(e);
    }
    const items = out.map((e, i) => [abs(e.time), `${e.from || '∅'} → ${e.to || '∅'}`, e.cause,
      i + 1 < out.length ? dur(out[i + 1].time - e.time) : `${dur(t - e.time)} so far`]).reverse();
    const key = JSON.stringify([items, st.transitions]);
    if (key === lastTimeline) return;
    lastTimeline = key;
    const count = h('p', { class: 'muted' }, `spec.leaseTransitions: ${st.transitions}.${hs ? ` Holder changes seen since ${abs(since)}.` : ''}`);
    timeline.replaceChildren(count, items.length ? h('ol', { class: 'timeline' }, items.map(([time, fromTo, cause, tenure]) =>
      h('li', {}, h('time', {}, time), h('strong', {}, fromTo), h('span', {}, cause), h('span', { class: 'muted' }, `tenure ${tenure}`))))
      : h('p', { class: 'muted' }, 'No transitions known.'));
  }

  function filterHistory() {
    const rows = [...history.querySelectorAll('tbody tr')];
    const needle = historyQ.value.trim().toLowerCase();
    let shown = 0;
    for (const r of rows) {
      r.hidden = !!needle && !r.textContent.toLowerCase().includes(needle);
      if (!r.hidden) shown++;
    }
    setText(historyCount, needle ? `${shown} of ${rows.length} decisions` : rows.length ? `${rows.length} decisions` : '');
  }

  function renderRaw() {
    const l = store.leases.items.get(k);
    if (!l) { raw.textContent = ''; return; }
    const obj = structuredClone(l);
    if (!showManaged) delete obj.metadata.managedFields;
    obj.apiVersion ||= 'coordination.k8s.io/v1';
    obj.kind ||= 'Lease';
    const text = rawMode === 'json' ? JSON.stringify(reorder(obj), null, 2) : toYAML(reorder(obj));
    if (text !== lastRaw) raw.textContent = lastRaw = text;
  }

  return { update, destroy() { acts.destroy(); } };
}

// reorder puts apiVersion and kind first, as kubectl prints them.
function reorder(o) {
  const { apiVersion, kind, ...rest } = o;
  return { apiVersion, kind, ...rest };
}

function table(head, rows, id) {
  return h('div', { class: 'table-wrap' }, h('table', { id, class: 'plain' },
    h('thead', {}, h('tr', {}, head.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', { 'data-label': head[i] }, c)))))));
}
