// The page's shared data: the Lease and LeaseCandidate informers, the
// combined connection state, and the holder changes seen in this session.

import { Informer } from './informer.js';
import { now } from './api.js';
import { parseTime } from './format.js';

export const leases = new Informer('/apis/coordination.k8s.io/v1/leases');
export const candidates = new Informer('/apis/coordination.k8s.io/v1beta1/leasecandidates');

// transitions records holder changes observed live, per "ns/name", so the
// timeline shows hand-overs even without an election decision history.
export const transitions = new Map();

leases.addEventListener('change', (e) => {
  const { obj, old } = e.detail;
  const from = old?.spec?.holderIdentity || '';
  const to = obj.spec?.holderIdentity || '';
  if (!old || from === to || e.detail.type === 'DELETED') return;
  const k = `${obj.metadata.namespace}/${obj.metadata.name}`;
  const list = transitions.get(k) || [];
  list.push({ time: (to && parseTime(obj.spec.acquireTime)) || now(), from, to, cause: to ? (from ? 'holder changed' : 'acquired') : 'released' });
  transitions.set(k, list.slice(-50));
});

// connection is the page-wide state: live only when both streams are
// (candidates may be "unavailable" on servers that do not serve them).
export function connection() {
  const ok = (s) => s === 'live' || s === 'unavailable';
  for (const s of ['auth', 'stale']) {
    if (leases.state === s || candidates.state === s) {
      const since = [leases.staleSince, candidates.staleSince].filter(Boolean);
      return {
        state: s,
        since: since.length ? Math.min(...since) : null,
        error: leases.error || candidates.error,
        synced: leases.synced,
      };
    }
  }
  if (ok(leases.state) && ok(candidates.state)) return { state: 'live', synced: true };
  return { state: 'connecting', synced: leases.synced };
}

export function start() {
  leases.start();
  candidates.start();
}
