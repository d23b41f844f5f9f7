package engine

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serializerJSON is what the HTTP layer writes without the codecs.
func serializerJSON(t testing.TB, obj runtime.Object, gv schema.GroupVersion) []byte {
	t.Helper()
	for _, info := range Codecs.SupportedMediaTypes() {
		if info.MediaType == "application/json" {
			var buf bytes.Buffer
			if err := Codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, &buf); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
	}
	t.Fatal("no JSON serializer")
	return nil
}

// TestGetJSON checks GetJSON against Get and the serializer: the same
// body, the same errors, and no answer where it must decline.
func TestGetJSON(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("a", func(l *coordinationv1.Lease) {
		l.Labels = map[string]string{"app": "x", "tier": "y"}
		l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
	}))
	// A finalizer's managedFields entry holds an escaped quote, which
	// the codec leaves to the serializer.
	env.mustCreate(t, "default", newLease("declined", func(l *coordinationv1.Lease) {
		l.Finalizers = []string{"example.com/keep"}
	}))
	if _, ok, err := env.e.GetJSON(ctx, sc, "declined", nil); ok || err != nil {
		t.Fatalf("escaped fieldsV1: ok %v, %v", ok, err)
	}
	body, ok, err := env.e.GetJSON(ctx, sc, "a", &metav1.GetOptions{})
	if err != nil || !ok {
		t.Fatalf("GetJSON: ok %v, %v", ok, err)
	}
	obj, err := env.e.Get(ctx, sc, "a", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := serializerJSON(t, obj, coordinationv1.SchemeGroupVersion); !bytes.Equal(body, want) {
		t.Fatalf("GetJSON differs from the serializer\ngot:  %s\nwant: %s", body, want)
	}
	if enc, ok := EncodeJSON(obj, coordinationv1.SchemeGroupVersion); !ok || !bytes.Equal(enc, body) {
		t.Fatalf("EncodeJSON: ok %v\n%s", ok, enc)
	}

	_, ok, err = env.e.GetJSON(ctx, sc, "missing", nil)
	_, getErr := env.e.Get(ctx, sc, "missing", nil)
	if ok || !reflect.DeepEqual(statusOf(t, err), statusOf(t, getErr)) {
		t.Fatalf("missing lease: ok %v, %v; Get says %v", ok, err, getErr)
	}
	if _, ok, err := env.e.GetJSON(ctx, env.candidates("v1beta1", "default"), "c", nil); ok || err != nil {
		t.Fatalf("a kind without a stored-format codec: ok %v, %v", ok, err)
	}
}

// TestListJSON does the same for ListJSON, with a page that carries
// continue and remainingItemCount.
func TestListJSON(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	for i := range 5 {
		env.mustCreate(t, "default", newLease(fmt.Sprintf("l%d", i)))
	}
	for _, opts := range []*metav1.ListOptions{{}, {Limit: 2}} {
		body, ok, err := env.e.ListJSON(ctx, sc, opts)
		if err != nil || !ok {
			t.Fatalf("ListJSON %+v: ok %v, %v", opts, ok, err)
		}
		obj, err := env.e.List(ctx, sc, opts)
		if err != nil {
			t.Fatal(err)
		}
		if want := serializerJSON(t, obj, coordinationv1.SchemeGroupVersion); !bytes.Equal(body, want) {
			t.Fatalf("ListJSON %+v differs from the serializer\ngot:  %s\nwant: %s", opts, body, want)
		}
		if enc, ok := EncodeJSON(obj, coordinationv1.SchemeGroupVersion); !ok || !bytes.Equal(enc, body) {
			t.Fatalf("EncodeJSON of the list: ok %v\n%s", ok, enc)
		}
	}
	if _, ok, err := env.e.ListJSON(ctx, sc, &metav1.ListOptions{LabelSelector: "a=b"}); ok || err != nil {
		t.Fatalf("a selector must decline: ok %v, %v", ok, err)
	}
	bad := &metav1.ListOptions{LabelSelector: "a=(", Limit: 1}
	_, ok, err := env.e.ListJSON(ctx, sc, bad)
	_, listErr := env.e.List(ctx, sc, bad)
	if ok || !reflect.DeepEqual(statusOf(t, err), statusOf(t, listErr)) {
		t.Fatalf("bad selector: ok %v, %v; List says %v", ok, err, listErr)
	}
}

// TestDecodeJSON checks the kind dispatch: a Lease v1 renewal body is
// decoded, anything else is left to the serializer.
func TestDecodeJSON(t *testing.T) {
	body := []byte(`{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"a"},"spec":{"holderIdentity":"h"}}`)
	obj, ok := DecodeJSON(leaseV1, body)
	if l, isLease := obj.(*coordinationv1.Lease); !ok || !isLease || l.Name != "a" || *l.Spec.HolderIdentity != "h" {
		t.Fatalf("DecodeJSON: %v %#v", ok, obj)
	}
	if obj, ok := DecodeJSON(schema.GroupVersionKind{Group: GroupName, Version: "v1beta1", Kind: "LeaseCandidate"}, body); ok || obj != nil {
		t.Fatalf("another kind was decoded: %#v", obj)
	}
}

// BenchmarkGetJSON is the read half of a renewal as the HTTP layer serves
// plain JSON: the body rendered from the stored value.
func BenchmarkGetJSON(b *testing.B) {
	env := newTestEnv(b)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(b, "default", newLease("g"))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := env.e.GetJSON(ctx, sc, "g", nil); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
