package flowcontrol

import "strings"

// Class is a priority level.
type Class uint8

// The classes, in the order /metrics lists them.
const (
	LeaderElection Class = iota
	Workload
	List
	UI
	Metrics
	Admin
	numClasses
)

var classNames = [numClasses]string{"leader-election", "workload", "list", "ui", "metrics", "admin"}

func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "unknown"
}

// ParseClass finds a class by name.
func ParseClass(name string) (Class, bool) {
	for i, n := range classNames {
		if n == name {
			return Class(i), true
		}
	}
	return 0, false
}

// SmallBodyBytes is the largest request body a leader-election request
// may carry: a Lease or LeaseCandidate as client-go sends it is about one
// kilobyte, managedFields included. A larger write of a lease (a patch
// carrying big annotations) is workload, weighted by its size.
const SmallBodyBytes = 64 << 10

// Request is what classification sees of a request.
type Request struct {
	// Path is the URL path.
	Path string
	// Verb is the Kubernetes verb of a resource request (get, list,
	// watch, create, update, patch, delete, deletecollection), else the
	// lower-case HTTP method.
	Verb string
	// IsResourceRequest, Resource and Subresource are as in
	// kube-apiserver's RequestInfo.
	IsResourceRequest     bool
	Resource, Subresource string
	// BodyBytes is the declared body length (Content-Length), -1 when
	// unknown (chunked), 0 without a body.
	BodyBytes int
	// User is the authenticated user name, empty when anonymous; Addr is
	// the remote address, the flow of anonymous requests.
	User, Addr string
	// FullList is false for a LIST or WATCH whose answer is a part of
	// the collection only (limit, continue, or a watch from a given
	// resourceVersion, which sends no initial objects).
	FullList bool
	// Limit is a LIST's limit parameter (0: none).
	Limit int64
	// Selective is set for a LIST or WATCH with a label or field
	// selector, or of one object: it touches the whole collection but
	// answers part of it, so its size says nothing of the collection's.
	Selective bool
}

// Flow is the fair-queuing key: the user, or the address when anonymous.
func (r *Request) Flow() string {
	if r.User != "" {
		return "user:" + r.User
	}
	return "addr:" + r.Addr
}

// Classify returns the request's class.
func Classify(r *Request) Class {
	switch {
	case r.Path == "/ui" || strings.HasPrefix(r.Path, "/ui/") || r.Path == "/":
		return UI
	case r.Path == "/metrics":
		return Metrics
	case strings.HasPrefix(r.Path, "/leasehold/"):
		return Admin
	case !r.IsResourceRequest:
		return Workload
	}
	switch r.Verb {
	case "list", "watch", "deletecollection":
		return List
	case "get", "create", "update", "patch", "delete":
		if (r.Resource == "leases" || r.Resource == "leasecandidates") && r.Subresource == "" &&
			r.BodyBytes >= 0 && r.BodyBytes <= SmallBodyBytes {
			return LeaderElection
		}
	}
	return Workload
}

// IsList reports a LIST proper (not a watch), whose response is built in
// memory and so counts against the LIST byte budget.
func (r *Request) IsList() bool { return r.IsResourceRequest && r.Verb == "list" }
