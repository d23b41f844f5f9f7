package engine

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The fast path's view of each kind (fastfields.go). The spec comparisons
// must cover every spec field: TestFastKindsCoverSpecs fails when
// k8s.io/api adds one.

func specPaths(names ...string) []fieldpath.Path {
	out := make([]fieldpath.Path, len(names))
	for i, n := range names {
		out[i] = fieldpath.MakePathOrDie("spec", n)
	}
	return out
}

func newLeaseFast() *fastKind {
	return &fastKind{
		leaves: specPaths("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
			"leaseTransitions", "strategy", "preferredHolder"),
		specDiff: func(live, n object) (uint64, bool) {
			a, b := &live.(*coordinationv1.Lease).Spec, &n.(*coordinationv1.Lease).Spec
			var c specCmp
			ptrCmp(&c, a.HolderIdentity, b.HolderIdentity)
			ptrCmp(&c, a.LeaseDurationSeconds, b.LeaseDurationSeconds)
			microCmp(&c, a.AcquireTime, b.AcquireTime)
			microCmp(&c, a.RenewTime, b.RenewTime)
			ptrCmp(&c, a.LeaseTransitions, b.LeaseTransitions)
			ptrCmp(&c, a.Strategy, b.Strategy)
			ptrCmp(&c, a.PreferredHolder, b.PreferredHolder)
			return c.changed, !c.bad
		},
		meta:  func(o object) *metav1.ObjectMeta { return &o.(*coordinationv1.Lease).ObjectMeta },
		cache: map[string]fieldsInfo{},
	}
}

func newLeaseCandidateFast() *fastKind {
	return &fastKind{
		leaves: specPaths("leaseName", "pingTime", "renewTime", "binaryVersion", "emulationVersion", "strategy"),
		specDiff: func(live, n object) (uint64, bool) {
			a, b := &live.(*coordinationv1beta1.LeaseCandidate).Spec, &n.(*coordinationv1beta1.LeaseCandidate).Spec
			var c specCmp
			strCmp(&c, a.LeaseName, b.LeaseName)
			microCmp(&c, a.PingTime, b.PingTime)
			microCmp(&c, a.RenewTime, b.RenewTime)
			strCmp(&c, a.BinaryVersion, b.BinaryVersion)
			strCmp(&c, a.EmulationVersion, b.EmulationVersion)
			strCmp(&c, a.Strategy, b.Strategy)
			return c.changed, !c.bad
		},
		meta:  func(o object) *metav1.ObjectMeta { return &o.(*coordinationv1beta1.LeaseCandidate).ObjectMeta },
		cache: map[string]fieldsInfo{},
	}
}
