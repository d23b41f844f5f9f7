package election

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// createLease stores l in the test namespace and returns the stored object.
func (env *testEnv) createLease(l *coordinationv1.Lease) *coordinationv1.Lease {
	env.t.Helper()
	o, err := env.e.Create(context.Background(), env.leases, l, &metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("create lease %s: %v", l.Name, err)
	}
	return o.(*coordinationv1.Lease)
}

// updateLease applies change to the stored lease and returns the result.
func (env *testEnv) updateLease(name string, change func(*coordinationv1.Lease)) *coordinationv1.Lease {
	env.t.Helper()
	l := env.lease(name).DeepCopy()
	change(l)
	o, _, err := env.e.Update(context.Background(), env.leases, name, l, &metav1.UpdateOptions{})
	if err != nil {
		env.t.Fatalf("update lease %s: %v", name, err)
	}
	return o.(*coordinationv1.Lease)
}

// cachedLease is the controller's copy of a lease, nil if not cached.
func (env *testEnv) cachedLease(name string) *leaseEntry {
	env.c.mu.Lock()
	defer env.c.mu.Unlock()
	if e := env.c.leases[leaseKey{testNS, name}]; e != nil {
		cp := *e
		return &cp
	}
	return nil
}

// TestPlainLeasesNotCached: leases renewed by plain leader election, with
// no candidate, strategy or preferredHolder, are neither cached nor
// reconciled, and observing one costs no allocation.
func TestPlainLeasesNotCached(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
	env := newEnv(t, fastOptions())
	ctx := context.Background()
	const n = 100
	for i := range n {
		env.createLease(plainLease(plainLeaseName(i), fmt.Sprintf("holder-%d", i), time.Now()))
	}
	env.run()
	for range 2 {
		for i := range n {
			env.renewLease(ctx, plainLeaseName(i))
		}
	}
	for i := range n / 2 {
		if _, _, err := env.e.Delete(ctx, env.leases, plainLeaseName(i), &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.drained("sentinel")
	env.c.mu.Lock()
	leases, memos, deleted, due := len(env.c.leases), len(env.c.memos), len(env.c.deleted), len(env.c.due)
	env.c.mu.Unlock()
	if leases != 1 || memos != 0 || deleted != 0 || due != 0 {
		t.Fatalf("after plain renewals: %d leases cached (want only the sentinel), %d memos, %d deleted, %d due",
			leases, memos, deleted, due)
	}
	if st := env.c.Stats(); st.Decisions != 0 || st.Grants != 0 {
		t.Errorf("stats = %+v", st)
	}

	// The check itself, without the worker: nothing stored, nothing
	// enqueued, nothing allocated.
	c := newEnv(t, fastOptions()).c
	l := plainLease("plain", "holder", time.Now())
	l.Namespace, l.ResourceVersion = testNS, "42"
	if allocs := testing.AllocsPerRun(100, func() { c.observeLease(l) }); allocs != 0 {
		t.Errorf("observing a plain lease allocates %v times", allocs)
	}
	c.forgetLease(l)
	if len(c.leases) != 0 || len(c.dirty) != 0 || len(c.deleted) != 0 {
		t.Errorf("plain lease cached or enqueued: %d leases, %d dirty, %d deleted", len(c.leases), len(c.dirty), len(c.deleted))
	}
}

// TestCandidateForPlainLease: a candidate joining a lease the controller
// did not follow makes it read the lease and elect as if it had always
// known it, whether the lease is vacant or held by a plain elector.
func TestCandidateForPlainLease(t *testing.T) {
	t.Parallel()
	// The grant outlasts each test: assertKnewLease counts one grant and
	// reads its record last, which an expiry (a nobody renews it) and a
	// re-grant on a slow machine would not leave so.
	opts := fastOptions()
	opts.GrantDuration = time.Minute
	t.Run("released", func(t *testing.T) {
		env := newEnv(t, opts)
		l := plainLease("kcm", "", time.Now())
		two := int32(2)
		l.Spec.LeaseTransitions = &two
		env.createLease(l)
		env.run()
		env.drained("sentinel")
		if env.cachedLease("kcm") != nil {
			t.Fatal("plain lease cached before any candidate")
		}
		env.join("a", "kcm", "1.30.0", "1.30.0")
		env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") == "a" })
		got := env.lease("kcm")
		if derefI32(got.Spec.LeaseTransitions) != 3 || got.Spec.Strategy == nil || *got.Spec.Strategy != abi.BuiltinStrategy ||
			got.Annotations[AnnotationStrategy] != abi.BuiltinStrategy {
			t.Errorf("granted lease = %+v %v", got.Spec, got.Annotations)
		}
		assertKnewLease(t, env, abi.ReasonHolderReleased)
	})
	t.Run("held", func(t *testing.T) {
		env := newEnv(t, opts)
		ctx := context.Background()
		held := plainLease("kcm", "someone", time.Now())
		// Renewed every 200 ms: 3 s leaves a starved renewer room before
		// the lease expires and the controller rightly takes it.
		three := int32(3)
		held.Spec.LeaseDurationSeconds = &three
		first := env.createLease(held)
		env.run()
		// A plain elector keeps renewing: the lease stays its own, and a
		// lease without strategy gets no preferredHolder.
		stop := make(chan struct{})
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				// Errors show below: the lease would change hands.
				if o, err := env.e.Get(ctx, env.leases, "kcm", &metav1.GetOptions{}); err == nil {
					l := o.(*coordinationv1.Lease).DeepCopy()
					rt := metav1.NewMicroTime(time.Now())
					l.Spec.RenewTime = &rt
					_, _, _ = env.e.Update(ctx, env.leases, "kcm", l, &metav1.UpdateOptions{})
				}
			}
		}()
		env.join("a", "kcm", "1.30.0", "1.30.0")
		env.eventually(2*time.Second, "lease learned", func() bool { return env.cachedLease("kcm") != nil })
		env.eventually(2*time.Second, "a decision on the held lease", func() bool { return env.c.Stats().Decisions > 0 })
		if h, p := env.holder("kcm"), env.preferred("kcm"); h != "someone" || p != "" {
			t.Fatalf("holder %q, preferredHolder %q while the plain elector renews", h, p)
		}
		close(stop)
		<-renewed
		env.eventually(3*time.Second, "granted after expiry", func() bool { return env.holder("kcm") == "a" })
		got := env.lease("kcm")
		if derefI32(got.Spec.LeaseTransitions) != 1 || !got.Spec.AcquireTime.After(first.Spec.AcquireTime.Time) {
			t.Errorf("granted lease = %+v", got.Spec)
		}
		assertKnewLease(t, env, abi.ReasonLeaseExpired)
	})
}

// assertKnewLease checks that the controller decided on the lease it
// read, not on a missing lease it then failed to create, and granted
// once, for the reason given.
func assertKnewLease(t *testing.T, env *testEnv, trigger abi.Reason) {
	t.Helper()
	// The grant is visible in the store before the controller counts it.
	env.eventually(2*time.Second, "the grant counted", func() bool { return env.c.Stats().Grants >= 1 })
	if st := env.c.Stats(); st.WriteErrors != 0 || st.Grants != 1 {
		t.Errorf("stats = %+v", st)
	}
	recs := env.settledDecisions("kcm")
	for _, r := range recs {
		if r.Trigger == string(abi.ReasonLeaseMissing) || r.Outcome != "ok" {
			t.Errorf("decision on a lease the controller did not know: %+v", r)
		}
	}
	if last := recs[len(recs)-1]; last.Action != "grant" || last.Trigger != string(trigger) {
		t.Errorf("last decision = %+v", last)
	}
}

// TestLeaseDroppedWhenNoLongerCoordinated: a cached lease that loses its
// strategy, with no candidate left, leaves the cache; its decision
// history stays while the lease exists.
func TestLeaseDroppedWhenNoLongerCoordinated(t *testing.T) {
	t.Parallel()
	t.Run("strategy removed", func(t *testing.T) {
		env := newEnv(t, fastOptions())
		st := coordinationv1.CoordinatedLeaseStrategy(abi.BuiltinStrategy)
		env.createLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{Strategy: &st}})
		env.run()
		env.eventually(2*time.Second, "coordinated lease cached", func() bool { return env.cachedLease("l") != nil })
		env.updateLease("l", func(l *coordinationv1.Lease) { l.Spec.Strategy = nil })
		env.eventually(2*time.Second, "plain lease dropped", func() bool { return env.c.cachedLeases() == 0 })
	})
	t.Run("elected then released", func(t *testing.T) {
		env := newEnv(t, fastOptions())
		ctx := context.Background()
		a := env.join("a", "kcm", "1.30.0", "1.30.0")
		env.run()
		env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") == "a" })
		a.stop()
		if _, _, err := env.e.Delete(ctx, env.cands, "a", &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The holder releases as client-go does: strategy and
		// preferredHolder go with it.
		env.updateLease("kcm", func(l *coordinationv1.Lease) {
			empty := ""
			l.Spec.HolderIdentity, l.Spec.Strategy, l.Spec.PreferredHolder = &empty, nil, nil
		})
		env.eventually(2*time.Second, "released lease dropped", func() bool { return env.c.cachedLeases() == 0 })
		env.eventually(2*time.Second, "memory forgotten", func() bool {
			env.c.mu.Lock()
			defer env.c.mu.Unlock()
			return len(env.c.memos) == 0 && len(env.c.due) == 0
		})
		env.c.CollectGarbage(ctx)
		if len(env.decisions("kcm")) == 0 {
			t.Fatal("decision history of an existing lease collected")
		}
		if _, _, err := env.e.Delete(ctx, env.leases, "kcm", &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.c.CollectGarbage(ctx)
		if recs := env.decisions("kcm"); len(recs) != 0 {
			t.Errorf("history of the deleted plain lease kept: %+v", recs)
		}
	})
}

// TestFetchVersusWatchEvent drives the read of a newly concerned lease
// against concurrent watch events by hand (the controller is not
// running): whichever is newer by resourceVersion ends in the cache.
func TestFetchVersusWatchEvent(t *testing.T) {
	t.Parallel()
	k := leaseKey{testNS, "l"}
	// setup: a plain lease l at rv0 and a controller that just saw l's
	// first candidate; events is a watch on leases from rv0.
	setup := func(t *testing.T) (env *testEnv, rv0 *coordinationv1.Lease, events <-chan watch.Event) {
		env = newEnv(t, fastOptions())
		rv0 = env.createLease(plainLease("l", "someone", time.Now()))
		w, err := env.e.Watch(env.ctx, env.leases, &metav1.ListOptions{ResourceVersion: rv0.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		env.c.observeCandidate(candidateObj("a", "1.30.0", abi.BuiltinStrategy), fromWatch)
		if !env.c.startFetch(k) {
			t.Fatal("no read for a lease whose first candidate appeared")
		}
		return env, rv0, w.ResultChan()
	}
	next := func(t *testing.T, events <-chan watch.Event, typ watch.EventType) runtime.Object {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Type != typ {
				t.Fatalf("event %s, want %s", ev.Type, typ)
			}
			return ev.Object
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", typ)
		}
		return nil
	}
	rv := func(e *leaseEntry) string {
		if e == nil {
			return "none"
		}
		return e.obj.ResourceVersion
	}

	t.Run("event newer than read", func(t *testing.T) {
		env, rv0, events := setup(t)
		renewed := env.updateLease("l", func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()} })
		env.c.observeLease(next(t, events, watch.Modified).(*coordinationv1.Lease))
		env.c.endFetch(k, rv0)
		if got := rv(env.cachedLease("l")); got != renewed.ResourceVersion {
			t.Fatalf("cached rv %s, want the event's %s", got, renewed.ResourceVersion)
		}
	})
	t.Run("read newer than event", func(t *testing.T) {
		env, rv0, _ := setup(t)
		renewed := env.updateLease("l", func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()} })
		env.c.observeLease(rv0) // the watch lags behind the read
		env.c.endFetch(k, renewed)
		if got := rv(env.cachedLease("l")); got != renewed.ResourceVersion {
			t.Fatalf("cached rv %s, want the read's %s", got, renewed.ResourceVersion)
		}
	})
	t.Run("deleted during read", func(t *testing.T) {
		env, rv0, events := setup(t)
		if _, _, err := env.e.Delete(context.Background(), env.leases, "l", &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.c.forgetLease(next(t, events, watch.Deleted).(*coordinationv1.Lease))
		env.c.endFetch(k, rv0)
		if e := env.cachedLease("l"); e != nil {
			t.Fatalf("deleted lease cached at rv %s", rv(e))
		}
	})
	t.Run("passed uncached during read", func(t *testing.T) {
		// The candidate leaves and comes back while the read is in flight:
		// the renewal in between was not cached, yet it outdates the read.
		env, rv0, events := setup(t)
		cand := candidateObj("a", "1.30.0", abi.BuiltinStrategy)
		env.c.forgetCandidate(cand)
		renewed := env.updateLease("l", func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()} })
		env.c.observeLease(next(t, events, watch.Modified).(*coordinationv1.Lease))
		env.c.observeCandidate(cand, fromWatch)
		env.c.endFetch(k, rv0)
		if e := env.cachedLease("l"); e != nil {
			t.Fatalf("stale read cached at rv %s", rv(e))
		}
		// It is read again, and then the current lease is cached.
		if !env.c.learnLease(context.Background(), k) {
			t.Fatal("read failed")
		}
		if got := rv(env.cachedLease("l")); got != renewed.ResourceVersion {
			t.Fatalf("cached rv %s after the second read, want %s", got, renewed.ResourceVersion)
		}
	})
	t.Run("relist during read", func(t *testing.T) {
		env, rv0, _ := setup(t)
		env.c.replaceLeases(nil) // the list no longer has the lease
		env.c.endFetch(k, rv0)
		if e := env.cachedLease("l"); e != nil {
			t.Fatalf("read older than the list cached at rv %s", rv(e))
		}
		env.c.mu.Lock()
		_, again := env.c.unfetched[k]
		env.c.mu.Unlock()
		if !again {
			t.Error("lease not read again after a superseded read")
		}
	})
	t.Run("first sight", func(t *testing.T) {
		// A read lease counts as seen now, like a listed one.
		env, rv0, _ := setup(t)
		before := time.Now()
		env.c.endFetch(k, rv0)
		e := env.cachedLease("l")
		if e == nil || e.renewSeen.Before(before) {
			t.Fatalf("read lease cached as %+v", e)
		}
	})
}

// TestStaleCopyOfDeletedLease: a write result applied after the lease's
// deletion (the controller's own write racing a delete) leaves a stale
// copy in the cache; the next update fails with NotFound and must drop it,
// so that the controller creates the lease for its candidates instead of
// failing every second.
func TestStaleCopyOfDeletedLease(t *testing.T) {
	t.Parallel()
	env := newEnv(t, fastOptions())
	ctx := context.Background()
	env.run()
	a := env.join("a", "kcm", "1.30.0", "1.30.0")
	env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") == "a" })
	a.stop()
	if _, _, err := env.e.Delete(ctx, env.cands, "a", &metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete candidate: %v", err)
	}
	// Seen before the lease goes, or the controller may create it anew for a.
	env.candidateSynced("a")
	stale := env.lease("kcm").DeepCopy()
	if _, _, err := env.e.Delete(ctx, env.leases, "kcm", &metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete lease: %v", err)
	}
	env.eventually(2*time.Second, "deletion seen", func() bool { return env.cachedLease("kcm") == nil })
	// The late write result.
	env.c.observeLease(stale)
	if env.cachedLease("kcm") == nil {
		t.Fatal("the stale copy was not cached: the race is not reproduced")
	}
	errsBefore := env.c.stats.writeErrors.Load()
	env.join("b", "kcm", "1.30.0", "1.30.0")
	env.eventually(3*time.Second, "lease recreated for b", func() bool {
		l := env.lease("kcm")
		return l != nil && derefStr(l.Spec.HolderIdentity) == "b"
	})
	if n := env.c.stats.writeErrors.Load() - errsBefore; n > 1 {
		t.Errorf("%d write errors: the stale copy was retried", n)
	}
}
