package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/leasehold/leasehold/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Garbage collection: kube-apiserver adds the "orphan" or
// "foregroundDeletion" finalizer for propagationPolicy Orphan/Foreground
// and kube-controller-manager's garbage collector removes it moments later
// (a Lease has no dependents). leasehold has no garbage collector, so the
// engine plays its part at once: the delete first stores the object with
// deletionTimestamp and the finalizer (watchers see MODIFIED, the client
// gets that object back, as upstream), then removes the GC finalizers and,
// if no other finalizer is left, deletes the object (DELETED). Objects
// with other finalizers stay until their owners remove them.

// Delete removes one object.
func (e *Engine) Delete(ctx context.Context, s Scope, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	out, accepted, err := e.delete(ctx, s, name, opts)
	return out, accepted, toStatus(err)
}

func (e *Engine) delete(ctx context.Context, s Scope, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, false, err
	}
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, false, optionsInvalid("DeleteOptions", errs)
	}
	var out object
	var deleted bool
	if k == e.nsKind() {
		out, deleted, err = e.deleteNamespace(ctx, k, name, opts)
	} else {
		out, deleted, err = e.deleteOne(ctx, k, s.Namespace, name, opts)
	}
	if err != nil {
		return nil, false, err
	}
	if !deleted {
		//nolint:staticcheck // OrphanDependents is deprecated but still decides the 202.
		accepted := opts.OrphanDependents != nil && !*opts.OrphanDependents
		return k.fromStorage(out, s.Version), accepted, nil
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details: &metav1.StatusDetails{
			Name:  out.GetName(),
			Group: k.gr.Group,
			Kind:  k.gr.Resource, // upstream puts the resource here
			UID:   out.GetUID(),
		},
	}, false, nil
}

// deleteOne is Store.Delete. deleted is false when the object is only
// marked for deletion (finalizers pending); out is then the stored object.
func (e *Engine) deleteOne(ctx context.Context, k *kind, namespace, name string, opts *metav1.DeleteOptions) (out object, deleted bool, err error) {
	dryRun := isDryRun(opts.DryRun)
	unsafe := opts.IgnoreStoreReadErrorWithClusterBreakingPotential
	return e.deleteLoop(ctx, k, namespace, name, opts, unsafe != nil && *unsafe,
		func(kv storage.KeyValue, cur object) (object, bool, error) {
			// Without finalizers left (the GC ones are the engine's to
			// remove at once), the object goes now.
			_, finalizers := gcFinalizers(cur.GetFinalizers(), opts)
			if len(finalizers) == 0 {
				return nil, false, nil
			}
			n := cur.DeepCopyObject().(object)
			n.SetFinalizers(finalizers)
			markAsDeleting(n, metav1.NewTime(e.now()))
			if dryRun {
				return n, false, nil
			}
			data, err := k.encode(n)
			if err != nil {
				return nil, false, apierrors.NewInternalError(err)
			}
			if string(data) != string(kv.Value) {
				updated, err := e.store.Update(ctx, kv.Key, data, kv.ModRevision)
				if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
					return nil, true, nil
				}
				if err != nil {
					return nil, false, storageError(err)
				}
				n.SetResourceVersion(formatRV(updated.ModRevision))
			}
			e.collectGarbage(ctx, k, namespace, n)
			return n, false, nil
		})
}

// deleteStep is a delete's own part of deleteLoop, given the object as
// stored (kv) and decoded (cur): it returns the object when it only marked
// it for deletion (finalizers pending; the delete ends there), retry when
// its write conflicted (the loop reads again), or neither when the object
// is to be deleted now.
type deleteStep func(kv storage.KeyValue, cur object) (marked object, retry bool, err error)

// deleteLoop is the read, check and delete loop of every delete, retried
// from a fresh read when the object changed meanwhile: read (NotFound when
// missing), decode (an undecodable object is a corrupt-object error, or
// with unsafe deleted as it is), check the preconditions, run the step,
// then (unless a dry run) delete at the revision read.
func (e *Engine) deleteLoop(ctx context.Context, k *kind, namespace, name string, opts *metav1.DeleteOptions, unsafe bool, step deleteStep) (object, bool, error) {
	key := k.key(namespace, name)
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		kv, err := e.store.Get(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, false, apierrors.NewNotFound(k.gr, name)
		}
		if err != nil {
			return nil, false, storageError(err)
		}
		cur, err := k.decode(kv.Value, kv.ModRevision)
		if err != nil {
			e.noteUndecodable(ctx, kv, err)
			if !unsafe {
				return nil, false, k.corruptObject(namespace, name, err)
			}
			return e.deleteUndecodable(ctx, k, kv, namespace, name, isDryRun(opts.DryRun))
		}
		if err := checkDeletePreconditions(k, cur, opts.Preconditions); err != nil {
			return nil, false, err
		}
		marked, retry, err := step(kv, cur)
		switch {
		case err != nil:
			return nil, false, err
		case retry:
			continue
		case marked != nil:
			return marked, false, nil
		}
		if isDryRun(opts.DryRun) {
			return cur, true, nil
		}
		if retry, err := e.deleteAtRevision(ctx, k, name, key, kv.ModRevision); retry {
			continue
		} else if err != nil {
			return nil, false, err
		}
		return cur, true, nil
	}
	return nil, false, apierrors.NewConflict(k.gr, name, errors.New(OptimisticLockErrorMsg))
}

// deleteAtRevision deletes key if it is still at revision rev. retry
// reports that it changed meanwhile, so the caller reads it again; a key
// already gone is name's NotFound Status.
func (e *Engine) deleteAtRevision(ctx context.Context, k *kind, name, key string, rev int64) (retry bool, err error) {
	_, _, err = e.store.Delete(ctx, key, rev)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, storage.ErrConflict):
		return true, nil
	case errors.Is(err, storage.ErrNotFound):
		return false, apierrors.NewNotFound(k.gr, name)
	}
	return false, storageError(err)
}

// deleteUndecodable is kube-apiserver's unsafe deletion of a corrupt
// object (the DeleteOption ignoreStoreReadErrorWithClusterBreakingPotential):
// the stored value is removed as it is, without finalizers or
// preconditions, which cannot be read from it (ValidateDeleteOptions
// refuses the option together with preconditions and propagation). A plain
// DELETE keeps answering the corrupt object error, as upstream: deciding
// to ignore finalizers is the client's to make. The result names the
// object without a uid, which cannot be read either.
func (e *Engine) deleteUndecodable(ctx context.Context, k *kind, kv storage.KeyValue, namespace, name string, dryRun bool) (object, bool, error) {
	o := k.newObj()
	o.SetNamespace(namespace)
	o.SetName(name)
	if dryRun {
		return o, true, nil
	}
	if _, _, err := e.store.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, false, apierrors.NewNotFound(k.gr, name)
		}
		if errors.Is(err, storage.ErrConflict) {
			// Rewritten meanwhile: the client looks again.
			return nil, false, apierrors.NewConflict(k.gr, name, errors.New(OptimisticLockErrorMsg))
		}
		return nil, false, storageError(err)
	}
	e.forgetUndecodable(kv.Key)
	e.log.WarnContext(ctx, "Deleted an undecodable stored object (ignoreStoreReadErrorWithClusterBreakingPotential)", "key", kv.Key, "revision", kv.ModRevision)
	return o, true, nil
}

// checkDeletePreconditions is rest.BeforeDelete's check, which names the
// Kind (not the resource) in the message.
func checkDeletePreconditions(k *kind, o object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	gr := schema.GroupResource{Group: k.gk.Group, Resource: k.gk.Kind}
	if p.UID != nil && *p.UID != o.GetUID() {
		return apierrors.NewConflict(gr, o.GetName(), fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, o.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != o.GetResourceVersion() {
		return apierrors.NewConflict(gr, o.GetName(), fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, o.GetResourceVersion()))
	}
	return nil
}

// markAsDeleting sets deletionTimestamp (kept if already set) and a zero
// grace period, bumping a non-zero generation on the first mark.
func markAsDeleting(o object, now metav1.Time) {
	if o.GetDeletionTimestamp() == nil {
		if o.GetGeneration() > 0 {
			o.SetGeneration(o.GetGeneration() + 1)
		}
		o.SetDeletionTimestamp(&now)
	}
	var zero int64
	o.SetDeletionGracePeriodSeconds(&zero)
}

// gcFinalizers is deletionFinalizersForGarbageCollection: the orphan and
// foregroundDeletion finalizers the propagation policy asks for.
func gcFinalizers(current []string, opts *metav1.DeleteOptions) (bool, []string) {
	orphan, foreground := false, false
	//nolint:staticcheck // OrphanDependents is deprecated but honoured.
	switch {
	case opts.OrphanDependents != nil:
		orphan = *opts.OrphanDependents
	case opts.PropagationPolicy != nil:
		orphan = *opts.PropagationPolicy == metav1.DeletePropagationOrphan
		foreground = *opts.PropagationPolicy == metav1.DeletePropagationForeground
	default:
		for _, f := range current {
			if f == metav1.FinalizerOrphanDependents {
				orphan = true
				break
			}
			if f == metav1.FinalizerDeleteDependents {
				foreground = true
				break
			}
		}
	}
	out := []string{}
	for _, f := range current {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	if sameSet(current, out) {
		return false, current
	}
	return true, out
}

func sameSet(a, b []string) bool {
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	n := map[string]bool{}
	for _, s := range b {
		if !m[s] {
			return false
		}
		n[s] = true
	}
	return len(m) == len(n)
}

// collectGarbage plays kube-controller-manager's garbage collector for an
// object pending deletion: it drops the orphan/foregroundDeletion
// finalizers (there are never dependents), which deletes the object when
// no other finalizer remains. Failures are logged: the object then simply
// stays pending, as it would with a slow garbage collector.
func (e *Engine) collectGarbage(ctx context.Context, k *kind, namespace string, o object) {
	if o.GetDeletionTimestamp() == nil || !hasGCFinalizer(o.GetFinalizers()) {
		return
	}
	_, err := e.guaranteedUpdate(ctx, k, namespace, o.GetName(), "", false, func(_ context.Context, live object, exists bool) (object, error) {
		if !exists || !hasGCFinalizer(live.GetFinalizers()) {
			return nil, errNothingToCollect
		}
		var keep []string
		for _, f := range live.GetFinalizers() {
			if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
				keep = append(keep, f)
			}
		}
		out := live.DeepCopyObject().(object)
		out.SetFinalizers(keep)
		return out, nil
	})
	if err != nil && !errors.Is(err, errNothingToCollect) {
		e.log.WarnContext(ctx, "garbage collection of deleted object failed", "resource", k.res.Plural, "namespace", namespace, "name", o.GetName(), "error", err)
	}
}

var errNothingToCollect = errors.New("nothing to collect")

func hasGCFinalizer(fs []string) bool {
	for _, f := range fs {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			return true
		}
	}
	return false
}

// methodNotAllowed is the router's 405.
func methodNotAllowed() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Message: "the server does not allow this method on the requested resource",
		Details: &metav1.StatusDetails{},
	}}
}
