package election

import (
	"encoding/binary"
	"hash/fnv"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseView is the lease as the controller judges it.
type leaseView struct {
	exists    bool
	obj       *coordinationv1.Lease
	holder    string
	preferred string
	strategy  string
	// live: held, and renewed within its duration on the server's clock.
	live   bool
	expiry time.Time
	// renewSeen is when the controller saw the holder last renew.
	renewSeen time.Time
	// unconfirmed: live, but its holder has not renewed since the grant
	// (AnnotationGrantedRenewTime), so it does not lead yet.
	unconfirmed bool
}

func viewLease(le *leaseEntry, now time.Time) leaseView {
	if le == nil {
		return leaseView{}
	}
	s := &le.obj.Spec
	v := leaseView{exists: true, obj: le.obj, holder: derefStr(s.HolderIdentity),
		preferred: derefStr(s.PreferredHolder), renewSeen: le.renewSeen}
	if s.Strategy != nil {
		v.strategy = string(*s.Strategy)
	}
	if v.holder != "" && s.RenewTime != nil && s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds > 0 {
		v.expiry = le.renewSeen.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
		v.live = now.Before(v.expiry)
	}
	if v.live {
		g, ok := le.obj.Annotations[AnnotationGrantedRenewTime]
		v.unconfirmed = ok && g == microRFC3339(s.RenewTime.Time)
	}
	if v.holder != "" && v.expiry.IsZero() {
		// Held without renewTime or duration: expired since first seen.
		v.expiry = le.renewSeen
	}
	return v
}

// roundStart is when the vacancy of a lease that nobody holds began: a
// grant needs proof of life from after it ("answered this round"), so
// that a holder that just died, or a candidate that acked a ping seconds
// before, is not handed the lease on an old ack.
func (v leaseView) roundStart() time.Time {
	switch {
	case !v.exists:
		return time.Time{}
	case v.holder == "" || v.expiry.IsZero():
		return v.renewSeen
	}
	return v.expiry
}

// forRound forgets acks older than since on snapshot copies: such a
// candidate must be pinged again. One that ignored its last ping stays
// pending or unresponsive.
func forRound(cands []*candEntry, since time.Time) {
	for _, e := range cands {
		if e.ackAt.IsZero() || !e.ackAt.Before(since) {
			continue
		}
		if !e.ackAt.Before(e.pingAt) {
			e.pingAt = time.Time{}
		}
		e.ackAt = time.Time{}
	}
}

// trigger says why a decision is being made.
func (v leaseView) trigger() abi.Reason {
	switch {
	case !v.exists:
		return abi.ReasonLeaseMissing
	case v.holder == "":
		if v.obj.Spec.AcquireTime != nil {
			return abi.ReasonHolderReleased
		}
		return abi.ReasonNoHolder
	case !v.live:
		return abi.ReasonLeaseExpired
	}
	return abi.ReasonCandidateChanged
}

// microRFC3339 renders t as renewTime is rendered on the wire.
func microRFC3339(t time.Time) string { return t.UTC().Format(metav1.RFC3339Micro) }

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// buildInput is the deterministic snapshot a strategy sees: candidates
// sorted by name, times from the server's observations.
func (c *Controller) buildInput(k leaseKey, m *memo, strategy string, lv leaseView, cands []*candEntry,
	drained map[string]history.DrainRecord, now time.Time) *abi.Input {
	m.seq++
	in := &abi.Input{
		ABIVersion:  abi.ABIVersion,
		Strategy:    strategy,
		NowUs:       c.wall().UnixMicro(),
		DecisionSeq: m.seq,
		Reason:      lv.trigger(),
		Lease: abi.LeaseState{
			Namespace: k.ns, Name: k.name, Exists: lv.exists,
			Holder: lv.holder, PreferredHolder: lv.preferred, Strategy: lv.strategy,
			Expired: lv.exists && !lv.live,
		},
		Candidates: make([]abi.Candidate, 0, len(cands)),
		History:    append([]abi.HistoryEntry(nil), m.history...),
	}
	// The observation times below are monotonic instants (clock.go); the
	// strategy sees them as wall times, all mapped through the wall clock
	// as NowUs read it, so that they agree with NowUs and with each other
	// even across a step of the wall clock.
	wall := time.UnixMicro(in.NowUs)
	shown := func(instant time.Time) int64 { return micros(wallAt(instant, wall, now)) }
	var uid string
	if lv.exists {
		s := &lv.obj.Spec
		uid = string(lv.obj.UID)
		if s.AcquireTime != nil {
			in.Lease.AcquireTimeUs = s.AcquireTime.UnixMicro()
			in.Lease.HolderSinceUs = in.Lease.AcquireTimeUs
		}
		if s.RenewTime != nil {
			in.Lease.RenewTimeUs = shown(lv.renewSeen)
		}
		in.Lease.LeaseDurationS = derefI32(s.LeaseDurationSeconds)
		in.Lease.Transitions = derefI32(s.LeaseTransitions)
	}
	for _, e := range cands {
		o := e.obj
		ac := abi.Candidate{
			Name:             o.Name,
			UID:              string(o.UID),
			CreationTimeUs:   o.CreationTimestamp.UnixMicro(),
			BinaryVersion:    abi.ParseVersion(o.Spec.BinaryVersion),
			EmulationVersion: abi.ParseVersion(o.Spec.EmulationVersion),
			Strategy:         string(o.Spec.Strategy),
			RenewTimeUs:      shown(e.renewAt),
			PingTimeUs:       shown(e.pingAt),
			Acked:            c.state(e, now) == stAcked,
			Labels:           o.Labels,
		}
		_, ac.Drained = drained[o.Name]
		if o.CreationTimestamp.IsZero() {
			ac.CreationTimeUs = 0
		}
		if o.Name == lv.holder {
			in.Lease.HolderIsCandidate = true
		}
		in.Candidates = append(in.Candidates, ac)
	}
	h := fnv.New64a()
	h.Write([]byte(k.String()))
	h.Write([]byte(uid))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(m.seq))
	h.Write(b[:])
	in.Seed = h.Sum64()
	return in
}
