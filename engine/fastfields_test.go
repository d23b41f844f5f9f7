package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// diffEnv runs one update request through both the fast path and the
// field manager and compares the results.
type diffEnv struct {
	env        *testEnv
	hits, runs int
}

// compare runs the renewal fast path and FieldManager.UpdateNoErrors on
// copies of live and n. When the fast path applies, the objects must be
// identical: the stored bytes (what every later read and watch sees) and
// TypeMeta.
func (d *diffEnv) compare(t *testing.T, k *kind, version string, live, n object, manager, what string) {
	t.Helper()
	fm := k.fieldManagers[version]
	apiVersion := k.gvk(version).GroupVersion().String()
	for attempt := 0; ; attempt++ {
		start := time.Now().Unix()
		slow := fm.UpdateNoErrors(live.DeepCopyObject(), n.DeepCopyObject(), manager).(object)
		fast := n.DeepCopyObject().(object)
		ok := k.fastUpdate(live.DeepCopyObject().(object), fast, manager, apiVersion)
		if time.Now().Unix() != start && attempt < 3 {
			continue // the manager's time may differ by a second boundary: run again
		}
		d.runs++
		if !ok {
			return
		}
		d.hits++
		sb, err1 := k.encode(slow)
		fb, err2 := k.encode(fast)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: encode: %v %v", what, err1, err2)
		}
		if !bytes.Equal(sb, fb) || slow.GetObjectKind().GroupVersionKind() != fast.GetObjectKind().GroupVersionKind() {
			sj, _ := json.MarshalIndent(slow, "", " ")
			fj, _ := json.MarshalIndent(fast, "", " ")
			t.Fatalf("%s (manager %q): fast path differs from the field manager\nslow: %s\nfast: %s", what, manager, sj, fj)
		}
		return
	}
}

// stored reads an object as the write path does: decoded from storage.
func stored(t *testing.T, env *testEnv, k *kind, ns, name string) object {
	t.Helper()
	kv, err := env.store.Get(context.Background(), k.key(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	o, err := k.decode(kv.Value, kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

var diffManagers = []string{"a", "b", "c", "", "d"}

func scope(env *testEnv, ns, manager string) Scope {
	s := env.leases(ns)
	s.UserAgent = manager + "/v1 (linux)"
	return s
}

// randomSpec sets a random subset of the lease's spec fields.
func randomSpec(r *rand.Rand, l *coordinationv1.Lease, now time.Time) {
	maybe := func() bool { return r.IntN(3) > 0 }
	l.Spec = coordinationv1.LeaseSpec{}
	if maybe() {
		l.Spec.HolderIdentity = ptr(fmt.Sprintf("h%d", r.IntN(3)))
	}
	if maybe() {
		l.Spec.LeaseDurationSeconds = ptr(int32(10 + r.IntN(3)))
	}
	if maybe() {
		l.Spec.AcquireTime = &metav1.MicroTime{Time: now.Add(-time.Duration(r.IntN(1e6)) * time.Microsecond)}
	}
	if maybe() {
		l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(time.Duration(r.IntN(1e6)) * time.Microsecond)}
	}
	if maybe() {
		l.Spec.LeaseTransitions = ptr(int32(r.IntN(3)))
	}
	if r.IntN(4) == 0 {
		l.Spec.Strategy = ptr(coordinationv1.OldestEmulationVersion)
		l.Spec.PreferredHolder = ptr("p")
	}
}

// mutate changes a GET result into an update request: usually a renewal,
// sometimes anything else a client might send.
func mutate(r *rand.Rand, l *coordinationv1.Lease, now time.Time) {
	s := &l.Spec
	if r.IntN(10) > 0 {
		s.RenewTime = &metav1.MicroTime{Time: now.Add(time.Duration(r.IntN(1e9)) * time.Nanosecond)}
	}
	switch r.IntN(30) { // cases 15-29: a plain renewal
	case 0:
		s.HolderIdentity = ptr("other")
		s.LeaseTransitions = ptr(int32(7))
		s.AcquireTime = &metav1.MicroTime{Time: now}
	case 1:
		s.HolderIdentity = nil
	case 2:
		s.LeaseDurationSeconds = ptr(int32(99))
	case 3:
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels["x"] = "y"
	case 4:
		l.Annotations = map[string]string{}
	case 5:
		l.ManagedFields = nil
	case 6:
		l.ManagedFields = []metav1.ManagedFieldsEntry{}
	case 7:
		if len(l.ManagedFields) > 0 && l.ManagedFields[0].Time != nil {
			l.ManagedFields[0].Time = &metav1.Time{Time: l.ManagedFields[0].Time.Add(-time.Hour)}
		}
	case 8:
		if len(l.ManagedFields) > 0 {
			raw := l.ManagedFields[0].FieldsV1.Raw
			l.ManagedFields[0].FieldsV1 = &metav1.FieldsV1{Raw: append([]byte(" "), raw...)}
		}
	case 9:
		if n := len(l.ManagedFields); n > 1 {
			l.ManagedFields[0], l.ManagedFields[n-1] = l.ManagedFields[n-1], l.ManagedFields[0]
		}
	case 10:
		l.UID = ""
	case 11:
		l.CreationTimestamp = metav1.Time{}
	case 12:
		s.RenewTime = nil
	case 13:
		s.Strategy, s.PreferredHolder = ptr(coordinationv1.OldestEmulationVersion), ptr("q")
	case 14:
		if s.RenewTime != nil {
			// A change below a microsecond is no change at all.
			s.RenewTime = &metav1.MicroTime{Time: s.RenewTime.Add(100 * time.Nanosecond)}
		}
	}
}

// TestFastUpdateMatchesFieldManager is the differential test of the
// renewal fast path: random lease histories (creates, updates and
// server-side applies by several managers), then random update requests
// (mostly renewals), each through both paths.
func TestFastUpdateMatchesFieldManager(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	d := &diffEnv{env: env}
	k := env.e.kinds[kindKey(GroupName, "leases")]
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	now := time.Now()
	for i := 0; i < 150; i++ {
		name := fmt.Sprintf("l%d", i)
		l := newLease(name)
		randomSpec(r, l, now)
		if r.IntN(3) == 0 {
			l.Labels = map[string]string{"app": "x"}
		}
		creator := diffManagers[r.IntN(len(diffManagers))]
		if _, err := env.e.Create(ctx, scope(env, "ns", creator), l, &metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
		for op := r.IntN(4); op > 0; op-- {
			m := diffManagers[r.IntN(len(diffManagers))]
			switch r.IntN(3) {
			case 0: // server-side apply of a few fields, shared when the value is the live one
				renew := now
				if cur := env.mustGet(t, "ns", name); cur.Spec.RenewTime != nil && r.IntN(2) == 0 {
					renew = cur.Spec.RenewTime.Time
				}
				patch := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"holderIdentity":"h%d","renewTime":%q}}`,
					name, r.IntN(3), renew.UTC().Format(metav1.RFC3339Micro))
				if _, _, err := env.e.Patch(ctx, scope(env, "ns", m), name, types.ApplyPatchType, []byte(patch), &metav1.PatchOptions{FieldManager: "apply-" + m, Force: ptr(true)}); err != nil {
					t.Fatalf("apply: %v", err)
				}
			default: // an update of random fields
				cur := env.mustGet(t, "ns", name)
				mutate(r, cur, now.Add(time.Duration(op)*time.Second))
				if r.IntN(3) == 0 && len(cur.ManagedFields) > 0 {
					// Clients may rewrite managedFields: leave fields unowned.
					cur.ManagedFields[0].FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)}
				} else {
					cur.ManagedFields = nil
				}
				_, _, _ = env.e.Update(ctx, scope(env, "ns", m), name, cur, &metav1.UpdateOptions{})
			}
		}
		for req := 0; req < 4; req++ {
			got := env.mustGet(t, "ns", name)
			mutate(r, got, time.Now())
			manager := diffManagers[r.IntN(len(diffManagers))]
			if r.IntN(4) > 0 && len(got.ManagedFields) > 0 {
				manager = got.ManagedFields[len(got.ManagedFields)-1].Manager // the usual renewer
			}
			live := stored(t, env, k, "ns", name)
			d.compare(t, k, "v1", live, got, managerOrUserAgent("", manager+"/v1"), fmt.Sprintf("lease %s request %d", name, req))
		}
	}
	t.Logf("fast path taken for %d of %d requests", d.hits, d.runs)
	// Both paths must be exercised for the comparison to mean anything.
	if d.hits < d.runs/10 || d.hits == d.runs {
		t.Fatalf("fast path taken for %d of %d requests: the generator no longer covers both paths", d.hits, d.runs)
	}
}

// TestFastUpdateNonCanonicalStored covers stored managedFields the engine
// never writes (non-canonical FieldsV1 bytes, an entry without time): the
// fast path must still agree with the field manager.
func TestFastUpdateNonCanonicalStored(t *testing.T) {
	env := newTestEnv(t)
	d := &diffEnv{env: env}
	k := env.e.kinds[kindKey(GroupName, "leases")]
	manager := managerOrUserAgent("", env.leases("ns").UserAgent)
	env.mustCreate(t, "ns", newLease("l", func(l *coordinationv1.Lease) {
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	}))
	for i, edit := range []func(e *metav1.ManagedFieldsEntry){
		func(e *metav1.ManagedFieldsEntry) {
			e.FieldsV1 = &metav1.FieldsV1{Raw: bytes.Replace(e.FieldsV1.Raw, []byte(`":{`), []byte(`": {`), 1)}
		},
		func(e *metav1.ManagedFieldsEntry) { e.Time = nil },
		func(e *metav1.ManagedFieldsEntry) { e.FieldsType = "" },
	} {
		live := stored(t, env, k, "ns", "l")
		edit(&live.GetManagedFields()[0])
		n := live.DeepCopyObject().(*coordinationv1.Lease)
		n.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Hour)}
		d.compare(t, k, "v1", live, n, manager, fmt.Sprintf("edit %d", i))
	}
}

// TestFastUpdateCandidates compares both paths for LeaseCandidate renewals.
func TestFastUpdateCandidates(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	d := &diffEnv{env: env}
	k := env.e.kinds[kindKey(GroupName, "leasecandidates")]
	sc := env.candidates("v1beta1", "ns")
	now := time.Now()
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("c%d", i)
		c := &coordinationv1beta1.LeaseCandidate{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1beta1.LeaseCandidateSpec{
				LeaseName: "l", BinaryVersion: "1.37.0", EmulationVersion: "1.37.0",
				Strategy: coordinationv1.OldestEmulationVersion, RenewTime: &metav1.MicroTime{Time: now},
			},
		}
		if _, err := env.e.Create(ctx, sc, c, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := env.e.Get(ctx, sc, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := got.(*coordinationv1beta1.LeaseCandidate)
		switch i % 4 {
		case 0, 1:
			n.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(time.Duration(i+1) * time.Second)}
		case 2:
			n.Spec.PingTime = &metav1.MicroTime{Time: now}
		case 3:
			n.Spec.EmulationVersion = ""
		}
		live := stored(t, env, k, "ns", name)
		d.compare(t, k, "v1beta1", live, n, managerOrUserAgent("", sc.UserAgent), name)
	}
	if d.hits == 0 || d.hits == d.runs {
		t.Fatalf("fast path taken for %d of %d requests", d.hits, d.runs)
	}
}

// TestFastKindsCoverSpecs fails when k8s.io/api adds a spec field the fast
// path would not compare (it would then miss a change).
func TestFastKindsCoverSpecs(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		fast *fastKind
	}{
		{reflect.TypeFor[coordinationv1.LeaseSpec](), newLeaseFast()},
		{reflect.TypeFor[coordinationv1beta1.LeaseCandidateSpec](), newLeaseCandidateFast()},
	} {
		if c.typ.NumField() != len(c.fast.leaves) {
			t.Errorf("%s has %d fields, the fast path compares %d", c.typ, c.typ.NumField(), len(c.fast.leaves))
		}
		for i, p := range c.fast.leaves {
			tag, _, _ := bytes.Cut([]byte(c.typ.Field(i).Tag.Get("json")), []byte(","))
			if want := ".spec." + string(tag); p.String() != want {
				t.Errorf("%s field %d is %s, the fast path's leaf %d is %s", c.typ, i, want, i, p)
			}
		}
	}
}

// BenchmarkFastUpdate is the managedFields step of a renewal on the fast
// path; BenchmarkFieldManagerUpdate the same through the field manager.
func BenchmarkFastUpdate(b *testing.B)         { benchManaged(b, true) }
func BenchmarkFieldManagerUpdate(b *testing.B) { benchManaged(b, false) }

func benchManaged(b *testing.B, fast bool) {
	env := newTestEnv(b)
	k := env.e.kinds[kindKey(GroupName, "leases")]
	env.mustCreate(b, "ns", newLease("l", func(l *coordinationv1.Lease) {
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		l.Spec.AcquireTime = &metav1.MicroTime{Time: time.Now()}
		l.Spec.LeaseTransitions = ptr[int32](0)
	}))
	kv, _ := env.store.Get(context.Background(), k.key("ns", "l"))
	live, _ := k.decode(kv.Value, kv.ModRevision)
	req := live.DeepCopyObject().(*coordinationv1.Lease)
	req.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Second)}
	manager := managerOrUserAgent("", env.leases("ns").UserAgent)
	fm := k.fieldManagers["v1"]
	b.ReportAllocs()
	for b.Loop() {
		n := req.DeepCopyObject().(object)
		if fast {
			if !k.fastUpdate(live, n, manager, "coordination.k8s.io/v1") {
				b.Fatal("fast path not taken")
			}
		} else {
			fm.UpdateNoErrors(live.DeepCopyObject(), n, manager)
		}
	}
}
