// The system view: version, uptime, storage, the embedded etcd cluster
// (on a member), strategy modules and readiness, from /ui/api/v1/system,
// refreshed every few seconds.

import { h } from './dom.js';
import { getJSON, clockOffset } from './api.js';
import { dur, abs, ago, bytes, nanos, parseTime } from './format.js';
import * as store from './store.js';

const MEMBER_COLS = ['Member', 'etcd leader', 'Health', 'Learner', 'Raft index', 'DB size', 'Peer URL', 'Error'];
const MOD_COLS = ['Module', 'Version', 'State', 'Status', 'Signer', 'sha256', 'Calls', 'Errors', 'p50', 'p99', 'Last error'];

export function system(root) {
  const body = h('div', { id: 'system', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading…'));
  root.append(h('h1', {}, 'System'), body);
  let timer = null;
  let stopped = false;
  // The live-data card describes this page's own streams: it follows
  // them on every refresh, not only when the status is re-read.
  const live = h('div', { id: 'live' });
  function renderLive() {
    const d = dl([
      ['Leases', `${store.leases.items.size} (${store.leases.state})`],
      ['LeaseCandidates', `${store.candidates.items.size} (${store.candidates.state})`],
      ['Lease watch resourceVersion', store.leases.rv || '—'],
    ]);
    if (d.textContent !== live.textContent) live.replaceChildren(d);
  }

  async function load() {
    try {
      render(await getJSON('/ui/api/v1/system'));
    } catch (e) {
      body.replaceChildren(h('p', { class: 'banner' }, `Cannot read the system status: ${e.message}`));
    }
    body.removeAttribute('aria-busy');
    if (!stopped) timer = setTimeout(load, 5000);
  }

  function render(s) {
    const v = s.version || {};
    const started = parseTime(s.startTime);
    const server = parseTime(s.serverTime);
    const cards = [
      card('Server', dl([
        ['Version', v.gitVersion || '—'],
        ['Commit', v.gitCommit ? `${v.gitCommit.slice(0, 12)}${v.gitTreeState === 'dirty' ? ' (dirty)' : ''}` : '—'],
        ['Built', v.buildDate || '—'],
        ['Go', `${v.goVersion || '—'} ${v.platform || ''}`],
        ['Uptime', started && server ? `${dur(server - started)} (since ${abs(started)})` : '—'],
        ['Server clock', `${abs(server)} (browser ${Math.abs(clockOffset()) < 500 ? 'in sync' : `off by ${dur(clockOffset())}`})`],
        ['Goroutines', String(s.goroutines)],
        ['Heap', bytes(s.heapBytes)],
      ])),
      card('Storage', s.storage ? dl([
        ['Mode', mode(s)],
        ['Backend', s.storage.backend || '—'],
        ['File', s.storagePath || '—'],
        ['Size', bytes(s.storage.sizeBytes)],
        ['Revision', String(s.storage.revision)],
        ['Compacted to', String(s.storage.compactRevision)],
        ['Keys', String(s.storage.keys)],
      ]) : h('p', { class: 'muted' }, s.storageError ? `Error: ${s.storageError}` : 'No data: storage statistics are not wired.')),
      ...snapshotsCard(s, server),
      card(`Readiness: ${s.ready ? 'ready' : 'NOT ready'}`, s.checks?.length
        ? h('ul', { class: 'checks', id: 'checks' }, s.checks.map((c) => h('li', { class: c.ok ? 'ok' : 'fail' },
          h('span', { class: 'mark', 'aria-hidden': 'true' }, c.ok ? '✓' : '✗'), `${c.name}: ${c.ok ? 'ok' : 'failed'}`)))
        : h('p', { class: 'muted' }, 'No data.')),
      card('Live data', live),
    ];
    renderLive();
    const mods = s.modules == null
      ? h('p', { class: 'muted' }, 'No data: strategy modules are not wired.')
      : s.modules.length === 0 ? h('p', { class: 'muted' }, 'No strategy modules loaded.')
        : h('div', { class: 'table-wrap' }, h('table', { class: 'plain', id: 'modules' },
          h('thead', {}, h('tr', {}, MOD_COLS.map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, s.modules.map((m) => {
            const status = m.loadError ? `load error: ${m.loadError}` : `${m.active ? 'active' : 'inactive'}${m.builtin ? ', built-in' : ''}`;
            // A refused module (bad signature, wrong ABI) is marked in
            // the row itself: it looks loaded by name, but never runs.
            const refused = (m.state || '').startsWith('refused');
            const digest = refused && m.refusedSha256 ? m.refusedSha256 : m.sha256;
            const state = h('span', { class: `badge ${refused ? 's-expired' : m.state ? 's-held' : 's-vacant'}`, title: m.state || '' }, m.state || '—');
            const cells = [m.name || m.file, `${m.version || '—'}${m.abiVersion ? ` (ABI ${m.abiVersion})` : ''}`, state, status,
              m.signerKeyId ? h('code', {}, m.signerKeyId) : 'unsigned',
              h('code', { title: digest }, (digest || '').slice(0, 12) || '—'),
              String(m.calls), String(m.errors), nanos(m.latencyP50), nanos(m.latencyP99),
              m.lastError ? `${m.lastError} (${abs(parseTime(m.lastErrorAt))})` : '—'];
            return h('tr', { class: refused ? 'refused' : '', 'data-module': m.name || m.file }, cells.map((c, i) => h('td', { 'data-label': MOD_COLS[i] }, c)));
          }))));
    body.replaceChildren(h('div', { class: 'cards' }, cards), ...clusterSection(s),
      h('section', { 'aria-labelledby': 'h-mods' }, h('h2', { id: 'h-mods' }, 'Strategy modules'), mods));
  }

  load();
  return { update: renderLive, destroy() { stopped = true; clearTimeout(timer); } };
}

// mode says how this server stores: alone on the device, as a member of
// an embedded cluster, or on an external etcd.
function mode(s) {
  if (s.cluster) return `cluster member ${s.cluster.self} (embedded etcd)`;
  if (s.clusterError) return 'cluster member (status unavailable)';
  switch (s.storage.backend) {
    case 'boltdb': return 'single device, bbolt';
    case 'etcd': return 'replica on a shared etcd';
    default: return s.storage.backend || '—';
  }
}

// snapshotsCard shows the scheduled snapshots: the schedule, the last
// attempt (a refusal for a full disk stands out), the last good one and
// how many are kept; nothing when none are scheduled.
function snapshotsCard(s, now) {
  const sn = s.snapshots;
  if (!sn) return [];
  const run = (r) => {
    if (!r) return 'none since the server started';
    const t = parseTime(r.time);
    const when = `${abs(t)} (${ago(t, now)})`;
    if (r.result === 'ok') return `${when}: revision ${r.revision}, ${bytes(r.sizeBytes)}`;
    return `${when}: ${r.result === 'refused_low_space' ? 'REFUSED, disk too full' : 'FAILED'}: ${r.error}`;
  };
  const files = sn.files || [];
  const newest = files[0];
  const rows = [
    ['Schedule', `every ${dur(sn.intervalSeconds * 1000)}, newest ${sn.retention} kept, ${bytes(sn.minFreeBytes)} left free`],
    ['Last attempt', run(sn.last)],
    ['Last good', sn.lastSuccess ? run(sn.lastSuccess)
      : newest ? `${abs(parseTime(newest.time))} (${ago(parseTime(newest.time), now)}): revision ${newest.revision}, ${bytes(newest.sizeBytes)}` : 'none'],
    ['Next', sn.next ? abs(parseTime(sn.next)) : '—'],
    ['Kept', `${files.length} in ${sn.dir}${sn.listError ? ` (cannot list: ${sn.listError})` : ''}`],
  ];
  const bad = sn.last && sn.last.result !== 'ok';
  const content = bad
    ? [h('p', { class: 'banner', id: 'snapshot-problem' }, `The last scheduled snapshot ${sn.last.result === 'refused_low_space' ? 'was refused: the disk is too full' : 'failed'}.`), dl(rows)]
    : [dl(rows)];
  return [h('section', { class: 'card', id: 'snapshots' }, h('h2', {}, 'Snapshots'), ...content)];
}

// clusterSection lists the members of the embedded etcd cluster; nothing
// on a single device.
function clusterSection(s) {
  if (!s.cluster && !s.clusterError) return [];
  const title = h('h2', { id: 'h-cluster' }, 'Cluster');
  if (!s.cluster) {
    return [h('section', { 'aria-labelledby': 'h-cluster', id: 'cluster' }, title,
      h('p', { class: 'banner' }, `Cannot read the cluster status: ${s.clusterError}`))];
  }
  const c = s.cluster;
  const members = c.members || [];
  const voters = members.filter((m) => !m.learner);
  const healthy = voters.filter((m) => m.healthy).length;
  const quorum = Math.floor(voters.length / 2) + 1;
  const ctl = c.electionController;
  const summary = dl([
    ['This member', c.self],
    ['etcd leader', c.leader || 'none: no quorum'],
    ['Healthy voting members', `${healthy} of ${voters.length} (quorum ${quorum}${healthy < quorum ? ': LOST' : ''})`],
    ['Election controller', c.electionControllerUnknown ? 'unknown (no quorum to read it from)'
      : ctl ? `${ctl}${ctl === c.self ? ' (this member)' : ''}` : '—'],
    ['Cluster CA', caText(c.ca)],
  ]);
  const table = h('div', { class: 'table-wrap' }, h('table', { class: 'plain', id: 'members' },
    h('thead', {}, h('tr', {}, MEMBER_COLS.map((col) => h('th', { scope: 'col' }, col)))),
    h('tbody', {}, members.map((m) => {
      const name = m.name === c.self ? `${m.name} (this member)` : m.name || '(not started)';
      const cells = [name, m.leader ? 'leader' : '—',
        h('span', { class: `badge ${m.healthy ? 's-held' : 's-expired'}` }, m.healthy ? 'healthy' : 'unhealthy'),
        m.learner ? (m.stale ? 'stale learner' : 'learner') : 'voter', String(m.raftIndex), bytes(m.dbSizeBytes),
        h('code', {}, (m.peerURLs || [])[0] || '—'), staleText(m) || m.error || '—'];
      return h('tr', { 'data-member': m.name, class: m.name === c.self ? 'self' : '' },
        cells.map((cell, i) => h('td', { 'data-label': MEMBER_COLS[i] }, cell)));
    }))));
  return [h('section', { 'aria-labelledby': 'h-cluster', id: 'cluster' }, title, summary, table, certificatesTable(c))];
}

const CERT_COLS = ['Certificate', 'Kind', 'CA', 'Expires', 'Renews', 'Warning'];

// certificatesTable lists every member's and replica's newest
// certificate: its expiry, when its holder renews it, and a warning when
// it nears its expiry without a renewal.
function certificatesTable(c) {
  const certs = c.certificates || [];
  if (!certs.length) return [];
  return h('div', { class: 'table-wrap' }, h('table', { class: 'plain', id: 'certificates' },
    h('thead', {}, h('tr', {}, CERT_COLS.map((col) => h('th', { scope: 'col' }, col)))),
    h('tbody', {}, certs.map((x) => {
      const expires = x.expiresInSeconds > 0 ? `in ${dur(x.expiresInSeconds * 1000)}` : 'expired';
      const cells = [x.name, x.kind, (x.ca || '—').slice(0, 12), x.notAfter ? `${x.notAfter} (${expires})` : 'unrecorded',
        x.renewAt || '—', x.warning ? h('span', { class: 'badge s-expired' }, x.warning) : '—'];
      return h('tr', { 'data-certificate': x.name }, cells.map((cell, i) => h('td', { 'data-label': CERT_COLS[i] }, cell)));
    }))));
}

// caText is the CA members sign with, and the last CA rotation's phase
// (leasehold cluster rotate-ca).
function caText(ca) {
  if (!ca || !ca.current) return '—';
  const id = (ca.current.id || '').slice(0, 12);
  const base = `${id} (${ca.current.subject}, until ${ca.current.notAfter})`;
  if (ca.phase === 'reissue') {
    const lag = (ca.lagging || []).join(', ') || 'none';
    return `${base}; rotation under way, not re-issued yet: ${lag}`;
  }
  if (ca.phase === 'done') return `${base}; rotated at ${ca.finished}`;
  return base;
}

// staleText says how long a learner has not answered and when the etcd
// leader's member removes it (a joiner that died halfway blocks joins).
function staleText(m) {
  if (!m.stale) return '';
  const what = m.stale.neverStarted ? 'never started' : 'lost before its promotion';
  return `${what}; unreachable for ${m.stale.unreachableSeconds}s, removed after ${m.stale.removedAfterSeconds}s`;
}

function card(title, content) {
  return h('section', { class: 'card' }, h('h2', {}, title), content);
}

function dl(rows) {
  return h('dl', { class: 'fields' }, rows.flatMap(([dt, dd]) => [h('dt', {}, dt), h('dd', {}, dd)]));
}
