package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
)

// Create stores a new object (POST).
func (e *Engine) Create(ctx context.Context, s Scope, obj runtime.Object, opts *metav1.CreateOptions) (runtime.Object, error) {
	out, err := e.create(ctx, s, obj, opts)
	return out, toStatus(err)
}

func (e *Engine) create(ctx context.Context, s Scope, obj runtime.Object, opts *metav1.CreateOptions) (runtime.Object, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &metav1.CreateOptions{}
	}
	if errs := metav1validation.ValidateCreateOptions(opts); len(errs) > 0 {
		return nil, optionsInvalid("CreateOptions", errs)
	}
	in, err := k.input(obj)
	if err != nil {
		return nil, err
	}
	o := in.DeepCopyObject().(object)
	wipeSystemFields(o)
	if err := ensureNamespace(o, s.Namespace); err != nil {
		return nil, err
	}
	dedupOwnerReferences(ctx, o)
	if k.defaults != nil {
		k.defaults(o)
	}
	if refusedBeforeFieldManager(o) {
		// Validation (in createOnce) refuses it: no managedFields to
		// compute, and a field manager that would take seconds skipped.
		o.SetManagedFields(nil)
	} else {
		// The field manager runs before the strategy, as in the create
		// handler, on an empty live object.
		o = k.fieldManagers[s.Version].UpdateNoErrors(k.newObj(), o, managerOrUserAgent(opts.FieldManager, s.UserAgent)).(object)
	}

	dryRun := isDryRun(opts.DryRun)
	var out object
	if o.GetName() == "" && o.GetGenerateName() != "" {
		for i := 0; i < maxNameGenerationCreateRetries; i++ {
			out, err = e.createOnce(ctx, k, s.Namespace, o.DeepCopyObject().(object), dryRun)
			if err == nil || !apierrors.IsAlreadyExists(err) {
				break
			}
		}
	} else {
		out, err = e.createOnce(ctx, k, s.Namespace, o, dryRun)
	}
	if err != nil {
		return nil, err
	}
	return k.fromStorage(out, s.Version), nil
}

// input converts a decoded request object to the storage version. The
// result may share memory with obj: callers copy before mutating.
func (k *kind) input(obj runtime.Object) (object, error) {
	if obj == nil {
		return nil, badRequest("no object provided")
	}
	o, ok := k.toStorage(obj)
	if !ok {
		return nil, badRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %T", k.res.Kind, obj))
	}
	return o, nil
}
