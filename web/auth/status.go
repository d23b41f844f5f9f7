package auth

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Unauthorized is kube-apiserver's 401:
// {"kind":"Status",...,"message":"Unauthorized","reason":"Unauthorized","code":401}.
func Unauthorized() error {
	return apierrors.NewUnauthorized("Unauthorized")
}

// Forbidden is responsewriters.ForbiddenStatusError: the 403 kube-apiserver
// sends when authorization denies ri to u, with the authorizer's reason
// appended.
func Forbidden(u User, ri RequestInfo, reason string) error {
	msg := fmt.Sprintf("User %q cannot %s", u.Name, ri.Verb)
	if !ri.IsResourceRequest {
		msg = fmt.Sprintf("%s path %q", msg, ri.Path)
	} else {
		resource := ri.Resource
		if ri.Subresource != "" {
			resource += "/" + ri.Subresource
		}
		if ri.Namespace != "" {
			msg = fmt.Sprintf("%s resource %q in API group %q in the namespace %q", msg, resource, ri.APIGroup, ri.Namespace)
		} else {
			msg = fmt.Sprintf("%s resource %q in API group %q at the cluster scope", msg, resource, ri.APIGroup)
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: ri.APIGroup, Resource: ri.Resource}
	return apierrors.NewForbidden(gr, ri.Name, fmt.Errorf("%s", msg))
}
