package election

import (
	"sync"

	"github.com/leasehold/leasehold/plugins/abi"
)

// StaticRegistry is a Registry over a fixed set of Go strategies, keyed by
// their Name. The controller uses it when no WebAssembly host is
// configured (with NativeOldest), and tests use it to plug in strategies
// written in Go. Set replaces an entry, mimicking a hot reload.
type StaticRegistry struct {
	mu sync.RWMutex
	m  map[string]abi.Strategy
}

var _ abi.Registry = (*StaticRegistry)(nil)

// NewStaticRegistry registers each strategy under its Name.
func NewStaticRegistry(ss ...abi.Strategy) *StaticRegistry {
	r := &StaticRegistry{m: map[string]abi.Strategy{}}
	for _, s := range ss {
		r.m[s.Name()] = s
	}
	return r
}

// Lookup returns the strategy registered under name.
func (r *StaticRegistry) Lookup(name string) (abi.Strategy, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.m[name]
	return s, ok
}

// Set registers s under name, replacing any earlier entry; a nil s removes
// the name.
func (r *StaticRegistry) Set(name string, s abi.Strategy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s == nil {
		delete(r.m, name)
		return
	}
	r.m[name] = s
}
