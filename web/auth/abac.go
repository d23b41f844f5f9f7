package auth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// PolicySpec is the spec of an abac.authorization.kubernetes.io/v1beta1
// Policy.
type PolicySpec struct {
	User            string `json:"user,omitempty"`
	Group           string `json:"group,omitempty"`
	Readonly        bool   `json:"readonly,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	NonResourcePath string `json:"nonResourcePath,omitempty"`
}

type policy struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Spec       PolicySpec `json:"spec"`
}

// Policies is an ABAC policy list (kube-apiserver's
// --authorization-mode=ABAC with --authorization-policy-file).
type Policies []PolicySpec

const abacVersion = "abac.authorization.kubernetes.io/v1beta1"

// LoadPolicyFile reads one JSON Policy per line; blank lines and lines
// starting with # are skipped, as upstream. Only the v1beta1 format is
// accepted: the unversioned v0 format predates it and has different
// defaults, and silently misreading a security policy is worse than
// refusing it.
func LoadPolicyFile(path string) (Policies, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("authorization policy file: %w", err)
	}
	defer f.Close()
	var out Policies
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var p policy
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("authorization policy file %s, line %d: %w", path, n, err)
		}
		if p.APIVersion != abacVersion || p.Kind != "Policy" {
			return nil, fmt.Errorf("authorization policy file %s, line %d: want apiVersion %q and kind \"Policy\", got %q and %q", path, n, abacVersion, p.APIVersion, p.Kind)
		}
		out = append(out, p.Spec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("authorization policy file %s: %w", path, err)
	}
	return out, nil
}

// Authorize is k8s.io/kubernetes' abac PolicyList.Authorize: allowed when
// any policy matches; otherwise the reason kube-apiserver appends to the
// 403 message.
func (pl Policies) Authorize(u User, ri RequestInfo) (allowed bool, reason string) {
	for i := range pl {
		if matches(&pl[i], u, ri) {
			return true, ""
		}
	}
	return false, "No policy matched."
}

func matches(p *PolicySpec, u User, ri RequestInfo) bool {
	if !subjectMatches(p, u) {
		return false
	}
	// All policies allow read-only requests; writes need readonly false.
	if !ri.IsReadOnly() && p.Readonly {
		return false
	}
	if ri.IsResourceRequest {
		return (p.Namespace == "*" || p.Namespace == ri.Namespace) &&
			(p.Resource == "*" || p.Resource == ri.Resource) &&
			(p.APIGroup == "*" || p.APIGroup == ri.APIGroup)
	}
	switch np := p.NonResourcePath; {
	case np == "*", np == ri.Path:
		return true
	case strings.HasSuffix(np, "*"):
		return strings.HasPrefix(ri.Path, strings.TrimRight(np, "*"))
	}
	return false
}

// subjectMatches: a policy naming neither user nor group matches nobody;
// "*" matches anyone; a named user and group must both match.
func subjectMatches(p *PolicySpec, u User) bool {
	matched := false
	if p.User != "" {
		if p.User != "*" && p.User != u.Name {
			return false
		}
		matched = true
	}
	if p.Group != "" {
		if p.Group == "*" {
			return true
		}
		for _, g := range u.Groups {
			if g == p.Group {
				return true
			}
		}
		return false
	}
	return matched
}
