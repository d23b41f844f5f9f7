package engine

import (
	"sync"

	"github.com/leasehold/leasehold/storage"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// decodeCache shares decoded objects between watchers: every watcher of a
// resource sees the same storage event, and decoding its value once per
// watcher would multiply the cost of a renewal by the number of watchers.
// Entries are keyed by storage key and modification revision (a pair that
// never changes meaning) and evicted first-in first-out. Cached objects
// are shared and must be treated as read-only.
type decodeCache struct {
	mu      sync.Mutex
	entries map[decodeKey]object
	order   []decodeKey
	next    int
	// undecodable is told of every value that does not decode.
	undecodable func(kv storage.KeyValue, err error)
}

type decodeKey struct {
	key string
	rev int64
}

func newDecodeCache(size int, undecodable func(kv storage.KeyValue, err error)) *decodeCache {
	// The map grows with use: an idle server (or one without watchers)
	// does not carry it.
	return &decodeCache{entries: make(map[decodeKey]object), order: make([]decodeKey, size), undecodable: undecodable}
}

// get returns the decoded object for key at rev, decoding value on a miss.
// The object has its resourceVersion and storage-version TypeMeta set.
func (c *decodeCache) get(k *kind, key string, rev int64, value []byte) (object, error) {
	dk := decodeKey{key, rev}
	c.mu.Lock()
	o, ok := c.entries[dk]
	c.mu.Unlock()
	if ok {
		return o, nil
	}
	o, err := k.decode(value, rev)
	if err != nil {
		if c.undecodable != nil {
			c.undecodable(storage.KeyValue{Key: key, ModRevision: rev, Value: value}, err)
		}
		return nil, err
	}
	o.GetObjectKind().SetGroupVersionKind(k.storageGV.WithKind(k.res.Kind))
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.entries[dk]; ok {
		return prev, nil
	}
	if old := c.order[c.next]; old.key != "" {
		delete(c.entries, old)
	}
	c.order[c.next] = dk
	c.next = (c.next + 1) % len(c.order)
	c.entries[dk] = o
	return o, nil
}

// ShallowCopy gives a consumer its own top-level copy of an object the
// engine shares between watchers. Encoders write the TypeMeta of what they
// encode (the versioning codec sets and restores it), so concurrent
// consumers must not share the struct that holds it; a shallow copy
// suffices because nothing writes nested fields. Other types are deep
// copied.
func ShallowCopy(o runtime.Object) runtime.Object {
	switch t := o.(type) {
	case *coordinationv1.Lease:
		c := *t
		return &c
	case *coordinationv1beta1.LeaseCandidate:
		c := *t
		return &c
	case *coordinationv1alpha2.LeaseCandidate:
		c := *t
		return &c
	case *metav1.Status:
		c := *t
		return &c
	}
	return o.DeepCopyObject()
}
