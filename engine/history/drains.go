package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/storage"
)

// Drains: an operator takes an identity (a device, a process) out of
// service, as `kubectl cordon` takes a node. The record is kept per
// (namespace, identity), not on a LeaseCandidate, so that it survives the
// candidate's garbage collection and re-creation, and covers plain
// `leasehold run` processes, which have no candidate. The election
// controller watches the records and never grants a drained identity a
// lease; `leasehold run` asks for its own.

// DrainKeyPrefix is the storage key prefix of drain records; the record of
// identity ID in namespace NS is stored at DrainKeyPrefix+"NS/"+the
// identity path-escaped (an identity may hold any character).
const DrainKeyPrefix = "/leasehold/drains/"

// MaxIdentityBytes bounds a drained identity, as a Lease's holderIdentity
// has no bound of its own: the record must stay small.
const MaxIdentityBytes = 253

// DrainRecord says that an identity is drained, and who drained it when.
// Every field is the server's: By is the name the request was
// authenticated as, never something the client asserted.
type DrainRecord struct {
	Namespace string `json:"namespace"`
	Identity  string `json:"identity"`
	// By is who drained it: the authenticated user
	// (system:anonymous@ADDR without authentication).
	By string `json:"by"`
	// Time is when the server recorded the drain.
	Time time.Time `json:"time"`
	// Via is how: "leasehold drain", "the web UI", "annotation on
	// LeaseCandidate NAME".
	Via string `json:"via,omitempty"`
	// Forced is set when the drain was forced past the refusal to drain
	// the only live candidate of a lease.
	Forced bool `json:"forced,omitempty"`
}

// CheckIdentity refuses a namespace or identity a drain key could not
// hold.
func CheckIdentity(ns, identity string) error {
	switch {
	case ns == "" || strings.Contains(ns, "/"):
		return fmt.Errorf("invalid namespace %q", ns)
	case identity == "":
		return errors.New("the identity is empty")
	case len(identity) > MaxIdentityBytes:
		return fmt.Errorf("the identity is %d bytes long, more than %d", len(identity), MaxIdentityBytes)
	}
	return nil
}

func drainKey(ns, identity string) string {
	return DrainKeyPrefix + ns + "/" + url.PathEscape(identity)
}

// parseDrainKey is drainKey's inverse.
func parseDrainKey(key string) (ns, identity string, ok bool) {
	ns, esc, ok := strings.Cut(strings.TrimPrefix(key, DrainKeyPrefix), "/")
	if !ok {
		return "", "", false
	}
	identity, err := url.PathUnescape(esc)
	return ns, identity, err == nil && ns != "" && identity != ""
}

// Drain records rec (Namespace, Identity, By, Time, Via, Forced). An
// identity already drained keeps its first record, which is returned with
// created false: draining twice changes nothing.
func (s *Store) Drain(ctx context.Context, rec DrainRecord) (DrainRecord, bool, error) {
	if err := CheckIdentity(rec.Namespace, rec.Identity); err != nil {
		return DrainRecord{}, false, fmt.Errorf("drain: %w", err)
	}
	val, err := json.Marshal(&rec)
	if err != nil {
		return DrainRecord{}, false, fmt.Errorf("drain %s/%s: %w", rec.Namespace, rec.Identity, err)
	}
	key := drainKey(rec.Namespace, rec.Identity)
	for range maxWriteRetries {
		if _, err = s.kv.Create(ctx, key, val); err == nil {
			return rec, true, nil
		}
		if !errors.Is(err, storage.ErrKeyExists) {
			return DrainRecord{}, false, fmt.Errorf("drain %s/%s: %w", rec.Namespace, rec.Identity, err)
		}
		old, found, gerr := s.DrainOf(ctx, rec.Namespace, rec.Identity)
		if gerr != nil {
			return DrainRecord{}, false, gerr
		}
		if found {
			return old, false, nil
		}
		// Undrained between the two calls: try again.
	}
	return DrainRecord{}, false, fmt.Errorf("drain %s/%s: %w", rec.Namespace, rec.Identity, storage.ErrConflict)
}

// Undrain removes the drain of ns/identity and returns the record it
// removed; found is false when the identity was not drained.
func (s *Store) Undrain(ctx context.Context, ns, identity string) (rec DrainRecord, found bool, err error) {
	if err := CheckIdentity(ns, identity); err != nil {
		return DrainRecord{}, false, fmt.Errorf("undrain: %w", err)
	}
	prev, _, err := s.kv.Delete(ctx, drainKey(ns, identity), 0)
	if errors.Is(err, storage.ErrNotFound) {
		return DrainRecord{}, false, nil
	}
	if err != nil {
		return DrainRecord{}, false, fmt.Errorf("undrain %s/%s: %w", ns, identity, err)
	}
	rec, _ = decodeDrain(prev.Key, prev.Value)
	return rec, true, nil
}

// DrainOf returns the drain record of ns/identity; found is false when the
// identity is not drained.
func (s *Store) DrainOf(ctx context.Context, ns, identity string) (rec DrainRecord, found bool, err error) {
	if err := CheckIdentity(ns, identity); err != nil {
		return DrainRecord{}, false, fmt.Errorf("read drain: %w", err)
	}
	kv, err := s.kv.Get(ctx, drainKey(ns, identity))
	if errors.Is(err, storage.ErrNotFound) {
		return DrainRecord{}, false, nil
	}
	if err != nil {
		return DrainRecord{}, false, fmt.Errorf("read drain of %s/%s: %w", ns, identity, err)
	}
	rec, _ = decodeDrain(kv.Key, kv.Value)
	return rec, true, nil
}

// Drains lists the drain records of namespace ns (every namespace when ns
// is empty), sorted by namespace and identity's key.
func (s *Store) Drains(ctx context.Context, ns string) ([]DrainRecord, error) {
	recs, _, err := s.listDrains(ctx, ns)
	return recs, err
}

func (s *Store) listDrains(ctx context.Context, ns string) ([]DrainRecord, int64, error) {
	prefix := DrainKeyPrefix
	if ns != "" {
		prefix += ns + "/"
	}
	res, err := s.kv.List(ctx, prefix, storage.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("list drains: %w", err)
	}
	out := make([]DrainRecord, 0, len(res.KVs))
	for _, kv := range res.KVs {
		if rec, ok := decodeDrain(kv.Key, kv.Value); ok {
			out = append(out, rec)
		}
	}
	return out, res.Revision, nil
}

// decodeDrain reads a stored record; the key is the authority on what is
// drained, so an undecodable value still drains its identity (with no
// author), and ok is false only for a key that names none.
func decodeDrain(key string, val []byte) (DrainRecord, bool) {
	ns, identity, ok := parseDrainKey(key)
	if !ok {
		return DrainRecord{}, false
	}
	var rec DrainRecord
	_ = json.Unmarshal(val, &rec)
	rec.Namespace, rec.Identity = ns, identity
	return rec, true
}

// drainWatchRetry is how long WatchDrains waits after a failed list or
// watch before it lists again.
const drainWatchRetry = time.Second

// WatchDrains keeps a caller's view of every drain record current until
// ctx ends: replace gets the whole set after each (re)list, apply each
// later change (deleted: the identity was undrained). A watch that ends
// (compaction, a store hiccup) is followed by a fresh list.
func (s *Store) WatchDrains(ctx context.Context, replace func([]DrainRecord), apply func(rec DrainRecord, deleted bool)) {
	for ctx.Err() == nil {
		if err := s.watchDrainsOnce(ctx, replace, apply); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "Watching drain records failed; listing again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(drainWatchRetry):
			}
		}
	}
}

func (s *Store) watchDrainsOnce(ctx context.Context, replace func([]DrainRecord), apply func(DrainRecord, bool)) error {
	recs, rev, err := s.listDrains(ctx, "")
	if err != nil {
		return err
	}
	replace(recs)
	w, err := s.kv.Watch(ctx, DrainKeyPrefix, rev)
	if err != nil {
		return fmt.Errorf("watch drains: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case resp, ok := <-w.ResultChan():
			if !ok {
				return errors.New("watch drains: the watch ended")
			}
			if resp.Err != nil {
				return fmt.Errorf("watch drains: %w", resp.Err)
			}
			for _, ev := range resp.Events {
				rec, ok := decodeDrain(ev.KV.Key, ev.KV.Value)
				if ok {
					apply(rec, ev.Type == storage.EventDelete)
				}
			}
		}
	}
}

// DrainSet is an in-memory copy of every drain record, kept current by a
// watch (Run): for lookups on hot paths, such as the rows of a printed
// LeaseCandidate list.
type DrainSet struct {
	s  *Store
	mu sync.RWMutex
	// byNS maps namespace and identity to the record.
	byNS map[string]map[string]DrainRecord
}

// NewDrainSet returns an empty set over s; Run fills it.
func (s *Store) NewDrainSet() *DrainSet {
	return &DrainSet{s: s, byNS: map[string]map[string]DrainRecord{}}
}

// Run keeps the set current until ctx ends.
func (d *DrainSet) Run(ctx context.Context) {
	d.s.WatchDrains(ctx, func(recs []DrainRecord) {
		byNS := map[string]map[string]DrainRecord{}
		for _, r := range recs {
			if byNS[r.Namespace] == nil {
				byNS[r.Namespace] = map[string]DrainRecord{}
			}
			byNS[r.Namespace][r.Identity] = r
		}
		d.mu.Lock()
		d.byNS = byNS
		d.mu.Unlock()
	}, func(r DrainRecord, deleted bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if deleted {
			delete(d.byNS[r.Namespace], r.Identity)
			return
		}
		if d.byNS[r.Namespace] == nil {
			d.byNS[r.Namespace] = map[string]DrainRecord{}
		}
		d.byNS[r.Namespace][r.Identity] = r
	})
}

// Drained reports whether ns/identity is drained, and by whom.
func (d *DrainSet) Drained(ns, identity string) (by string, drained bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	r, ok := d.byNS[ns][identity]
	return r.By, ok
}
