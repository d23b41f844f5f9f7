package run

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// leaseRec builds a lease record as the server would hold it.
func leaseRec(holder string, seconds int32, acquire, renew time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	l.Spec.LeaseDurationSeconds = &seconds
	at, rt := metav1.NewMicroTime(acquire), metav1.NewMicroTime(renew)
	l.Spec.AcquireTime, l.Spec.RenewTime = &at, &rt
	return l
}

// forced is the record a merge patch {"spec":{"holderIdentity":null}}
// leaves: everything else as the holder last wrote it.
func forced(l *coordinationv1.Lease) *coordinationv1.Lease {
	c := l.DeepCopy()
	c.Spec.HolderIdentity = nil
	return c
}

// released is what client-go's LeaderElector.release writes.
func released(l *coordinationv1.Lease, at time.Time) *coordinationv1.Lease {
	c := l.DeepCopy()
	empty, one, t := "", int32(1), metav1.NewMicroTime(at)
	t2 := t
	c.Spec.HolderIdentity, c.Spec.LeaseDurationSeconds = &empty, &one
	c.Spec.AcquireTime, c.Spec.RenewTime = &t, &t2
	return c
}

// TestTurnFence: a forced release fences the next child until the last
// renewal seen + its duration + the skew margin; the holder's own release,
// a normal takeover and our own records do not.
func TestTurnFence(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	held := leaseRec("a", 15, t0, t0.Add(2*time.Second))
	want := 15*time.Second + skewMargin(15*time.Second)
	near := func(t *testing.T, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < 0 || d > time.Second {
			t.Errorf("fence at %v, want %v (within 1s after)", got, want)
		}
	}

	t.Run("forced release", func(t *testing.T) {
		f := &turnFence{me: "b"}
		seen := time.Now()
		f.observe(held)
		f.observe(forced(held))
		near(t, f.notBefore(), seen.Add(want))
	})
	t.Run("forced release with a one-second duration patched in", func(t *testing.T) {
		// Not a self-release: renewTime is the last renewal's.
		f := &turnFence{me: "b"}
		f.observe(held)
		c := forced(held)
		one := int32(1)
		c.Spec.LeaseDurationSeconds = &one
		c.Spec.AcquireTime = c.Spec.RenewTime.DeepCopy()
		f.observe(c)
		if f.notBefore().IsZero() {
			t.Error("a patch copying renewTime into acquireTime with duration 1 passed for a self-release")
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f := &turnFence{me: "b"}
		seen := time.Now()
		f.observe(held)
		f.observeGone()
		near(t, f.notBefore(), seen.Add(want))
	})
	t.Run("self-release", func(t *testing.T) {
		f := &turnFence{me: "b"}
		f.observe(held)
		f.observe(released(held, t0.Add(3*time.Second)))
		if nb := f.notBefore(); !nb.IsZero() {
			t.Errorf("fence %v after the holder's own release, want none", nb)
		}
	})
	t.Run("first seen freed by force", func(t *testing.T) {
		f := &turnFence{me: "b"}
		seen := time.Now()
		f.observe(forced(held))
		near(t, f.notBefore(), seen.Add(want))
	})
	t.Run("created without a holder", func(t *testing.T) {
		f := &turnFence{me: "b"}
		l := forced(held)
		l.Spec.AcquireTime, l.Spec.RenewTime = nil, nil
		f.observe(l)
		if nb := f.notBefore(); !nb.IsZero() {
			t.Errorf("fence %v on a lease nobody held, want none", nb)
		}
	})
	t.Run("first seen released", func(t *testing.T) {
		f := &turnFence{me: "b"}
		f.observe(released(held, t0))
		f.observeGone()
		if nb := f.notBefore(); !nb.IsZero() {
			t.Errorf("fence %v, want none", nb)
		}
	})
	t.Run("our own lease freed by force", func(t *testing.T) {
		// We stopped our own child before campaigning again.
		f := &turnFence{me: "a"}
		f.observe(held)
		f.observe(forced(held))
		if nb := f.notBefore(); !nb.IsZero() {
			t.Errorf("fence %v on our own lease, want none", nb)
		}
	})
	t.Run("granted over an unexpired holder", func(t *testing.T) {
		// The election controller's grant; we never saw the lease freed.
		f := &turnFence{me: "b"}
		seen := time.Now()
		f.observe(held)
		f.observe(leaseRec("b", 15, t0.Add(5*time.Second), t0.Add(5*time.Second)))
		near(t, f.notBefore(), seen.Add(want))
	})
	t.Run("fences only grow", func(t *testing.T) {
		f := &turnFence{me: "c"}
		f.observe(held)
		f.observe(forced(held)) // a's lease: 15 s
		first := f.notBefore()
		short := leaseRec("b", 1, t0.Add(4*time.Second), t0.Add(4*time.Second))
		f.observe(short)
		f.observe(forced(short)) // b's: 1 s, taken before its child started
		if nb := f.notBefore(); !nb.Equal(first) {
			t.Errorf("fence moved from %v to %v: a's child may still run", first, nb)
		}
	})
}

// TestTermOver: the holder's lease watch ends the term on a forced
// release, another holder, a deletion or a step-down request, and not on
// copies from before the term.
func TestTermOver(t *testing.T) {
	r := &runner{el: &elector{id: "a"}}
	tm := term{Transitions: 3, UID: "u1"}
	rec := func(holder string, transitions int32, uid string) *coordinationv1.Lease {
		l := leaseRec(holder, 15, time.Now(), time.Now())
		l.Spec.LeaseTransitions = &transitions
		l.UID = types.UID(uid)
		return l
	}
	stepDown := rec("a", 3, "u1")
	stepDown.Annotations = map[string]string{AnnotationStepDown: "a"}
	otherStepDown := rec("a", 3, "u1")
	otherStepDown.Annotations = map[string]string{AnnotationStepDown: "z"}
	for _, c := range []struct {
		name     string
		l        *coordinationv1.Lease
		deleted  bool
		over     bool
		stepDown bool
	}{
		{"ours", rec("a", 3, "u1"), false, false, false},
		{"forced release", rec("", 3, "u1"), false, true, false},
		{"taken", rec("b", 4, "u1"), false, true, false},
		{"before our term", rec("b", 2, "u1"), false, false, false},
		{"another object", rec("b", 0, "u2"), false, true, false},
		{"deleted", rec("a", 3, "u1"), true, true, false},
		{"an older object deleted", rec("b", 7, "u0"), true, false, false},
		{"absent", nil, false, true, false},
		{"asked to step down", stepDown, false, true, true},
		{"someone else asked", otherStepDown, false, false, false},
	} {
		end, over := r.termOver(tm, c.l, c.deleted)
		if over != c.over || end.stepDown != c.stepDown {
			t.Errorf("%s: over %v (%q, step-down %v), want %v, step-down %v", c.name, over, end.reason, end.stepDown, c.over, c.stepDown)
		}
	}
}
