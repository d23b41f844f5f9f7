package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/storage"
)

// Events are the one resource any client writes in volume, so the engine
// bounds them: each expires EventTTL after it was last seen (kube-apiserver
// attaches an etcd lease of --event-ttl to every Event write; recorders
// advance lastTimestamp or series.lastObservedTime with each write), and beyond
// EventMaxCount events or EventMaxBytes of stored events the oldest are
// deleted, so that a chatty client cannot fill the disk. The bound is
// enforced by a sweeper woken by the creates that cross it; between two
// sweeps (at most eventSweepGap apart while creates keep crossing it) the
// store can hold what was created meanwhile.

const (
	// DefaultEventTTL is kube-apiserver's --event-ttl default.
	DefaultEventTTL = time.Hour
	// DefaultEventMaxCount and DefaultEventMaxBytes bound the stored
	// Events of the whole server.
	DefaultEventMaxCount = 10000
	DefaultEventMaxBytes = 16 << 20
	// eventSweepGap is the least time between two sweeps woken by the
	// bounds, so that a create storm does not turn into a list storm.
	eventSweepGap = 200 * time.Millisecond
	// eventLowWater is the fraction of a bound a sweep brings the events
	// down to, so that the next sweep is not due at the next create.
	eventLowWater = 0.9
	// eventAggregationWindow is how long RecordEvent folds a repeated
	// event into the existing one (count and lastTimestamp), as
	// client-go's event correlator does.
	eventAggregationWindow = 10 * time.Minute
)

// eventStore holds the bounds and the sweeper's state.
type eventStore struct {
	ttl      time.Duration
	maxCount int
	maxBytes int64
	// count and bytes follow the stored events approximately: exact after
	// each sweep, plus the creates since.
	count, bytes atomic.Int64
	kick         chan struct{}
	instance     string

	mu     sync.Mutex
	recent map[string]recentEvent // RecordEvent's aggregation
}

type recentEvent struct {
	name string
	at   time.Time
}

func (s *eventStore) init(opts Options) {
	s.ttl, s.maxCount, s.maxBytes = opts.EventTTL, opts.EventMaxCount, opts.EventMaxBytes
	if s.ttl <= 0 {
		s.ttl = DefaultEventTTL
	}
	if s.maxCount <= 0 {
		s.maxCount = DefaultEventMaxCount
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultEventMaxBytes
	}
	s.kick = make(chan struct{}, 1)
	s.recent = map[string]recentEvent{}
	s.instance, _ = os.Hostname()
}

// noteCreate counts a stored Event and wakes the sweeper beyond a bound.
func (s *eventStore) noteCreate(size int) {
	n, b := s.count.Add(1), s.bytes.Add(int64(size))
	if n > int64(s.maxCount) || b > s.maxBytes {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// runEventExpiry sweeps at start, every sweep interval, and when a create
// crosses a bound, until ctx ends.
func (e *Engine) runEventExpiry(ctx context.Context) {
	interval := min(max(e.events.ttl/10, time.Second), time.Minute)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := e.sweepEvents(ctx); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "Sweeping expired events", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.events.kick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(eventSweepGap):
			}
		}
	}
}

type storedEvent struct {
	kv       storage.KeyValue
	lastSeen time.Time
}

// sweepEvents deletes the expired events, then the oldest ones while the
// rest exceed a bound.
func (e *Engine) sweepEvents(ctx context.Context) error {
	res, err := e.store.List(ctx, eventsKeyPrefix, storage.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing events: %w", err)
	}
	k := e.kinds[kindKey("", "events")]
	now := e.now()
	var keep []storedEvent
	var expired []storage.KeyValue
	var bytes int64
	for _, kv := range res.KVs {
		o, err := k.decode(kv.Value, kv.ModRevision)
		if err != nil {
			continue // reported by reads; CheckStoredValue names it
		}
		last := eventLastWrite(o.(*corev1.Event))
		if now.Sub(last) >= e.events.ttl {
			expired = append(expired, kv)
			continue
		}
		keep = append(keep, storedEvent{kv: kv, lastSeen: last})
		bytes += int64(len(kv.Value))
	}
	e.deleteStoredEvents(ctx, expired)
	if len(keep) > e.events.maxCount || bytes > e.events.maxBytes {
		sort.Slice(keep, func(i, j int) bool { return keep[i].lastSeen.Before(keep[j].lastSeen) })
		wantCount := int(float64(e.events.maxCount) * eventLowWater)
		wantBytes := int64(float64(e.events.maxBytes) * eventLowWater)
		dropped := 0
		var oldest []storage.KeyValue
		for _, se := range keep {
			if len(keep)-dropped <= wantCount && bytes <= wantBytes {
				break
			}
			oldest = append(oldest, se.kv)
			dropped++
			bytes -= int64(len(se.kv.Value))
		}
		e.deleteStoredEvents(ctx, oldest)
		if dropped > 0 {
			e.log.InfoContext(ctx, "Deleted the oldest events beyond the event bounds", "deleted", dropped,
				"maxCount", e.events.maxCount, "maxBytes", e.events.maxBytes)
		}
		keep = keep[dropped:]
	}
	e.events.count.Store(int64(len(keep)))
	e.events.bytes.Store(bytes)
	return nil
}

// deleteStoredEvents deletes events as they were read (an event
// rewritten since is left for the next sweep), several at a time so that
// the deletes share the store's group commits.
func (e *Engine) deleteStoredEvents(ctx context.Context, kvs []storage.KeyValue) {
	parallel(ctx, len(kvs), func(i int) {
		kv := kvs[i]
		if _, _, err := e.store.Delete(ctx, kv.Key, kv.ModRevision); err != nil &&
			!errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) && ctx.Err() == nil {
			e.log.WarnContext(ctx, "Deleting an event", "key", kv.Key, "error", err)
		}
	})
}

// deleteParallelism is how many deletes the engine's own clean-ups
// (expired events, a namespace's content) have in flight.
const deleteParallelism = 32

// parallel runs fn(0..n-1) on up to deleteParallelism goroutines.
func parallel(ctx context.Context, n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, deleteParallelism) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// eventLastWrite is the latest time the event says it was seen: its
// creation, lastTimestamp, eventTime and series.lastObservedTime, which
// every recorder's update of a repeated event advances. (managedFields
// times would do too, but they come from the field manager's own clock.)
func eventLastWrite(ev *corev1.Event) time.Time {
	t := ev.CreationTimestamp.Time
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	later(ev.LastTimestamp.Time)
	later(ev.EventTime.Time)
	if ev.Series != nil {
		later(ev.Series.LastObservedTime.Time)
	}
	return t
}

// EventComponent is the source component of the events the server
// records itself.
const EventComponent = "leasehold"

// RecordEvent records an event about an object as the server itself
// (source component "leasehold"), the way client-go's EventRecorder does:
// a core/v1 Event in the object's namespace, folded into the previous one
// (count, lastTimestamp) when the same event repeats within ten minutes.
// eventType is corev1.EventTypeNormal or corev1.EventTypeWarning. A
// reference without a uid gets the object's: kubectl describe finds an
// object's events by uid. When the object does not exist, nothing is
// recorded and the error is ErrNoSuchObject.
func (e *Engine) RecordEvent(ctx context.Context, regarding corev1.ObjectReference, eventType, reason, message string) error {
	if regarding.UID == "" {
		if regarding.UID = e.uidOf(ctx, regarding); regarding.UID == "" {
			return ErrNoSuchObject
		}
	}
	k := e.kinds[kindKey("", "events")]
	s := Scope{Resource: k.res, Version: "v1", Namespace: regarding.Namespace, UserAgent: EventComponent}
	aggKey := string(regarding.UID) + "\x00" + regarding.Namespace + "\x00" + regarding.Name + "\x00" + eventType + "\x00" + reason + "\x00" + message
	now := e.now()
	ts := metav1.NewTime(now)

	e.events.mu.Lock()
	prev, seen := e.events.recent[aggKey]
	for key, r := range e.events.recent {
		if now.Sub(r.at) > eventAggregationWindow {
			delete(e.events.recent, key)
		}
	}
	e.events.mu.Unlock()

	if seen && now.Sub(prev.at) <= eventAggregationWindow {
		_, err := e.guaranteedUpdate(ctx, k, regarding.Namespace, prev.name, "", false, func(_ context.Context, live object, exists bool) (object, error) {
			if !exists {
				return nil, errEventGone
			}
			ev := live.DeepCopyObject().(*corev1.Event)
			ev.Count++
			ev.LastTimestamp = ts
			return ev, nil
		})
		if err == nil {
			e.rememberEvent(aggKey, prev.name, now)
			return nil
		}
		if !errors.Is(err, errEventGone) {
			return fmt.Errorf("recording event %s: %w", reason, err)
		}
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", regarding.Name, now.UnixNano()), Namespace: regarding.Namespace},
		InvolvedObject:      regarding,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: EventComponent, Host: e.events.instance},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: EventComponent,
		ReportingInstance:   e.events.instance,
	}
	out, err := e.create(ctx, s, ev, &metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("recording event %s: %w", reason, err)
	}
	e.rememberEvent(aggKey, out.(*corev1.Event).Name, now)
	return nil
}

// ErrNoSuchObject: RecordEvent's object does not exist (or is not one the
// engine serves).
var ErrNoSuchObject = errors.New("record event: no such object")

// errEventGone: the event to fold into expired or was deleted.
var errEventGone = errors.New("event gone")

func (e *Engine) rememberEvent(key, name string, at time.Time) {
	e.events.mu.Lock()
	e.events.recent[key] = recentEvent{name: name, at: at}
	e.events.mu.Unlock()
}

// uidOf reads the uid of a served object a reference names, "" when it
// cannot.
func (e *Engine) uidOf(ctx context.Context, ref corev1.ObjectReference) types.UID {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ""
	}
	for _, k := range e.kinds {
		if k.res.Group != gv.Group || k.res.Kind != ref.Kind || k.isEvent {
			continue
		}
		kv, err := e.store.Get(ctx, k.key(ref.Namespace, ref.Name))
		if err != nil {
			return ""
		}
		o, err := k.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return ""
		}
		return o.GetUID()
	}
	return ""
}
