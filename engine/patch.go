package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// maxJSONPatchOperations is kube-apiserver's cap on RFC 6902 operations.
const maxJSONPatchOperations = 10000

// jsonSerializer encodes the current object for JSON and merge patches;
// strictSerializer decodes the patched result, reporting unknown and
// duplicate fields as strict errors.
var (
	jsonSerializer   = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, Scheme, Scheme, kjson.SerializerOptions{})
	strictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, Scheme, Scheme, kjson.SerializerOptions{Strict: true})
)

// jsonPatchOp is only used for the strict check of a JSON patch body.
type jsonPatchOp struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	From  string      `json:"from"`
	Value interface{} `json:"value"`
}

// Patch applies a JSON, merge, strategic-merge or apply patch.
func (e *Engine) Patch(ctx context.Context, s Scope, name string, pt types.PatchType, data []byte, opts *metav1.PatchOptions) (out runtime.Object, created bool, err error) {
	defer func() {
		// Bad input must never take the server down; upstream's patch
		// libraries have panicked on odd documents before.
		if r := recover(); r != nil {
			out, created, err = nil, false, apierrors.NewInternalError(fmt.Errorf("patch failed: %v", r))
		}
	}()
	out, created, err = e.patch(ctx, s, name, pt, data, opts)
	return out, created, toStatus(err)
}

func unsupportedPatchType() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "415: Unsupported Media Type",
		Details: &metav1.StatusDetails{},
	}}
}

// patcher holds one patch request.
type patcher struct {
	e          *Engine
	k          *kind
	s          Scope
	name       string
	pt         types.PatchType
	data       []byte
	opts       *metav1.PatchOptions
	fm         *managedfields.FieldManager
	validation string // Strict, Warn or Ignore
	manager    string
	// pendingStrict are the JSON patch's own strict-decoding problems.
	pendingStrict []error
}

func (e *Engine) patch(ctx context.Context, s Scope, name string, pt types.PatchType, data []byte, opts *metav1.PatchOptions) (runtime.Object, bool, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, false, err
	}
	if opts == nil {
		opts = &metav1.PatchOptions{}
	}
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyPatchType:
	default:
		return nil, false, unsupportedPatchType()
	}
	if errs := metav1validation.ValidatePatchOptions(opts, pt); len(errs) > 0 {
		return nil, false, optionsInvalid("PatchOptions", errs)
	}
	p := &patcher{
		e: e, k: k, s: s, name: name, pt: pt, data: data, opts: opts,
		fm:         k.fieldManagers[s.Version],
		validation: opts.FieldValidation,
		manager:    managerOrUserAgent(opts.FieldManager, s.UserAgent),
	}
	if p.validation == "" {
		p.validation = metav1.FieldValidationWarn
	}
	var jp jsonpatch.Patch
	if pt == types.JSONPatchType {
		// Decode once: the operation count limit is checked before any
		// object is read.
		if jp, err = p.decodeJSONPatch(); err != nil {
			return nil, false, err
		}
	}
	transform := func(ctx context.Context, live object, exists bool) (object, error) {
		var obj object
		var err error
		if exists {
			live = live.DeepCopyObject().(object) // the patchers may edit it
		}
		if stand, ok := p.refusedPatch(live, exists); ok {
			obj = stand
		} else if !exists {
			if pt != types.ApplyPatchType {
				return nil, apierrors.NewNotFound(k.gr, name)
			}
			obj, err = p.apply(ctx, live)
		} else {
			switch pt {
			case types.JSONPatchType, types.MergePatchType:
				obj, err = p.applyJSON(ctx, live, jp)
			case types.StrategicMergePatchType:
				obj, err = p.applyStrategic(ctx, live)
			case types.ApplyPatchType:
				obj, err = p.apply(ctx, live)
			}
		}
		if err != nil {
			return nil, err
		}
		if !exists && obj.GetUID() != "" {
			return nil, apierrors.NewConflict(k.gr, name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", obj.GetUID()))
		}
		if err := checkName(obj, name, s.Namespace); err != nil {
			return nil, err
		}
		dedupOwnerReferences(ctx, obj)
		return obj, nil
	}
	res, err := e.guaranteedUpdate(ctx, k, s.Namespace, name, "", isDryRun(opts.DryRun), transform)
	if err != nil {
		return nil, false, err
	}
	if !res.created && !res.deleted && !isDryRun(opts.DryRun) {
		e.collectGarbage(ctx, k, s.Namespace, res.obj)
	}
	return k.fromStorage(res.obj, s.Version), res.created, nil
}

func (p *patcher) strictChecks() bool {
	return p.validation == metav1.FieldValidationStrict || p.validation == metav1.FieldValidationWarn
}

// maxJSONPatchCopyBytes bounds how much a JSON patch's "copy" operations may
// grow the document, as kube-apiserver's JSONPatchMaxCopyBytes (3 MiB):
// without it each copy can double the object, and a 1.6 KB patch of
// nineteen copies asks for gigabytes. json-patch keeps the limit in a
// package variable, which kube-apiserver also sets once at start.
const maxJSONPatchCopyBytes = 3 << 20

func init() { jsonpatch.AccumulatedCopySizeLimit = maxJSONPatchCopyBytes }

func (p *patcher) decodeJSONPatch() (jsonpatch.Patch, error) {
	var strictErrs []error
	if p.strictChecks() {
		var ops []jsonPatchOp
		var err error
		if strictErrs, err = sigsjson.UnmarshalStrict(p.data, &ops); err != nil {
			return nil, badRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		for i, e := range strictErrs {
			strictErrs[i] = fmt.Errorf("json patch %v", e)
		}
	}
	jp, err := jsonpatch.DecodePatch(p.data)
	if err != nil {
		return nil, badRequest(err.Error())
	}
	if len(jp) > maxJSONPatchOperations {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(jp)))
	}
	// Upstream reports these together with the decoding of the patched
	// object, so they are kept for then.
	p.pendingStrict = strictErrs
	return jp, nil
}

// applyJSON applies a JSON or merge patch to the current object's JSON.
func (p *patcher) applyJSON(ctx context.Context, live object, jp jsonpatch.Patch) (object, error) {
	current, err := runtime.Encode(jsonSerializer, p.k.fromStorage(live.DeepCopyObject().(object), p.s.Version))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	strictErrs := p.pendingStrict
	switch p.pt {
	case types.JSONPatchType:
		if patched, err = jp.Apply(current); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if p.strictChecks() {
			v := map[string]interface{}{}
			errs, err := sigsjson.UnmarshalStrict(p.data, &v)
			if err != nil {
				return nil, badRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			strictErrs = errs
		}
		patched, err = jsonpatch.MergePatch(current, p.data)
		if errors.Is(err, jsonpatch.ErrBadJSONPatch) {
			return nil, badRequest(err.Error())
		}
		if err != nil {
			return nil, err
		}
	}
	into, err := Scheme.New(p.k.gvk(p.s.Version))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	patchInvalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), msg)})
	}
	if err := runtime.DecodeInto(strictSerializer, patched, into); err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		switch {
		case !isStrict:
			return nil, patchInvalid(err.Error())
		case p.validation == metav1.FieldValidationWarn:
			addStrictWarnings(ctx, append(strictErrs, strictErr.Errors()...))
		case p.validation == metav1.FieldValidationStrict:
			return nil, patchInvalid(runtime.NewStrictDecodingError(append(strictErrs, strictErr.Errors()...)).Error())
		}
	} else if len(strictErrs) > 0 {
		if p.validation == metav1.FieldValidationStrict {
			return nil, patchInvalid(runtime.NewStrictDecodingError(strictErrs).Error())
		}
		addStrictWarnings(ctx, strictErrs)
	}
	return p.updateManagedFields(live, into)
}

// applyStrategic applies a strategic merge patch on the unstructured form
// of the current object.
func (p *patcher) applyStrategic(ctx context.Context, live object) (object, error) {
	versioned := p.k.fromStorage(live.DeepCopyObject().(object), p.s.Version)
	original, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	patchMap := map[string]interface{}{}
	var strictErrs []error
	if p.strictChecks() {
		if strictErrs, err = sigsjson.UnmarshalStrict(p.data, &patchMap); err != nil {
			return nil, badRequest(err.Error())
		}
	} else if err := sigsjson.UnmarshalCaseSensitivePreserveInts(p.data, &patchMap); err != nil {
		return nil, badRequest(err.Error())
	}
	schemaRef, err := Scheme.New(p.k.gvk(p.s.Version))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	patchedMap, err := strategicpatch.StrategicMergeMapPatch(original, patchMap, schemaRef)
	if err != nil {
		return nil, interpretStrategicMergePatchError(err)
	}
	into, _ := Scheme.New(p.k.gvk(p.s.Version))
	patchInvalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patchMap), msg)})
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(patchedMap, into, p.strictChecks()); err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		switch {
		case !isStrict:
			return nil, patchInvalid(err.Error())
		case p.validation == metav1.FieldValidationWarn:
			addStrictWarnings(ctx, append(strictErrs, strictErr.Errors()...))
		default:
			return nil, patchInvalid(runtime.NewStrictDecodingError(append(strictErrs, strictErr.Errors()...)).Error())
		}
	} else if len(strictErrs) > 0 {
		if p.validation == metav1.FieldValidationStrict {
			return nil, patchInvalid(runtime.NewStrictDecodingError(strictErrs).Error())
		}
		addStrictWarnings(ctx, strictErrs)
	}
	return p.updateManagedFields(live, into)
}

// updateManagedFields converts the patched versioned object to storage and
// records the change for the patch's manager.
func (p *patcher) updateManagedFields(live object, patched runtime.Object) (object, error) {
	obj, ok := p.k.toStorage(patched)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("patched object has unexpected type %T", patched))
	}
	if p.k.defaults != nil {
		if obj == patched {
			obj = obj.DeepCopyObject().(object)
		}
		p.k.defaults(obj)
	}
	if refusedBeforeFieldManager(obj) {
		// Validation (in guaranteedUpdate) refuses it: the field manager,
		// which would take seconds, is skipped.
		obj.SetManagedFields(live.GetManagedFields())
		return obj, nil
	}
	out, ok := p.fm.UpdateNoErrors(live, obj, p.manager).(object)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager returned unexpected type"))
	}
	return out, nil
}

// apply runs server-side apply against live (an empty object when the
// target does not exist yet).
func (p *patcher) apply(ctx context.Context, live object) (object, error) {
	force := p.opts.Force != nil && *p.opts.Force
	patchObj := &unstructured.Unstructured{Object: map[string]interface{}{}}
	if err := yaml.Unmarshal(p.data, &patchObj.Object); err != nil {
		return nil, badRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if patchObj.Object == nil {
		patchObj.Object = map[string]interface{}{}
	}
	if refusedApplyPatch(patchObj.Object) {
		if obj, ok := p.mergedForValidation(live, patchObj.Object); ok {
			return obj, nil
		}
	}
	res, err := p.fm.Apply(live, patchObj, p.opts.FieldManager, force)
	if err != nil {
		return nil, err
	}
	if p.strictChecks() {
		if err := yaml.UnmarshalStrict(p.data, &map[string]interface{}{}); err != nil {
			if p.validation == metav1.FieldValidationStrict {
				return nil, badRequest(fmt.Sprintf("error strict decoding YAML: %v", err))
			}
			addStrictWarnings(ctx, []error{err})
		}
	}
	obj, ok := p.k.toStorage(res)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("apply returned unexpected type %T", res))
	}
	return obj, nil
}

// prescanPatchBytes is the size from which a merge or apply patch is
// looked at before it is applied: a smaller one holds too few entries to
// be costly (a few thousand at most: milliseconds of field manager).
const prescanPatchBytes = 32 << 10

// refusedPatch returns what stands in for the result of a large JSON
// merge or apply patch that validation is bound to refuse
// (refusedApplyPatch: a merge patch, too, can only add what it sets), so
// that validation answers its 422 after one parse of the patch instead of
// the three of the merge and the field manager's work. ok is false for
// anything else, which takes the ordinary path.
func (p *patcher) refusedPatch(live object, exists bool) (object, bool) {
	if len(p.data) < prescanPatchBytes || (p.pt != types.MergePatchType && p.pt != types.ApplyPatchType) ||
		(!exists && p.pt != types.ApplyPatchType) {
		return nil, false
	}
	if d := bytes.TrimLeft(p.data, " \t\r\n"); len(d) == 0 || d[0] != '{' {
		return nil, false // YAML: apply looks after parsing it
	}
	var patch map[string]interface{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(p.data, &patch); err != nil || !refusedApplyPatch(patch) {
		return nil, false
	}
	return p.mergedForValidation(live, patch)
}

// refusedApplyPatch is refusedBeforeFieldManager for an apply patch, whose
// metadata the merge can only grow: an object with these labels,
// annotations, finalizers or owner references is refused by validation
// whatever it is merged with.
func refusedApplyPatch(patch map[string]interface{}) bool {
	meta, _ := patch["metadata"].(map[string]interface{})
	if meta == nil {
		return false
	}
	for _, f := range [...]string{"labels", "annotations", "finalizers", "ownerReferences", "managedFields"} {
		n := 0
		switch v := meta[f].(type) {
		case map[string]interface{}:
			n = len(v)
		case []interface{}:
			n = len(v)
		}
		if n > maxMetadataEntries {
			return true
		}
	}
	annotations, _ := meta["annotations"].(map[string]interface{})
	size := 0
	for k, v := range annotations {
		s, _ := v.(string)
		size += len(k) + len(s)
	}
	return size > apivalidation.TotalAnnotationSizeLimitB
}

// mergedForValidation stands in for server-side apply's result when
// validation is bound to refuse it (refusedApplyPatch): the patch merged
// into the live object with JSON merge patch rules, in linear time and
// without managedFields work. Only the 422 it leads to is ever seen. ok
// is false when the merge does not make an object; the caller then
// applies the patch, which reports why.
func (p *patcher) mergedForValidation(live object, patch map[string]interface{}) (object, bool) {
	current, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.k.fromStorage(live.DeepCopyObject().(object), p.s.Version))
	if err != nil {
		return nil, false
	}
	mergeJSONObjects(current, patch)
	into, err := Scheme.New(p.k.gvk(p.s.Version))
	if err != nil {
		return nil, false
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(current, into); err != nil {
		return nil, false
	}
	obj, ok := p.k.toStorage(into)
	if !ok {
		return nil, false
	}
	obj.SetManagedFields(live.GetManagedFields())
	return obj, true
}

// mergeJSONObjects merges patch into dst as RFC 7386 does: objects merge,
// null removes, anything else replaces.
func mergeJSONObjects(dst, patch map[string]interface{}) {
	for k, v := range patch {
		if v == nil {
			delete(dst, k)
			continue
		}
		if pm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				mergeJSONObjects(dm, pm)
				continue
			}
		}
		dst[k] = v
	}
}

func addStrictWarnings(ctx context.Context, errs []error) {
	for _, e := range errs {
		AddWarning(ctx, e.Error())
	}
}

// interpretStrategicMergePatchError maps strategic merge errors to the
// codes kube-apiserver uses.
func interpretStrategicMergePatchError(err error) error {
	switch {
	case errors.Is(err, mergepatch.ErrBadJSONDoc), errors.Is(err, mergepatch.ErrBadPatchFormatForPrimitiveList),
		errors.Is(err, mergepatch.ErrBadPatchFormatForRetainKeys), errors.Is(err, mergepatch.ErrBadPatchFormatForSetElementOrderList),
		errors.Is(err, mergepatch.ErrUnsupportedStrategicMergePatchFormat):
		return badRequest(err.Error())
	case errors.Is(err, mergepatch.ErrNoListOfLists), errors.Is(err, mergepatch.ErrPatchContentNotMatchRetainKeys):
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return err
}
