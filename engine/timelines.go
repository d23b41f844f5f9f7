package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/storage"
)

// Lease timelines: the web UI keeps who held each Lease over the last day
// and stores it here so that a restart does not wipe it. Like decision
// histories they are not a Kubernetes resource: opaque documents under
// TimelineKeyPrefix, which no Kubernetes list or watch reads. The engine
// does not interpret them; it only bounds their size.

// TimelineKeyPrefix is the storage key prefix of lease timelines; the
// timeline of Lease <ns>/<name> is stored at TimelineKeyPrefix+"<ns>/<name>".
const TimelineKeyPrefix = "/leasehold/timelines/"

// MaxTimelineBytes bounds one stored timeline.
const MaxTimelineBytes = 64 << 10

func timelineKey(ns, name string) string { return TimelineKeyPrefix + ns + "/" + name }

// SaveTimeline stores the timeline document of Lease ns/name, replacing
// any previous one (the caller holds the whole timeline: last write wins).
func (e *Engine) SaveTimeline(ctx context.Context, ns, name string, doc []byte) error {
	if ns == "" || name == "" || strings.Contains(ns, "/") || strings.Contains(name, "/") {
		return fmt.Errorf("save timeline: invalid lease %q/%q", ns, name)
	}
	if len(doc) > MaxTimelineBytes {
		return fmt.Errorf("save timeline of %s/%s: %d bytes, more than %d", ns, name, len(doc), MaxTimelineBytes)
	}
	key := timelineKey(ns, name)
	for range maxDecisionRetries {
		kv, err := e.store.Get(ctx, key)
		switch {
		case err == nil:
			_, err = e.store.Update(ctx, key, doc, kv.ModRevision)
		case errors.Is(err, storage.ErrNotFound):
			_, err = e.store.Create(ctx, key, doc)
		}
		if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrKeyExists) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("save timeline of %s/%s: %w", ns, name, err)
		}
		return nil
	}
	return fmt.Errorf("save timeline of %s/%s: %w", ns, name, storage.ErrConflict)
}

// Timelines returns every stored timeline document by lease.
func (e *Engine) Timelines(ctx context.Context) (map[types.NamespacedName][]byte, error) {
	res, err := e.store.List(ctx, TimelineKeyPrefix, storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list timelines: %w", err)
	}
	out := make(map[types.NamespacedName][]byte, len(res.KVs))
	for _, kv := range res.KVs {
		if ns, name, ok := strings.Cut(strings.TrimPrefix(kv.Key, TimelineKeyPrefix), "/"); ok {
			out[types.NamespacedName{Namespace: ns, Name: name}] = kv.Value
		}
	}
	return out, nil
}

// DeleteTimeline removes the timeline of Lease ns/name; a missing one is
// not an error.
func (e *Engine) DeleteTimeline(ctx context.Context, ns, name string) error {
	_, _, err := e.store.Delete(ctx, timelineKey(ns, name), 0)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("delete timeline of %s/%s: %w", ns, name, err)
	}
	return nil
}
