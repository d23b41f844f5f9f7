package history

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// Lease timelines: the web UI keeps who held each Lease over the last day
// and stores it here so that a restart does not wipe it. They are opaque
// documents to this package: it only bounds their size.

// TimelineKeyPrefix is the storage key prefix of lease timelines; the
// timeline of Lease <ns>/<name> is stored at TimelineKeyPrefix+"<ns>/<name>".
const TimelineKeyPrefix = "/leasehold/timelines/"

// MaxTimelineBytes bounds one stored timeline.
const MaxTimelineBytes = 64 << 10

func timelineKey(ns, name string) string { return TimelineKeyPrefix + ns + "/" + name }

// SaveTimeline stores the timeline document of Lease ns/name, replacing
// any previous one (the caller holds the whole timeline: last write wins).
func (s *Store) SaveTimeline(ctx context.Context, ns, name string, doc []byte) error {
	if err := checkLease(ns, name); err != nil {
		return fmt.Errorf("save timeline: %w", err)
	}
	if len(doc) > MaxTimelineBytes {
		return fmt.Errorf("save timeline of %s/%s: %d bytes, more than %d", ns, name, len(doc), MaxTimelineBytes)
	}
	if err := s.rewrite(ctx, timelineKey(ns, name), func([]byte) ([]byte, error) { return doc, nil }); err != nil {
		return fmt.Errorf("save timeline of %s/%s: %w", ns, name, err)
	}
	return nil
}

// Timelines returns every stored timeline document by lease.
func (s *Store) Timelines(ctx context.Context) (map[types.NamespacedName][]byte, error) {
	out := map[types.NamespacedName][]byte{}
	err := s.leases(ctx, TimelineKeyPrefix, func(ns, name string, doc []byte) {
		out[types.NamespacedName{Namespace: ns, Name: name}] = doc
	})
	if err != nil {
		return nil, fmt.Errorf("list timelines: %w", err)
	}
	return out, nil
}

// DeleteTimeline removes the timeline of Lease ns/name; a missing one is
// not an error.
func (s *Store) DeleteTimeline(ctx context.Context, ns, name string) error {
	if err := s.remove(ctx, timelineKey(ns, name)); err != nil {
		return fmt.Errorf("delete timeline of %s/%s: %w", ns, name, err)
	}
	return nil
}
