package auth

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// IsSelfReview reports the requests that ask about the requester alone:
// creating a SelfSubjectAccessReview, SelfSubjectRulesReview or
// SelfSubjectReview. Every authenticated user may make them, as the
// system:basic-user role grants them to system:authenticated on an RBAC
// cluster: they reveal only what the requester may do, and `kubectl auth
// can-i` and `whoami` need them to answer at all. The policy then decides
// the review's answer.
func IsSelfReview(ri RequestInfo) bool {
	if !ri.IsResourceRequest || ri.Verb != "create" || ri.APIVersion != "v1" ||
		ri.Namespace != "" || ri.Name != "" || ri.Subresource != "" {
		return false
	}
	switch ri.APIGroup {
	case authorizationv1.GroupName:
		return ri.Resource == "selfsubjectaccessreviews" || ri.Resource == "selfsubjectrulesreviews"
	case authenticationv1.GroupName:
		return ri.Resource == "selfsubjectreviews"
	}
	return false
}

// AccessReview answers a SelfSubjectAccessReview for u: the spec's
// attributes become the request a asks about, as upstream's
// ResourceAttributesFrom and NonResourceAttributesFrom build it (an empty
// version means any). The spec must hold exactly one kind of attributes
// (engine.ValidateSelfSubjectAccessReview). ABAC never denies outright: a
// request no policy matches has no opinion, so Denied stays false.
func AccessReview(a Authorizer, u User, spec authorizationv1.SelfSubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	var ri RequestInfo
	switch {
	case spec.ResourceAttributes != nil:
		ra := spec.ResourceAttributes
		ri = RequestInfo{IsResourceRequest: true, Verb: ra.Verb, APIGroup: ra.Group, APIVersion: ra.Version,
			Namespace: ra.Namespace, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name}
		if ri.APIVersion == "" {
			ri.APIVersion = "*"
		}
	case spec.NonResourceAttributes != nil:
		ri = RequestInfo{Path: spec.NonResourceAttributes.Path, Verb: spec.NonResourceAttributes.Verb}
	}
	allowed, reason := a.Authorize(u, ri)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Reason: reason}
}

// RulesReview answers a SelfSubjectRulesReview for u in namespace. Empty
// lists are sent as [], as upstream does.
func RulesReview(a Authorizer, u User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	rules := a.RulesFor(u, namespace)
	out := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    make([]authorizationv1.ResourceRule, 0, len(rules.Resource)),
		NonResourceRules: make([]authorizationv1.NonResourceRule, 0, len(rules.NonResource)),
	}
	for _, r := range rules.Resource {
		out.ResourceRules = append(out.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources})
	}
	for _, r := range rules.NonResource {
		out.NonResourceRules = append(out.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
	}
	return out
}

// UserInfo is u as a SelfSubjectReview reports it.
func UserInfo(u User) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
}
