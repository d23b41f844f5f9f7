package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// DefaultStaleLearnerAfter is --cluster-stale-learner-after's default: a
// joiner starts its member within seconds of its admission, and a learner
// catching up answers all along; a minute unreachable is a joiner that
// died halfway. It is below a joiner's two minutes of retries, so the
// next joiner gets in.
const DefaultStaleLearnerAfter = time.Minute

// learnerWatch tracks, on every member, since when each learner has not
// answered; the etcd leader's member removes the ones past the bound.
// Every member tracks, so that a new leader goes on from what it saw.
type learnerWatch struct {
	after time.Duration
	mu    sync.Mutex
	since map[uint64]time.Time // learner ID -> unreachable since
}

// unreachableFor is how long learner id has not answered (false: it
// answers, or has not been looked at yet).
func (w *learnerWatch) unreachableFor(id uint64, now time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.since[id]
	if !ok {
		return 0, false
	}
	return now.Sub(t), true
}

// observe records whether the learners answer (reachable[id]) and forgets
// the members that are no longer learners.
func (w *learnerWatch) observe(reachable map[uint64]bool, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.since {
		if _, ok := reachable[id]; !ok {
			delete(w.since, id)
		}
	}
	for id, ok := range reachable {
		if ok {
			delete(w.since, id)
		} else if _, seen := w.since[id]; !seen {
			w.since[id] = now
		}
	}
}

// staleInterval is how often the learners are looked at.
func (w *learnerWatch) interval() time.Duration {
	return min(max(w.after/4, 200*time.Millisecond), 5*time.Second)
}

// watchLearners runs until the member closes: it probes the learners and,
// on the etcd leader's member, removes those unreachable past the bound.
func (m *Member) watchLearners() {
	t := time.NewTicker(m.learners.interval())
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-m.etcd.Server.StopNotify():
			return
		case <-t.C:
		}
		m.checkLearners()
	}
}

// learners are the learners as this member applied the membership.
func (m *Member) learnerList() []*membership.Member {
	var out []*membership.Member
	for _, mem := range m.etcd.Server.Cluster().Members() {
		if mem.IsLearner {
			out = append(out, mem)
		}
	}
	return out
}

// checkLearners is one look at the learners.
func (m *Member) checkLearners() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	learners := m.learnerList()
	reachable := make(map[uint64]bool, len(learners))
	for _, mem := range learners {
		reachable[uint64(mem.ID)] = m.learnerAnswers(ctx, mem)
	}
	now := time.Now()
	m.learners.observe(reachable, now)
	if m.etcd.Server.Leader() != m.etcd.Server.MemberID() {
		return
	}
	for _, mem := range learners {
		d, stale := m.learners.unreachableFor(uint64(mem.ID), now)
		if !stale || d < m.learners.after {
			continue
		}
		if _, err := m.client.MemberRemove(ctx, uint64(mem.ID)); err != nil {
			m.log.Warn("Removing a stale learner failed; retrying", "learner", learnerName(mem), "id", mem.ID.String(), "err", err)
			continue
		}
		m.log.Warn("Removed a stale learner: it was added by a join but has not answered since, so it blocked every later join",
			"learner", learnerName(mem), "id", mem.ID.String(), "peer_urls", strings.Join(mem.PeerURLs, ","),
			"unreachable_for", d.Round(time.Second).String(), "bound", m.learners.after.String())
	}
}

// learnerAnswers reports whether learner mem's member runs: its client
// URL answers a status request, or, while it catches up (its client
// listener serves only once it applied its own start), its peer listener
// answers over the cluster's mutual TLS.
func (m *Member) learnerAnswers(ctx context.Context, mem *membership.Member) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if len(mem.ClientURLs) > 0 {
		if _, err := m.client.Status(ctx, mem.ClientURLs[0]); err == nil {
			return true
		}
	}
	for _, u := range mem.PeerURLs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(u, "/")+"/version", nil)
		if err != nil {
			continue
		}
		if resp, err := m.peerHTTP.Do(req); err == nil {
			resp.Body.Close()
			return true // any answer: the member's peer server runs
		}
	}
	return false
}

// staleInfo is how Status shows learner mem when it does not answer.
func (m *Member) staleInfo(mem *membership.Member) *clusterapi.StaleLearner {
	d, ok := m.learners.unreachableFor(uint64(mem.ID), time.Now())
	if !ok {
		return nil
	}
	return &clusterapi.StaleLearner{NeverStarted: mem.Name == "", UnreachableSeconds: int64(d / time.Second),
		RemovedAfterSeconds: int64(m.learners.after / time.Second)}
}

// learnerName is a learner's name, or what stands for it before its
// member started and published one.
func learnerName(mem *membership.Member) string {
	if mem.Name == "" {
		return "(never started)"
	}
	return mem.Name
}

// learnersInTheWay is the error of a join etcd refused because the
// cluster has its one learner already: which learner, whether it answers
// (a join under way) or not (a joiner that died halfway), and when it
// goes. The joiner retries it (ErrTryAgain).
func (m *Member) learnersInTheWay(name string, cause error) error {
	var parts []string
	now := time.Now()
	for _, mem := range m.learnerList() {
		desc := fmt.Sprintf("learner %s (ID %s, peer URL %s)", learnerName(mem), mem.ID, strings.Join(mem.PeerURLs, ","))
		if d, ok := m.learners.unreachableFor(uint64(mem.ID), now); ok {
			desc += fmt.Sprintf(" has not answered for %s; the etcd leader's member removes it once unreachable for %s, "+
				"or remove it now with \"leasehold cluster remove %s\"", d.Round(time.Second), m.learners.after, mem.ID)
		} else {
			desc += " is starting or catching up before its promotion (another join under way)"
		}
		parts = append(parts, desc)
	}
	if len(parts) == 0 {
		parts = append(parts, "a learner this member has not applied yet")
	}
	return fmt.Errorf("cluster: cannot admit %s yet (%w): etcd admits one learner at a time, and %s (etcd: %v)",
		name, clusterapi.ErrTryAgain, strings.Join(parts, "; "), cause)
}

// isTooManyLearners reports etcd's refusal of a second learner.
func isTooManyLearners(err error) bool {
	return errors.Is(err, rpctypes.ErrTooManyLearners) || (err != nil && strings.Contains(err.Error(), "too many learner members"))
}
