package engine

import (
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateSelfSubjectAccessReview is kube-apiserver's validation of a
// SelfSubjectAccessReview: empty metadata, exactly one of resource and
// non-resource attributes, well-formed selector attributes. The 422 names
// the kind as upstream's does: the internal object it validates carries no
// kind after decoding, so the qualified kind is the group alone.
func ValidateSelfSubjectAccessReview(review *authorizationv1.SelfSubjectAccessReview) error {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if (review.Spec.ResourceAttributes == nil) == (review.Spec.NonResourceAttributes == nil) {
		errs = append(errs, field.Invalid(spec, review.Spec.NonResourceAttributes,
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
