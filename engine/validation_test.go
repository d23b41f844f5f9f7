package engine

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// validStoredLease is a lease as the engine stores it: metadata that
// passed validation, with managedFields, labels, annotations, owner
// references and finalizers to vary.
func validStoredLease() *coordinationv1.Lease {
	t := true
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: "l", Namespace: "ns", UID: "u-1", ResourceVersion: "7", Generation: 0,
			CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
			Labels:            map[string]string{"app": "x"},
			Annotations:       map[string]string{"note": "y"},
			Finalizers:        []string{"example.com/keep"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "pu", Controller: &t}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "coordination.k8s.io/v1",
				Time: ptr(metav1.NewTime(time.Unix(1700000001, 0))), FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)},
			}},
		},
	}
}

// TestMetadataAsStored checks the validation skip against the validation
// it skips: whenever metadataAsStored holds, validateGenericUpdate finds
// nothing, and any change it must see makes it false.
func TestMetadataAsStored(t *testing.T) {
	old := validStoredLease()
	if errs := validateGenericUpdate(old, old); len(errs) != 0 {
		t.Fatalf("the stored lease is not valid: %v", errs)
	}
	same := func(o *coordinationv1.Lease) {}
	changes := map[string]func(o *coordinationv1.Lease){
		"renewal (managedFields time)": func(o *coordinationv1.Lease) {
			o.ManagedFields[0].Time = ptr(metav1.NewTime(time.Unix(1800000000, 0)))
		},
		"nothing":            same,
		"no resourceVersion": func(o *coordinationv1.Lease) { o.ResourceVersion = "" },
		"name":               func(o *coordinationv1.Lease) { o.Name = "other" },
		"namespace":          func(o *coordinationv1.Lease) { o.Namespace = "other" },
		"uid":                func(o *coordinationv1.Lease) { o.UID = types.UID("u-2") },
		"generation":         func(o *coordinationv1.Lease) { o.Generation = -1 },
		"generateName":       func(o *coordinationv1.Lease) { o.GenerateName = "Bad_" },
		"creation":           func(o *coordinationv1.Lease) { o.CreationTimestamp = metav1.NewTime(time.Unix(1, 0)) },
		"deletion":           func(o *coordinationv1.Lease) { o.DeletionTimestamp = ptr(metav1.Now()) },
		"grace":              func(o *coordinationv1.Lease) { o.DeletionGracePeriodSeconds = ptr(int64(3)) },
		"bad label":          func(o *coordinationv1.Lease) { o.Labels = map[string]string{"a b": "c"} },
		"label value":        func(o *coordinationv1.Lease) { o.Labels = map[string]string{"app": "z"} },
		"huge annotation":    func(o *coordinationv1.Lease) { o.Annotations = map[string]string{"k": strings.Repeat("x", 300<<10)} },
		"finalizer":          func(o *coordinationv1.Lease) { o.Finalizers = append(o.Finalizers, "bad finalizer") },
		"owner uid":          func(o *coordinationv1.Lease) { o.OwnerReferences[0].UID = "" },
		"owner controller":   func(o *coordinationv1.Lease) { o.OwnerReferences[0].Controller = nil },
		"operation":          func(o *coordinationv1.Lease) { o.ManagedFields[0].Operation = "Bogus" },
		"fieldsType":         func(o *coordinationv1.Lease) { o.ManagedFields[0].FieldsType = "FieldsV2" },
		"fields":             func(o *coordinationv1.Lease) { o.ManagedFields[0].FieldsV1 = nil },
		"manager":            func(o *coordinationv1.Lease) { o.ManagedFields[0].Manager = "n" },
		"subresource":        func(o *coordinationv1.Lease) { o.ManagedFields[0].Subresource = "status" },
		"extra entry": func(o *coordinationv1.Lease) {
			o.ManagedFields = append(o.ManagedFields, o.ManagedFields[0])
		},
	}
	for name, change := range changes {
		o := old.DeepCopy()
		change(o)
		skip := metadataAsStored(o, old)
		errs := validateGenericUpdate(o, old)
		switch name {
		case "renewal (managedFields time)", "nothing":
			if !skip {
				t.Errorf("%s: validation not skipped", name)
			}
		default:
			if skip {
				t.Errorf("%s: validation skipped", name)
			}
		}
		if skip && len(errs) != 0 {
			t.Errorf("%s: skipped a validation that fails: %v", name, errs)
		}
	}

	// Random combinations: a skip never hides an error.
	r := rand.New(rand.NewSource(1))
	names := make([]string, 0, len(changes))
	for name := range changes {
		names = append(names, name)
	}
	slices.Sort(names)
	for range 2000 {
		o := old.DeepCopy()
		for range r.Intn(3) {
			changes[names[r.Intn(len(names))]](o)
		}
		if metadataAsStored(o, old) {
			if errs := validateGenericUpdate(o, old); len(errs) != 0 {
				t.Fatalf("skipped a validation that fails: %v", errs)
			}
		}
	}
}
