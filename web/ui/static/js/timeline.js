// Who held a lease over time: the server's timeline (tenures with their
// renewals aggregated, expiries, gaps) drawn as a plain SVG strip for the
// last 5 or 15 minutes, hour or day, with the same facts listed below it; and the
// overview's sparkline of changes of hands.

import { h, svg, setText } from './dom.js';
import { dur, abs, parseTime } from './format.js';

// The strip's time ranges: a button label, and the words "in the last …"
// uses. The short ones zoom in on a hand-over that an hour shows as a sliver.
const RANGES = {
  '5m': { ms: 300e3, label: 'Last 5 min', words: '5 minutes' },
  '15m': { ms: 900e3, label: 'Last 15 min', words: '15 minutes' },
  hour: { ms: 3600e3, label: 'Last hour', words: 'hour' },
  day: { ms: 86400e3, label: 'Last day', words: 'day' },
};
const W = 1000; // the strip's viewBox width; it scales to the page
const PALETTE = 8;

// colour picks a stable palette slot for a holder name.
function colour(name) {
  let x = 0;
  for (const c of name) x = (x * 31 + c.codePointAt(0)) >>> 0;
  return x % PALETTE;
}

// holderStrip builds the "Holder over time" section's content.
export function holderStrip() {
  let range = 'hour';
  let data = null; // TimelineView | null
  let lastKey = '';
  const buttons = Object.keys(RANGES).map((r) => h('button', {
    type: 'button', class: 'chip', 'data-range': r, 'aria-pressed': String(r === range),
    onclick: () => { range = r; buttons.forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.range === r))); render(); },
  }, RANGES[r].label));
  const note = h('p', { class: 'muted', id: 'strip-note' });
  const box = h('div', { class: 'strip', id: 'strip' });
  const axis = h('div', { class: 'axis', 'aria-hidden': 'true' });
  const list = h('div', { id: 'tenures' });
  const el = h('div', {}, h('div', { class: 'chips', role: 'group', 'aria-label': 'Time range' }, buttons), box, axis, note, list);

  function render(now) {
    if (!data) { box.replaceChildren(); setText(note, 'No timeline: this server does not watch leases.'); return; }
    const t1 = now ?? parseTime(data.now);
    const span = RANGES[range].ms;
    const last = RANGES[range].words;
    const t0 = t1 - span;
    // Re-render when the data change or the strip moved by a pixel.
    const key = JSON.stringify([range, data.tenures, data.gaps, Math.floor(t1 / (span / W))]);
    if (key === lastKey) return;
    lastKey = key;
    const x = (t) => Math.max(0, Math.min(W, ((t - t0) / span) * W));
    const shapes = [];
    const since = parseTime(data.since);
    const firstStart = Math.min(...data.tenures.map((tn) => parseTime(tn.start)), since);
    if (firstStart > t0) {
      shapes.push(svg('rect', { class: 'unknown', x: 0, y: 4, width: x(firstStart), height: 28 },
        svg('title', {}, `Not known: before ${abs(firstStart)}`)));
    }
    const rows = [];
    for (const g of data.gaps) {
      const s = parseTime(g.start); const e = g.end ? parseTime(g.end) : t1;
      if (e < t0) continue;
      const what = `No holder for ${dur(e - s)}${g.end ? '' : ' so far'} after ${g.after || 'the last holder'} ${g.cause || 'left'}`;
      shapes.push(svg('rect', { class: 'gap', x: x(s), y: 4, width: Math.max(1, x(e) - x(s)), height: 28 }, svg('title', {}, `${what} (${abs(s)})`)));
      rows.push({ at: s, cells: ['gap', abs(s), g.end ? abs(e) : 'now', dur(e - s), '—', `after ${g.after || '?'} ${g.cause}`], cls: 'gaprow' });
    }
    for (const tn of data.tenures) {
      const s = parseTime(tn.start);
      const exp = tn.expiredAt ? parseTime(tn.expiredAt) : null;
      const end = exp ?? (tn.end ? parseTime(tn.end) : t1);
      if (end < t0 && !(tn.unconfirmed && s >= t0)) continue;
      if (tn.unconfirmed) {
        // A grant nobody acted on: a mark, not a tenure.
        const ms = (tn.end ? parseTime(tn.end) : t1) - s;
        shapes.push(svg('rect', { class: 'unconf', x: x(s) - 1, y: 0, width: 2, height: 36 },
          svg('title', {}, `Granted to ${tn.holder}, redirected after ${ms < 1000 ? `${Math.round(ms)} ms` : dur(ms)}: never confirmed (${abs(s)})`)));
        rows.push({ at: s, cells: [tn.holder, abs(s), '—', `${Math.round(ms)} ms`, '0', 'granted, redirected before it renewed: not a tenure'], cls: 'unconfrow' });
        continue;
      }
      const len = end - s;
      const how = tn.end || exp ? (exp ? 'expired' : tn.ended || 'ended') : 'holds it';
      shapes.push(svg('rect', { class: `seg c${colour(tn.holder)}`, 'data-holder': tn.holder, x: x(s), y: 4, width: Math.max(1.5, x(end) - x(s)), height: 28 },
        svg('title', {}, `${tn.holder}: ${abs(s)} – ${tn.end || exp ? abs(end) : 'now'} (${dur(len)}), ${tn.renewals} renewals, ${how}`)));
      if (exp) shapes.push(svg('rect', { class: 'exp', x: x(exp) - 1, y: 0, width: 2, height: 36 }, svg('title', {}, `${tn.holder}'s lease expired at ${abs(exp)}`)));
      rows.push({ at: s, cells: [tn.holder, abs(s), tn.end || exp ? abs(end) : 'now', dur(len), String(tn.renewals), how] });
    }
    box.replaceChildren(svg('svg', { viewBox: `0 0 ${W} 36`, preserveAspectRatio: 'none', role: 'img',
      'aria-label': `Holders over the last ${last}` }, shapes));
    axis.replaceChildren(...[0, 0.25, 0.5, 0.75, 1].map((f) => h('span', {}, f === 1 ? 'now' : `−${dur(span * (1 - f)).replace(/ 00[ms]$/, '')}`)));
    const count = data.tenures.filter((tn) => !tn.unconfirmed && parseTime(tn.start) >= t0).length;
    setText(note, `${count} tenure${count === 1 ? '' : 's'} began in the last ${last}. Kept since ${abs(since)}${data.persisted ? ' (kept across restarts)' : ''}; renewals are counted, not listed.`);
    rows.sort((a, b) => b.at - a.at);
    list.replaceChildren(rows.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'plain', id: 'tenure-list' },
      h('thead', {}, h('tr', {}, ['Holder', 'From', 'To', 'Length', 'Renewals', 'Ended'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((r) => h('tr', { class: r.cls || '' }, r.cells.map((c, i) => h('td', { 'data-label': ['Holder', 'From', 'To', 'Length', 'Renewals', 'Ended'][i] }, c)))))))
      : h('p', { class: 'muted' }, `Nobody held it in the last ${last}.`));
  }

  return {
    el,
    set(v) { data = v || null; lastKey = ''; render(); },
    tick(now) { render(now); },
  };
}

// sparkline draws a lease's changes of hands per bucket (oldest first).
export function sparkline(el, counts, bucketSeconds) {
  const key = counts ? counts.join(',') : '';
  if (el.dataset.k === key) return;
  el.dataset.k = key;
  if (!counts) { el.replaceChildren(); el.title = ''; return; }
  const max = Math.max(1, ...counts);
  const total = counts.reduce((a, b) => a + b, 0);
  const bw = 3;
  el.title = `${total} change${total === 1 ? '' : 's'} of hands in the last ${dur(counts.length * bucketSeconds * 1000).replace(/ 00[ms]$/, '')}, per ${dur(bucketSeconds * 1000).replace(/ 00[ms]$/, '')}`;
  el.replaceChildren(svg('svg', { width: counts.length * bw, height: 14, viewBox: `0 0 ${counts.length * bw} 14`, role: 'img', 'aria-label': el.title },
    counts.map((c, i) => {
      const ht = c ? Math.max(3, Math.round((c / max) * 14)) : 1;
      return svg('rect', { class: c ? 'on' : 'off', x: i * bw, y: 14 - ht, width: bw - 1, height: ht });
    })));
}
