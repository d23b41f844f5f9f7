package leasecodec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// serializerJSON encodes obj as web/apiserver does without the codec.
func serializerJSON(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var info runtime.SerializerInfo
	for _, i := range testCodecs.SupportedMediaTypes() {
		if i.MediaType == "application/json" {
			info = i
		}
	}
	var buf bytes.Buffer
	if err := testCodecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serializerFrame is a watch event as web/apiserver's watch stream writes
// it with the serializer.
func serializerFrame(t testing.TB, typ string, obj runtime.Object) []byte {
	t.Helper()
	raw := serializerJSON(t, obj)
	var info runtime.SerializerInfo
	for _, i := range testCodecs.SupportedMediaTypes() {
		if i.MediaType == "application/json" {
			info = i
		}
	}
	var buf bytes.Buffer
	we := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
	if err := testCodecs.EncoderForVersion(info.StreamSerializer.Serializer, coordinationv1.SchemeGroupVersion).Encode(we, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// randomLease builds a lease from r, with strs as string material (the
// fuzzer's), covering every field the fast encoder writes.
func randomLease(r *rand.Rand, strs []string) *coordinationv1.Lease {
	plain := []string{"", "a", "bench-000001", "kube-system", "ok.example.com/x"}
	pick := func() string {
		if r.IntN(30) > 0 {
			return plain[r.IntN(len(plain))]
		}
		return strs[r.IntN(len(strs))]
	}
	maybe := func() bool { return r.IntN(2) == 0 }
	tm := func() time.Time {
		if r.IntN(8) == 0 {
			return time.Time{}
		}
		return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("z", r.IntN(7200)))
	}
	l := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}}
	m := &l.ObjectMeta
	m.Name, m.Namespace, m.ResourceVersion = pick(), pick(), fmt.Sprint(r.IntN(1000))
	if maybe() {
		m.GenerateName, m.UID, m.SelfLink = pick(), types.UID("uid-"+pick()), pick()
	}
	m.Generation = r.Int64N(3) - 1
	m.CreationTimestamp = metav1.Time{Time: tm()}
	if r.IntN(5) == 0 {
		m.DeletionTimestamp = &metav1.Time{Time: tm()}
		m.DeletionGracePeriodSeconds = ptrTo(r.Int64N(30))
	}
	for _, dst := range []*map[string]string{&m.Labels, &m.Annotations} {
		switch r.IntN(3) {
		case 1:
			*dst = map[string]string{}
		case 2:
			*dst = map[string]string{pick(): pick(), pick(): pick(), "b": pick()}
		}
	}
	if maybe() {
		m.Finalizers = []string{pick(), pick()}
	}
	for i := r.IntN(3); i > 0; i-- {
		e := metav1.ManagedFieldsEntry{Manager: pick(), Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "coordination.k8s.io/v1", FieldsType: "FieldsV1"}
		if maybe() {
			e.Time = &metav1.Time{Time: tm()}
		}
		switch r.IntN(4) {
		case 0:
			e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:renewTime":{}}}`)}
		case 1:
			e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:` + pick() + `":{}}}}`)}
		case 2:
			e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{ "f:spec": {} }`)}
		}
		if maybe() {
			e.Subresource = pick()
		}
		m.ManagedFields = append(m.ManagedFields, e)
	}
	s := &l.Spec
	if maybe() {
		s.HolderIdentity = ptrTo(pick())
	}
	if maybe() {
		s.LeaseDurationSeconds = ptrTo(int32(r.IntN(100) - 5))
	}
	if maybe() {
		s.AcquireTime = &metav1.MicroTime{Time: tm()}
	}
	if maybe() {
		s.RenewTime = &metav1.MicroTime{Time: tm()}
	}
	if maybe() {
		s.LeaseTransitions = ptrTo(int32(r.IntN(5)))
	}
	if maybe() {
		s.Strategy = ptrTo(coordinationv1.CoordinatedLeaseStrategy(pick()))
		s.PreferredHolder = ptrTo(pick())
	}
	return l
}

func ptrTo[T any](v T) *T { return &v }

var encodeStrings = []string{"", "a", "bench-000001", "kube-system", "x<y", "é", "a\"b", "tab\t", "\u2028", "\xff", "&", "ok.example.com/x"}

// checkEncode compares the fast encoders with the serializer on one lease.
func checkEncode(t *testing.T, l *coordinationv1.Lease) (taken bool) {
	t.Helper()
	if fast, ok := JSON(l); ok {
		taken = true
		if slow := serializerJSON(t, l); !bytes.Equal(fast, slow) {
			t.Fatalf("lease encodings differ\nfast: %s\nslow: %s", fast, slow)
		}
	}
	for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
		if frame, ok := AppendEventJSON(nil, string(typ), l); ok {
			if slow := serializerFrame(t, string(typ), l); !bytes.Equal(frame, slow) {
				t.Fatalf("watch frames differ\nfast: %s\nslow: %s", frame, slow)
			}
		}
	}
	item := *l
	item.TypeMeta = metav1.TypeMeta{}
	list := &coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: l.ResourceVersion, Continue: l.Name}, Items: []coordinationv1.Lease{item, item}}
	if fast, ok := ListJSON(list); ok {
		if slow := serializerJSON(t, list); !bytes.Equal(fast, slow) {
			t.Fatalf("list encodings differ\nfast: %s\nslow: %s", fast, slow)
		}
	}
	return taken
}

// TestFastEncodeLease compares the fast encoders with the serializer on
// random leases, and checks that typical ones take the fast path.
func TestFastEncodeLease(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	taken := 0
	for range 2000 {
		if checkEncode(t, randomLease(r, encodeStrings)) {
			taken++
		}
	}
	if taken < 100 {
		t.Fatalf("fast path taken for %d of 2000 random leases", taken)
	}
	for _, l := range []*coordinationv1.LeaseList{{}, {TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"}}} {
		if fast, ok := ListJSON(l); ok {
			if slow := serializerJSON(t, l); !bytes.Equal(fast, slow) {
				t.Fatalf("empty list: fast %s, slow %s", fast, slow)
			}
		}
	}
}

// FuzzFastEncodeLease drives the same comparison with fuzzed strings.
func FuzzFastEncodeLease(f *testing.F) {
	f.Add(uint64(1), "a", "b")
	f.Add(uint64(2), "<", "\x00")
	f.Fuzz(func(t *testing.T, seed uint64, a, b string) {
		checkEncode(t, randomLease(rand.New(rand.NewPCG(seed, 0)), []string{a, b, "c"}))
	})
}
