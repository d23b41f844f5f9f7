// What a Lease's fields mean: its state in words, and its times.

import { parseTime } from './format.js';

export const STATES = {
  held: 'Held',
  expiring: 'Expiring',
  expired: 'Expired',
  vacant: 'Vacant',
  handover: 'Handover pending',
};

// A lease is "expiring" in the last quarter of its duration.
const EXPIRING_FRACTION = 0.25;

// leaseState interprets a Lease at server time now (epoch ms).
export function leaseState(l, now) {
  const s = l.spec || {};
  const holder = s.holderIdentity || '';
  const durMs = (s.leaseDurationSeconds || 0) * 1000;
  const renew = parseTime(s.renewTime);
  const acquire = parseTime(s.acquireTime);
  const last = renew ?? acquire;
  const expiresAt = last != null && durMs > 0 ? last + durMs : null;
  const remaining = expiresAt == null ? null : expiresAt - now;
  let key = 'held';
  if (!holder) key = 'vacant';
  else if (remaining != null && remaining <= 0) key = 'expired';
  else if (s.preferredHolder && s.preferredHolder !== holder) key = 'handover';
  else if (remaining != null && remaining < durMs * EXPIRING_FRACTION) key = 'expiring';
  return {
    key,
    label: STATES[key],
    holder,
    preferred: s.preferredHolder || '',
    strategy: s.strategy || '',
    durMs,
    renew,
    acquire,
    expiresAt,
    remaining,
    // fraction of the duration still left, 0..1, for the progress bar.
    fraction: remaining == null || !durMs ? null : Math.max(0, Math.min(1, remaining / durMs)),
    transitions: s.leaseTransitions || 0,
  };
}

// expiresText says when the lease expires (or expired), or why it does not.
export function expiresText(st, dur) {
  if (!st.holder) return 'no holder';
  if (st.remaining == null) return st.durMs ? 'never renewed' : 'no duration';
  return st.remaining > 0 ? `in ${dur(st.remaining)}` : `expired ${dur(-st.remaining)} ago`;
}

// candidatesOf lists the LeaseCandidates naming lease ns/name.
export function candidatesOf(cands, ns, name) {
  const out = [];
  for (const c of cands.values()) {
    if (c.metadata?.namespace === ns && c.spec?.leaseName === name) out.push(c);
  }
  return out.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}
