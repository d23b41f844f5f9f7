package engine

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
)

// deleteCollectionPageSize is the list page size of a deletecollection
// without limit (kube-apiserver's).
const deleteCollectionPageSize = 10000

// DeleteCollection deletes the selected objects one by one (not
// atomically) and returns them as listed.
func (e *Engine) DeleteCollection(ctx context.Context, s Scope, listOpts *metav1.ListOptions, opts *metav1.DeleteOptions) (runtime.Object, error) {
	out, err := e.deleteCollection(ctx, s, listOpts, opts)
	return out, toStatus(err)
}

func (e *Engine) deleteCollection(ctx context.Context, s Scope, listOpts *metav1.ListOptions, opts *metav1.DeleteOptions) (runtime.Object, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	if s.Namespace == "" {
		return nil, methodNotAllowed()
	}
	q, err := parseListOptions(k, listOpts, false)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, optionsInvalid("DeleteOptions", errs)
	}
	hasLimit := q.opts.Limit > 0
	if !hasLimit {
		q.opts.Limit = deleteCollectionPageSize
	}
	var items []object
	var meta metav1.ListMeta
	for first := true; ; first = false {
		res, err := e.list(ctx, k, s.Namespace, q)
		if err != nil {
			return nil, err
		}
		if first {
			meta.ResourceVersion = res.meta.ResourceVersion
		}
		for _, o := range res.items {
			if _, _, err := e.deleteOne(ctx, k, s.Namespace, o.GetName(), opts.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		items = append(items, res.items...)
		if hasLimit || res.meta.Continue == "" {
			break
		}
		q.opts.Continue = res.meta.Continue
		q.opts.ResourceVersion = ""
		q.opts.ResourceVersionMatch = ""
	}
	return k.newList(s.Version, items, meta), nil
}
