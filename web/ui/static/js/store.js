// The page's shared data: the Lease and LeaseCandidate informers and the
// combined connection state.

import { Informer } from './informer.js';

export const leases = new Informer('/apis/coordination.k8s.io/v1/leases');
export const candidates = new Informer('/apis/coordination.k8s.io/v1beta1/leasecandidates');

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
