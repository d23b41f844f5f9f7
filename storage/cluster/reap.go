package cluster

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage/etcd"
)

// Election leases are revoked as soon as they expire. etcd's lessor looks
// for expired leases every 500 ms, so a lease is revoked up to half a
// second after it expired, and a survivor takes over the election
// controller only then: after its member died, that was up to 0.5 s of
// the hand-off (issue 27, item 4). The member that leads raft therefore
// reads, every reapEvery, the remaining time of each lease holding an
// election (the oldest key under each election's prefix) from its own
// lessor, and revokes a lease it has proved expired, as etcd's lessor
// would a moment later.
//
// The proof. etcd answers a lease's remaining time in whole seconds,
// rounded toward zero (LeaseTimeToLive). A reading of 0 or less means
// under a second left when it was taken; a renewal sets the remaining
// time back to the lease's TTL (reapMinTTL or more; the members do not
// enable etcd's lease checkpoints, with which a renewal after a leader
// change could set less), so a reading taken
// less than reapMaxGap after a renewal reads 1 or more. Hence readings of
// 0 or less, none more than reapMaxGap after the one before, the first
// received at t and the last sent at t+1s or later, prove that no renewal
// came between them and that the lease expired before the last one. An
// expired lease cannot be renewed (etcd's Renew refuses it), so revoking
// it is what etcd does, only sooner. Every reading must come from this
// member's lessor while it leads in one raft term (a new leader extends
// every lease: its lessor counts anew), and the revocation follows a
// quorum read after which this member still leads in that term, as etcd's
// own revocation checks its leadership first.
//
// The holder of an election stops its work two thirds of a TTL after the
// last renewal it sent that was answered (storage/etcd's confirmLease),
// before its lease can expire: revoking at expiry keeps that margin.

const (
	// reapEvery is how often the leader reads the holders' leases.
	reapEvery = 50 * time.Millisecond
	// reapMaxGap bounds the time between two readings of one proof (from
	// the earlier one sent to the later one received).
	reapMaxGap = 900 * time.Millisecond
	// reapMinTTL is the shortest lease TTL (seconds) the proof holds for: a
	// renewal must read 1 or more up to reapMaxGap later.
	reapMinTTL = 2
)

// expiryProof collects one lease's readings towards the proof above.
type expiryProof struct {
	term      uint64    // the raft term of the readings
	firstZero time.Time // when the first reading of 0 or less of this run arrived
	lastSent  time.Time // when the last reading was sent
}

// observe adds a reading of ttl (whole seconds left; granted the TTL of
// the lease) sent at sent and received at recv, in raft term term, taken
// while this member led. It reports whether the lease is proved expired.
func (p *expiryProof) observe(term uint64, sent, recv time.Time, ttl, granted int64) bool {
	prevSent := p.lastSent
	p.lastSent = sent
	if term != p.term || granted < reapMinTTL || ttl > 0 {
		p.term, p.firstZero = term, time.Time{}
		if ttl <= 0 && granted >= reapMinTTL {
			p.firstZero = recv
		}
		return false
	}
	if p.firstZero.IsZero() || recv.Sub(prevSent) >= reapMaxGap {
		p.firstZero = recv
		return false
	}
	return !sent.Before(p.firstZero.Add(time.Second))
}

// reapElectionLeases runs the revocations above until the member closes.
func (m *Member) reapElectionLeases() {
	srv := m.etcd.Server
	prefix := etcd.ElectionsPrefix(m.cfg.Prefix)
	proofs := map[clientv3.LeaseID]*expiryProof{}
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-srv.StopNotify():
			return
		case <-t.C:
		}
		if srv.Leader() != srv.MemberID() {
			clear(proofs)
			continue
		}
		term := srv.Term()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		holders, err := m.electionHolders(ctx, prefix)
		if err != nil {
			cancel()
			continue
		}
		for id := range proofs {
			if _, ok := holders[id]; !ok {
				delete(proofs, id)
			}
		}
		for id := range holders {
			p := proofs[id]
			if p == nil {
				p = &expiryProof{}
				proofs[id] = p
			}
			sent := time.Now()
			resp, err := m.local.TimeToLive(ctx, id)
			recv := time.Now()
			if err != nil {
				delete(proofs, id)
				continue
			}
			// Taken from this member's lessor only if it led in term
			// before and after the reading.
			if srv.Leader() != srv.MemberID() || srv.Term() != term {
				delete(proofs, id)
				continue
			}
			if p.observe(term, sent, recv, resp.TTL, resp.GrantedTTL) {
				m.revokeExpired(ctx, id, term, holders[id], recv.Sub(p.firstZero))
				delete(proofs, id)
			}
		}
		cancel()
	}
}

// electionHolders maps the lease of each election's oldest key under
// prefix to that key, read from this member's own data (the proof, not
// this list, decides a revocation).
func (m *Member) electionHolders(ctx context.Context, prefix string) (map[clientv3.LeaseID]string, error) {
	resp, err := m.local.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	type holder struct {
		key   string
		rev   int64
		lease clientv3.LeaseID
	}
	oldest := map[string]holder{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		name := electionOf(key[len(prefix):])
		if h, ok := oldest[name]; kv.Lease != 0 && (!ok || kv.CreateRevision < h.rev) {
			oldest[name] = holder{key: key, rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
		}
	}
	out := make(map[clientv3.LeaseID]string, len(oldest))
	for _, h := range oldest {
		out[h.lease] = h.key
	}
	return out, nil
}

// electionOf is the election's name in a key below the elections'
// prefix ("NAME/LEASE").
func electionOf(rest string) string {
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i] == '/' {
			return rest[:i]
		}
	}
	return rest
}

// revokeExpired revokes lease id, proved expired in term, after a quorum
// read that this member still leads in that term.
func (m *Member) revokeExpired(ctx context.Context, id clientv3.LeaseID, term uint64, key string, proofTook time.Duration) {
	srv := m.etcd.Server
	if _, err := m.local.Get(clientv3.WithRequireLeader(ctx), probeKey); err != nil {
		return
	}
	if srv.Leader() != srv.MemberID() || srv.Term() != term {
		return
	}
	if _, err := m.local.Revoke(ctx, id); err != nil {
		// etcd's lessor revoked it first, or the leadership moved on.
		m.log.Debug("Revoking an expired election lease failed", "key", key, "err", err)
		return
	}
	m.log.Info("Revoked an expired election lease (without waiting for etcd's check every 500 ms)", "key", key, "lease", int64(id), "proof_took", proofTook.Round(time.Millisecond))
	m.reaped.Add(1)
}
