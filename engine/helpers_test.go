package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage/boltdb"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type testEnv struct {
	e     *Engine
	store *boltdb.Store
	clock *testClock
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	return newTestEnvWith(t, boltdb.Options{}, Options{})
}

func newTestEnvWith(t testing.TB, bo boltdb.Options, eo Options) *testEnv {
	t.Helper()
	ctx := context.Background()
	if bo.Logger == nil {
		bo.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if eo.Logger == nil {
		eo.Logger = bo.Logger
	}
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "db"), bo)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clock := &testClock{t: time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)}
	eo.Store = st
	if eo.Now == nil {
		eo.Now = clock.Now
	}
	e, err := New(eo)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.rvWait = 100 * time.Millisecond
	return &testEnv{e: e, store: st, clock: clock}
}

func (env *testEnv) leases(ns string) Scope {
	r, _ := env.e.ResourceFor(GroupName, "v1", "leases")
	return Scope{Resource: r, Version: "v1", Namespace: ns, UserAgent: "leasehold-test/v0.0.0 (linux)"}
}

func (env *testEnv) candidates(version, ns string) Scope {
	r, _ := env.e.ResourceFor(GroupName, version, "leasecandidates")
	return Scope{Resource: r, Version: version, Namespace: ns, UserAgent: "leasehold-test/v0.0.0"}
}

func ptr[T any](v T) *T { return &v }

func newLease(name string, mut ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("h1"),
			LeaseDurationSeconds: ptr[int32](15),
		},
	}
	for _, m := range mut {
		m(l)
	}
	return l
}

// mustCreate creates a lease in ns and returns the stored object.
func (env *testEnv) mustCreate(t testing.TB, ns string, l *coordinationv1.Lease) *coordinationv1.Lease {
	t.Helper()
	out, err := env.e.Create(context.Background(), env.leases(ns), l, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", l.Name, err)
	}
	return out.(*coordinationv1.Lease)
}

func (env *testEnv) mustGet(t testing.TB, ns, name string) *coordinationv1.Lease {
	t.Helper()
	out, err := env.e.Get(context.Background(), env.leases(ns), name, &metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return out.(*coordinationv1.Lease)
}

// statusOf asserts err is a StatusError and returns its Status.
func statusOf(t testing.TB, err error) metav1.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error, got nil")
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %T is not a StatusError: %v", err, err)
	}
	return se.ErrStatus
}

// wantStatus checks code, reason and exact message.
func wantStatus(t testing.TB, err error, code int32, reason metav1.StatusReason, msg string) metav1.Status {
	t.Helper()
	st := statusOf(t, err)
	if st.Code != code || st.Reason != reason || (msg != "" && st.Message != msg) {
		t.Fatalf("got %d %q %q\nwant %d %q %q", st.Code, st.Reason, st.Message, code, reason, msg)
	}
	return st
}
