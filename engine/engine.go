package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/storage"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Options configure an Engine.
type Options struct {
	// Store persists every object; required.
	Store storage.Interface
	// Now is the clock (creationTimestamp, managedFields times, Age);
	// default time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// BookmarkInterval is how often a watch with allowWatchBookmarks gets
	// a BOOKMARK; default 1m, as kube-apiserver.
	BookmarkInterval time.Duration
	// TypeConverter for managedFields and server-side apply; default is
	// the one built from leasehold's OpenAPI schema.
	TypeConverter managedfields.TypeConverter
	// WatchQueueBytes is the byte budget of one watch's undelivered
	// events (DefaultWatchQueueBytes); WatchQueueBytesTotal that of all
	// watches together (DefaultWatchQueueBytesTotal). A watch that falls
	// behind beyond them is closed and its client re-watches.
	WatchQueueBytes, WatchQueueBytesTotal int64
	// NamespaceLifecycle is what a create into a missing namespace does
	// (NamespacesImplicit, NamespacesStrict); the zero value manages no
	// namespaces. With a policy, New creates DefaultNamespaces.
	NamespaceLifecycle NamespaceLifecycle
	// EventTTL is how long an Event lives after its last write
	// (DefaultEventTTL, kube-apiserver's --event-ttl).
	EventTTL time.Duration
	// EventMaxCount and EventMaxBytes bound the stored Events: beyond
	// either, the oldest are deleted (DefaultEventMaxCount,
	// DefaultEventMaxBytes).
	EventMaxCount int
	EventMaxBytes int64
	// Drained, when set, says whether an operator drained an identity of
	// a namespace and who: the LeaseCandidates Table's Drained and
	// Drained By columns. It must answer from memory (engine/history's
	// DrainSet): it runs for every row of a printed list.
	Drained func(namespace, identity string) (by string, drained bool)
}

// Engine implements API on top of a storage.Interface.
type Engine struct {
	store            storage.Interface
	now              func() time.Time
	log              *slog.Logger
	bookmarkInterval time.Duration

	kinds     map[groupPlural]*kind
	resources []*Resource
	decoded   *decodeCache
	// undecodable remembers stored values that do not decode.
	undecodable undecodableRecords
	// hubs are the shared watch fan-outs by storage prefix (watchhub.go).
	hubsMu sync.Mutex
	hubs   map[string]*watchHub
	// watchBudget accounts every watch's queued events (watchqueue.go).
	watchBudget *watchBudget
	// rvWait is how long reads wait for a future resourceVersion.
	rvWait time.Duration

	nsLifecycle NamespaceLifecycle
	// background carries the engine's own work (namespace finalization,
	// event expiry); Start replaces it with its context.
	background   context.Context
	finalizingMu sync.Mutex
	finalizing   map[string]bool
	// nsGate orders creates against the end of a namespace's
	// finalization (namespacegate.go).
	nsGate nsGate
	events eventStore
	// drained is Options.Drained, or a function that reports none.
	drained func(namespace, identity string) (string, bool)
}

var _ API = (*Engine)(nil)

// New builds an Engine.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: Options.Store is required")
	}
	e := &Engine{
		store:            opts.Store,
		now:              opts.Now,
		log:              opts.Logger,
		bookmarkInterval: opts.BookmarkInterval,
		kinds:            map[groupPlural]*kind{},
		rvWait:           tooLargeRVWait,
		nsLifecycle:      opts.NamespaceLifecycle,
		background:       context.Background(),
	}
	e.events.init(opts)
	e.drained = opts.Drained
	if e.drained == nil {
		e.drained = func(string, string) (string, bool) { return "", false }
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.decoded = newDecodeCache(1024, decodeCacheBytes, func(kv storage.KeyValue, err error) {
		e.noteUndecodable(context.Background(), kv, err)
	})
	e.watchBudget = &watchBudget{perWatch: opts.WatchQueueBytes, total: opts.WatchQueueBytesTotal, log: e.log}
	if e.watchBudget.perWatch <= 0 {
		e.watchBudget.perWatch = DefaultWatchQueueBytes
	}
	if e.watchBudget.total <= 0 {
		e.watchBudget.total = DefaultWatchQueueBytesTotal
	}
	if e.bookmarkInterval <= 0 {
		e.bookmarkInterval = time.Minute
	}
	tc := opts.TypeConverter
	if tc == nil {
		var err error
		if tc, err = defaultTypeConverter(); err != nil {
			return nil, fmt.Errorf("engine: type converter: %w", err)
		}
	}
	for _, k := range allKinds() {
		if err := newFieldManagers(k, tc); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		k.res.StorageGroup = k.storageGV.Group
		e.kinds[kindKey(k.res.Group, k.res.Plural)] = k
		e.resources = append(e.resources, k.res)
	}
	if e.nsLifecycle != NamespacesUnmanaged {
		if err := e.ensureDefaultNamespacesPatiently(context.Background()); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	return e, nil
}

// Start runs the engine's background work until ctx ends: the
// finalization of namespaces left terminating by a previous run, and the
// expiry and size bound of Events. Without Start, Events never expire.
func (e *Engine) Start(ctx context.Context) error {
	e.finalizingMu.Lock()
	e.background = ctx
	e.finalizingMu.Unlock()
	if err := e.resumeFinalizing(ctx); err != nil {
		return fmt.Errorf("engine: resuming namespace finalization: %w", err)
	}
	go e.runEventExpiry(ctx)
	return nil
}

// ReleaseMemory drops what the engine keeps only to save work under load:
// the decoded objects its watchers share and each shared watch's ring of
// recent events (up to 1,024 each, with their managedFields: about a
// megabyte that an idle server kept for good). The server calls it when
// it goes quiet; the next event is decoded again, and a watch starting
// before the release's revision is served from the store's history
// instead of the ring.
func (e *Engine) ReleaseMemory() {
	e.decoded.clear()
	e.hubsMu.Lock()
	hubs := make([]*watchHub, 0, len(e.hubs))
	for _, h := range e.hubs {
		hubs = append(hubs, h)
	}
	e.hubsMu.Unlock()
	for _, h := range hubs { // not under hubsMu: see stopLocked
		h.releaseRing()
	}
}

// Resources lists the served resources: Lease, LeaseCandidate,
// Namespace, Event (core), Event (events.k8s.io).
func (e *Engine) Resources() []*Resource { return e.resources }

// ResourceFor finds a served resource by group, version and plural.
func (e *Engine) ResourceFor(group, version, plural string) (*Resource, bool) {
	k, ok := e.kinds[kindKey(group, plural)]
	if !ok {
		return nil, false
	}
	if _, ok := k.res.ServedVersion(version); !ok {
		return nil, false
	}
	return k.res, true
}

// allKinds builds every served kind, in the order of Resources.
func allKinds() []*kind {
	return []*kind{newLeaseKind(), newLeaseCandidateKind(), newNamespaceKind(), newCoreEventKind(), newEventsEventKind()}
}
