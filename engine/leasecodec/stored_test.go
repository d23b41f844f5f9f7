package leasecodec

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/storage"
)

// checkReader compares leaseReader with the generated Unmarshal on one
// stored value: whenever the reader accepts it, both must render the same
// JSON.
func checkReader(t *testing.T, rd *leaseReader, value []byte, rev int64) (taken bool) {
	t.Helper()
	got, ok := rd.read(value, rev)
	want := &coordinationv1.Lease{}
	err := want.Unmarshal(value)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("reader accepted what Unmarshal refuses (%v): %q", err, value)
	}
	want.ResourceVersion = strconv.FormatInt(rev, 10)
	wj, wok := appendLeaseJSON(nil, want, false)
	gj, gok := appendLeaseJSON(nil, got, false)
	if wok != gok || !bytes.Equal(wj, gj) {
		t.Fatalf("reader and Unmarshal differ on %q\nreader:    %v %s\nUnmarshal: %v %s", value, gok, gj, wok, wj)
	}
	return true
}

// stored is a lease as the engine stores it: protobuf, no TypeMeta or
// resourceVersion.
func stored(t *testing.T, l *coordinationv1.Lease) []byte {
	t.Helper()
	c := l.DeepCopy()
	c.TypeMeta, c.ResourceVersion = metav1.TypeMeta{}, ""
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLeaseReader(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	var rd leaseReader // reused across leases, as in a list
	taken := 0
	for i := range 3000 {
		l := randomLease(r, encodeStrings)
		if r.IntN(4) == 0 {
			l.Labels = map[string]string{"a": "1", "b": "", "c/d": "x"}
			l.Finalizers = []string{"f1", "f2"}
		}
		if checkReader(t, &rd, stored(t, l), int64(i+1)) {
			taken++
		}
	}
	if taken < 2000 {
		t.Fatalf("reader took %d of 3000 random leases", taken)
	}
	// A whole list body equals the serializer's rendering of List's result.
	var items []storage.KeyValue
	list := &coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "77", Continue: "tok", RemainingItemCount: ptrTo(int64(3))}, Items: []coordinationv1.Lease{}}
	for i := 0; len(items) < 50; i++ {
		l := randomLease(r, []string{"x"})
		if _, ok := appendLeaseJSON(nil, l, true); !ok {
			continue
		}
		v := stored(t, l)
		items = append(items, storage.KeyValue{Value: v, ModRevision: int64(100 + i)})
		d := &coordinationv1.Lease{}
		if err := d.Unmarshal(v); err != nil {
			t.Fatal(err)
		}
		d.ResourceVersion = strconv.Itoa(100 + i)
		list.Items = append(list.Items, *d)
	}
	fast, ok := StoredListJSON(&list.ListMeta, items)
	if !ok {
		t.Fatal("raw list refused")
	}
	if slow := serializerJSON(t, list); !bytes.Equal(fast, slow) {
		t.Fatalf("list bodies differ\nfast: %s\nslow: %s", fast, slow)
	}
	empty := &coordinationv1.LeaseList{TypeMeta: list.TypeMeta, ListMeta: metav1.ListMeta{ResourceVersion: "5"}, Items: []coordinationv1.Lease{}}
	if fast, ok := StoredListJSON(&empty.ListMeta, nil); !ok || !bytes.Equal(fast, serializerJSON(t, empty)) {
		t.Fatalf("empty list: %s", fast)
	}
}

// FuzzLeaseReader feeds arbitrary and mutated protobuf to the reader.
func FuzzLeaseReader(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		l := randomLease(r, encodeStrings)
		c := l.DeepCopy()
		c.TypeMeta, c.ResourceVersion = metav1.TypeMeta{}, ""
		b, _ := c.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		var rd leaseReader
		checkReader(t, &rd, value, 9)
	})
}

func TestAppendUTC(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	times := []time.Time{time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for range 5000 {
		times = append(times, time.Unix(r.Int64N(1<<36)-1<<35, r.Int64N(1e9)))
	}
	for _, tm := range times {
		u := tm.UTC()
		if got, want := appendUTC(nil, u, false), u.AppendFormat(nil, time.RFC3339); !bytes.Equal(got, want) {
			t.Fatalf("%v: got %s, want %s", tm, got, want)
		}
		if got, want := appendUTC(nil, u, true), u.AppendFormat(nil, metav1.RFC3339Micro); !bytes.Equal(got, want) {
			t.Fatalf("%v micro: got %s, want %s", tm, got, want)
		}
	}
}

// benchLeases are 10,000 renewed leases as stored, like the load tool's.
func benchLeases(b *testing.B) ([]storage.KeyValue, *coordinationv1.LeaseList) {
	now := time.Now()
	fields := []byte(`{"f:spec":{"f:acquireTime":{},"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:leaseTransitions":{},"f:renewTime":{}}}`)
	var kvs []storage.KeyValue
	list := &coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "99999"}}
	for i := range 10000 {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + strconv.Itoa(i), Namespace: "bench", UID: "5f0c3a8e-3b7a-4d0e-9d59-6a1d0c8b7e21",
			CreationTimestamp: metav1.Time{Time: now}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "leasehold-bench", Operation: "Update",
				APIVersion: "coordination.k8s.io/v1", Time: &metav1.Time{Time: now}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("holder-1"), LeaseDurationSeconds: ptrTo(int32(15)),
				AcquireTime: &metav1.MicroTime{Time: now}, RenewTime: &metav1.MicroTime{Time: now}, LeaseTransitions: ptrTo(int32(0))}}
		v, err := l.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		kvs = append(kvs, storage.KeyValue{Value: v, ModRevision: int64(i + 1)})
		l.ResourceVersion = strconv.Itoa(i + 1)
		list.Items = append(list.Items, *l)
	}
	return kvs, list
}

// BenchmarkListJSONRaw renders 10,000 leases from their stored values.
func BenchmarkListJSONRaw(b *testing.B) {
	kvs, list := benchLeases(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := StoredListJSON(&list.ListMeta, kvs); !ok {
			b.Fatal("refused")
		}
	}
}

// BenchmarkListJSONDecoded is the path before: decode every value, then
// render the LeaseList.
func BenchmarkListJSONDecoded(b *testing.B) {
	kvs, list := benchLeases(b)
	b.ReportAllocs()
	for b.Loop() {
		out := &coordinationv1.LeaseList{TypeMeta: list.TypeMeta, ListMeta: list.ListMeta, Items: make([]coordinationv1.Lease, len(kvs))}
		for i := range kvs {
			if err := out.Items[i].Unmarshal(kvs[i].Value); err != nil {
				b.Fatal(err)
			}
			out.Items[i].ResourceVersion = strconv.FormatInt(kvs[i].ModRevision, 10)
		}
		if _, ok := ListJSON(out); !ok {
			b.Fatal("refused")
		}
	}
}
