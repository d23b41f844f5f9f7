package election

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// operatorChoice honours an operator's hand-over: a preferredHolder that
// names a candidate ranks first (with preemption); otherwise a live holder
// that is a candidate stays; a free lease goes to the lowest name. So a
// hand-over sticks only to the candidate with the lowest name: the holder
// clears preferredHolder as it steps down, and the strategy no longer
// knows the operator's wish.
type operatorChoice struct{}

const operatorChoiceName = "example.com/operator-choice"

func (operatorChoice) Name() string { return operatorChoiceName }
func (operatorChoice) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: operatorChoiceName, Version: "1.0.0", SHA256: "0c"}
}
func (operatorChoice) Decide(_ context.Context, in *abi.Input) (*abi.Decision, error) {
	d := &abi.Decision{Ranking: []string{}}
	for _, c := range in.Candidates { // sorted by name
		d.Ranking = append(d.Ranking, c.Name)
	}
	l := in.Lease
	if i := slices.Index(d.Ranking, l.PreferredHolder); i > 0 {
		d.Ranking = append(append([]string{l.PreferredHolder}, d.Ranking[:i]...), d.Ranking[i+1:]...)
	}
	switch {
	case len(d.Ranking) == 0:
		d.Action, d.Reason = abi.ActionKeep, "no candidate"
	case l.PreferredHolder != "" && slices.Contains(d.Ranking, l.PreferredHolder):
		d.Action, d.Preempt, d.Reason = abi.ActionPrefer, true, "the operator prefers "+l.PreferredHolder
	case l.Exists && !l.Expired && l.HolderIsCandidate:
		d.Action, d.Reason = abi.ActionKeep, "the holder stays"
	default:
		d.Action, d.Reason = abi.ActionPrefer, "lowest name first"
	}
	return d, nil
}

// operatorChoiceLease starts lease "op" on the operatorChoice strategy:
// c leads it with 60 s leases, and candidates a and b have joined since
// and are synced.
func operatorChoiceLease(t *testing.T) (env *testEnv, a, b, c *member) {
	t.Helper()
	opts := fastOptions()
	opts.Registry = NewStaticRegistry(NativeOldest, operatorChoice{})
	env = newPatientEnv(t, opts)
	start := func(name string) *member {
		m := env.joinWith(name, "op", "1.30.0", "1.30.0", operatorChoiceName)
		m.leaseDur.Store(60)
		m.elect.Store(true)
		return m
	}
	c = start("c")
	env.run()
	env.eventually(3*time.Second, "c leads", c.leading.Load)
	a, b = start("a"), start("b")
	env.candidateSynced("a")
	env.candidateSynced("b")
	return env, a, b, c
}

// revision is the store's revision, as a list reports it.
func (env *testEnv) revision() string {
	env.t.Helper()
	o, err := env.e.List(context.Background(), env.leases, &metav1.ListOptions{})
	if err != nil {
		env.t.Fatalf("list leases: %v", err)
	}
	return o.(*coordinationv1.LeaseList).ResourceVersion
}

// handOver sets preferredHolder as an operator's merge patch does,
// retrying the conflicts the holder's renewals cause.
func (env *testEnv) handOver(name, to string) {
	env.t.Helper()
	for range 50 {
		l := env.lease(name).DeepCopy()
		l.Spec.PreferredHolder = &to
		if _, _, err := env.e.Update(context.Background(), env.leases, name, l, &metav1.UpdateOptions{}); err == nil {
			return
		} else if !apierrors.IsConflict(err) {
			env.t.Fatalf("hand %s over to %s: %v", name, to, err)
		}
	}
	env.t.Fatalf("hand %s over to %s: conflicts all along", name, to)
}

func (env *testEnv) preview(lease, to string) HandOverPreview {
	env.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := env.c.PreviewHandOver(ctx, testNS, lease, to)
	if err != nil {
		env.t.Fatalf("preview of a hand-over of %s to %s: %v", lease, to, err)
	}
	return p
}

// quiet stops the members' renewals (their last ones gave a minute) and
// waits until the controller is idle and the store unchanged.
func (env *testEnv) quiet(ms ...*member) string {
	env.t.Helper()
	for _, m := range ms {
		m.elect.Store(false)
	}
	rev := ""
	env.eventually(3*time.Second, "a quiet store", func() bool {
		time.Sleep(200 * time.Millisecond)
		r := env.revision()
		ok := r == rev && env.c.idle()
		rev = r
		return ok
	})
	return rev
}

// TestPreviewHandOver: the preview writes nothing (the store's revision,
// the controller's counters and the decision history are as before), and
// what it says is what the controller then does when the hand-over is
// written: the lease goes to the chosen candidate when the strategy keeps
// it, and to the one the preview named when not.
func TestPreviewHandOver(t *testing.T) {
	t.Parallel()
	env, a, b, c := operatorChoiceLease(t)

	rev := env.quiet(a, b, c)
	stats, recs := env.c.Stats(), len(env.decisions("op"))
	keeps := env.preview("op", "a")
	if !keeps.Keeps || keeps.Outcome != PreviewHandsOver || keeps.Holder != "c" || len(keeps.Steps) != 2 ||
		keeps.Steps[0].Then != "keep-preferred" || keeps.Steps[1].Then != "grant" || keeps.Steps[1].Target != "a" {
		t.Fatalf("preview of a hand-over to a: %+v", keeps)
	}
	refused := env.preview("op", "b")
	if refused.Keeps || refused.Outcome != PreviewGrantsOther || refused.Chosen != "a" ||
		!strings.Contains(refused.Message, "would not keep b") || !strings.Contains(refused.Message, "grants the lease to a") {
		t.Fatalf("preview of a hand-over to b: %+v", refused)
	}
	if p := env.preview("op", "nobody"); p.Keeps || p.Outcome != PreviewNotElected || !strings.Contains(p.Message, "not a valid LeaseCandidate") {
		t.Fatalf("preview of a hand-over to a non-candidate: %+v", p)
	}
	if got := env.revision(); got != rev {
		t.Errorf("the store changed during the previews: revision %s -> %s", rev, got)
	}
	if got := env.c.Stats(); got != stats {
		t.Errorf("the previews changed the controller's counters:\n%+v\n%+v", stats, got)
	}
	if got := len(env.decisions("op")); got != recs {
		t.Errorf("the previews recorded %d decisions", got-recs)
	}

	// The refused hand-over, written: c steps down, and a (not b) gets
	// the lease, as the preview said.
	for _, m := range []*member{a, b, c} {
		m.elect.Store(true)
	}
	env.handOver("op", "b")
	env.eventually(5*time.Second, "a leads after the hand-over to b", a.leading.Load)
	if b.renewedOnce.Load() != 0 {
		t.Errorf("b led, though the preview said the strategy grants the lease to a")
	}
	// With a holding, a hand-over to c only makes a step down for
	// nothing: the free lease goes back to a.
	env.quiet(a, b, c)
	back := env.preview("op", "c")
	if back.Keeps || back.Chosen != "a" || !strings.Contains(back.Message, "grants the lease back to a") {
		t.Fatalf("preview of a hand-over to c with a holding: %+v", back)
	}
}

// TestPreviewHandOverKept: a hand-over the strategy keeps goes to the
// chosen candidate once written, through the decision the preview made.
func TestPreviewHandOverKept(t *testing.T) {
	t.Parallel()
	env, a, b, c := operatorChoiceLease(t)
	env.quiet(a, b, c)
	if p := env.preview("op", "a"); !p.Keeps {
		t.Fatalf("preview of a hand-over to a: %+v", p)
	}
	for _, m := range []*member{a, b, c} {
		m.elect.Store(true)
	}
	env.handOver("op", "a")
	env.eventually(5*time.Second, "a leads after the hand-over to a", a.leading.Load)
	if b.renewedOnce.Load() != 0 {
		t.Errorf("b led during a hand-over to a")
	}
}

// TestPreviewHandOverRefusedByBuiltin is the case the issue met: the
// built-in OldestEmulationVersion keeps a holder with the oldest versions,
// so a hand-over to a newer candidate is undone. The preview says so, with
// the strategy's reason, and the controller then does just that.
func TestPreviewHandOverRefusedByBuiltin(t *testing.T) {
	t.Parallel()
	env := newPatientEnv(t, fastOptions())
	old := env.join("c-old", "kcm", "1.30.0", "1.30.0")
	old.leaseDur.Store(60)
	old.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "c-old leads", old.leading.Load)
	newer := env.join("c-new", "kcm", "1.31.0", "1.31.0")
	newer.elect.Store(true)
	env.candidateSynced("c-new")
	rev := env.quiet(old, newer)
	p := env.preview("kcm", "c-new")
	if p.Keeps || p.Outcome != PreviewKeepsHolder || p.Chosen != "c-old" || p.Reason != "holder has the oldest versions" ||
		!strings.Contains(p.Message, "would not keep c-new") || len(p.Steps) != 1 || p.Steps[0].Then != "clear-preferred" {
		t.Fatalf("preview: %+v", p)
	}
	if got := env.revision(); got != rev {
		t.Errorf("the store changed during the preview: revision %s -> %s", rev, got)
	}
	before := len(env.decisions("kcm"))
	old.elect.Store(true)
	newer.elect.Store(true)
	env.handOver("kcm", "c-new")
	env.eventually(5*time.Second, "preferredHolder cleared, c-old holding", func() bool {
		return env.preferred("kcm") == "" && env.holder("kcm") == "c-old" && old.leading.Load()
	})
	if newer.renewedOnce.Load() != 0 {
		t.Errorf("c-new led, though the preview said the strategy keeps c-old")
	}
	recs := env.settledDecisions("kcm")[before:]
	// c-old may have seen preferredHolder and released before the
	// controller cleared it: then the strategy re-granted it. Either way
	// the decision on the hand-over is the preview's.
	var first *struct{ action, reason string }
	for _, r := range recs {
		if r.Action == "clear-preferred" || r.Action == "grant" {
			first = &struct{ action, reason string }{r.Action, r.Reason}
			if r.Action == "clear-preferred" && !strings.Contains(r.Reason, p.Reason) {
				t.Errorf("the controller cleared preferredHolder for %q, the preview said %q", r.Reason, p.Reason)
			}
			if r.Action == "grant" && r.Chosen != "c-old" {
				t.Errorf("the controller granted to %s", r.Chosen)
			}
			break
		}
	}
	if first == nil {
		t.Errorf("no decision on the hand-over: %+v", recs)
	}
}

// BenchmarkPreviewHandOver is one hand-over preview through the worker
// with the native OldestEmulationVersion on a lease with 3 candidates:
// the cost of the dry run itself, without a WebAssembly guest.
func BenchmarkPreviewHandOver(b *testing.B) {
	env := newPatientEnv(b, fastOptions())
	old := env.join("c-old", "kcm", "1.30.0", "1.30.0")
	old.leaseDur.Store(60)
	old.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "c-old leads", old.leading.Load)
	mid, newer := env.join("c-mid", "kcm", "1.31.0", "1.31.0"), env.join("c-new", "kcm", "1.32.0", "1.32.0")
	env.candidateSynced("c-mid")
	env.candidateSynced("c-new")
	env.quiet(old, mid, newer)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := env.c.PreviewHandOver(ctx, testNS, "kcm", "c-new")
		if err != nil || p.Outcome != PreviewKeepsHolder {
			b.Fatalf("preview: %v %+v", err, p)
		}
	}
}

// TestPreviewHandOverDrained: the preview applies the drains as the
// controller does. A hand-over to a drained candidate is refused with who
// drained it; and with a drained, a hand-over to b is kept, though the
// strategy, once the holder has stepped down, ranks a (the lowest name)
// first: the controller never grants a drained candidate.
func TestPreviewHandOverDrained(t *testing.T) {
	t.Parallel()
	env, a, b, c := operatorChoiceLease(t)
	env.drain("a", false)
	env.quiet(a, b, c)
	if p := env.preview("op", "a"); p.Keeps || !strings.Contains(p.Message, "drained (by alice)") {
		t.Errorf("preview of a hand-over to drained a: %+v; want refused, naming who drained it", p)
	}
	p := env.preview("op", "b")
	if !p.Keeps || p.Outcome != PreviewHandsOver {
		t.Fatalf("preview of a hand-over to b with a drained: %+v; want kept (a is never granted)", p)
	}
	for _, m := range []*member{a, b, c} {
		m.elect.Store(true)
	}
	env.handOver("op", "b")
	env.eventually(5*time.Second, "b leads after the hand-over to b", b.leading.Load)
	if a.renewedOnce.Load() != 0 {
		t.Errorf("drained a led during the hand-over to b")
	}
}
