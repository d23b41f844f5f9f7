package election

import (
	"context"
	"time"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// runGC deletes stale candidates every GCPeriod, as upstream's
// LeaseCandidate GC controller (elections already ignore them).
func (c *Controller) runGC(ctx context.Context) {
	t := time.NewTicker(c.opts.GCPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c.Synced() {
				c.CollectGarbage(ctx)
			}
		}
	}
}

// staleCandidate is a candidate the cache judged expired.
type staleCandidate struct {
	ns, name string
	uid      types.UID
	rv       string
}

// CollectGarbage deletes every candidate that has not renewed within
// CandidateValidity (one without renewTime: created that long ago), and
// decision histories of leases that have neither object nor candidates.
// Like upstream it re-reads each candidate before deleting it, and it
// deletes with uid and resourceVersion preconditions, so a candidate that
// renewed in between survives. It returns how many candidates it deleted.
func (c *Controller) CollectGarbage(ctx context.Context) int {
	now := c.now()
	var stale []staleCandidate
	c.mu.Lock()
	for _, byName := range c.cands {
		for _, e := range byName {
			o := e.obj
			expired := !c.valid(e, now)
			if o.Spec.RenewTime == nil {
				expired = now.After(e.createdAt.Add(c.opts.CandidateValidity))
			}
			if expired {
				stale = append(stale, staleCandidate{o.Namespace, o.Name, o.UID, o.ResourceVersion})
			}
		}
	}
	c.mu.Unlock()
	deleted := 0
	for _, s := range stale {
		sc := c.candScope
		sc.Namespace = s.ns
		cur, err := c.e.Get(ctx, sc, s.name, &metav1.GetOptions{})
		if err != nil {
			continue
		}
		lc, ok := cur.(*coordinationv1beta1.LeaseCandidate)
		if !ok || lc.UID != s.uid || lc.ResourceVersion != s.rv {
			continue // changed since judged: the watch will tell
		}
		uid, rv := s.uid, s.rv
		_, _, err = c.e.Delete(ctx, sc, s.name, &metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil:
			deleted++
			c.stats.collected.Add(1)
			c.log.Info("Deleted stale lease candidate", "namespace", s.ns, "candidate", s.name)
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			c.log.Warn("Deleting stale lease candidate failed", "namespace", s.ns, "candidate", s.name, "err", err)
		}
	}
	c.collectHistories(ctx)
	return deleted
}

// collectHistories deletes decision histories nobody can relate to any
// more (their lease was deleted while the controller was not running, or
// while it was a plain lease the cache did not follow). A lease that is
// not cached may still exist, so the engine has the last word.
func (c *Controller) collectHistories(ctx context.Context) {
	keys, err := c.h.DecisionLeases(ctx)
	if err != nil {
		c.log.Warn("Listing decision histories failed", "err", err)
		return
	}
	for _, nn := range keys {
		k := leaseKey{nn.Namespace, nn.Name}
		c.mu.Lock()
		orphan := c.leases[k] == nil && len(c.cands[k]) == 0
		c.mu.Unlock()
		if orphan && !c.leaseExists(ctx, k) {
			if err := c.h.DeleteDecisions(ctx, k.ns, k.name); err != nil {
				c.log.Warn("Deleting decision history failed", "lease", k.String(), "err", err)
			}
		}
	}
}
