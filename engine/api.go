package engine

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/storage"
)

// Scope identifies what a request addresses: which resource, in which
// served version, in which namespace, on whose behalf.
type Scope struct {
	// Resource is one of Engine.Resources().
	Resource *Resource
	// Version is the served version the client speaks ("v1", "v1beta1",
	// "v1alpha2"); objects in and out are in this version.
	Version string
	// Namespace is empty for all-namespace list, watch and table requests.
	Namespace string
	// UserAgent is the request's User-Agent; its prefix names the default
	// field manager, as in kube-apiserver.
	UserAgent string
	// User is the authenticated user name, empty when anonymous.
	User string
	// Subresource is one of Resource.Subresources ("status", "finalize")
	// for get, update and patch on it; empty for the resource itself.
	Subresource string
}

// GroupVersionKind is the scope's kind in its served version.
func (s Scope) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: s.Resource.Group, Version: s.Version, Kind: s.Resource.Kind}
}

// ServedVersion describes one version in which a resource is served.
type ServedVersion struct {
	Version string
	// Deprecation is the Warning text sent with every response in this
	// version, empty when the version is not deprecated.
	Deprecation string
}

// Resource describes one served resource.
type Resource struct {
	Group    string // "coordination.k8s.io"
	Kind     string // "Lease"
	ListKind string // "LeaseList"
	Plural   string // "leases"
	Singular string // "lease"
	// Namespaced is false for Namespace, the one cluster-scoped resource.
	Namespaced bool
	// Versions are the served versions, most preferred first.
	Versions []ServedVersion
	// StorageVersion is the version objects are persisted in, in
	// StorageGroup: Group, but for events.k8s.io Events, stored as core/v1
	// Events (discovery's storageVersionHash names it).
	StorageVersion string
	StorageGroup   string
	// Verbs are the discovery verbs, sorted.
	Verbs []string
	// ShortNames and Categories for discovery (empty upstream for both kinds).
	ShortNames []string
	Categories []string
	// Subresources are the served subresources (namespaces/status and
	// namespaces/finalize), in name order, each with its verbs.
	Subresources []Subresource
}

// Subresource is one served subresource of a Resource, answering with the
// Resource's kind.
type Subresource struct {
	Name  string   // "status"
	Verbs []string // sorted
}

// Subresource returns the served subresource named name.
func (r *Resource) Subresource(name string) (Subresource, bool) {
	for _, s := range r.Subresources {
		if s.Name == name {
			return s, true
		}
	}
	return Subresource{}, false
}

// GroupResource is the resource's group and plural name.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Plural}
}

// ServedVersion reports whether version is served, with its details.
func (r *Resource) ServedVersion(version string) (ServedVersion, bool) {
	for _, v := range r.Versions {
		if v.Version == version {
			return v, true
		}
	}
	return ServedVersion{}, false
}

// Warnings collects the Warning headers a request produces.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// Add records one warning; duplicates are dropped.
func (w *Warnings) Add(text string) {
	if w == nil || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.list {
		if t == text {
			return
		}
	}
	w.list = append(w.list, text)
}

// List returns the recorded warnings in order.
func (w *Warnings) List() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

type warningsKey struct{}

// WithWarnings returns a context whose engine calls record warnings into w.
func WithWarnings(ctx context.Context, w *Warnings) context.Context {
	return context.WithValue(ctx, warningsKey{}, w)
}

// AddWarning records a warning on the request carried by ctx, if any.
func AddWarning(ctx context.Context, text string) {
	if w, ok := ctx.Value(warningsKey{}).(*Warnings); ok {
		w.Add(text)
	}
}

// API is what the HTTP layer needs from the engine. *Engine implements it.
// Every error is a *k8s.io/apimachinery/pkg/api/errors.StatusError carrying
// kube-apiserver's code, reason, message and details for the case.
type API interface {
	// Resources lists the served resources.
	Resources() []*Resource
	// WatchStats reports the watch queues: bytes held, budgets, and the
	// watches closed for falling behind.
	WatchStats() WatchStats
	// ResourceFor finds a served resource by group, version and plural.
	ResourceFor(group, version, plural string) (*Resource, bool)

	// Get returns one object in the scope's version.
	Get(ctx context.Context, s Scope, name string, opts *metav1.GetOptions) (runtime.Object, error)
	// List returns a list object (e.g. *coordinationv1.LeaseList).
	List(ctx context.Context, s Scope, opts *metav1.ListOptions) (runtime.Object, error)
	// GetJSON and ListJSON are Get and List answered with the body of a
	// plain application/json response (not indented, no Table or
	// metadata-only conversion), rendered from the stored values without
	// decoding them: the renewal path. They return the same errors as Get
	// and List, and bodies byte for byte the serializer's; ok false with
	// a nil error means nothing was answered (a kind or version without a
	// stored-format codec, selectors, a value the codec declines) and the
	// caller uses Get or List.
	GetJSON(ctx context.Context, s Scope, name string, opts *metav1.GetOptions) (body []byte, ok bool, err error)
	ListJSON(ctx context.Context, s Scope, opts *metav1.ListOptions) (body []byte, ok bool, err error)
	// Create stores a new object decoded by the caller in the scope's
	// version.
	Create(ctx context.Context, s Scope, obj runtime.Object, opts *metav1.CreateOptions) (runtime.Object, error)
	// Update replaces an object, creating it when missing (created=true).
	Update(ctx context.Context, s Scope, name string, obj runtime.Object, opts *metav1.UpdateOptions) (out runtime.Object, created bool, err error)
	// Patch applies a JSON, merge, strategic-merge or apply patch; apply
	// creates a missing object (created=true).
	Patch(ctx context.Context, s Scope, name string, pt types.PatchType, data []byte, opts *metav1.PatchOptions) (out runtime.Object, created bool, err error)
	// Delete removes an object. It returns a *metav1.Status for an
	// immediate delete, or the object when deletion is pending finalizers;
	// accepted reports a 202 (orphanDependents=false given explicitly).
	Delete(ctx context.Context, s Scope, name string, opts *metav1.DeleteOptions) (out runtime.Object, accepted bool, err error)
	// DeleteCollection deletes the selected objects and returns them as a
	// list.
	DeleteCollection(ctx context.Context, s Scope, listOpts *metav1.ListOptions, opts *metav1.DeleteOptions) (runtime.Object, error)
	// Watch streams changes. The result channel closes when the watch ends
	// (opts.TimeoutSeconds, ctx, or an ERROR event such as 410 Expired).
	Watch(ctx context.Context, s Scope, opts *metav1.ListOptions) (watch.Interface, error)
	// ConvertToTable renders an object or list as a Table (server-side
	// printing) with leasehold's columns.
	ConvertToTable(ctx context.Context, s Scope, obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error)
}

// StorageStats describes the store (backend, revisions, keys, size) for
// status pages and /metrics. It is the storage contract's own type, so
// that web reports it without importing storage or copying it field by
// field.
type StorageStats = storage.Stats
