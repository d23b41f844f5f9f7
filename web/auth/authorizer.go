package auth

// Authorizer decides requests and lists what a user may do, as
// kube-apiserver's authorizer and rule resolver do; SelfSubjectAccessReview
// and SelfSubjectRulesReview ask it on the requester's behalf.
type Authorizer interface {
	// Authorize reports whether u may do ri and, when not, why.
	Authorize(u User, ri RequestInfo) (allowed bool, reason string)
	// RulesFor lists what u may do in namespace.
	RulesFor(u User, namespace string) Rules
}

// Rules is what a user may do: upstream's ResourceRuleInfo and
// NonResourceRuleInfo lists.
type Rules struct {
	Resource    []ResourceRule
	NonResource []NonResourceRule
}

// ResourceRule allows Verbs on Resources of APIGroups ("*" is any).
type ResourceRule struct {
	Verbs, APIGroups, Resources []string
}

// NonResourceRule allows Verbs on the paths NonResourceURLs name (a
// trailing "*" is a prefix).
type NonResourceRule struct {
	Verbs, NonResourceURLs []string
}

// AllowAll is the authorizer of a server without a policy file: every
// request is allowed (kube-apiserver's AlwaysAllow).
type AllowAll struct{}

// Authorize allows everything.
func (AllowAll) Authorize(User, RequestInfo) (bool, string) { return true, "" }

// RulesFor is AlwaysAllow's rule list: every verb on everything.
func (AllowAll) RulesFor(User, string) Rules {
	return Rules{
		Resource:    []ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResource: []NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
}

// RulesFor is upstream ABAC's rule resolver: one rule per policy whose
// subject matches and whose namespace is "*" or namespace, resource and
// non-resource parts alike, with every verb or, for read-only policies,
// get, list and watch. ABAC's rules are always complete.
func (pl Policies) RulesFor(u User, namespace string) Rules {
	var out Rules
	for i := range pl {
		p := &pl[i]
		if !subjectMatches(p, u) || (p.Namespace != "*" && p.Namespace != namespace) {
			continue
		}
		verbs := []string{"*"}
		if p.Readonly {
			verbs = []string{"get", "list", "watch"}
		}
		if p.Resource != "" {
			out.Resource = append(out.Resource, ResourceRule{Verbs: verbs, APIGroups: []string{p.APIGroup}, Resources: []string{p.Resource}})
		}
		if p.NonResourcePath != "" {
			out.NonResource = append(out.NonResource, NonResourceRule{Verbs: verbs, NonResourceURLs: []string{p.NonResourcePath}})
		}
	}
	return out
}
