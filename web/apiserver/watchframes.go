package apiserver

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine"
)

// frameCache shares encoded watch frames between the watchers of a
// resource: every watcher of a namespace gets every renewal, and encoding
// it once per watcher would cost the event's encoding times the number of
// watchers. A frame is keyed by the object's address and the event type:
// the engine hands the same read-only object to every watcher of an event
// (engine.WithSharedWatchObjects), and an entry keeps its object alive, so
// the address cannot be reused for another object while it is cached.
// It holds at most size frames of maxBytes together (frames and the
// objects they keep alive are about the same size), so large objects
// cannot make it grow to size times their size.
type frameCache struct {
	// entries is read by every watch stream for every event: a sync.Map
	// keeps those reads free of a shared lock. mu orders insertions and
	// the first-in first-out eviction.
	entries  sync.Map // frameKey -> []byte
	mu       sync.Mutex
	order    []frameKey // a ring of the cached keys, oldest at first
	first, n int
	bytes    int
	maxBytes int
}

// frameCacheBytes bounds the frames cached together.
const frameCacheBytes = 8 << 20

// frameKey holds the object itself: runtime.Objects are pointers, so
// equal keys are the same object.
type frameKey struct {
	obj runtime.Object
	typ watch.EventType
}

func newFrameCache(size, maxBytes int) *frameCache {
	return &frameCache{order: make([]frameKey, size), maxBytes: maxBytes}
}

// frame returns the plain JSON watch frame of an event in version gv
// (engine.AppendWatchEventJSON); ok false means use the serializer.
func (c *frameCache) frame(typ watch.EventType, obj runtime.Object, gv schema.GroupVersion) ([]byte, bool) {
	k := frameKey{obj, typ}
	if f, ok := c.entries.Load(k); ok {
		return f.([]byte), true
	}
	f, ok := engine.AppendWatchEventJSON(make([]byte, 0, 1024), typ, obj, gv)
	if !ok {
		return nil, false
	}
	if len(f) > c.maxBytes/8 {
		return f, true // too large to share the cache with others
	}
	if prev, loaded := c.entries.LoadOrStore(k, f); loaded {
		return prev.([]byte), true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.n > 0 && (c.n == len(c.order) || c.bytes+len(f) > c.maxBytes) {
		old := c.order[c.first]
		c.order[c.first] = frameKey{}
		c.first = (c.first + 1) % len(c.order)
		c.n--
		if v, ok := c.entries.LoadAndDelete(old); ok {
			c.bytes -= len(v.([]byte))
		}
	}
	c.order[(c.first+c.n)%len(c.order)] = k
	c.n++
	c.bytes += len(f)
	return f, true
}
