package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testLease(ns, name, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

// TestHolderTrackerBounds checks the memory bounds the page relies on:
// histories of at most maxHolderHistories leases (the least recently
// changed go first), identities clipped, and a listed lease without a
// made-up past.
func TestHolderTrackerBounds(t *testing.T) {
	t.Parallel()
	tr := newHolderTracker()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	tr.replace([]coordinationv1.Lease{*testLease("default", "listed", "a")})
	if h, ok := tr.history("default", "listed"); !ok || len(h.Items) != 0 {
		t.Fatalf("a listed lease: %+v %v, want an empty history", h, ok)
	}
	for i := range maxHolderHistories + 5 {
		name := fmt.Sprintf("l-%d", i)
		tr.observe(testLease("default", name, "x"), true)
	}
	if len(tr.changes) != maxHolderHistories {
		t.Errorf("%d histories kept, want %d", len(tr.changes), maxHolderHistories)
	}
	for _, gone := range []string{"l-0", "l-4"} {
		if h, _ := tr.history("default", gone); len(h.Items) != 0 {
			t.Errorf("%s: the oldest histories should have been evicted, have %+v", gone, h.Items)
		}
	}
	if h, _ := tr.history("default", "l-5"); len(h.Items) != 1 {
		t.Errorf("l-5: %+v, want its one change", h.Items)
	}
	long := strings.Repeat("n", 4000)
	tr.observe(testLease("default", "listed", long), true)
	h, _ := tr.history("default", "listed")
	if len(h.Items) != 1 || h.Items[0].From != "a" || len(h.Items[0].To) > maxIdentityBytes+len("…") {
		t.Errorf("long identity: %d items, to %d bytes", len(h.Items), len(h.Items[0].To))
	}
	// The same long holder renewing is not a change.
	tr.observe(testLease("default", "listed", long), true)
	if h, _ := tr.history("default", "listed"); len(h.Items) != 1 {
		t.Errorf("a renewal by a clipped identity counted as a change: %d items", len(h.Items))
	}
}
