package schema

import (
	"sort"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/util"
)

// resource is one served resource of a group/version.
type resource struct {
	plural string
	kind   string
	object runtime.Object // sample of the kind, for its Go type
	list   runtime.Object // sample of the list kind
	// cluster marks a cluster-scoped resource (Namespace).
	cluster bool
	// noDeleteCollection: the resource has no deletecollection verb.
	noDeleteCollection bool
}

// groupVersion is one served API group/version and its resources.
type groupVersion struct {
	group     string
	version   string
	resources []resource
}

// group is leasehold's own API group; the core group ("") and
// events.k8s.io serve Namespace and Event.
const (
	group       = "coordination.k8s.io"
	eventsGroup = "events.k8s.io"
)

// served lists what leasehold serves, in the order of the /openapi/v3 index.
var served = []groupVersion{
	{"", "v1", []resource{
		{plural: "events", kind: "Event", object: &corev1.Event{}, list: &corev1.EventList{}},
		{plural: "namespaces", kind: "Namespace", object: &corev1.Namespace{}, list: &corev1.NamespaceList{}, cluster: true, noDeleteCollection: true},
	}},
	{group, "v1", []resource{{plural: "leases", kind: "Lease", object: &coordinationv1.Lease{}, list: &coordinationv1.LeaseList{}}}},
	{group, "v1beta1", []resource{{plural: "leasecandidates", kind: "LeaseCandidate", object: &coordinationv1beta1.LeaseCandidate{}, list: &coordinationv1beta1.LeaseCandidateList{}}}},
	{group, "v1alpha2", []resource{{plural: "leasecandidates", kind: "LeaseCandidate", object: &coordinationv1alpha2.LeaseCandidate{}, list: &coordinationv1alpha2.LeaseCandidateList{}}}},
	{eventsGroup, "v1", []resource{{plural: "events", kind: "Event", object: &eventsv1.Event{}, list: &eventsv1.EventList{}}}},
}

// groups are the named groups, each with a /openapi/v3/apis/<group>
// document.
var groups = []string{group, eventsGroup}

// rootModels are the samples of every type a route names directly; the
// definitions are the closure of their references.
func rootModels() []interface{} {
	models := []interface{}{
		&metav1.APIResourceList{}, &metav1.APIGroup{}, &metav1.APIGroupList{}, &metav1.APIVersions{},
		&metav1.Status{}, &metav1.DeleteOptions{}, &metav1.WatchEvent{}, &metav1.Patch{}, &version.Info{},
	}
	for _, gv := range served {
		for _, r := range gv.resources {
			models = append(models, r.object, r.list)
		}
	}
	return models
}

// gvk is how x-kubernetes-group-version-kind entries look on definitions
// (keys sorted, as the apiserver's definition namer emits them).
func gvk(g, v, k string) map[string]interface{} {
	return map[string]interface{}{"group": g, "version": v, "kind": k}
}

// definitionGVKs returns the x-kubernetes-group-version-kind lists of the
// definitions as seen from the given group/versions: every kind registered
// in them, plus the unversioned meta kinds and the per-group-version option
// and watch kinds, sorted by group, version, kind like upstream's namer.
func definitionGVKs(gvs []groupVersion) map[string][]interface{} {
	type key struct{ g, v, k string }
	byName := map[string][]key{}
	add := func(sample interface{}, g, v, k string) {
		n := util.GetCanonicalTypeName(sample)
		for _, have := range byName[n] {
			if have == (key{g, v, k}) {
				return // core/v1 registers the meta kinds once
			}
		}
		byName[n] = append(byName[n], key{g, v, k})
	}
	for _, s := range []struct {
		sample interface{}
		kind   string
	}{
		{&metav1.Status{}, "Status"}, {&metav1.APIVersions{}, "APIVersions"}, {&metav1.APIGroupList{}, "APIGroupList"},
		{&metav1.APIGroup{}, "APIGroup"}, {&metav1.APIResourceList{}, "APIResourceList"},
		{&metav1.DeleteOptions{}, "DeleteOptions"}, {&metav1.WatchEvent{}, "WatchEvent"},
	} {
		add(s.sample, "", "v1", s.kind)
	}
	for _, gv := range gvs {
		add(&metav1.DeleteOptions{}, gv.group, gv.version, "DeleteOptions")
		add(&metav1.WatchEvent{}, gv.group, gv.version, "WatchEvent")
		for _, r := range gv.resources {
			add(r.object, gv.group, gv.version, r.kind)
			add(r.list, gv.group, gv.version, r.kind+"List")
		}
	}
	out := map[string][]interface{}{}
	for n, keys := range byName {
		sort.Slice(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			if a.g != b.g {
				return a.g < b.g
			}
			if a.v != b.v {
				return a.v < b.v
			}
			return a.k < b.k
		})
		for _, k := range keys {
			out[n] = append(out[n], gvk(k.g, k.v, k.k))
		}
	}
	return out
}
