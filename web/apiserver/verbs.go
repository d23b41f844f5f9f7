package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/leasehold/leasehold/engine"
)

// get serves GET .../<plural>/<name> (handlers.GetResource).
func (r *request) get() {
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	var opts metav1.GetOptions
	if err := r.decodeOptions(&opts, coreV1); err != nil {
		r.fail(err)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	if r.getFast(ctx, mo, &opts) {
		return
	}
	obj, err := r.h.eng.Get(ctx, r.scope, r.rt.name, &opts)
	if err != nil {
		r.fail(err)
		return
	}
	r.respond(http.StatusOK, obj, mo)
}

// list serves GET on a collection: a list, or a watch with ?watch=true.
func (r *request) list() { r.listOrWatch(false) }

// watchForced serves the deprecated /watch/ paths.
func (r *request) watchForced() { r.listOrWatch(true) }

// listOrWatch follows handlers.ListResource.
func (r *request) listOrWatch(forceWatch bool) {
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	var opts metav1.ListOptions
	if err := r.decodeOptions(&opts, coreV1); err != nil {
		r.fail(err)
		return
	}
	if r.rt.name != "" {
		// A watch of one object: its name is a field selector.
		if opts.FieldSelector == "" {
			opts.FieldSelector = "metadata.name=" + r.rt.name
		} else {
			sel, err := fields.ParseSelector(opts.FieldSelector)
			if err != nil {
				r.fail(apierrors.NewBadRequest(err.Error()))
				return
			}
			if n, ok := sel.RequiresExactMatch("metadata.name"); !ok || n != r.rt.name {
				r.fail(apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name"))
				return
			}
		}
	}
	if opts.Watch || forceWatch {
		opts.Watch = true
		r.watch(mo, &opts)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	if r.listFast(ctx, mo, &opts) {
		return
	}
	obj, err := r.h.eng.List(ctx, r.scope, &opts)
	if err != nil {
		r.fail(err)
		return
	}
	r.respond(http.StatusOK, obj, mo)
}

// create serves POST on a namespaced collection (handlers.createHandler).
func (r *request) create() {
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	info, ok := inputSerializer(b2s(r.rc.Request.Header.ContentType()), r.h.infos)
	if !ok {
		r.fail(unsupportedMediaType(r.h.mediaTypes))
		return
	}
	body, err := r.body()
	if err != nil {
		r.fail(err)
		return
	}
	opts := &metav1.CreateOptions{}
	if err := r.writeOptions(opts, "CreateOptions", func() field.ErrorList { return metav1validation.ValidateCreateOptions(opts) }); err != nil {
		r.fail(err)
		return
	}
	obj, err := r.decodeBody(info, body, opts.FieldValidation)
	if err != nil {
		r.fail(err)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	out, err := r.h.eng.Create(ctx, r.scope, obj, opts)
	if err != nil {
		r.fail(err)
		return
	}
	r.respond(http.StatusCreated, out, mo)
}

// update serves PUT .../<name> (handlers.UpdateResource).
func (r *request) update() {
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	body, err := r.body()
	if err != nil {
		r.fail(err)
		return
	}
	opts := &metav1.UpdateOptions{}
	if err := r.writeOptions(opts, "UpdateOptions", func() field.ErrorList { return engine.ValidateUpdateOptions(opts) }); err != nil {
		r.fail(err)
		return
	}
	info, ok := inputSerializer(b2s(r.rc.Request.Header.ContentType()), r.h.infos)
	if !ok {
		r.fail(unsupportedMediaType(r.h.mediaTypes))
		return
	}
	obj, err := r.decodeBody(info, body, opts.FieldValidation)
	if err != nil {
		r.fail(err)
		return
	}
	if err := checkName(obj, r.rt.name, r.rt.namespace); err != nil {
		r.fail(err)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	out, created, err := r.h.eng.Update(ctx, r.scope, r.rt.name, obj, opts)
	if err != nil {
		r.fail(err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	r.respond(code, out, mo)
}

// patch serves PATCH .../<name> (handlers.PatchResource). The router has
// already checked the Content-Type.
func (r *request) patch() {
	ct, _ := cut(b2s(r.rc.Request.Header.ContentType()), ';')
	pt := types.PatchType(ct)
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	body, err := r.body()
	if err != nil {
		r.fail(err)
		return
	}
	opts := &metav1.PatchOptions{}
	if err := r.writeOptions(opts, "PatchOptions", func() field.ErrorList { return metav1validation.ValidatePatchOptions(opts, pt) }); err != nil {
		r.fail(err)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	// The engine may keep the patch beyond this call (managedFields,
	// errors); fasthttp reuses the body buffer, so hand it a copy.
	data := append([]byte(nil), body...)
	out, created, err := r.h.eng.Patch(ctx, r.scope, r.rt.name, pt, data, opts)
	if err != nil {
		r.fail(err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	r.respond(code, out, mo)
}

// delete serves DELETE .../<name> (handlers.DeleteResource).
func (r *request) delete() {
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	opts, err := r.deleteOptions()
	if err != nil {
		r.fail(err)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	out, accepted, err := r.h.eng.Delete(ctx, r.scope, r.rt.name, opts)
	if err != nil {
		r.fail(err)
		return
	}
	code := http.StatusOK
	if accepted {
		code = http.StatusAccepted
	}
	if out == nil {
		out = &metav1.Status{
			Status:  metav1.StatusSuccess,
			Code:    int32(code),
			Details: &metav1.StatusDetails{Name: r.rt.name, Kind: r.rt.res.Kind},
		}
	}
	r.respond(code, out, mo)
}

// deleteCollection serves DELETE on a namespaced collection
// (handlers.DeleteCollection).
func (r *request) deleteCollection() {
	mo, ok := r.negotiate()
	if !ok {
		return
	}
	var listOpts metav1.ListOptions
	if err := r.decodeOptions(&listOpts, coreV1); err != nil {
		r.fail(err)
		return
	}
	opts, err := r.deleteOptions()
	if err != nil {
		r.fail(err)
		return
	}
	ctx, err := r.ctx()
	if err != nil {
		r.fail(err)
		return
	}
	out, err := r.h.eng.DeleteCollection(ctx, r.scope, &listOpts, opts)
	if err != nil {
		r.fail(err)
		return
	}
	if out == nil {
		out = &metav1.Status{
			Status:  metav1.StatusSuccess,
			Code:    http.StatusOK,
			Details: &metav1.StatusDetails{Kind: r.rt.res.Kind},
		}
	}
	r.respond(http.StatusOK, out, mo)
}

// deleteOptions reads DeleteOptions from the body, or from the query when
// the body is empty, and validates them.
func (r *request) deleteOptions() (*metav1.DeleteOptions, error) {
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	opts := &metav1.DeleteOptions{}
	if len(body) > 0 {
		info, ok := inputSerializer(b2s(r.rc.Request.Header.ContentType()), r.h.infos)
		if !ok {
			return nil, unsupportedMediaType(r.h.mediaTypes)
		}
		if err := decodeDeleteOptions(info, body, opts); err != nil {
			return nil, err
		}
	} else if err := r.decodeOptions(opts, coreV1); err != nil {
		return nil, err
	}
	if err := checkOptions(opts, "DeleteOptions", metav1validation.ValidateDeleteOptions(opts)); err != nil {
		return nil, err
	}
	return opts, nil
}

// writeOptions decodes a write verb's options from the query and checks
// them (see checkOptions).
func (r *request) writeOptions(opts runtime.Object, kind string, validate func() field.ErrorList) error {
	if err := r.decodeOptions(opts, coreV1); err != nil {
		return err
	}
	return checkOptions(opts, kind, validate())
}

// checkOptions turns option validation errors into upstream's 422
// (`<Kind>.meta.k8s.io "" is invalid: ...`) and stamps the options' kind,
// as kube-apiserver's handlers do before passing them on.
func checkOptions(opts runtime.Object, kind string, errs field.ErrorList) error {
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	opts.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind(kind))
	return nil
}

// respond transforms the result as the Accept header asked (Table,
// PartialObjectMetadata) and writes it (handlers.transformResponseObject).
func (r *request) respond(code int, obj runtime.Object, mo mediaOptions) {
	out, gv, err := r.transform(obj, mo)
	if err != nil {
		r.fail(err)
		return
	}
	r.h.writeObject(r.rc, restrictResource, code, out, gv, mo, true)
}
