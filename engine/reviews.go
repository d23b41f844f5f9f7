package engine

import (
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lhschema "github.com/leasehold/leasehold/engine/schema"
)

var (
	ssarFieldManagerOnce sync.Once
	ssarFieldManager     *managedfields.FieldManager
	ssarFieldManagerErr  error
)

// PrepareSelfSubjectAccessReview is what kube-apiserver's create handler
// does to a SelfSubjectAccessReview before its REST answers it: the field
// manager records the request's fields for manager (fieldManager, else the
// User-Agent's prefix), so the echoed review carries managedFields, and
// then validation (ValidateSelfSubjectAccessReview).
func PrepareSelfSubjectAccessReview(review *authorizationv1.SelfSubjectAccessReview, fieldManager, userAgent string) (*authorizationv1.SelfSubjectAccessReview, error) {
	ssarFieldManagerOnce.Do(func() {
		tc, err := lhschema.ReviewTypeConverter()
		if err != nil {
			ssarFieldManagerErr = err
			return
		}
		gvk := authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")
		ssarFieldManager, ssarFieldManagerErr = managedfields.NewDefaultFieldManager(tc, versionConvertor{}, Scheme, Scheme, gvk, gvk.GroupVersion(), "", nil)
	})
	if ssarFieldManagerErr != nil {
		return nil, apierrors.NewInternalError(ssarFieldManagerErr)
	}
	if out, ok := ssarFieldManager.UpdateNoErrors(&authorizationv1.SelfSubjectAccessReview{}, review, managerOrUserAgent(fieldManager, userAgent)).(*authorizationv1.SelfSubjectAccessReview); ok {
		review = out
	}
	return review, ValidateSelfSubjectAccessReview(review)
}

// ValidateSelfSubjectAccessReview is kube-apiserver's validation of a
// SelfSubjectAccessReview: empty metadata, exactly one of resource and
// non-resource attributes, well-formed selector attributes. The 422 names
// the kind as upstream's does: the internal object it validates carries no
// kind after decoding, so the qualified kind is the group alone.
func ValidateSelfSubjectAccessReview(review *authorizationv1.SelfSubjectAccessReview) error {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if (review.Spec.ResourceAttributes == nil) == (review.Spec.NonResourceAttributes == nil) {
		// Upstream prints its internal type, which has no JSON tags.
		var value any
		if nra := review.Spec.NonResourceAttributes; nra != nil {
			value = struct{ Path, Verb string }{nra.Path, nra.Verb}
		}
		errs = append(errs, field.Invalid(spec, value,
			"exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if ra := review.Spec.ResourceAttributes; ra != nil {
		attrs := field.NewPath("spec.resourceAttributes")
		errs = append(errs, validateFieldSelectorAttributes(ra.FieldSelector, attrs.Child("fieldSelector"))...)
		errs = append(errs, validateLabelSelectorAttributes(ra.LabelSelector, attrs.Child("labelSelector"))...)
	}
	meta := review.ObjectMeta
	meta.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, meta) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), review.ObjectMeta, "must be empty"))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName}, "", errs)
}

func validateFieldSelectorAttributes(sel *authorizationv1.FieldSelectorAttributes, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	errs := selectorShape(sel.RawSelector, len(sel.Requirements), path)
	// Unknown operators pass: a newer client may know operators this
	// server does not, and the authorizer judges them.
	opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
	for i, r := range sel.Requirements {
		errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(r, opts, path.Child("requirements").Index(i))...)
	}
	return errs
}

func validateLabelSelectorAttributes(sel *authorizationv1.LabelSelectorAttributes, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	errs := selectorShape(sel.RawSelector, len(sel.Requirements), path)
	opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
	for i, r := range sel.Requirements {
		errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(r, opts, path.Child("requirements").Index(i))...)
	}
	return errs
}

// selectorShape: a selector attribute holds a raw selector or
// requirements, exactly one of them.
func selectorShape(raw string, requirements int, path *field.Path) field.ErrorList {
	switch {
	case raw != "" && requirements > 0:
		return field.ErrorList{field.Invalid(path.Child("rawSelector"), raw, "may not specified at the same time as requirements")}
	case raw == "" && requirements == 0:
		return field.ErrorList{field.Required(path.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", path))}
	}
	return nil
}
