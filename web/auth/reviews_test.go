package auth

import (
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
)

func TestReviews(t *testing.T) {
	pl, err := LoadPolicyFile(writeFile(t, `{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"viewers","readonly":true,"namespace":"edge","resource":"leases","apiGroup":"coordination.k8s.io"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"v","namespace":"*","nonResourcePath":"/metrics"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"someone-else","namespace":"*","resource":"*","apiGroup":"*"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	viewer := User{Name: "v", Groups: []string{"viewers", AuthenticatedGroup}}
	get := &authorizationv1.ResourceAttributes{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "edge"}
	del := &authorizationv1.ResourceAttributes{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: "edge"}
	for _, c := range []struct {
		spec authorizationv1.SelfSubjectAccessReviewSpec
		want authorizationv1.SubjectAccessReviewStatus
	}{
		{authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: get}, authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: del}, authorizationv1.SubjectAccessReviewStatus{Reason: "No policy matched."}},
		{authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}, authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}}, authorizationv1.SubjectAccessReviewStatus{Reason: "No policy matched."}},
	} {
		if got := AccessReview(pl, viewer, c.spec); got != c.want {
			t.Errorf("AccessReview(%+v) = %+v, want %+v", c.spec, got, c.want)
		}
	}
	if got := AccessReview(AllowAll{}, Anonymous, authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: del}); !got.Allowed {
		t.Error("AllowAll denied")
	}

	// Upstream's ABAC resolver: the namespace must match for both kinds
	// of rule; readonly policies list get, list and watch.
	want := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"/metrics"}}},
	}
	if got := RulesReview(pl, viewer, "edge"); !reflect.DeepEqual(got, want) {
		t.Errorf("rules in edge = %+v, want %+v", got, want)
	}
	if got := RulesReview(pl, viewer, "other"); len(got.ResourceRules) != 0 || got.ResourceRules == nil || len(got.NonResourceRules) != 1 {
		t.Errorf("rules in other = %#v, want no resource rule ([], not null) and the /metrics rule", got)
	}

	for ri, want := range map[RequestInfo]bool{
		{IsResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", APIVersion: "v1", Resource: "selfsubjectaccessreviews"}:                 true,
		{IsResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", APIVersion: "v1", Resource: "selfsubjectrulesreviews"}:                  true,
		{IsResourceRequest: true, Verb: "create", APIGroup: "authentication.k8s.io", APIVersion: "v1", Resource: "selfsubjectreviews"}:                      true,
		{IsResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", APIVersion: "v1", Resource: "subjectaccessreviews"}:                     false,
		{IsResourceRequest: true, Verb: "list", APIGroup: "authorization.k8s.io", APIVersion: "v1", Resource: "selfsubjectaccessreviews"}:                   false,
		{IsResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", APIVersion: "v1", Namespace: "x", Resource: "selfsubjectaccessreviews"}: false,
	} {
		if IsSelfReview(ri) != want {
			t.Errorf("IsSelfReview(%+v) = %v", ri, !want)
		}
	}
}
