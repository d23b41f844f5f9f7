package apiserver

import (
	"context"
	"net/http"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
)

// The GET fast path: what listFast does for a LIST, for one lease. A
// leader-election client GETs its lease before every renewal, so this is
// half of all requests: rendering the stored protobuf straight to JSON
// saves decoding it into a fresh Lease (about 30 allocations) and the
// TypeMeta copy. The body is byte for byte what the decoded path writes
// (leaseReader and appendLeaseJSON are each checked against the generated
// code and the serializer; TestLeaseJSONRaw checks them together).

// rawGetter is implemented by *engine.Engine.
type rawGetter interface {
	GetRaw(ctx context.Context, s engine.Scope, name string, opts *metav1.GetOptions) (engine.RawItem, bool, error)
}

// leaseJSONFastOK reports whether a request for leases may be answered by
// the raw fast paths: plain v1 JSON, no conversion (Table,
// PartialObjectMetadata), not indented.
func (r *request) leaseJSONFastOK(mo mediaOptions) bool {
	return r.scope.Resource != nil && r.scope.Resource.Plural == "leases" && r.gv == coordinationv1.SchemeGroupVersion &&
		mo.convert == nil && mo.info.MediaType == "application/json" && !mo.pretty && !isPrettyPrint(r.rc)
}

// getFast serves a GET of a lease from its stored value; false means
// nothing was written and Get must serve it.
func (r *request) getFast(ctx context.Context, mo mediaOptions, opts *metav1.GetOptions) bool {
	rg, ok := r.h.eng.(rawGetter)
	if !ok || !r.leaseJSONFastOK(mo) {
		return false
	}
	item, ok, err := rg.GetRaw(ctx, r.scope, r.rt.name, opts)
	if err != nil {
		r.fail(err)
		return true
	}
	if !ok {
		return false
	}
	body, ok := leaseJSONRaw(item)
	if !ok {
		return false
	}
	r.rc.SetContentType(mo.info.MediaType)
	r.rc.SetStatusCode(http.StatusOK)
	r.rc.Response.SetBodyRaw(body)
	return true
}

// readers recycles leaseReaders (their maps and slices) between GETs.
var readers = sync.Pool{New: func() any { return new(leaseReader) }}

// leaseJSONRaw renders a stored lease as leaseJSON renders the decoded
// one; ok false means the value or the encoder declined it.
func leaseJSONRaw(item engine.RawItem) ([]byte, bool) {
	rd := readers.Get().(*leaseReader)
	defer readers.Put(rd)
	l, ok := rd.lease(item)
	if !ok {
		return nil, false
	}
	l.Kind, l.APIVersion = "Lease", "coordination.k8s.io/v1"
	b, ok := appendLeaseJSON(make([]byte, 0, 2*len(item.Value)+128), l, true)
	return append(b, '\n'), ok
}
