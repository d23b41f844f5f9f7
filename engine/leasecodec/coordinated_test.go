package leasecodec

import (
	"math/rand/v2"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// checkCoordination compares StoredLeaseCoordination with the generated
// Unmarshal: whenever it reads a value that Unmarshal decodes, both
// agree on namespace, name and whether a strategy or preferred holder is
// set (the election controller's coordinated()).
func checkCoordination(t *testing.T, value []byte) (read bool) {
	t.Helper()
	ns, name, coord, ok := StoredLeaseCoordination(value)
	if !ok {
		return false
	}
	l := &coordinationv1.Lease{}
	if err := l.Unmarshal(value); err != nil {
		return true // a list skips an undecodable value either way
	}
	s := &l.Spec
	want := s.Strategy != nil && *s.Strategy != "" || s.PreferredHolder != nil && *s.PreferredHolder != ""
	if ns != l.Namespace || name != l.Name || coord != want {
		t.Fatalf("on %q: read %q/%q coordinated=%v; Unmarshal %q/%q coordinated=%v", value, ns, name, coord, l.Namespace, l.Name, want)
	}
	return true
}

func TestStoredLeaseCoordination(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	strategy := coordinationv1.CoordinatedLeaseStrategy("OldestEmulationVersion")
	empty := coordinationv1.CoordinatedLeaseStrategy("")
	for i := range 3000 {
		l := randomLease(r, encodeStrings)
		switch i % 5 {
		case 0:
			l.Spec.Strategy = &strategy
		case 1:
			l.Spec.PreferredHolder = ptrTo("holder-b")
		case 2:
			l.Spec.Strategy, l.Spec.PreferredHolder = &empty, ptrTo("")
		case 3:
			l.Spec.Strategy, l.Spec.PreferredHolder = nil, nil
		}
		if !checkCoordination(t, stored(t, l)) {
			t.Fatalf("a marshalled lease was not read: %q", stored(t, l))
		}
	}

	// Unmarshal merges a repeated spec (and keeps the last name): such a
	// value is left to it.
	a := &coordinationv1.Lease{}
	a.Name, a.Namespace = "a", "ns"
	a.Spec.Strategy = &strategy
	b := &coordinationv1.Lease{}
	b.Name = "b"
	b.Spec.HolderIdentity = ptrTo("h")
	if _, _, _, ok := StoredLeaseCoordination(append(stored(t, a), stored(t, b)...)); ok {
		t.Error("a value with metadata and spec twice was read")
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 0x0a}, {0x12, 0x02, 0x30, 0x01}, {0x08}} {
		if _, _, _, ok := StoredLeaseCoordination(bad); ok {
			t.Errorf("malformed %q was read", bad)
		}
	}
}

// FuzzStoredLeaseCoordination feeds arbitrary and mutated protobuf to it.
func FuzzStoredLeaseCoordination(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 3))
	strategy := coordinationv1.CoordinatedLeaseStrategy("OldestEmulationVersion")
	for i := range 8 {
		l := randomLease(r, encodeStrings)
		if i%2 == 0 {
			l.Spec.Strategy = &strategy
		}
		b, _ := l.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, value []byte) { checkCoordination(t, value) })
}
