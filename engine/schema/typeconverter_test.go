package schema

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// testMeta has one of each interesting metadata shape, so that the field set
// shows how the converter treats them.
func testMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        "n",
		Namespace:   "default",
		Labels:      map[string]string{"a": "b"},
		Annotations: map[string]string{"c": "d"},
		Finalizers:  []string{"x"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("u1"),
		}},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate}},
	}
}

func fieldSet(t *testing.T, obj runtime.Object) *fieldpath.Set {
	t.Helper()
	tc, err := TypeConverter()
	if err != nil {
		t.Fatalf("TypeConverter: %v", err)
	}
	tv, err := tc.ObjectToTyped(obj)
	if err != nil {
		t.Fatalf("ObjectToTyped(%T): %v", obj, err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		t.Fatalf("ToFieldSet(%T): %v", obj, err)
	}
	return set
}

// checkMetadata asserts the SSA semantics of metadata that upstream's
// markers give: labels granular, finalizers a set, ownerReferences a map
// keyed by uid with atomic entries, managedFields atomic.
func checkMetadata(t *testing.T, set *fieldpath.Set) {
	t.Helper()
	owner := fieldpath.KeyByFields("uid", "u1")
	has := []fieldpath.Path{
		fieldpath.MakePathOrDie("metadata", "labels", "a"),
		fieldpath.MakePathOrDie("metadata", "annotations", "c"),
		fieldpath.MakePathOrDie("metadata", "finalizers", value.NewValueInterface("x")),
		fieldpath.MakePathOrDie("metadata", "ownerReferences", owner),
		fieldpath.MakePathOrDie("metadata", "managedFields"),
	}
	for _, p := range has {
		if !set.Has(p) {
			t.Errorf("field set lacks %v; set:\n%v", p, set)
		}
	}
	hasNot := []fieldpath.Path{
		fieldpath.MakePathOrDie("metadata", "labels"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences", owner, "name"),
		fieldpath.MakePathOrDie("metadata", "managedFields", 0),
		fieldpath.MakePathOrDie("metadata", "managedFields", 0, "manager"),
	}
	for _, p := range hasNot {
		if set.Has(p) {
			t.Errorf("field set has %v, want it not to (wrong list/map type); set:\n%v", p, set)
		}
	}
}

func TestTypeConverterLease(t *testing.T) {
	d := int32(15)
	holder := "me"
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: testMeta(),
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d},
	}
	set := fieldSet(t, lease)
	checkMetadata(t, set)
	for _, f := range []string{"holderIdentity", "leaseDurationSeconds"} {
		if !set.Has(fieldpath.MakePathOrDie("spec", f)) {
			t.Errorf("spec.%s is not a scalar leaf; set:\n%v", f, set)
		}
	}
}

func TestTypeConverterLeaseCandidate(t *testing.T) {
	objs := []runtime.Object{
		&coordinationv1beta1.LeaseCandidate{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1beta1", Kind: "LeaseCandidate"},
			ObjectMeta: testMeta(),
			Spec:       coordinationv1beta1.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: "1.37.0", Strategy: coordinationv1.OldestEmulationVersion},
		},
		&coordinationv1alpha2.LeaseCandidate{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1alpha2", Kind: "LeaseCandidate"},
			ObjectMeta: testMeta(),
			Spec:       coordinationv1alpha2.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: "1.37.0", Strategy: coordinationv1.OldestEmulationVersion},
		},
	}
	for _, obj := range objs {
		set := fieldSet(t, obj)
		checkMetadata(t, set)
		for _, f := range []string{"leaseName", "binaryVersion", "strategy"} {
			if !set.Has(fieldpath.MakePathOrDie("spec", f)) {
				t.Errorf("%T spec.%s is not a scalar leaf; set:\n%v", obj, f, set)
			}
		}
	}
}

func TestTypeConverterIsCached(t *testing.T) {
	a, err := TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := TypeConverter()
	if a != b {
		t.Error("TypeConverter built twice")
	}
}
