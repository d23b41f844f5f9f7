package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Short timers keep the test fast; they satisfy client-go's rule
// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod.
const (
	leLeaseDuration = 3 * time.Second
	leRenewDeadline = 2 * time.Second
	leRetryPeriod   = 300 * time.Millisecond
)

// elector is one client-go LeaderElector with its own client, a context to
// stop it and a "plug" that cuts its network to simulate a crash.
type elector struct {
	id     string
	le     *leaderelection.LeaderElector
	cancel context.CancelFunc
	dead   atomic.Bool
	done   chan struct{}
}

// leaderTracker records who leads and flags any moment with two leaders.
type leaderTracker struct {
	mu      sync.Mutex
	leading map[string]bool
	starts  []string
	overlap []string
	events  []leaderEvent
}

// leaderEvent is one elector starting or stopping to lead, and when.
type leaderEvent struct {
	id      string
	leading bool
	at      time.Time
}

func (lt *leaderTracker) started(id string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for other, on := range lt.leading {
		if on && other != id {
			lt.overlap = append(lt.overlap, id+" started while "+other+" leads")
		}
	}
	lt.leading[id] = true
	lt.starts = append(lt.starts, id)
	lt.events = append(lt.events, leaderEvent{id: id, leading: true, at: time.Now()})
}

func (lt *leaderTracker) stopped(id string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.leading[id] = false
	lt.events = append(lt.events, leaderEvent{id: id, at: time.Now()})
}

func (lt *leaderTracker) snapshot() (starts []string, overlap []string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return append([]string(nil), lt.starts...), append([]string(nil), lt.overlap...)
}

// TestE2ELeaderElection runs three client-go LeaderElectors with LeaseLock
// against the server: exactly one leads; when the leader is cancelled it
// releases (ReleaseOnCancel) and another takes over at once; when a leader
// dies without releasing, another takes over only after the lease expires.
func TestE2ELeaderElection(t *testing.T) {
	t.Parallel() // mostly sleeping on timers; overlaps well with CPU-bound tests
	ts := startServer(t)
	ctx := context.Background()
	lt := &leaderTracker{leading: map[string]bool{}}
	var electors []*elector
	for _, id := range []string{"e0", "e1", "e2"} {
		electors = append(electors, startElector(t, ts, lt, id))
	}
	defer func() {
		for _, e := range electors {
			e.cancel()
			<-e.done
		}
	}()
	observer := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system")

	// Phase 1: one leader emerges and everyone agrees on it.
	first := waitLeader(t, lt, 1, 5*time.Second)
	l1 := waitHolder(t, observer, first, electors)
	if *l1.Spec.LeaseDurationSeconds != 3 || *l1.Spec.LeaseTransitions != 0 || l1.Spec.AcquireTime == nil {
		t.Errorf("first lease spec = %+v, want leaseDurationSeconds 3, leaseTransitions 0, an acquireTime", l1.Spec)
	}
	// Renewals advance renewTime through the fast-path PUTs.
	time.Sleep(2 * leRetryPeriod)
	l1b, err := observer.Get(ctx, "e2e-le", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	if !l1b.Spec.RenewTime.After(l1.Spec.RenewTime.Time) || *l1b.Spec.HolderIdentity != first {
		t.Errorf("lease not renewed by %s: renewTime %v -> %v, holder %q", first, l1.Spec.RenewTime, l1b.Spec.RenewTime, *l1b.Spec.HolderIdentity)
	}

	// Phase 2: cancel the leader; it releases, a follower takes over fast.
	released := time.Now()
	lead := byID(electors, first)
	lt.stopped(first)
	lead.cancel()
	<-lead.done
	// Released means free (holderIdentity ""): a follower takes over at
	// its next retry, before the lease would have expired. The bound is
	// the lease's own duration, not a wall-clock target, so a loaded
	// machine passes.
	second := waitLeader(t, lt, 2, 3*leLeaseDuration)
	if d := time.Since(released); d >= leLeaseDuration {
		t.Errorf("takeover after release took %v, not before the %v lease expired (holderIdentity \"\" means free)", d, leLeaseDuration)
	}
	if second == first {
		t.Fatalf("the cancelled elector %s led again", first)
	}
	l2 := waitHolder(t, observer, second, electors)
	if *l2.Spec.LeaseTransitions != 1 {
		t.Errorf("leaseTransitions after release takeover = %d, want 1", *l2.Spec.LeaseTransitions)
	}

	// Phase 3: the new leader dies without releasing (its network is cut);
	// the last elector must wait for expiry, then take over.
	killed := time.Now()
	victim := byID(electors, second)
	lt.stopped(second)
	victim.dead.Store(true)
	third := waitLeader(t, lt, 3, 3*leLeaseDuration)
	if d := time.Since(killed); d < leLeaseDuration/2 {
		t.Errorf("takeover %v after the crash: the lease cannot have expired yet", d)
	}
	if third == first || third == second {
		t.Fatalf("third leader %s is not the remaining elector", third)
	}
	l3 := waitHolder(t, observer, third, nil)
	if *l3.Spec.LeaseTransitions != 2 {
		t.Errorf("leaseTransitions after expiry takeover = %d, want 2", *l3.Spec.LeaseTransitions)
	}

	// Shut everything down; the last leader releases the lease.
	victim.cancel()
	<-victim.done
	last := byID(electors, third)
	lt.stopped(third)
	last.cancel()
	<-last.done
	final, err := observer.Get(ctx, "e2e-le", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get final lease: %v", err)
	}
	if final.Spec.HolderIdentity == nil || *final.Spec.HolderIdentity != "" || *final.Spec.LeaseDurationSeconds != 1 || *final.Spec.LeaseTransitions != 2 {
		t.Errorf("released lease spec = %+v, want holderIdentity \"\", leaseDurationSeconds 1, leaseTransitions 2", final.Spec)
	}

	starts, overlap := lt.snapshot()
	if len(overlap) > 0 {
		t.Errorf("two leaders at once: %q", overlap)
	}
	if len(starts) != 3 {
		t.Errorf("leadership starts = %q, want exactly 3", starts)
	}
}

func startElector(t *testing.T, ts *testServer, lt *leaderTracker, id string) *elector {
	t.Helper()
	return startElectorOn(t, restConfig(t, ts, wireProtobuf), lt, id, "e2e-le", true)
}

// startElectorOn runs an elector for the lease kube-system/lease through
// cfg (a copy is changed); release is its ReleaseOnCancel. client-go calls
// OnStoppedLeading only after that release request (up to the client's
// 1 s timeout against a server that does not answer), after its renewals
// failed: an elector on a member that is cut off is told it stopped up to
// a second after it stopped renewing, past the moment another may take
// the lease, so tests that cut a member off use release false (as a
// crashed component does not release either).
func startElectorOn(t *testing.T, cfg *rest.Config, lt *leaderTracker, id, lease string, release bool) *elector {
	t.Helper()
	e := &elector{id: id, done: make(chan struct{})}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "e2e-" + id + "/leader-election"
	cfg.Timeout = leRenewDeadline / 2 // what NewFromKubeconfig sets
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if e.dead.Load() {
				return nil, errors.New("elector " + id + " is dead")
			}
			return rt.RoundTrip(r)
		})
	})
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: "kube-system"},
		Client:     clientset(t, cfg).CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leLeaseDuration,
		RenewDeadline:   leRenewDeadline,
		RetryPeriod:     leRetryPeriod,
		ReleaseOnCancel: release,
		Name:            lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { lt.started(id) },
			OnStoppedLeading: func() { lt.stopped(id) },
		},
	})
	if err != nil {
		t.Fatalf("new elector %s: %v", id, err)
	}
	e.le = le
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		le.Run(ctx)
	}()
	return e
}

func byID(es []*elector, id string) *elector {
	for _, e := range es {
		if e.id == id {
			return e
		}
	}
	panic("no elector " + id)
}

// waitLeader waits until the n-th leadership start and returns who it was.
func waitLeader(t *testing.T, lt *leaderTracker, n int, timeout time.Duration) string {
	t.Helper()
	var who string
	eventually(t, timeout, "leader number "+strconv.Itoa(n), func() (bool, string) {
		starts, _ := lt.snapshot()
		if len(starts) >= n {
			who = starts[n-1]
			return true, ""
		}
		return false, fmt.Sprintf("leadership starts so far: %q", starts)
	})
	return who
}

// waitHolder waits until the lease names holder and every live elector in
// es has observed it.
func waitHolder(t *testing.T, leases interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
}, holder string, es []*elector) *coordinationv1.Lease {
	t.Helper()
	var l *coordinationv1.Lease
	eventually(t, 3*time.Second, "holder "+holder, func() (bool, string) {
		var err error
		l, err = leases.Get(context.Background(), "e2e-le", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			return false, "lease holder is not " + holder
		}
		for _, e := range es {
			select {
			case <-e.done:
				continue
			default:
			}
			if got := e.le.GetLeader(); got != holder && !e.dead.Load() {
				return false, e.id + " sees leader " + got
			}
		}
		return true, ""
	})
	return l
}
