package apiserver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/engine"
)

func yamlEncoder(t testing.TB, gv schema.GroupVersion) runtime.Encoder {
	t.Helper()
	for _, info := range engine.Codecs.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeYAML {
			return engine.Codecs.EncoderForVersion(info.Serializer, gv)
		}
	}
	t.Fatal("no YAML serializer")
	return nil
}

// manyLeases has what YAML renders in different ways: long strings with
// spaces (line folding), multi-line strings, numbers, empty and nil
// fields, nested lists.
func manyLeases(n int) *coordinationv1.LeaseList {
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "12345", Continue: "abc"}}
	now := metav1.NewMicroTime(time.Date(2026, 5, 1, 10, 0, 0, 123456000, time.UTC))
	for i := range n {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lease-%04d", i), Namespace: "default",
			ResourceVersion: fmt.Sprint(100 + i), Labels: map[string]string{"n": fmt.Sprint(i), "yes": "true"}}}
		switch i % 4 {
		case 0:
			l.Annotations = map[string]string{"long": strings.Repeat("word ", 60+i%17), "multi": "line one\nline two\n  indented\n"}
		case 1:
			holder := fmt.Sprintf("holder %d: with colon", i)
			d := int32(i)
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now, AcquireTime: &now}
		case 2:
			l.Finalizers = []string{"a/b", "-dash", "'quoted'", "0x10", "1e3", ""}
			l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)}}}
		}
		list.Items = append(list.Items, l)
	}
	return list
}

// The item-by-item YAML of a list is byte for byte the serializer's.
func TestYAMLCollectionMatchesSerializer(t *testing.T) {
	gv := coordinationv1.SchemeGroupVersion
	for _, n := range []int{yamlItemsMin, 301} {
		enc := yamlEncoder(t, gv)
		list := manyLeases(n)
		var want, got bytes.Buffer
		if err := enc.Encode(list, &want); err != nil {
			t.Fatal(err)
		}
		ok, err := encodeYAMLCollection(enc, list, &got)
		if !ok || err != nil {
			t.Fatalf("encodeYAMLCollection: %v %v", ok, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%d items: YAML differs\n got: %.600s\nwant: %.600s", n, got.String(), want.String())
		}
		if len(list.Items) != n {
			t.Fatalf("the list lost its items: %d", len(list.Items))
		}
	}
	// Few items: left to the serializer.
	if ok, _ := encodeYAMLCollection(yamlEncoder(t, gv), manyLeases(3), &bytes.Buffer{}); ok {
		t.Error("a 3-item list was taken item by item")
	}
}

// A Table's rows, with their cells and objects, likewise.
func TestYAMLTableMatchesSerializer(t *testing.T) {
	gv := metav1.SchemeGroupVersion
	table := &metav1.Table{ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: "a long description " + strings.Repeat("of words ", 20)}, {Name: "Age", Type: "string"}}}
	for i, l := range manyLeases(200).Items {
		l := l
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []interface{}{l.Name, fmt.Sprint(i, "d"), int64(i), 1.5, nil},
			Object: runtime.RawExtension{Object: &l}})
	}
	enc := yamlEncoder(t, gv)
	var want, got bytes.Buffer
	if err := enc.Encode(table, &want); err != nil {
		t.Fatal(err)
	}
	if ok, err := encodeYAMLCollection(enc, table, &got); !ok || err != nil {
		t.Fatalf("encodeYAMLCollection: %v %v", ok, err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("YAML differs\n got: %.600s\nwant: %.600s", got.String(), want.String())
	}
}

// BenchmarkYAMLList10k compares the serializer and the item-by-item
// encoding of a 10,000-lease list (memory per op is the point).
func BenchmarkYAMLList10k(b *testing.B) {
	list := manyLeases(10000)
	enc := yamlEncoder(b, coordinationv1.SchemeGroupVersion)
	b.Run("serializer", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var out bytes.Buffer
			if err := enc.Encode(list, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("itemByItem", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var out bytes.Buffer
			if _, err := encodeYAMLCollection(enc, list, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
