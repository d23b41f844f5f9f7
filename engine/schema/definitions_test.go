package schema

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func definition(t *testing.T, name string) *spec.Schema {
	t.Helper()
	s, ok := Definitions()[name]
	if !ok {
		t.Fatalf("Definitions() has no %s", name)
	}
	return s
}

func TestDefinitionsGVK(t *testing.T) {
	gvk := definition(t, "io.k8s.api.coordination.v1.Lease").Extensions["x-kubernetes-group-version-kind"]
	want := []interface{}{map[string]interface{}{"group": group, "version": "v1", "kind": "Lease"}}
	if !reflect.DeepEqual(gvk, want) {
		t.Errorf("Lease gvk = %v, want %v", gvk, want)
	}
	// Definitions() covers every served group/version, sorted like upstream.
	var versions []string
	for _, e := range definition(t, metaV1+"DeleteOptions").Extensions["x-kubernetes-group-version-kind"].([]interface{}) {
		m := e.(map[string]interface{})
		versions = append(versions, m["group"].(string)+"/"+m["version"].(string))
	}
	if w := []string{"/v1", group + "/v1", group + "/v1alpha2", group + "/v1beta1", eventsGroup + "/v1"}; !reflect.DeepEqual(versions, w) {
		t.Errorf("DeleteOptions gvks = %q, want %q", versions, w)
	}
}

func TestDefinitionsMarkers(t *testing.T) {
	meta := definition(t, metaV1+"ObjectMeta")
	cases := []struct {
		field string
		want  map[string]interface{}
	}{
		{"ownerReferences", map[string]interface{}{
			"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []interface{}{"uid"},
			"x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "uid",
		}},
		{"finalizers", map[string]interface{}{"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"}},
		{"managedFields", map[string]interface{}{"x-kubernetes-list-type": "atomic"}},
		{"labels", nil},
	}
	for _, c := range cases {
		got := map[string]interface{}(meta.Properties[c.field].Extensions)
		if len(got) == 0 && c.want == nil {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ObjectMeta.%s extensions = %v, want %v", c.field, got, c.want)
		}
	}
	if mt := definition(t, metaV1+"OwnerReference").Extensions["x-kubernetes-map-type"]; mt != "atomic" {
		t.Errorf("OwnerReference map type = %v, want atomic", mt)
	}
	// $refs with siblings are wrapped in allOf, as kube-apiserver's models are.
	owners := meta.Properties["ownerReferences"].Items.Schema
	if owners.Ref.String() != "#/components/schemas/"+metaV1+"OwnerReference" {
		t.Errorf("ownerReferences items = %#v", owners)
	}
	md := definition(t, "io.k8s.api.coordination.v1.Lease").Properties["metadata"]
	if len(md.AllOf) != 1 || md.AllOf[0].Ref.String() != "#/components/schemas/"+metaV1+"ObjectMeta" ||
		!reflect.DeepEqual(md.Default, map[string]interface{}{}) {
		t.Errorf("Lease.metadata = %#v", md)
	}
}

func TestDefinitionsTypesAndDocs(t *testing.T) {
	spec := definition(t, "io.k8s.api.coordination.v1.LeaseSpec")
	dur := spec.Properties["leaseDurationSeconds"]
	if !reflect.DeepEqual([]string(dur.Type), []string{"integer"}) || dur.Format != "int32" {
		t.Errorf("leaseDurationSeconds = %v/%v", dur.Type, dur.Format)
	}
	if dur.Description == "" || spec.Description != "LeaseSpec is a specification of a Lease." {
		t.Errorf("LeaseSpec descriptions missing: %q / %q", spec.Description, dur.Description)
	}
	for _, n := range []string{"Time", "MicroTime"} {
		s := definition(t, metaV1+n)
		if !reflect.DeepEqual([]string(s.Type), []string{"string"}) || s.Format != "date-time" || s.Description == "" {
			t.Errorf("%s = %v/%v %q", n, s.Type, s.Format, s.Description)
		}
	}
	if f := definition(t, metaV1+"ObjectMeta").Properties["generation"].Format; f != "int64" {
		t.Errorf("ObjectMeta.generation format = %q", f)
	}
	lc := definition(t, "io.k8s.api.coordination.v1beta1.LeaseCandidateSpec")
	if w := []string{"leaseName", "binaryVersion", "strategy"}; !reflect.DeepEqual(lc.Required, w) {
		t.Errorf("LeaseCandidateSpec required = %q, want %q", lc.Required, w)
	}
}

func TestDefinitionsAcceptedByNewTypeConverter(t *testing.T) {
	if _, err := managedfields.NewTypeConverter(Definitions(), false); err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
}
