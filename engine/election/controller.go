package election

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
)

// leaseKey names a Lease (and so the candidates that target it).
type leaseKey struct{ ns, name string }

func (k leaseKey) String() string { return k.ns + "/" + k.name }

// leaseEntry is a cached Lease with the server's observation time.
type leaseEntry struct {
	obj *coordinationv1.Lease
	// renewSeen is when the controller saw the holder, renewTime or
	// leaseDurationSeconds change (or first saw the lease): expiry is
	// renewSeen+duration on the server's clock, never the holder's
	// renewTime against our clock (upstream compares clocks).
	renewSeen time.Time
	// stored is c.stores when the entry was last stored: a relist
	// drops only entries stored before it began (cache.go).
	stored uint64
}

// candEntry is a cached LeaseCandidate with liveness bookkeeping, all on
// the controller's monotonic clock (clock.go).
type candEntry struct {
	obj *coordinationv1beta1.LeaseCandidate
	// renewAt estimates the last renewal, for validity: the observation
	// time of a renewal seen live, or, for one found by a list, first
	// sight minus how old spec.renewTime is by our wall clock (never
	// less than zero: a renewTime from our future is taken as now).
	// Zero when renewTime is unset.
	renewAt time.Time
	// createdAt estimates the creation the same way from
	// creationTimestamp, when first seen: the validity of a candidate
	// that never set renewTime.
	createdAt time.Time
	// ackAt is when a renewal (or creation) was observed live; zero if the
	// candidate was only ever listed. Only this counts as proof of life.
	ackAt time.Time
	// pingAt is when the controller last wrote its pingTime.
	pingAt time.Time
}

// Controller is the coordinated leader election controller. It keeps
// caches of all LeaseCandidates and of the Leases coordinated election
// concerns (concern.go) through engine watches, and elects through the
// engine, so every write is validated, versioned and seen by watchers
// exactly like a client's.
type Controller struct {
	opts Options
	e    *engine.Engine
	h    DecisionHistory
	log  *slog.Logger
	// now reads the monotonic clock (Clock.Monotonic): every judgement
	// and wait; wall reads the wall clock (Clock.Now): only what is
	// written or shown (clock.go).
	now  func() time.Time
	wall func() time.Time

	leaseScope, candScope engine.Scope

	mu      sync.Mutex
	leases  map[leaseKey]*leaseEntry
	cands   map[leaseKey]map[string]*candEntry
	memos   map[leaseKey]*memo
	deleted map[leaseKey]bool // leases seen deleted, for history cleanup
	// unfetched are leases whose first candidate appeared while they were
	// not cached; fetching holds the floor of each read in flight
	// (concern.go).
	unfetched map[leaseKey]struct{}
	fetching  map[leaseKey]int64
	// stores counts the leases stored in the cache; listFrom is its
	// value when the last lease list began (cache.go).
	stores, listFrom uint64

	// queue state, guarded by mu.
	dirty map[leaseKey]struct{}
	due   map[leaseKey]time.Time
	wake  chan struct{}
	// working is how many leases the worker took and has not finished
	// reconciling: with nothing dirty either, every decision on what the
	// controller has seen so far is written and recorded (idle).
	working int

	// backoff holds strategy modules that failed recently.
	backoff *moduleBackoff
	// resyncs counts Resync calls: a decision made before the latest one
	// is never reused, so that a module reload (and the periodic resync)
	// re-decides every lease.
	resyncs atomic.Uint64

	// beforeMove, set only by tests, runs just before the write that
	// moves an unconfirmed grant: the point a holder's confirmation races.
	beforeMove func()
	// quickAckFloor is quickAckFloor (liveness.go) unless a test sets it
	// before Run: a test whose better candidate is alive but, on a loaded
	// machine, may answer well over 100 ms after a worse one waits on a
	// duration it can rely on instead.
	quickAckFloor time.Duration

	// drained holds the drain records by namespace and identity
	// (drain.go), guarded by mu.
	drained map[string]map[string]history.DrainRecord

	// previews are hand-over previews waiting for the worker, which
	// answers them between reconciles (preview.go).
	previews chan previewRequest

	leasesSynced, candsSynced, drainsSynced atomic.Bool
	// strategies is where the wait for the strategy modules stands
	// (startup.go).
	strategies atomic.Int32
	stats      counters
}

// New builds a controller; Run starts it.
func New(opts Options) (*Controller, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts:          opts,
		e:             opts.Engine,
		h:             opts.History,
		log:           opts.Logger,
		now:           opts.Clock.Monotonic,
		wall:          opts.Clock.Now,
		quickAckFloor: quickAckFloor,
		leases:        map[leaseKey]*leaseEntry{},
		cands:         map[leaseKey]map[string]*candEntry{},
		memos:         map[leaseKey]*memo{},
		deleted:       map[leaseKey]bool{},
		drained:       map[string]map[string]history.DrainRecord{},
		unfetched:     map[leaseKey]struct{}{},
		fetching:      map[leaseKey]int64{},
		dirty:         map[leaseKey]struct{}{},
		due:           map[leaseKey]time.Time{},
		wake:          make(chan struct{}, 1),
		previews:      make(chan previewRequest),
		backoff:       newModuleBackoff(opts.FailureBackoff, opts.MaxFailureBackoff),
	}
	lr, ok1 := c.e.ResourceFor(engine.GroupName, "v1", "leases")
	cr, ok2 := c.e.ResourceFor(engine.GroupName, "v1beta1", "leasecandidates")
	if !ok1 || !ok2 {
		return nil, errMissingResources
	}
	c.leaseScope = engine.Scope{Resource: lr, Version: "v1", UserAgent: opts.UserAgent}
	c.candScope = engine.Scope{Resource: cr, Version: "v1beta1", UserAgent: opts.UserAgent}
	return c, nil
}

// Run keeps the caches, elects and collects stale candidates until ctx
// ends; it returns nil then.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { c.runLeaseInformer(ctx) })
	wg.Go(func() { c.runCandidateInformer(ctx) })
	wg.Go(func() { c.runDrainInformer(ctx) })
	wg.Go(func() { c.runGC(ctx) })
	c.runWorker(ctx)
	wg.Wait()
	return nil
}

// Synced reports that the caches hold a complete initial list, so that
// decisions see every candidate and every drain (for readiness).
func (c *Controller) Synced() bool {
	return c.leasesSynced.Load() && c.candsSynced.Load() && c.drainsSynced.Load()
}

// Resync re-evaluates every known lease now, e.g. after strategy modules
// were reloaded, calling the strategies afresh rather than reusing the
// last decisions.
func (c *Controller) Resync() {
	c.resyncs.Add(1)
	c.mu.Lock()
	for k := range c.leases {
		c.dirty[k] = struct{}{}
	}
	for k := range c.cands {
		c.dirty[k] = struct{}{}
	}
	c.mu.Unlock()
	c.signal()
}

// enqueueLocked marks a lease for reconciliation; c.mu is held.
func (c *Controller) enqueueLocked(k leaseKey) {
	c.dirty[k] = struct{}{}
}

func (c *Controller) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// runWorker is the single worker: it reconciles dirty leases and leases
// whose deadline (expiry, ping window, validity) has come, then sleeps
// until the next deadline or event. One worker, as upstream, so that two
// decisions on one lease never race.
func (c *Controller) runWorker(ctx context.Context) {
	c.watchStrategies(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	resync := time.NewTicker(c.opts.ResyncPeriod)
	defer resync.Stop()
	for {
		if !c.Synced() {
			// Deciding on half a cache could grant to a worse candidate;
			// wait for both initial lists.
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			case r := <-c.previews:
				r.reply <- previewResult{err: errPreviewNotSynced}
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		keys := c.takeDue()
		for _, k := range keys {
			if ctx.Err() != nil {
				return
			}
			next := c.reconcile(ctx, k)
			c.mu.Lock()
			c.working--
			if next.IsZero() {
				delete(c.due, k)
			} else {
				c.due[k] = next
			}
			c.mu.Unlock()
		}
		c.mu.Lock()
		pending := len(c.dirty) > 0
		var earliest time.Time
		for _, t := range c.due {
			if earliest.IsZero() || t.Before(earliest) {
				earliest = t
			}
		}
		c.mu.Unlock()
		if pending {
			continue
		}
		wait := time.Hour
		if !earliest.IsZero() {
			wait = max(earliest.Sub(c.now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case r := <-c.previews:
			p, err := c.preview(ctx, r.k, r.candidate)
			r.reply <- previewResult{p: p, err: err}
		case <-timer.C:
		case <-resync.C:
			c.Resync()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// takeDue returns, sorted, the dirty leases and those whose deadline has
// passed, and clears their marks.
func (c *Controller) takeDue() []leaseKey {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]leaseKey, 0, len(c.dirty))
	for k := range c.dirty {
		keys = append(keys, k)
		delete(c.dirty, k)
		delete(c.due, k)
	}
	for k, t := range c.due {
		if !t.After(now) {
			keys = append(keys, k)
			delete(c.due, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].name < keys[j].name
	})
	c.working = len(keys)
	return keys
}

// idle reports that the worker has reconciled every lease marked so far
// and is between batches: each write it decided on is recorded by then.
// Tests wait for it instead of for a quiet spell of the history.
func (c *Controller) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.working == 0 && len(c.dirty) == 0
}
