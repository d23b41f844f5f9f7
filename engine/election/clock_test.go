package election

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// steppedClock is a device's two clocks apart: a wall clock the test
// steps forward and back (NTP setting a clock that booted in 1970, or a
// fake-hwclock's saved time), and a monotonic clock that only moves at
// the rate time passes. Its monotonic instants count from the year 2000
// and carry no monotonic reading, and its wall readings carry none
// either: a comparison of a wall time with a monotonic instant, which no
// code may make, is then off by decades and fails the test, instead of
// being rescued by Go's hidden monotonic reading.
type steppedClock struct {
	start time.Time
	off   atomic.Int64
}

func newSteppedClock() *steppedClock { return &steppedClock{start: time.Now()} }

var monoOrigin = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *steppedClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.off.Load())).Round(0)
}

func (c *steppedClock) Monotonic() time.Time { return monoOrigin.Add(time.Since(c.start)) }

func (c *steppedClock) step(d time.Duration) { c.off.Add(int64(d)) }

// leaseLog records every version of a lease the test watch delivers.
type leaseLog struct {
	mu       sync.Mutex
	versions []*coordinationv1.Lease
}

func (env *testEnv) recordLease(name string) *leaseLog {
	env.t.Helper()
	w, err := env.e.Watch(env.ctx, env.leases, &metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		env.t.Fatalf("watch lease: %v", err)
	}
	ll := &leaseLog{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
				ll.mu.Lock()
				ll.versions = append(ll.versions, l)
				ll.mu.Unlock()
			}
		}
	}()
	return ll
}

// holdersSince lists the distinct holders of the versions from index i on.
func (ll *leaseLog) holdersSince(i int) (holders []string, n int) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	seen := map[string]bool{}
	for _, l := range ll.versions[min(i, len(ll.versions)):] {
		if h := derefStr(l.Spec.HolderIdentity); !seen[h] {
			seen[h] = true
			holders = append(holders, h)
		}
	}
	return holders, len(ll.versions)
}

// overlaps returns, described, every pair of tenures of two different
// members that overlap: two leaders at once.
func overlaps(ms ...*member) []string {
	var all []tenure
	for _, m := range ms {
		all = append(all, m.leadTenures()...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].start.Before(all[j].start) })
	var bad []string
	for i := range all {
		for j := i + 1; j < len(all) && all[j].start.Before(all[i].end); j++ {
			if all[j].member != all[i].member {
				bad = append(bad, fmt.Sprintf("%s led until %s after its last renewal, %s led from %s on (%v overlap)",
					all[i].member, all[i].end.Format(time.StampMicro), all[j].member,
					all[j].start.Format(time.StampMicro), all[i].end.Sub(all[j].start)))
			}
		}
	}
	return bad
}

// expiredSince counts the decisions after seq that judged the lease
// expired, and returns the last seq seen.
func (env *testEnv) expiredSince(lease string, seq int64) (n int, last int64) {
	last = seq
	for _, r := range env.decisions(lease) {
		if r.Seq > seq && r.Trigger == string(abi.ReasonLeaseExpired) {
			n++
		}
		last = max(last, r.Seq)
	}
	return n, last
}

// TestWallClockSteps steps the server's wall clock (engine and
// controller) forward and back by minutes every 150 ms, through a first
// election among three candidates, a holder renewing on time, and two
// failovers: one right after a step of an hour forward, one right after
// a step of an hour back. Expiry is judged on the monotonic clock only,
// so the holder renewing on time keeps its lease through every step
// (never judged expired), each failover comes one lease duration after
// the holder died (a forward step does not bring it closer, a backward
// one does not delay it by an hour), and no two members ever lead at
// once (each member's tenure runs to its last renewal's send time plus
// its lease duration, as client-go's may).
func TestWallClockSteps(t *testing.T) {
	t.Parallel()
	clock := newSteppedClock()
	opts := fastOptions()
	opts.Clock = clock
	env := newEnv(t, opts)
	env.recordLease("kcm")
	env.run()

	stepped := make(chan struct{})
	var steps atomic.Int32
	stepCtx, stopStepping := context.WithCancel(env.ctx)
	go func() {
		defer close(stepped)
		rng := rand.New(rand.NewPCG(31, 3))
		for {
			select {
			case <-stepCtx.Done():
				return
			case <-time.After(150 * time.Millisecond):
			}
			// 1 to 5 minutes, forward or back; the offset wanders.
			d := time.Duration(1+rng.IntN(5)) * time.Minute
			if rng.IntN(2) == 0 {
				d = -d
			}
			clock.step(d)
			steps.Add(1)
		}
	}()
	defer func() { stopStepping(); <-stepped }()

	// Leases of 4 s, renewed every 100 ms: a holder keeps its lease
	// unless the machine stalls for seconds.
	const leaseDur = 4
	a := env.join("a", "kcm", "1.30.0", "1.30.0")
	b := env.join("b", "kcm", "1.31.0", "1.31.0")
	c := env.join("c", "kcm", "1.32.0", "1.32.0")
	for _, m := range []*member{a, b, c} {
		m.leaseDur.Store(leaseDur)
		m.elect.Store(true)
	}
	env.eventually(3*time.Second, "a elected and leading", func() bool { return env.holder("kcm") == "a" && a.leading.Load() })

	// The holder renews on time through 20 steps and one of an hour
	// forward: it keeps the lease, never judged expired.
	transitions := derefI32(env.lease("kcm").Spec.LeaseTransitions)
	_, seq := env.expiredSince("kcm", 0)
	target := steps.Load() + 20
	env.eventually(10*time.Second, "20 wall-clock steps", func() bool { return steps.Load() >= target })
	clock.step(time.Hour)
	target = steps.Load() + 5
	env.eventually(10*time.Second, "5 more wall-clock steps", func() bool { return steps.Load() >= target })
	if n, _ := env.expiredSince("kcm", seq); n > 0 {
		t.Errorf("a renewed on time through wall-clock steps of minutes and one of an hour, yet %d decisions judged its lease expired", n)
	}
	if l := env.lease("kcm"); derefStr(l.Spec.HolderIdentity) != "a" || derefI32(l.Spec.LeaseTransitions) != transitions || derefStr(l.Spec.PreferredHolder) != "" {
		t.Errorf("after the steps: holder %q, leaseTransitions %d (was %d), preferredHolder %q; want a kept, undisturbed",
			derefStr(l.Spec.HolderIdentity), derefI32(l.Spec.LeaseTransitions), transitions, derefStr(l.Spec.PreferredHolder))
	}
	if n := len(a.leadTenures()); n != 1 {
		t.Errorf("a led %d separate times, want 1: it lost the lead while renewing on time", n)
	}

	// failover kills the holder, steps the wall clock by jump and waits
	// for next to lead: one lease duration later on the monotonic
	// clock, whatever the wall clock did.
	failover := func(dead, next *member, jump time.Duration) {
		t.Helper()
		dead.stop()
		died := time.Now()
		clock.step(jump)
		env.eventually(3*time.Second, next.name+" elected and leading after "+dead.name+" died", func() bool {
			return env.holder("kcm") == next.name && next.leading.Load()
		})
		took := time.Since(died)
		t.Logf("%s took over %v after %s died and the wall clock stepped %v", next.name, took.Round(time.Millisecond), dead.name, jump)
		if took > time.Minute {
			t.Errorf("failover took %v: expiry followed the stepped wall clock", took)
		}
	}
	failover(a, b, time.Hour)
	failover(b, c, -time.Hour)
	_, seq = env.expiredSince("kcm", 0)
	target = steps.Load() + 10
	env.eventually(10*time.Second, "10 more wall-clock steps", func() bool { return steps.Load() >= target })
	if h := env.holder("kcm"); h != "c" {
		t.Errorf("holder %q after 10 more steps, want c (renewing on time)", h)
	}
	if n, _ := env.expiredSince("kcm", seq); n > 0 {
		t.Errorf("c renewed on time, yet %d decisions judged its lease expired", n)
	}
	stopStepping()
	<-stepped
	if bad := overlaps(a, b, c); len(bad) > 0 {
		t.Fatalf("two leaders at once across wall-clock steps:\n%s", strings.Join(bad, "\n"))
	}
}

// TestListedCandidateAgedOnce: a candidate found by a list (a restarted
// controller) is aged once by its renewTime against our wall clock, for
// its validity only, and the age becomes a monotonic instant at once: a
// renewTime from our clock's future (a device back in 1970) counts as
// fresh, one 40 minutes old as expired, and a later step of the wall
// clock by a century changes neither.
func TestListedCandidateAgedOnce(t *testing.T) {
	t.Parallel()
	clock := newSteppedClock()
	clock.step(-50 * 365 * 24 * time.Hour) // booted in the 1970s
	opts := fastOptions()
	opts.Clock = clock
	env := newEnv(t, opts)
	wall := clock.Now()
	listed := func(name string, renew, created time.Time) {
		lc := candidateObj(name, "1.30.0", abi.BuiltinStrategy)
		lc.UID, lc.ResourceVersion = types.UID(name), "1"
		lc.CreationTimestamp = metav1.NewTime(created)
		if !renew.IsZero() {
			rt := metav1.NewMicroTime(renew)
			lc.Spec.RenewTime = &rt
		}
		env.c.observeCandidate(lc, fromList)
	}
	listed("future", time.Now(), time.Now()) // renewed by a clock 50 years ahead of ours
	listed("stale", wall.Add(-40*time.Minute), wall.Add(-time.Hour))
	listed("never", time.Time{}, wall.Add(-10*time.Minute)) // no renewTime: aged by creation
	check := func(when string) {
		t.Helper()
		now := env.c.now()
		if e := env.cachedCandidate("l", "future"); e == nil || !env.c.valid(e, now) || now.Sub(e.renewAt) > time.Minute {
			t.Errorf("%s: a candidate renewed at our clock's future is not fresh: %+v", when, e)
		}
		if e := env.cachedCandidate("l", "stale"); e == nil || env.c.valid(e, now) {
			t.Errorf("%s: a candidate renewed 40 min ago by our clock counts as valid", when)
		}
		if e := env.cachedCandidate("l", "never"); e == nil || now.Sub(e.createdAt) < 10*time.Minute || now.Sub(e.createdAt) > 11*time.Minute {
			t.Errorf("%s: a candidate created 10 min ago: createdAt %v before now", when, now.Sub(e.createdAt))
		}
	}
	check("after the list")
	clock.step(100 * 365 * 24 * time.Hour)
	check("after a step of the wall clock by a century")
}
