package election

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/storage/boltdb"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

const testNS = "kube-system"

// testEnv is a real engine over a real bbolt file, and a running
// controller acting through it.
type testEnv struct {
	t      testing.TB
	e      *engine.Engine
	h      *history.Store
	c      *Controller
	ctx    context.Context
	leases engine.Scope
	cands  engine.Scope

	started bool
	done    chan struct{}
}

// fastOptions keep tests short: sub-second ping windows, 1 s grants.
func fastOptions() Options {
	return Options{PingWindow: 600 * time.Millisecond, GrantAckWait: 300 * time.Millisecond,
		GrantDuration: time.Second, UnresponsiveRetry: 3 * time.Second}
}

// patience is how long a patient env awaits a better-ranked candidate
// that was pinged and has not answered yet: longer than an alive one
// takes to answer on any machine.
const patience = 10 * time.Second

// newPatientEnv is newEnv for tests in which every candidate that matters
// answers its pings and the best of them must get the grant. planFor
// awaits a better candidate only about twice as long as the round's
// fastest ack took (at least quickAckFloor, 100 ms) once a worse one
// answered; on a loaded machine, under the race detector, an alive
// candidate can answer that much later than another, and the worse one
// is granted first (then the grant moves, or the worse one confirms it
// and is asked to step down), which is right for the product but not the
// history such a test asserts. Here the better candidate is awaited
// patience: the test no longer depends on which member the scheduler runs
// first. TestLapsedHolderNotAwaitedLong tests the short wait itself.
func newPatientEnv(t testing.TB, opts Options) *testEnv {
	t.Helper()
	opts.PingWindow, opts.GrantAckWait = max(opts.PingWindow, patience), patience
	env := newEnv(t, opts)
	env.c.quickAckFloor = patience
	return env
}

func newEnv(t testing.TB, opts Options) *testEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// The controller's log goes with the test's output when it fails
	// (registered first, this cleanup runs last, after the controller
	// stopped), so that a failure in CI says what the controller did.
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the controller's log:\n%s", logs.String())
		}
	})
	var w io.Writer = logs
	if testing.Verbose() {
		w = testWriter{t}
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "db"), boltdb.Options{Logger: log})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	// The engine and the controller share the (wall) clock, as in main.
	now := opts.Now
	if opts.Clock != nil {
		now = opts.Clock.Now
	}
	e, err := engine.New(engine.Options{Store: st, Logger: log, Now: now})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	h := history.New(st, log)
	opts.Engine, opts.History, opts.Drains, opts.Logger = e, h, h, log
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lr, _ := e.ResourceFor(engine.GroupName, "v1", "leases")
	cr, _ := e.ResourceFor(engine.GroupName, "v1beta1", "leasecandidates")
	env := &testEnv{t: t, e: e, h: h, c: c, ctx: ctx, done: make(chan struct{}),
		leases: engine.Scope{Resource: lr, Version: "v1", Namespace: testNS, UserAgent: "election-test/v0"},
		cands:  engine.Scope{Resource: cr, Version: "v1beta1", Namespace: testNS, UserAgent: "election-test/v0"}}
	t.Cleanup(func() {
		cancel()
		if env.started {
			<-env.done
		}
		_ = st.Close()
	})
	return env
}

// run starts the controller and waits for its caches.
func (env *testEnv) run() {
	env.t.Helper()
	env.started = true
	go func() {
		defer close(env.done)
		if err := env.c.Run(env.ctx); err != nil {
			env.t.Errorf("Run: %v", err)
		}
	}()
	env.eventually(2*time.Second, "controller synced", env.c.Synced)
}

type testWriter struct{ t testing.TB }

// logBuffer keeps a test's log for its failure report.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// waitSlack stretches every wait: d is what an idle machine needs, and CI
// runs these tests under the race detector on 2 busy cores. Waits end as
// soon as the condition holds, so the slack costs nothing when all is well;
// how fast failover is gets measured by benchmarks, not asserted here.
const waitSlack = 5

// eventually polls cond until it holds or waitSlack*d passes.
func (env *testEnv) eventually(d time.Duration, what string, cond func() bool) {
	env.t.Helper()
	d *= waitSlack
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			env.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cachedCandidate is the controller's copy of a candidate of lease, nil
// if not cached.
func (env *testEnv) cachedCandidate(lease, name string) *candEntry {
	env.c.mu.Lock()
	defer env.c.mu.Unlock()
	if e := env.c.cands[leaseKey{testNS, lease}][name]; e != nil {
		cp := *e
		return &cp
	}
	return nil
}

// candidateSynced waits until the controller's cache holds candidate
// name as stored now (or, deleted, not at all): every write to it so far
// has reached the controller, so none can arrive later.
func (env *testEnv) candidateSynced(name string) {
	env.t.Helper()
	var want int64 // resourceVersion; 0 if deleted
	o, err := env.e.Get(context.Background(), env.cands, name, &metav1.GetOptions{})
	switch {
	case err == nil:
		want = rvOf(o.(*coordinationv1beta1.LeaseCandidate))
	case !apierrors.IsNotFound(err):
		env.t.Fatalf("get candidate %s: %v", name, err)
	}
	env.eventually(2*time.Second, "controller caught up with candidate "+name, func() bool {
		env.c.mu.Lock()
		defer env.c.mu.Unlock()
		for _, byName := range env.c.cands {
			if e := byName[name]; e != nil {
				return want > 0 && rvOf(e.obj) >= want
			}
		}
		return want == 0
	})
}

// collectUntilGone runs the candidate GC until the named candidates are
// deleted and returns how many candidates it deleted in all. One run may
// rightly spare a stale candidate: one that changed since the cache
// judged it (a ping the controller was still writing) is left for the
// next run.
func (env *testEnv) collectUntilGone(names ...string) int {
	env.t.Helper()
	n := 0
	env.eventually(2*time.Second, "stale candidates collected", func() bool {
		n += env.c.CollectGarbage(context.Background())
		for _, name := range names {
			if _, err := env.e.Get(context.Background(), env.cands, name, &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	return n
}

func (env *testEnv) lease(name string) *coordinationv1.Lease {
	env.t.Helper()
	o, err := env.e.Get(context.Background(), env.leases, name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		env.t.Fatalf("get lease %s: %v", name, err)
	}
	return o.(*coordinationv1.Lease)
}

func (env *testEnv) holder(name string) string {
	if l := env.lease(name); l != nil {
		return derefStr(l.Spec.HolderIdentity)
	}
	return ""
}

func (env *testEnv) preferred(name string) string {
	if l := env.lease(name); l != nil {
		return derefStr(l.Spec.PreferredHolder)
	}
	return ""
}

// settledDecisions waits until the lease has a decision history and the
// controller is idle: it records a decision just after the write it
// decided on, so a test that saw the write may not see the record yet,
// but will once the worker finished that reconcile. (A quiet spell of the
// history is no proof: under load the record can come 50 ms late.)
func (env *testEnv) settledDecisions(name string) []history.DecisionRecord {
	env.t.Helper()
	var recs []history.DecisionRecord
	env.eventually(3*time.Second, "the controller idle with a decision history of "+name, func() bool {
		if !env.c.idle() {
			return false
		}
		recs = env.decisions(name)
		return len(recs) > 0
	})
	return recs
}

func (env *testEnv) decisions(name string) []history.DecisionRecord {
	env.t.Helper()
	recs, err := env.h.Decisions(context.Background(), testNS, name)
	if err != nil {
		env.t.Fatalf("decisions: %v", err)
	}
	return recs
}

func countAction(recs []history.DecisionRecord, action string) int {
	n := 0
	for _, r := range recs {
		if r.Action == action {
			n++
		}
	}
	return n
}

// countDone counts the records of action whose write succeeded.
func countDone(recs []history.DecisionRecord, action string) int {
	n := 0
	for _, r := range recs {
		if r.Action == action && r.Outcome == "ok" {
			n++
		}
	}
	return n
}

// member emulates one client-go process: a LeaseCandidate runner that
// answers pings (NewCandidate) and, optionally, a coordinated elector
// that only renews a lease the controller gave it (LeaderElector with
// Coordinated: true, ReleaseOnCancel: true).
type member struct {
	env                     *testEnv
	name, lease             string
	emu, bin, strategy      string
	ack                     atomic.Bool // answers pings
	elect                   atomic.Bool // renews the lease when holder
	noRelease               atomic.Bool // keeps the lease when asked to step down
	leading                 atomic.Bool
	leaseDur                atomic.Int32 // leaseDurationSeconds of its renewals
	cancel                  context.CancelFunc
	wg                      sync.WaitGroup
	mu                      sync.Mutex
	pinged                  int
	observedRaw             string
	observedAt              time.Time
	ackedPings, renewedOnce atomic.Int32
	// tenures are the spans during which this member could believe it
	// led (guarded by mu), on the monotonic clock.
	tenures []tenure
}

// tenure is a span during which a member may act as the leader: from its
// first successful renewal to when it released the lease, or else to
// its last successful renewal's send time plus the duration it wrote,
// which is how long a client-go leader may go on without renewing.
type tenure struct {
	member     string
	start, end time.Time
}

func (env *testEnv) join(name, lease, emu, bin string) *member {
	return env.joinWith(name, lease, emu, bin, abi.BuiltinStrategy)
}

func (env *testEnv) joinWith(name, lease, emu, bin, strategy string) *member {
	env.t.Helper()
	m := &member{env: env, name: name, lease: lease, emu: emu, bin: bin, strategy: strategy}
	m.leaseDur.Store(2)
	m.ack.Store(true)
	now := metav1.NewMicroTime(time.Now())
	lc := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: lease, BinaryVersion: bin,
			EmulationVersion: emu, Strategy: coordinationv1.CoordinatedLeaseStrategy(strategy), RenewTime: &now},
	}
	ctx, cancel := context.WithCancel(env.ctx)
	m.cancel = cancel
	// Watch first, so that no ping can come before the watch.
	w, err := env.e.Watch(ctx, env.cands, &metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		env.t.Fatalf("watch candidate: %v", err)
	}
	if _, err := env.e.Create(context.Background(), env.cands, lc, &metav1.CreateOptions{}); err != nil {
		env.t.Fatalf("create candidate %s: %v", name, err)
	}
	m.wg.Go(func() { m.answerPings(ctx, w) })
	m.wg.Go(func() { m.renewLoop(ctx) })
	env.t.Cleanup(m.stop)
	return m
}

// stop kills the member: no more acks, no more renewals, no release.
func (m *member) stop() {
	m.cancel()
	m.wg.Wait()
}

func (m *member) answerPings(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		lc, ok := ev.Object.(*coordinationv1beta1.LeaseCandidate)
		if !ok || ev.Type != watch.Modified || !m.ack.Load() {
			continue
		}
		if lc.Spec.PingTime != nil && lc.Spec.PingTime.After(lc.Spec.RenewTime.Time) {
			m.mu.Lock()
			m.pinged++
			m.mu.Unlock()
			m.renewCandidate(ctx)
			m.ackedPings.Add(1)
		}
	}
}

// renewCandidate sets renewTime=now, as client-go's ensureLease.
func (m *member) renewCandidate(ctx context.Context) {
	for range 10 {
		o, err := m.env.e.Get(ctx, m.env.cands, m.name, &metav1.GetOptions{})
		if err != nil {
			return
		}
		lc := o.(*coordinationv1beta1.LeaseCandidate).DeepCopy()
		now := metav1.NewMicroTime(time.Now())
		lc.Spec.RenewTime = &now
		if _, _, err = m.env.e.Update(ctx, m.env.cands, m.name, lc, &metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}

// renewLoop is tryCoordinatedRenew every 100 ms.
func (m *member) renewLoop(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.elect.Load() {
			m.tryRenew(ctx)
		}
	}
}

func (m *member) tryRenew(ctx context.Context) {
	o, err := m.env.e.Get(ctx, m.env.leases, m.lease, &metav1.GetOptions{})
	if err != nil {
		return
	}
	l := o.(*coordinationv1.Lease).DeepCopy()
	s := &l.Spec
	raw := derefStr(s.HolderIdentity) + "|" + derefStr(s.PreferredHolder) + "|" + microString(s.RenewTime) + "|" + microString(s.AcquireTime)
	now := time.Now()
	if raw != m.observedRaw {
		m.observedRaw, m.observedAt = raw, now
	}
	expired := m.observedAt.Add(time.Duration(derefI32(s.LeaseDurationSeconds)) * time.Second).Before(now)
	if expired || derefStr(s.HolderIdentity) != m.name {
		m.leading.Store(false)
		return
	}
	if derefStr(s.PreferredHolder) != "" {
		if m.noRelease.Load() {
			return // end of term: stop renewing, keep trying
		}
		// End of term: release, as ReleaseOnCancel does.
		empty := ""
		one := int32(1)
		rt := metav1.NewMicroTime(now)
		s.HolderIdentity, s.LeaseDurationSeconds, s.RenewTime, s.AcquireTime = &empty, &one, &rt, &rt
		s.Strategy, s.PreferredHolder = nil, nil
		if _, _, err := m.env.e.Update(ctx, m.env.leases, m.lease, l, &metav1.UpdateOptions{}); err == nil {
			m.leading.Store(false)
			m.mu.Lock()
			if n := len(m.tenures); n > 0 && now.Before(m.tenures[n-1].end) {
				m.tenures[n-1].end = now // it stopped leading before it released
			}
			m.mu.Unlock()
		}
		return
	}
	rt := metav1.NewMicroTime(now)
	dur := m.leaseDur.Load()
	s.RenewTime, s.LeaseDurationSeconds = &rt, &dur
	if _, _, err := m.env.e.Update(ctx, m.env.leases, m.lease, l, &metav1.UpdateOptions{}); err == nil {
		m.mu.Lock()
		end := now.Add(time.Duration(dur) * time.Second)
		if n := len(m.tenures); m.leading.Load() && n > 0 {
			m.tenures[n-1].end = end
		} else {
			m.tenures = append(m.tenures, tenure{member: m.name, start: time.Now(), end: end})
		}
		m.mu.Unlock()
		m.leading.Store(true)
		m.renewedOnce.Add(1)
	}
}

// leadTenures returns a copy of the member's tenures.
func (m *member) leadTenures() []tenure {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]tenure(nil), m.tenures...)
}

func microString(t *metav1.MicroTime) string {
	if t == nil {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

func (m *member) pings() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pinged
}

// DecisionRecordForTest is a minimal record.
func DecisionRecordForTest(action string) history.DecisionRecord {
	return history.DecisionRecord{Time: time.Now().UTC(), Action: action, Strategy: abi.BuiltinStrategy}
}

func candidateObj(name, bin, strategy string) *coordinationv1beta1.LeaseCandidate {
	return &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: bin,
			Strategy: coordinationv1.CoordinatedLeaseStrategy(strategy)},
	}
}

func names(es []*candEntry) string {
	s := ""
	for _, e := range es {
		s += e.obj.Name
	}
	return s
}

// offsetClock is the real clock plus a jump the test controls.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time       { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) jump(d time.Duration) { c.off.Add(int64(d)) }
