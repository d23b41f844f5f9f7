package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/leasehold/leasehold/storage"
)

// NamespaceLifecycle is how the engine treats the namespace of a new
// namespaced object (a Lease, LeaseCandidate or Event).
type NamespaceLifecycle string

const (
	// NamespacesUnmanaged (the zero value) neither requires nor creates
	// Namespace objects, and creates no default namespaces: a bare engine,
	// as the unit tests and embedders without namespaces use it. A
	// terminating namespace still refuses new content.
	NamespacesUnmanaged NamespaceLifecycle = ""
	// NamespacesImplicit creates a missing namespace the first time a
	// Lease or LeaseCandidate is written into it: leasehold's
	// zero-configuration behaviour, where a write into a namespace nobody
	// created succeeds. An Event into a missing namespace is a 404, as
	// with NamespacesStrict.
	NamespacesImplicit NamespaceLifecycle = "implicit"
	// NamespacesStrict is kube-apiserver's NamespaceLifecycle admission: a
	// create into a missing namespace is a 404 `namespaces "x" not found`.
	NamespacesStrict NamespaceLifecycle = "strict"
)

// ParseNamespaceLifecycle reads the --namespace-lifecycle flag.
func ParseNamespaceLifecycle(s string) (NamespaceLifecycle, error) {
	switch NamespaceLifecycle(s) {
	case NamespacesImplicit, NamespacesStrict:
		return NamespaceLifecycle(s), nil
	}
	return "", fmt.Errorf("namespace lifecycle %q: want %q or %q", s, NamespacesImplicit, NamespacesStrict)
}

// DefaultNamespaces exist from the start, as on every cluster; the first
// three can never be deleted (kube-apiserver's immortal namespaces).
var DefaultNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

var immortalNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic}

// namespacesResource names namespaces in NotFound errors.
var namespacesResource = schema.GroupResource{Resource: "namespaces"}

func newNamespaceKind() *kind {
	res := &Resource{
		Group: "", Kind: "Namespace", ListKind: "NamespaceList",
		Plural: "namespaces", Singular: "namespace", Namespaced: false,
		Versions:       []ServedVersion{{Version: "v1"}},
		StorageVersion: "v1",
		Verbs:          []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		ShortNames:     []string{"ns"},
		// kubectl and namespace controllers use them on a namespace stuck
		// terminating: status for its conditions, finalize for the
		// finalizers (the one write that may change spec.finalizers).
		Subresources: []Subresource{
			{Name: "finalize", Verbs: []string{"update"}},
			{Name: "status", Verbs: []string{"get", "patch", "update"}},
		},
	}
	k := &kind{
		res:                      res,
		gr:                       namespacesResource,
		gk:                       schema.GroupKind{Kind: "Namespace"},
		allowUnconditionalUpdate: true,
		noCreateOnUpdate:         true,
		storageGV:                corev1.SchemeGroupVersion,
		keyPrefix:                "/registry/namespaces/",
		upstreamKeyPrefix:        "/registry/namespaces/",
		newObj:                   func() object { return &corev1.Namespace{} },
		newList: func(_ string, items []object, lm metav1.ListMeta) runtime.Object {
			l := &corev1.NamespaceList{ListMeta: lm, Items: make([]corev1.Namespace, len(items))}
			l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
			for i, o := range items {
				l.Items[i] = *o.(*corev1.Namespace)
				l.Items[i].TypeMeta = metav1.TypeMeta{}
			}
			return l
		},
		toStorage: func(in runtime.Object) (object, bool) {
			n, ok := in.(*corev1.Namespace)
			return n, ok
		},
		fromStorage: func(o object, _ string) runtime.Object {
			setGVK(o, corev1.SchemeGroupVersion.WithKind("Namespace"))
			return o
		},
		// SetDefaults_Namespace (core/v1): the name label, where the name
		// is known; prepareForCreate and prepareForUpdate set it again
		// (upstream's Canonicalize) for generated names.
		defaults: func(o object) { setNamespaceNameLabel(o.(*corev1.Namespace)) },
		prepareForCreate: func(o object) {
			n := o.(*corev1.Namespace)
			n.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			if !slices.Contains(n.Spec.Finalizers, corev1.FinalizerKubernetes) {
				n.Spec.Finalizers = append(n.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
			setNamespaceNameLabel(n)
		},
		prepareForUpdate: func(o, old object) {
			n, prev := o.(*corev1.Namespace), old.(*corev1.Namespace)
			// spec.finalizers changes only through finalization, status
			// only through deletion: neither is the client's to write.
			n.Spec.Finalizers = prev.Spec.Finalizers
			n.Status = prev.Status
			setNamespaceNameLabel(n)
		},
		validate: func(o object) field.ErrorList { return validateNamespace(o.(*corev1.Namespace)) },
		validateUpdate: func(o, _ object) field.ErrorList {
			return validateNamespaceFinalizers(o.(*corev1.Namespace))
		},
		fieldSet: func(o object) fields.Set {
			n := o.(*corev1.Namespace)
			return fields.Set{"metadata.name": n.Name, "status.phase": string(n.Status.Phase)}
		},
		fieldLabel: func(label, value string) (string, string, error) {
			// Upstream's own conversion for Namespace (core/v1): no
			// metadata.namespace, and its own wording for the rest.
			if label == "status.phase" || label == "metadata.name" {
				return label, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		},
	}
	k.columns, k.cells = namespaceTable()
	k.resetFields = resetFieldsV1("status")
	k.subresources = map[string]*kind{"status": namespaceStatusKind(k), "finalize": namespaceFinalizeKind(k)}
	return k
}

// resetFieldsV1 is a strategy's GetResetFields for core/v1: the named
// top-level field is the strategy's, never the request's.
func resetFieldsV1(name string) map[fieldpath.APIVersion]fieldpath.Filter {
	return map[fieldpath.APIVersion]fieldpath.Filter{"v1": fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie(name)))}
}

// namespaceStatusKind is namespaces/status (namespaceStatusStrategy): an
// update keeps the stored spec, and the phase must agree with the
// deletionTimestamp.
func namespaceStatusKind(main *kind) *kind {
	k := *main
	k.subresource, k.subresources = "status", nil
	k.resetFields = resetFieldsV1("spec")
	k.prepareForUpdate = func(o, old object) {
		n, prev := o.(*corev1.Namespace), old.(*corev1.Namespace)
		n.Spec = prev.Spec
		setNamespaceNameLabel(n)
	}
	k.validateUpdate = func(o, _ object) field.ErrorList {
		n := o.(*corev1.Namespace)
		p := field.NewPath("status", "Phase") // sic: upstream's path
		if n.DeletionTimestamp.IsZero() {
			if n.Status.Phase != corev1.NamespaceActive {
				return field.ErrorList{field.Invalid(p, n.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
			}
		} else if n.Status.Phase != corev1.NamespaceTerminating {
			return field.ErrorList{field.Invalid(p, n.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
		}
		return nil
	}
	return &k
}

// namespaceFinalizeKind is namespaces/finalize (namespaceFinalizeStrategy):
// the one write that changes spec.finalizers; it keeps the stored status.
func namespaceFinalizeKind(main *kind) *kind {
	k := *main
	k.subresource, k.subresources = "finalize", nil
	k.resetFields = resetFieldsV1("status")
	k.prepareForUpdate = func(o, old object) {
		n, prev := o.(*corev1.Namespace), old.(*corev1.Namespace)
		n.Status = prev.Status
		setNamespaceNameLabel(n)
	}
	k.validateUpdate = func(o, _ object) field.ErrorList {
		n := o.(*corev1.Namespace)
		var errs field.ErrorList
		p := field.NewPath("spec", "finalizers")
		for i, f := range n.Spec.Finalizers {
			errs = append(errs, validateKubeFinalizerName(string(f), p.Index(i))...)
		}
		return errs
	}
	return &k
}

// setNamespaceNameLabel is the Namespace strategy's Canonicalize: the
// kubernetes.io/metadata.name label always names the namespace.
func setNamespaceNameLabel(n *corev1.Namespace) {
	if n.Name == "" {
		return // generateName: set once the name is generated
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[corev1.LabelMetadataName] = n.Name
}

// validateNamespace is core validation's ValidateNamespace: a DNS-1123
// label name, no namespace, and finalizer names that are standard or
// fully qualified.
func validateNamespace(n *corev1.Namespace) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSLabel, metadataPath)
	return append(errs, validateNamespaceFinalizers(n)...)
}

func validateNamespaceFinalizers(n *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "finalizers")
	for _, f := range n.Spec.Finalizers {
		errs = append(errs, validateKubeFinalizerName(string(f), p)...)
	}
	return errs
}

// validateKubeFinalizerName is core validation's validateFinalizerName.
func validateKubeFinalizerName(name string, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, p)
	if !containsRune(name, '/') {
		switch name {
		case string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		default:
			errs = append(errs, field.Invalid(p, name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

func containsRune(s string, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

// namespaceTable is upstream's printer: Name, Status, Age.
func namespaceTable() ([]metav1.TableColumnDefinition, func(e *Engine, o object) []any) {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		ageColumn,
	}
	cells := func(e *Engine, o object) []any {
		n := o.(*corev1.Namespace)
		return []any{n.Name, string(n.Status.Phase), humanSince(n.CreationTimestamp.Time, e.now())}
	}
	return cols, cells
}

// nsKind is the Namespace kind of this engine.
func (e *Engine) nsKind() *kind { return e.kinds[kindKey("", "namespaces")] }

// admitCreate is kube-apiserver's NamespaceLifecycle admission for a new
// namespaced object: 403 into a terminating namespace, and per the
// lifecycle policy a 404 or the namespace's implicit creation when it is
// missing. dryRun creates nothing.
func (e *Engine) admitCreate(ctx context.Context, k *kind, namespace string, o object, dryRun bool) error {
	if !k.res.Namespaced || namespace == "" {
		return nil
	}
	nk := e.nsKind()
	kv, err := e.store.Get(ctx, nk.key("", namespace))
	switch {
	case err == nil:
		ns, derr := nk.decode(kv.Value, kv.ModRevision)
		if derr != nil {
			return nil // a damaged namespace record does not block its content
		}
		if ns.(*corev1.Namespace).Status.Phase == corev1.NamespaceTerminating {
			return namespaceTerminating(k, namespace, o)
		}
		return nil
	case !errors.Is(err, storage.ErrNotFound):
		return storageError(err)
	}
	switch {
	case e.nsLifecycle == NamespacesStrict, e.nsLifecycle == NamespacesImplicit && k.isEvent:
		// Events never create a namespace: an event recorded late about
		// an object of a deleted namespace must not bring it back.
		return apierrors.NewNotFound(namespacesResource, namespace)
	case e.nsLifecycle == NamespacesImplicit:
		if dryRun {
			return nil
		}
		if err := e.createNamespace(ctx, namespace); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// namespaceTerminating is the lifecycle admission's 403.
func namespaceTerminating(k *kind, namespace string, o object) error {
	name := o.GetName()
	if name == "" {
		name = o.GetGenerateName()
	}
	err := apierrors.NewForbidden(k.gr, name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", namespace),
		Field:   "metadata.namespace",
	})
	return err
}

// createNamespace stores a new, empty namespace as the server itself.
func (e *Engine) createNamespace(ctx context.Context, name string) error {
	nk := e.nsKind()
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := e.createOnce(ctx, nk, "", n, false)
	return err
}

// defaultNamespacesPatience is how long New retries creating the default
// namespaces. On a cluster member the first writes after a restart may
// meet a raft leader election ("no leader", "leader changed", a timeout):
// nothing was applied, and the creates are idempotent, so they are tried
// again rather than ending the start. A store that keeps failing still
// fails New, with the last error, after this long.
const defaultNamespacesPatience = 20 * time.Second

// ensureDefaultNamespacesPatiently is ensureDefaultNamespaces, retried
// with backoff for up to defaultNamespacesPatience.
func (e *Engine) ensureDefaultNamespacesPatiently(ctx context.Context) error {
	deadline := time.Now().Add(defaultNamespacesPatience)
	wait := 100 * time.Millisecond
	for {
		err := e.ensureDefaultNamespaces(ctx)
		if err == nil || errors.Is(err, storage.ErrClosed) || apierrors.IsServiceUnavailable(err) || time.Now().Add(wait).After(deadline) {
			return err // a closed store stays closed
		}
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
	}
}

// ensureDefaultNamespaces creates the namespaces every cluster has, and
// those that hold objects without a Namespace (written before namespaces
// were managed, or by an engine that does not manage them), so that
// `kubectl get ns` lists them and they can be deleted.
func (e *Engine) ensureDefaultNamespaces(ctx context.Context) error {
	names := append([]string(nil), DefaultNamespaces...)
	seen := map[string]bool{}
	for _, k := range e.kindsInOrder() {
		if !k.res.Namespaced || seen[k.keyPrefix] {
			continue
		}
		seen[k.keyPrefix] = true
		inUse, err := e.namespacesIn(ctx, k.keyPrefix)
		if err != nil {
			return err
		}
		names = append(names, inUse...)
	}
	for _, name := range names {
		if err := e.createNamespace(ctx, name); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// namespacesIn lists the namespaces that hold keys under prefix, reading
// one key per namespace: the next namespace's keys start after
// "<ns>0" ('0' follows '/').
func (e *Engine) namespacesIn(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	start := prefix
	for {
		res, err := e.store.List(ctx, prefix, storage.ListOptions{StartKey: start, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("listing namespaces in use: %w", err)
		}
		if len(res.KVs) == 0 {
			return out, nil
		}
		ns, _, ok := strings.Cut(res.KVs[0].Key[len(prefix):], "/")
		if !ok || ns == "" {
			return out, nil // not a namespaced key: nothing more to learn
		}
		out = append(out, ns)
		start = prefix + ns + "0"
	}
}

// deleteNamespace is the Namespace REST storage's Delete: the first
// delete marks the namespace Terminating (deletionTimestamp, status.phase)
// and returns it; finalization then deletes its content, removes the
// kubernetes finalizer and the namespace itself. Only a namespace without
// spec.finalizers is deleted at once.
func (e *Engine) deleteNamespace(ctx context.Context, k *kind, name string, opts *metav1.DeleteOptions) (object, bool, error) {
	if slices.Contains(immortalNamespaces, name) {
		return nil, false, apierrors.NewForbidden(namespacesResource, name, errors.New("this namespace may not be deleted"))
	}
	dryRun := isDryRun(opts.DryRun)
	return e.deleteLoop(ctx, k, "", name, opts, false, func(kv storage.KeyValue, cur object) (object, bool, error) {
		ns := cur.(*corev1.Namespace)
		if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating {
			n := ns.DeepCopy()
			if n.DeletionTimestamp == nil {
				now := metav1.NewTime(e.now())
				n.DeletionTimestamp = &now
			}
			n.Status.Phase = corev1.NamespaceTerminating
			if dryRun {
				return n, false, nil
			}
			data, err := k.encode(n)
			if err != nil {
				return nil, false, apierrors.NewInternalError(err)
			}
			updated, err := e.store.Update(ctx, kv.Key, data, kv.ModRevision)
			if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
				return nil, true, nil
			}
			if err != nil {
				return nil, false, storageError(err)
			}
			n.SetResourceVersion(formatRV(updated.ModRevision))
			e.startFinalizing(name)
			return n, false, nil
		}
		if len(ns.Spec.Finalizers) != 0 || len(ns.Finalizers) != 0 {
			e.startFinalizing(name)
			return ns, false, nil
		}
		return nil, false, nil
	})
}

// startFinalizing runs the namespace controller's work for one
// terminating namespace, once at a time per namespace.
func (e *Engine) startFinalizing(name string) {
	e.finalizingMu.Lock()
	defer e.finalizingMu.Unlock()
	if e.finalizing == nil {
		e.finalizing = map[string]bool{}
	}
	if e.finalizing[name] {
		return
	}
	e.finalizing[name] = true
	ctx := e.background
	go func() {
		defer func() {
			e.finalizingMu.Lock()
			delete(e.finalizing, name)
			e.finalizingMu.Unlock()
		}()
		e.finalizeNamespace(ctx, name)
	}()
}

// finalizeNamespace is kube-controller-manager's namespace controller for
// one namespace: it deletes every object in it, retrying while some
// remain (objects with finalizers of their own leave when those are
// removed), then removes the kubernetes finalizer, which deletes the
// namespace.
func (e *Engine) finalizeNamespace(ctx context.Context, name string) {
	backoff := 50 * time.Millisecond
	for {
		left, err := e.deleteNamespaceContent(ctx, name)
		if err == nil {
			e.setNamespaceConditions(ctx, name, left)
		}
		if err == nil && left.count() == 0 {
			if err = e.removeFinalizerIfEmpty(ctx, name); err == nil {
				return
			}
			if errors.Is(err, errNamespaceNotEmpty) {
				backoff = 50 * time.Millisecond
				continue // a create landed since the listing: delete it too
			}
		}
		if err != nil {
			e.log.WarnContext(ctx, "Finalizing namespace", "namespace", name, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// deleteNamespaceContent deletes the namespace's objects of every
// namespaced kind and reports how many are still there.
func (e *Engine) deleteNamespaceContent(ctx context.Context, namespace string) (left remaining, _ error) {
	left = remaining{resources: map[string]int{}, finalizers: map[string]int{}}
	seen := map[string]bool{}
	for _, k := range e.kindsInOrder() {
		if !k.res.Namespaced || seen[k.keyPrefix] {
			continue
		}
		seen[k.keyPrefix] = true
		res, err := e.store.List(ctx, k.listPrefix(namespace), storage.ListOptions{})
		if err != nil {
			return left, storageError(err)
		}
		var mu sync.Mutex
		var firstErr error
		parallel(ctx, len(res.KVs), func(i int) {
			name := res.KVs[i].Key[len(k.listPrefix(namespace)):]
			out, deleted, err := e.deleteOne(ctx, k, namespace, name, &metav1.DeleteOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && !apierrors.IsNotFound(err):
				if firstErr == nil {
					firstErr = err
				}
			case err == nil && !deleted:
				left.resources[k.gr.String()]++
				for _, f := range out.GetFinalizers() {
					left.finalizers[f]++
				}
			}
		})
		if firstErr != nil {
			return left, firstErr
		}
	}
	return left, nil
}

// removeNamespaceFinalizer is the namespace controller's finalize call:
// spec.finalizers loses "kubernetes"; with no finalizer left the
// namespace is deleted.
func (e *Engine) removeNamespaceFinalizer(ctx context.Context, name string) error {
	k := e.nsKind()
	key := k.key("", name)
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		kv, err := e.store.Get(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		cur, err := k.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return err
		}
		ns := cur.(*corev1.Namespace)
		if ns.DeletionTimestamp == nil {
			return nil // recreated meanwhile
		}
		n := ns.DeepCopy()
		n.Spec.Finalizers = slices.DeleteFunc(n.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		if len(n.Spec.Finalizers) == 0 && len(n.Finalizers) == 0 {
			_, _, err = e.store.Delete(ctx, key, kv.ModRevision)
		} else {
			var data []byte
			if data, err = k.encode(n); err == nil {
				_, err = e.store.Update(ctx, key, data, kv.ModRevision)
			}
		}
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		return err
	}
	return errors.New("finalizing namespace: too many write conflicts")
}

// resumeFinalizing picks up the namespaces a previous run left
// terminating.
func (e *Engine) resumeFinalizing(ctx context.Context) error {
	k := e.nsKind()
	res, err := e.store.List(ctx, k.keyPrefix, storage.ListOptions{})
	if err != nil {
		return err
	}
	for _, kv := range res.KVs {
		o, err := k.decode(kv.Value, kv.ModRevision)
		if err != nil {
			continue
		}
		if o.GetDeletionTimestamp() != nil {
			e.startFinalizing(o.GetName())
		}
	}
	return nil
}

// kindsInOrder lists the kinds in the order of Resources.
func (e *Engine) kindsInOrder() []*kind {
	out := make([]*kind, 0, len(e.resources))
	for _, r := range e.resources {
		out = append(out, e.kinds[kindKey(r.Group, r.Plural)])
	}
	return out
}

// remaining is what a finalization pass left in a namespace: objects per
// resource and the finalizers holding them.
type remaining struct {
	resources, finalizers map[string]int
}

func (r remaining) count() (n int) {
	for _, c := range r.resources {
		n += c
	}
	return n
}

// setNamespaceConditions writes the namespace controller's conditions, so
// that `kubectl describe namespace` tells what a Terminating namespace
// waits for. Failures are left to the next pass.
func (e *Engine) setNamespaceConditions(ctx context.Context, name string, left remaining) {
	now := metav1.NewTime(e.now())
	cond := func(t corev1.NamespaceConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NamespaceCondition {
		return corev1.NamespaceCondition{Type: t, Status: status, LastTransitionTime: now, Reason: reason, Message: msg}
	}
	summary := func(m map[string]int, format string) string {
		var parts []string
		for k, n := range m {
			parts = append(parts, fmt.Sprintf(format, k, n))
		}
		slices.Sort(parts)
		return strings.Join(parts, ", ")
	}
	conds := []corev1.NamespaceCondition{
		cond(corev1.NamespaceDeletionDiscoveryFailure, corev1.ConditionFalse, "ResourcesDiscovered", "All resources successfully discovered"),
		cond(corev1.NamespaceDeletionGVParsingFailure, corev1.ConditionFalse, "ParsedGroupVersions", "All legacy kube types successfully parsed"),
		cond(corev1.NamespaceDeletionContentFailure, corev1.ConditionFalse, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
		cond(corev1.NamespaceContentRemaining, corev1.ConditionFalse, "ContentRemoved", "All content successfully removed"),
		cond(corev1.NamespaceFinalizersRemaining, corev1.ConditionFalse, "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
	}
	if left.count() > 0 {
		conds[3] = cond(corev1.NamespaceContentRemaining, corev1.ConditionTrue, "SomeResourcesRemain",
			"Some resources are remaining: "+summary(left.resources, "%s has %d resource instances"))
	}
	if len(left.finalizers) > 0 {
		conds[4] = cond(corev1.NamespaceFinalizersRemaining, corev1.ConditionTrue, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+summary(left.finalizers, "%s in %d resource instances"))
	}
	k := e.nsKind()
	key := k.key("", name)
	kv, err := e.store.Get(ctx, key)
	if err != nil {
		return
	}
	cur, err := k.decode(kv.Value, kv.ModRevision)
	if err != nil {
		return
	}
	ns := cur.(*corev1.Namespace).DeepCopy()
	changed := len(ns.Status.Conditions) != len(conds)
	for i := range conds {
		if changed {
			break
		}
		old := ns.Status.Conditions[i]
		if old.Type != conds[i].Type || old.Status != conds[i].Status || old.Reason != conds[i].Reason || old.Message != conds[i].Message {
			changed = true
		}
	}
	if !changed {
		return // same conditions: no write, no event
	}
	for i := range conds {
		for _, old := range ns.Status.Conditions {
			if old.Type == conds[i].Type && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	ns.Status.Conditions = conds
	if data, err := k.encode(ns); err == nil {
		_, _ = e.store.Update(ctx, key, data, kv.ModRevision) // a conflict: the next pass writes them
	}
}
