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
// never changes meaning) and evicted first-in first-out, at most size of
// them of maxBytes stored size together: large objects cannot make it
// hold size times their size. Cached objects are shared and must be
// treated as read-only.
type decodeCache struct {
	mu       sync.Mutex
	entries  map[decodeKey]decoded
	order    []decodeKey // a ring of the cached keys, oldest at first
	first, n int
	bytes    int
	maxBytes int
	// undecodable is told of every value that does not decode.
	undecodable func(kv storage.KeyValue, err error)
}

type decoded struct {
	obj  object
	size int
}

// decodeCacheBytes bounds the stored size of the objects cached together.
const decodeCacheBytes = 8 << 20

type decodeKey struct {
	key string
	rev int64
}

func newDecodeCache(size, maxBytes int, undecodable func(kv storage.KeyValue, err error)) *decodeCache {
	// The map grows with use: an idle server (or one without watchers)
	// does not carry it.
	return &decodeCache{entries: make(map[decodeKey]decoded), order: make([]decodeKey, size), maxBytes: maxBytes,
		undecodable: undecodable}
}

// get returns the decoded object for key at rev, decoding value on a miss.
// The object has its resourceVersion and storage-version TypeMeta set.
func (c *decodeCache) get(k *kind, key string, rev int64, value []byte) (object, error) {
	dk := decodeKey{key, rev}
	c.mu.Lock()
	d, ok := c.entries[dk]
	c.mu.Unlock()
	if ok {
		return d.obj, nil
	}
	o, err := k.decode(value, rev)
	if err != nil {
		if c.undecodable != nil {
			c.undecodable(storage.KeyValue{Key: key, ModRevision: rev, Value: value}, err)
		}
		return nil, err
	}
	o.GetObjectKind().SetGroupVersionKind(k.storageGV.WithKind(k.res.Kind))
	size := len(value)
	if size > c.maxBytes/8 {
		return o, nil // too large to share the cache with others
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.entries[dk]; ok {
		return prev.obj, nil
	}
	for c.n > 0 && (c.n == len(c.order) || c.bytes+size > c.maxBytes) {
		old := c.order[c.first]
		c.order[c.first] = decodeKey{}
		c.first = (c.first + 1) % len(c.order)
		c.n--
		c.bytes -= c.entries[old].size
		delete(c.entries, old)
	}
	c.order[(c.first+c.n)%len(c.order)] = dk
	c.n++
	c.bytes += size
	c.entries[dk] = decoded{o, size}
	return o, nil
}

// clear drops every cached object. The map is replaced, not emptied: a
// map keeps the table it grew to.
func (c *decodeCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = make(map[decodeKey]decoded)
	clear(c.order)
	c.first, c.n, c.bytes = 0, 0, 0
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
