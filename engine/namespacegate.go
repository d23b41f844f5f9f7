package engine

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"

	"github.com/leasehold/leasehold/storage"
)

// nsGateShards is how many locks namespaces share: a namespace's final
// check holds one briefly, delaying creates in the namespaces that hash
// with it, never blocking them for long.
const nsGateShards = 64

// nsGate closes the race between a create and its namespace's deletion.
// The lifecycle admission reads the namespace, then the create writes: a
// finalization listing the namespace empty in between, then deleting the
// namespace, left the new object behind in a namespace that no longer
// exists (1-3 leases in 40,000 racing creates in the hostile review).
// A create holds its namespace's gate shared from the admission to the
// write; the finalizer's last listing and the namespace's deletion hold it
// exclusively, so every create either is seen by that listing or runs its
// admission after it, and finds the namespace terminating or gone.
//
// The gate is per process: servers sharing one etcd cluster each admit on
// their own, as kube-apiservers do.
type nsGate struct {
	shards [nsGateShards]sync.RWMutex
}

func (g *nsGate) shard(namespace string) *sync.RWMutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace))
	return &g.shards[h.Sum32()%nsGateShards]
}

// enterCreate holds namespace's gate shared until the returned func is
// called. Cluster-scoped objects (namespace "") pass freely.
func (g *nsGate) enterCreate(namespace string) func() {
	if namespace == "" {
		return func() {}
	}
	m := g.shard(namespace)
	m.RLock()
	return m.RUnlock
}

// errNamespaceNotEmpty makes finalization go round again.
var errNamespaceNotEmpty = errors.New("namespace content created during finalization: deleting it too")

// removeFinalizerIfEmpty removes the namespace's kubernetes finalizer (so
// deletes it) only if, with creates held off, it has no content left.
func (e *Engine) removeFinalizerIfEmpty(ctx context.Context, name string) error {
	m := e.nsGate.shard(name)
	m.Lock()
	defer m.Unlock()
	seen := map[string]bool{}
	for _, k := range e.kindsInOrder() {
		if !k.res.Namespaced || seen[k.keyPrefix] {
			continue
		}
		seen[k.keyPrefix] = true
		res, err := e.store.List(ctx, k.listPrefix(name), storage.ListOptions{Limit: 1})
		if err != nil {
			return storageError(err)
		}
		if len(res.KVs) > 0 {
			return errNamespaceNotEmpty
		}
	}
	return e.removeNamespaceFinalizer(ctx, name)
}
