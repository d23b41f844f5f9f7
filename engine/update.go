package engine

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Update replaces an object (PUT), creating it when missing (not a
// Namespace: 404, as upstream).
func (e *Engine) Update(ctx context.Context, s Scope, name string, obj runtime.Object, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	out, created, err := e.update(ctx, s, name, obj, opts)
	return out, created, toStatus(err)
}

func (e *Engine) update(ctx context.Context, s Scope, name string, obj runtime.Object, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, false, err
	}
	if opts == nil {
		opts = &metav1.UpdateOptions{}
	}
	if errs := validateUpdateOptions(opts); len(errs) > 0 {
		return nil, false, optionsInvalid("UpdateOptions", errs)
	}
	in, err := k.input(obj)
	if err != nil {
		return nil, false, err
	}
	if err := checkName(in, name, s.Namespace); err != nil {
		return nil, false, err
	}
	dedupOwnerReferences(ctx, in)
	fm := k.fieldManagers[s.Version]
	manager := managerOrUserAgent(opts.FieldManager, s.UserAgent)
	apiVersion := k.gvk(s.Version).GroupVersion().String()
	refused := refusedBeforeFieldManager(in)
	transform := func(_ context.Context, live object, exists bool) (object, error) {
		if !exists && k.noCreateOnUpdate {
			return nil, apierrors.NewNotFound(k.gr, name)
		}
		// Each attempt starts again from the request's object.
		n := in.DeepCopyObject().(object)
		if k.defaults != nil {
			k.defaults(n)
		}
		if refused {
			// Validation (in guaranteedUpdate) refuses it: the field
			// manager, which would take seconds, is skipped.
			n.SetManagedFields(live.GetManagedFields())
			return n, nil
		}
		if exists && k.fastUpdate(live, n, manager, apiVersion) {
			return n, nil // a renewal: same result, without the field manager
		}
		if exists {
			live = live.DeepCopyObject().(object) // the field manager may edit it
		}
		return fm.UpdateNoErrors(live, n, manager).(object), nil
	}
	res, err := e.guaranteedUpdate(ctx, k, s.Namespace, name, string(in.GetUID()), isDryRun(opts.DryRun), transform)
	if err != nil {
		return nil, false, err
	}
	if !res.created && !res.deleted && !isDryRun(opts.DryRun) {
		e.collectGarbage(ctx, k, s.Namespace, res.obj)
		if k.subresource == "finalize" && res.obj.GetDeletionTimestamp() != nil && e.nsLifecycle != NamespacesUnmanaged {
			// A terminating namespace whose finalizers a client changed:
			// the namespace controller looks again (and deletes it once
			// none are left), as kube-controller-manager's would.
			e.startFinalizing(name)
		}
	}
	return k.fromStorage(res.obj, s.Version), res.created, nil
}
