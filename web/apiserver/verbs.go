package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The verbs return the error that ends a request; serveResource answers
// it as a Status (request.fail), the one place failures are written.
// Options and objects are validated by the engine: a verb decodes what
// the request carries and passes it on.

// get serves GET .../<plural>/<name> (handlers.GetResource).
func (r *request) get() error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	var opts metav1.GetOptions
	if err := r.decodeOptions(&opts, coreV1); err != nil {
		return err
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	if r.plainJSON(mo) {
		// The renewal path: the engine renders the stored lease itself.
		body, ok, err := r.h.eng.GetJSON(ctx, r.scope, r.rt.name, &opts)
		if err != nil {
			return err
		}
		if ok {
			r.writeJSON(mo, body)
			return nil
		}
	}
	obj, err := r.h.eng.Get(ctx, r.scope, r.rt.name, &opts)
	if err != nil {
		return err
	}
	return r.respond(http.StatusOK, obj, mo)
}

// list serves GET on a collection: a list, or a watch with ?watch=true.
func (r *request) list() error { return r.listOrWatch(false) }

// watchForced serves the deprecated /watch/ paths.
func (r *request) watchForced() error { return r.listOrWatch(true) }

// listOrWatch follows handlers.ListResource.
func (r *request) listOrWatch(forceWatch bool) error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	var opts metav1.ListOptions
	if err := r.decodeOptions(&opts, coreV1); err != nil {
		return err
	}
	if r.rt.name != "" {
		// A watch of one object: its name is a field selector.
		if opts.FieldSelector == "" {
			opts.FieldSelector = "metadata.name=" + r.rt.name
		} else {
			sel, err := fields.ParseSelector(opts.FieldSelector)
			if err != nil {
				return apierrors.NewBadRequest(err.Error())
			}
			if n, ok := sel.RequiresExactMatch("metadata.name"); !ok || n != r.rt.name {
				return apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
			}
		}
	}
	if opts.Watch || forceWatch {
		opts.Watch = true
		return r.watch(mo, &opts)
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	if r.plainJSON(mo) {
		body, ok, err := r.h.eng.ListJSON(ctx, r.scope, &opts)
		if err != nil {
			return err
		}
		if ok {
			r.writeJSON(mo, body)
			return nil
		}
	}
	obj, err := r.h.eng.List(ctx, r.scope, &opts)
	if err != nil {
		return err
	}
	return r.respond(http.StatusOK, obj, mo)
}

// create serves POST on a namespaced collection (handlers.createHandler).
func (r *request) create() error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	info, ok := inputSerializer(b2s(r.rc.Request.Header.ContentType()), r.h.infos)
	if !ok {
		return unsupportedMediaType(r.h.mediaTypes)
	}
	body, err := r.body()
	if err != nil {
		return err
	}
	opts := &metav1.CreateOptions{}
	if err := r.writeOptions(opts, "CreateOptions"); err != nil {
		return err
	}
	obj, err := r.decodeBody(info, body, opts.FieldValidation)
	if err != nil {
		return err
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	out, err := r.h.eng.Create(ctx, r.scope, obj, opts)
	if err != nil {
		return err
	}
	return r.respond(http.StatusCreated, out, mo)
}

// update serves PUT .../<name> (handlers.UpdateResource). The engine
// checks the body's name against the URL's.
func (r *request) update() error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	body, err := r.body()
	if err != nil {
		return err
	}
	opts := &metav1.UpdateOptions{}
	if err := r.writeOptions(opts, "UpdateOptions"); err != nil {
		return err
	}
	info, ok := inputSerializer(b2s(r.rc.Request.Header.ContentType()), r.h.infos)
	if !ok {
		return unsupportedMediaType(r.h.mediaTypes)
	}
	obj, err := r.decodeBody(info, body, opts.FieldValidation)
	if err != nil {
		return err
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	out, created, err := r.h.eng.Update(ctx, r.scope, r.rt.name, obj, opts)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return r.respond(code, out, mo)
}

// patch serves PATCH .../<name> (handlers.PatchResource). The router has
// already checked the Content-Type.
func (r *request) patch() error {
	ct, _ := cut(b2s(r.rc.Request.Header.ContentType()), ';')
	pt := types.PatchType(ct)
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	body, err := r.body()
	if err != nil {
		return err
	}
	opts := &metav1.PatchOptions{}
	if err := r.writeOptions(opts, "PatchOptions"); err != nil {
		return err
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	// The engine may keep the patch beyond this call (managedFields,
	// errors); fasthttp reuses its body buffer, so hand it a copy unless
	// the body is the request's own (a large one, streamed).
	data := ownedBody(r.rc, body)
	out, created, err := r.h.eng.Patch(ctx, r.scope, r.rt.name, pt, data, opts)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return r.respond(code, out, mo)
}

// delete serves DELETE .../<name> (handlers.DeleteResource).
func (r *request) delete() error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	opts, err := r.deleteOptions()
	if err != nil {
		return err
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	out, accepted, err := r.h.eng.Delete(ctx, r.scope, r.rt.name, opts)
	if err != nil {
		return err
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
	return r.respond(code, out, mo)
}

// deleteCollection serves DELETE on a namespaced collection
// (handlers.DeleteCollection).
func (r *request) deleteCollection() error {
	mo, err := r.negotiate()
	if err != nil {
		return err
	}
	var listOpts metav1.ListOptions
	if err := r.decodeOptions(&listOpts, coreV1); err != nil {
		return err
	}
	opts, err := r.deleteOptions()
	if err != nil {
		return err
	}
	ctx, err := r.ctx()
	if err != nil {
		return err
	}
	out, err := r.h.eng.DeleteCollection(ctx, r.scope, &listOpts, opts)
	if err != nil {
		return err
	}
	if out == nil {
		out = &metav1.Status{
			Status:  metav1.StatusSuccess,
			Code:    http.StatusOK,
			Details: &metav1.StatusDetails{Kind: r.rt.res.Kind},
		}
	}
	return r.respond(http.StatusOK, out, mo)
}

// deleteOptions reads DeleteOptions from the body, or from the query when
// the body is empty.
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
	stampOptionsKind(opts, "DeleteOptions")
	return opts, nil
}

// writeOptions decodes a write verb's options from the query.
func (r *request) writeOptions(opts runtime.Object, kind string) error {
	if err := r.decodeOptions(opts, coreV1); err != nil {
		return err
	}
	stampOptionsKind(opts, kind)
	return nil
}

// stampOptionsKind sets the options' kind, as kube-apiserver's handlers do
// before passing them on.
func stampOptionsKind(opts runtime.Object, kind string) {
	opts.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind(kind))
}

// respond transforms the result as the Accept header asked (Table,
// PartialObjectMetadata) and writes it (handlers.transformResponseObject).
func (r *request) respond(code int, obj runtime.Object, mo mediaOptions) error {
	out, gv, err := r.transform(obj, mo)
	if err != nil {
		return err
	}
	r.h.writeObject(r.rc, restrictResource, code, out, gv, mo, true)
	return nil
}

// plainJSON reports whether the response may be a body the engine renders
// itself (GetJSON, ListJSON): plain application/json, not indented.
func (r *request) plainJSON(mo mediaOptions) bool {
	return plainJSON(mo, mo.pretty || isPrettyPrint(r.rc))
}

// writeJSON writes a 200 with a body the engine rendered.
func (r *request) writeJSON(mo mediaOptions, body []byte) {
	r.rc.SetContentType(mo.info.MediaType)
	r.rc.SetStatusCode(http.StatusOK)
	r.rc.Response.SetBodyRaw(body)
}
