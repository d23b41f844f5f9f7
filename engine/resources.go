package engine

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/leasehold/leasehold/engine/leasecodec"
	"github.com/leasehold/leasehold/storage"
)

// GroupName is the API group of the coordination resources (Lease,
// LeaseCandidate); Namespace and Event are also served in the core group
// and Event in events.k8s.io.
const GroupName = "coordination.k8s.io"

// object is a stored object in its storage version: a k8s.io/api type with
// generated protobuf methods.
type object interface {
	runtime.Object
	metav1.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// kind holds everything the engine knows about one resource: how to
// create, convert, validate and print its objects.
type kind struct {
	res *Resource
	// gr names the resource in NotFound/Conflict/AlreadyExists errors
	// ("leases.coordination.k8s.io"); gk names the kind in Invalid errors
	// ("Lease.coordination.k8s.io"). Upstream mixes them per case.
	gr schema.GroupResource
	gk schema.GroupKind
	// storageGV is the version objects are persisted in.
	storageGV schema.GroupVersion
	// keyPrefix is "/registry/coordination.k8s.io/<plural>/".
	keyPrefix string
	// upstreamKeyPrefix is the etcd key prefix kube-apiserver uses; it only
	// shows in the text of storage precondition errors, which we reproduce.
	upstreamKeyPrefix string

	newObj  func() object
	newList func(version string, items []object, lm metav1.ListMeta) runtime.Object
	// toStorage converts a decoded object in a served version to the
	// storage version. It may return the argument itself.
	toStorage func(in runtime.Object) (object, bool)
	// fromStorage converts to a served version. For the storage version it
	// returns o itself with TypeMeta set.
	fromStorage func(o object, version string) runtime.Object

	// defaults is the kind's defaulting (upstream's SetDefaults_*, run as
	// a body is decoded): it runs before the field manager, so what it sets
	// is owned by the request's manager, as upstream's managedFields show.
	defaults         func(o object)
	prepareForCreate func(o object)
	prepareForUpdate func(o, old object)
	validate         func(o object) field.ErrorList
	validateUpdate   func(o, old object) field.ErrorList

	// fieldSet and fieldLabel are the selectable fields and their label
	// conversion (400 for an unknown label), nil for metadata.name and
	// metadata.namespace only.
	fieldSet   func(o object) fields.Set
	fieldLabel func(label, value string) (string, string, error)

	// allowUnconditionalUpdate is the strategy's AllowUnconditionalUpdate:
	// an update without metadata.resourceVersion replaces whatever is
	// stored (Namespaces, Events) instead of being refused.
	allowUnconditionalUpdate bool

	// noCreateOnUpdate is the strategy's AllowCreateOnUpdate false: a PUT
	// of a missing object is 404 (Namespaces); server-side apply, which
	// upstream lets create whatever the strategy says, still creates.
	noCreateOnUpdate bool

	// isEvent marks the Event kinds, whose creates count against the
	// event store's bounds (eventstore.go).
	isEvent bool

	columns []metav1.TableColumnDefinition
	cells   func(e *Engine, o object) []any

	// subresource names the subresource this kind serves ("status",
	// "finalize"; empty for the resource itself), and subresources are
	// those of the resource: the same objects through another strategy
	// (prepareForUpdate, validateUpdate) and their own field managers,
	// which record the subresource in managedFields.
	subresource  string
	subresources map[string]*kind
	// resetFields are the strategy's GetResetFields: fields the field
	// manager leaves out of a request's managed set because the strategy
	// resets them (status on the resource, spec on status).
	resetFields map[fieldpath.APIVersion]fieldpath.Filter

	// fieldManagers per served version.
	fieldManagers map[string]*managedfields.FieldManager
	// fast is the renewal fast path of managedFields (fastfields.go).
	fast *fastKind
	// storedJSON and storedListJSON render stored values (the storage
	// version's protobuf without resourceVersion) straight to plain JSON
	// response bodies (GetJSON, ListJSON); nil for a kind without a
	// stored-format codec. ok false means decode and use the serializer.
	storedJSON     func(value []byte, modRevision int64) ([]byte, bool)
	storedListJSON func(meta *metav1.ListMeta, items []storage.KeyValue) ([]byte, bool)
}

// served returns the kind for a scope, or a 404 when the scope names
// nothing leasehold serves.
func (e *Engine) kindFor(s Scope) (*kind, error) {
	if s.Resource == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
	}
	k, ok := e.kinds[kindKey(s.Resource.Group, s.Resource.Plural)]
	if !ok {
		return nil, apierrors.NewNotFound(s.Resource.GroupResource(), "")
	}
	if _, ok := k.res.ServedVersion(s.Version); !ok {
		return nil, apierrors.NewNotFound(k.gr, "")
	}
	if s.Subresource != "" {
		sub, ok := k.subresources[s.Subresource]
		if !ok {
			return nil, apierrors.NewNotFound(k.gr, "")
		}
		return sub, nil
	}
	return k, nil
}

func newLeaseKind() *kind {
	res := &Resource{
		Group: GroupName, Kind: "Lease", ListKind: "LeaseList",
		Plural: "leases", Singular: "lease", Namespaced: true,
		Versions:       []ServedVersion{{Version: "v1"}},
		StorageVersion: "v1",
		Verbs:          []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
	k := &kind{
		res:               res,
		gr:                schema.GroupResource{Group: GroupName, Resource: "leases"},
		gk:                schema.GroupKind{Group: GroupName, Kind: "Lease"},
		storageGV:         coordinationv1.SchemeGroupVersion,
		keyPrefix:         "/registry/" + GroupName + "/leases/",
		upstreamKeyPrefix: "/registry/leases/",
		newObj:            func() object { return &coordinationv1.Lease{} },
		newList: func(_ string, items []object, lm metav1.ListMeta) runtime.Object {
			l := &coordinationv1.LeaseList{ListMeta: lm, Items: make([]coordinationv1.Lease, len(items))}
			l.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"))
			for i, o := range items {
				l.Items[i] = *o.(*coordinationv1.Lease)
				l.Items[i].TypeMeta = metav1.TypeMeta{}
			}
			return l
		},
		toStorage: func(in runtime.Object) (object, bool) {
			l, ok := in.(*coordinationv1.Lease)
			return l, ok
		},
		fromStorage: func(o object, _ string) runtime.Object {
			setGVK(o, coordinationv1.SchemeGroupVersion.WithKind("Lease"))
			return o
		},
		prepareForCreate: func(object) {},
		prepareForUpdate: func(object, object) {},
		validate:         func(o object) field.ErrorList { return validateLease(o.(*coordinationv1.Lease)) },
		validateUpdate: func(o, old object) field.ErrorList {
			return validateLeaseUpdate(o.(*coordinationv1.Lease), old.(*coordinationv1.Lease))
		},
	}
	k.columns, k.cells = leaseTable()
	k.fast = newLeaseFast()
	k.storedJSON, k.storedListJSON = leasecodec.StoredJSON, leasecodec.StoredListJSON
	return k
}

func newLeaseCandidateKind() *kind {
	res := &Resource{
		Group: GroupName, Kind: "LeaseCandidate", ListKind: "LeaseCandidateList",
		Plural: "leasecandidates", Singular: "leasecandidate", Namespaced: true,
		Versions: []ServedVersion{
			{Version: "v1beta1", Deprecation: "coordination.k8s.io/v1beta1 LeaseCandidate is deprecated in v1.36+, unavailable in v1.39+"},
			{Version: "v1alpha2", Deprecation: "coordination.k8s.io/v1alpha2 LeaseCandidate is deprecated in v1.35+, unavailable in v1.38+"},
		},
		StorageVersion: "v1beta1",
		Verbs:          []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
	k := &kind{
		res:               res,
		gr:                schema.GroupResource{Group: GroupName, Resource: "leasecandidates"},
		gk:                schema.GroupKind{Group: GroupName, Kind: "LeaseCandidate"},
		storageGV:         coordinationv1beta1.SchemeGroupVersion,
		keyPrefix:         "/registry/" + GroupName + "/leasecandidates/",
		upstreamKeyPrefix: "/registry/leasecandidates/",
		newObj:            func() object { return &coordinationv1beta1.LeaseCandidate{} },
		newList: func(version string, items []object, lm metav1.ListMeta) runtime.Object {
			if version == "v1alpha2" {
				l := &coordinationv1alpha2.LeaseCandidateList{ListMeta: lm, Items: make([]coordinationv1alpha2.LeaseCandidate, len(items))}
				l.SetGroupVersionKind(coordinationv1alpha2.SchemeGroupVersion.WithKind("LeaseCandidateList"))
				for i, o := range items {
					l.Items[i] = *candidateToV1alpha2(o.(*coordinationv1beta1.LeaseCandidate))
					l.Items[i].TypeMeta = metav1.TypeMeta{}
				}
				return l
			}
			l := &coordinationv1beta1.LeaseCandidateList{ListMeta: lm, Items: make([]coordinationv1beta1.LeaseCandidate, len(items))}
			l.SetGroupVersionKind(coordinationv1beta1.SchemeGroupVersion.WithKind("LeaseCandidateList"))
			for i, o := range items {
				l.Items[i] = *o.(*coordinationv1beta1.LeaseCandidate)
				l.Items[i].TypeMeta = metav1.TypeMeta{}
			}
			return l
		},
		toStorage: func(in runtime.Object) (object, bool) {
			switch c := in.(type) {
			case *coordinationv1beta1.LeaseCandidate:
				return c, true
			case *coordinationv1alpha2.LeaseCandidate:
				return candidateToV1beta1(c), true
			}
			return nil, false
		},
		fromStorage: func(o object, version string) runtime.Object {
			c := o.(*coordinationv1beta1.LeaseCandidate)
			if version == "v1alpha2" {
				return candidateToV1alpha2(c)
			}
			setGVK(c, coordinationv1beta1.SchemeGroupVersion.WithKind("LeaseCandidate"))
			return c
		},
		prepareForCreate: func(object) {},
		prepareForUpdate: func(object, object) {},
		validate: func(o object) field.ErrorList {
			return validateLeaseCandidate(o.(*coordinationv1beta1.LeaseCandidate))
		},
		validateUpdate: func(o, old object) field.ErrorList {
			return validateLeaseCandidateUpdate(o.(*coordinationv1beta1.LeaseCandidate), old.(*coordinationv1beta1.LeaseCandidate))
		},
	}
	k.columns, k.cells = leaseCandidateTable()
	k.fast = newLeaseCandidateFast()
	return k
}

// candidateToV1beta1 converts with a plain Go struct conversion: v1alpha2
// and v1beta1 specs have identical fields (the compiler checks it), so
// nothing is lost either way. ObjectMeta is shared,
// not copied.
func candidateToV1beta1(in *coordinationv1alpha2.LeaseCandidate) *coordinationv1beta1.LeaseCandidate {
	out := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: in.ObjectMeta,
		Spec:       coordinationv1beta1.LeaseCandidateSpec(in.Spec),
	}
	out.SetGroupVersionKind(coordinationv1beta1.SchemeGroupVersion.WithKind("LeaseCandidate"))
	return out
}

func candidateToV1alpha2(in *coordinationv1beta1.LeaseCandidate) *coordinationv1alpha2.LeaseCandidate {
	out := &coordinationv1alpha2.LeaseCandidate{
		ObjectMeta: in.ObjectMeta,
		Spec:       coordinationv1alpha2.LeaseCandidateSpec(in.Spec),
	}
	out.SetGroupVersionKind(coordinationv1alpha2.SchemeGroupVersion.WithKind("LeaseCandidate"))
	return out
}

// decode unmarshals a stored value and sets resourceVersion from the
// storage revision (resourceVersion itself is never stored).
func (k *kind) decode(value []byte, modRevision int64) (object, error) {
	o := k.newObj()
	if err := o.Unmarshal(value); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", k.res.Kind, err)
	}
	o.SetResourceVersion(formatRV(modRevision))
	return o, nil
}

// encode marshals an object for storage, without its resourceVersion and
// TypeMeta (protobuf does not carry TypeMeta).
func (k *kind) encode(o object) ([]byte, error) {
	rv := o.GetResourceVersion()
	o.SetResourceVersion("")
	b, err := o.Marshal()
	o.SetResourceVersion(rv)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", k.res.Kind, err)
	}
	return b, nil
}

// key builds the storage key of one object; a cluster-scoped object's
// key has no namespace segment.
func (k *kind) key(namespace, name string) string {
	if !k.res.Namespaced {
		return k.keyPrefix + name
	}
	return k.keyPrefix + namespace + "/" + name
}

// groupPlural indexes Engine.kinds: the same plural ("events") is served
// by more than one group. A struct, so that a lookup allocates nothing.
type groupPlural struct{ group, plural string }

func kindKey(group, plural string) groupPlural { return groupPlural{group, plural} }

// listPrefix is the storage prefix for a namespace ("" for all).
func (k *kind) listPrefix(namespace string) string {
	if namespace == "" {
		return k.keyPrefix
	}
	return k.keyPrefix + namespace + "/"
}

// gvk is the kind in a served version.
func (k *kind) gvk(version string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.res.Group, Version: version, Kind: k.res.Kind}
}

// setGVK sets TypeMeta unless it is already right, so that objects shared
// through the decode cache (already set) are never written to.
func setGVK(o runtime.Object, gvk schema.GroupVersionKind) {
	if o.GetObjectKind().GroupVersionKind() != gvk {
		o.GetObjectKind().SetGroupVersionKind(gvk)
	}
}
