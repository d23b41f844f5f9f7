package auth

import (
	"strings"

	"k8s.io/apimachinery/pkg/fields"
)

// RequestInfo is k8s.io/apiserver's request.RequestInfo: what a request
// does, read from its method, path and query alone.
type RequestInfo struct {
	// IsResourceRequest is false for everything but /api/<v>/... and
	// /apis/<group>/<v>/... below the version (discovery, /healthz,
	// /metrics, /ui/ are non-resource requests).
	IsResourceRequest bool
	// Path is the request path (non-resource authorization matches it).
	Path string
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection for resource requests, the lower-case method
	// otherwise.
	Verb        string
	APIGroup    string
	APIVersion  string
	Namespace   string
	Resource    string
	Subresource string
	Name        string
}

// IsReadOnly reports whether the verb only reads (ABAC's readonly).
func (ri RequestInfo) IsReadOnly() bool {
	return ri.Verb == "get" || ri.Verb == "list" || ri.Verb == "watch"
}

// Query is the part of a request's query NewRequestInfo reads.
type Query interface {
	Peek(key string) []byte
}

// NewRequestInfo is RequestInfoFactory.NewRequestInfo with API prefixes
// "api" (groupless) and "apis".
func NewRequestInfo(method, path string, q Query) RequestInfo {
	ri := RequestInfo{Path: path, Verb: strings.ToLower(method)}
	parts := splitPath(path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return ri
	}
	prefix := parts[0]
	parts = parts[1:]
	if prefix == "apis" {
		if len(parts) < 3 {
			return ri
		}
		ri.APIGroup = parts[0]
		parts = parts[1:]
	}
	ri.IsResourceRequest = true
	ri.APIVersion = parts[0]
	parts = parts[1:]

	viaWatchPath := false
	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			// Upstream fails the request here; a resource request with
			// no resource is never authorized anyway.
			return ri
		}
		ri.Verb = parts[0]
		parts = parts[1:]
		viaWatchPath = true
	} else {
		switch method {
		case "POST":
			ri.Verb = "create"
		case "GET", "HEAD":
			ri.Verb = "get"
		case "PUT":
			ri.Verb = "update"
		case "PATCH":
			ri.Verb = "patch"
		case "DELETE":
			ri.Verb = "delete"
		default:
			ri.Verb = ""
		}
	}
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			ri.Namespace = parts[1]
			if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
				parts = parts[2:]
			}
		}
	}
	switch {
	case len(parts) >= 3 && !viaWatchPath:
		ri.Subresource = parts[2]
		fallthrough
	case len(parts) >= 2:
		ri.Name = parts[1]
		fallthrough
	case len(parts) >= 1:
		ri.Resource = parts[0]
	}
	if ri.Name == "" && ri.Verb == "get" {
		ri.Verb = "list"
		if w := q.Peek("watch"); w != nil && !strings.EqualFold(string(w), "false") && string(w) != "0" {
			ri.Verb = "watch"
		}
		// A metadata.name field selector names the object, so that a
		// policy (and the 403 message) can speak of it.
		if fs := q.Peek("fieldSelector"); len(fs) > 0 {
			if sel, err := fields.ParseSelector(string(fs)); err == nil {
				if name, ok := sel.RequiresExactMatch("metadata.name"); ok && validPathSegment(name) {
					ri.Name = name
				}
			}
		}
	}
	if ri.Name == "" && ri.Verb == "delete" {
		ri.Verb = "deletecollection"
	}
	return ri
}

// splitPath splits a path into its non-empty-ended segments, as upstream.
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// validPathSegment is apimachinery's path.IsValidPathSegmentName.
func validPathSegment(name string) bool {
	return name != "." && name != ".." && !strings.ContainsAny(name, "/%")
}
