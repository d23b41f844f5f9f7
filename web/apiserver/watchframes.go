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
type frameCache struct {
	// entries is read by every watch stream for every event: a sync.Map
	// keeps those reads free of a shared lock. mu orders insertions and
	// the first-in first-out eviction.
	entries sync.Map // frameKey -> []byte
	mu      sync.Mutex
	order   []frameKey
	next    int
}

// frameKey holds the object itself: runtime.Objects are pointers, so
// equal keys are the same object.
type frameKey struct {
	obj runtime.Object
	typ watch.EventType
}

func newFrameCache(size int) *frameCache {
	return &frameCache{order: make([]frameKey, size)}
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
	if prev, loaded := c.entries.LoadOrStore(k, f); loaded {
		return prev.([]byte), true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.order[c.next]; old.obj != nil {
		c.entries.Delete(old)
	}
	c.order[c.next] = k
	c.next = (c.next + 1) % len(c.order)
	return f, true
}
