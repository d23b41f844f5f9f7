package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/storage"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// laggingStore is the real store as seen by a member that has not applied
// the latest writes yet: its GetStale (storage.StaleReader) answers with
// the values it held when lag was last called, while Get and the writes
// are the store's own (linearizable, compare-and-swap).
type laggingStore struct {
	storage.Interface
	mu     sync.Mutex
	frozen map[string]storage.KeyValue
	stale  atomic.Int64 // GetStale calls
}

func (s *laggingStore) lag(t *testing.T, key string) {
	t.Helper()
	kv, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.frozen[key] = kv
	s.mu.Unlock()
}

func (s *laggingStore) GetStale(ctx context.Context, key string) (storage.KeyValue, error) {
	s.stale.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if kv, ok := s.frozen[key]; ok {
		return kv, nil
	}
	return s.Get(ctx, key)
}

// TestUpdateFromStaleRead: an update starts from the store's stale read
// (no quorum round on a cluster) and its outcome is still the one a
// linearizable read gives. Through a member that lags the latest write:
// a renewal carrying the latest resourceVersion succeeds; one carrying
// the lagging member's resourceVersion is a 409, also when it would be a
// no-op against the stale state (same bytes), and never succeeds; a dry
// run (which writes nothing to check) reads linearizably.
func TestUpdateFromStaleRead(t *testing.T) {
	env := newTestEnv(t)
	lagging := &laggingStore{Interface: env.store, frozen: map[string]storage.KeyValue{}}
	member, err := New(Options{Store: lagging, Now: env.clock.Now, Logger: env.e.log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scope := env.leases("default")
	created := env.mustCreate(t, "default", newLease("l"))
	key := member.mustKind(t, scope).key("default", "l")

	lagging.lag(t, key) // the member holds created
	renewed := created.DeepCopy()
	renewed.Spec.HolderIdentity = ptr("h2")
	out, _, err := env.e.Update(ctx, scope, "l", renewed, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest := out.(*coordinationv1.Lease)

	// The latest resourceVersion through the lagging member: the stale
	// read disagrees, the linearizable one does not.
	next := latest.DeepCopy()
	next.Spec.HolderIdentity = ptr("h3")
	before := lagging.stale.Load()
	out, _, err = member.Update(ctx, scope, "l", next, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("renewal with the latest resourceVersion through a lagging member: %v", err)
	}
	if lagging.stale.Load() == before {
		t.Fatal("the update did not start from the stale read")
	}
	latest = out.(*coordinationv1.Lease)
	if *latest.Spec.HolderIdentity != "h3" {
		t.Fatalf("stored holder %q, want h3", *latest.Spec.HolderIdentity)
	}

	// The lagging member's resourceVersion: the stale read agrees with
	// it, the compare-and-swap does not.
	lagging.lag(t, key) // the member holds latest (h3)
	moved := latest.DeepCopy()
	moved.Spec.HolderIdentity = ptr("h4")
	if _, _, err := env.e.Update(ctx, scope, "l", moved, &metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := latest.DeepCopy()
	old.Spec.HolderIdentity = ptr("h5")
	if _, _, err := member.Update(ctx, scope, "l", old, &metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with an outdated resourceVersion through a lagging member = %v, want 409 Conflict", err)
	}
	// The same bytes as the stale state: a no-op there, a conflict in fact.
	if _, _, err := member.Update(ctx, scope, "l", latest.DeepCopy(), &metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("no-op update with an outdated resourceVersion through a lagging member = %v, want 409 Conflict", err)
	}
	if got := env.mustGet(t, "default", "l"); *got.Spec.HolderIdentity != "h4" {
		t.Fatalf("stored holder %q after the refused updates, want h4", *got.Spec.HolderIdentity)
	}

	// The lease deleted and created again (a new UID) where the member
	// still holds the old one: a renewal of the new one with its UID
	// passes (the UID precondition is checked against the latest state).
	lagging.lag(t, key)
	if _, _, err := env.e.Delete(ctx, scope, "l", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := env.mustCreate(t, "default", newLease("l"))
	again.Spec.HolderIdentity = ptr("h6")
	if _, _, err := member.Update(ctx, scope, "l", again, &metav1.UpdateOptions{}); err != nil {
		t.Fatalf("renewal of the lease created again (new UID) through a member holding the old one: %v", err)
	}
	lagging.lag(t, key)

	// A dry run writes nothing that would check a stale read.
	before = lagging.stale.Load()
	if _, _, err := member.Update(ctx, scope, "l", old, &metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsConflict(err) {
		t.Fatalf("dry-run update with an outdated resourceVersion = %v, want 409 Conflict", err)
	}
	if lagging.stale.Load() != before {
		t.Error("a dry run read the stale state")
	}
}

func (e *Engine) mustKind(t *testing.T, s Scope) *kind {
	t.Helper()
	k, err := e.kindFor(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
