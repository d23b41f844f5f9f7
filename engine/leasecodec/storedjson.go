package leasecodec

import (
	"sync"
)

// The GET fast path: what StoredListJSON does for a LIST, for one lease. A
// leader-election client GETs its lease before every renewal, so this is
// half of all requests: rendering the stored protobuf straight to JSON
// saves decoding it into a fresh Lease (about 30 allocations) and the
// TypeMeta copy. The body is byte for byte what the decoded path writes
// (leaseReader and appendLeaseJSON are each checked against the generated
// code and the serializer; TestLeaseJSONRaw checks them together).

// readers recycles leaseReaders (their maps and slices) between GETs.
var readers = sync.Pool{New: func() any { return new(leaseReader) }}

// StoredJSON renders the lease stored as value at modRevision as JSON
// renders the decoded one; ok false means the value or the encoder
// declined it, and the caller decodes it and uses the serializer.
func StoredJSON(value []byte, modRevision int64) ([]byte, bool) {
	rd := readers.Get().(*leaseReader)
	defer readers.Put(rd)
	l, ok := rd.lease(value, modRevision)
	if !ok {
		return nil, false
	}
	l.Kind, l.APIVersion = "Lease", "coordination.k8s.io/v1"
	b, ok := appendLeaseJSON(make([]byte, 0, 2*len(value)+128), l, true)
	return append(b, '\n'), ok
}
