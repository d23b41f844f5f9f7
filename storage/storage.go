package storage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"
)

// Sentinel errors. Backends wrap them with %w; callers test with errors.Is.
var (
	// ErrNotFound reports that a key does not exist (at the requested revision).
	ErrNotFound = errors.New("storage: key not found")
	// ErrKeyExists reports that Create found the key already present.
	ErrKeyExists = errors.New("storage: key already exists")
	// ErrConflict reports that a compare-and-swap failed because the key's
	// modification revision differed from the expected one.
	ErrConflict = errors.New("storage: modification revision mismatch")
	// ErrCompacted reports that a requested revision is older than the
	// retained history.
	ErrCompacted = errors.New("storage: required revision has been compacted")
	// ErrFutureRevision reports that a requested revision has not been
	// written yet.
	ErrFutureRevision = errors.New("storage: required revision is a future revision")
	// ErrValueTooLarge reports a value above the backend's size limit.
	ErrValueTooLarge = errors.New("storage: value too large")
	// ErrQuotaExceeded reports a write refused because the data it adds
	// would take the store past its quota (etcd's "database space
	// exceeded"); writes that do not grow the data still succeed.
	ErrQuotaExceeded = errors.New("storage: database space exceeded")
	// ErrClosed reports an operation on a closed store.
	ErrClosed = errors.New("storage: closed")
	// ErrTimeout reports a request that did not complete in time, or a
	// write that was sent and never answered: a write's outcome is then
	// unknown (it may have been applied). The API answers it as
	// kube-apiserver answers a request that ran out of time: 504 Timeout.
	ErrTimeout = errors.New("storage: request did not complete in time; a write's outcome is unknown")
)

// KeyValue is one stored key at one revision.
type KeyValue struct {
	Key string
	// Value is owned by the store and must not be modified by callers.
	Value []byte
	// CreateRevision is the revision at which the key was (last) created.
	CreateRevision int64
	// ModRevision is the revision of the key's last modification.
	ModRevision int64
}

// EventType says whether an event stored or removed a key.
type EventType uint8

const (
	// EventPut is a create or an update.
	EventPut EventType = iota + 1
	// EventDelete is a deletion.
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "PUT"
	case EventDelete:
		return "DELETE"
	}
	return "UNKNOWN"
}

// Event is one change to one key.
type Event struct {
	Type EventType
	// KV is the key after the change. For EventDelete, Value is nil and
	// ModRevision is the revision of the deletion.
	KV KeyValue
	// PrevKV is the key before the change; nil for a create.
	PrevKV *KeyValue
}

// Revision is the revision at which the event happened.
func (e Event) Revision() int64 { return e.KV.ModRevision }

// ListOptions narrow a List.
type ListOptions struct {
	// Revision selects the snapshot to read; 0 means the latest. A revision
	// older than the compacted revision fails with ErrCompacted, a future one
	// with ErrFutureRevision.
	Revision int64
	// StartKey, when set, is the first key (inclusive) to return; it must
	// carry the listed prefix.
	StartKey string
	// Limit caps the number of returned keys; 0 means no limit.
	Limit int64
}

// ListResult is one page of a List.
type ListResult struct {
	// KVs are in ascending byte order of their keys.
	KVs []KeyValue
	// Revision is the snapshot revision the page was read at.
	Revision int64
	// More reports that keys beyond the returned page exist in the range.
	More bool
	// Count is the number of keys in [StartKey, end of prefix) at Revision,
	// including the returned ones.
	Count int64
}

// WatchResponse is one batch of events, or a progress notification, or the
// terminal error of a watch.
type WatchResponse struct {
	// Events happened in revision order; all share a commit.
	Events []Event
	// Revision is the store revision up to which every matching event has
	// been delivered on this watch. For a progress notification Events is
	// empty.
	Revision int64
	// Err, when set, ends the watch: the channel is closed after it. A
	// watcher that cannot keep up is ended with ErrCompacted so that its
	// client relists.
	Err error
}

// Watcher is an open watch.
type Watcher interface {
	// ResultChan delivers responses until the watch ends; it is closed then.
	ResultChan() <-chan WatchResponse
	// RequestProgress asks for a progress notification: a response without
	// events whose Revision is the store's current revision, delivered after
	// every event already queued for this watcher.
	RequestProgress()
	// Stop ends the watch and releases its resources. It is safe to call
	// more than once and concurrently with receiving.
	Stop()
}

// Interface is the storage contract. Implementations are safe for
// concurrent use. Every write is durable when it returns without error.
type Interface interface {
	// Get returns the latest value of key, or ErrNotFound.
	Get(ctx context.Context, key string) (KeyValue, error)
	// List returns the keys under prefix at a consistent snapshot.
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	// Create stores a new key; ErrKeyExists if it is present.
	Create(ctx context.Context, key string, value []byte) (KeyValue, error)
	// Update replaces key's value if its ModRevision equals
	// expectedModRevision; ErrConflict otherwise, ErrNotFound if the key is
	// missing.
	Update(ctx context.Context, key string, value []byte, expectedModRevision int64) (KeyValue, error)
	// Delete removes key if its ModRevision equals expectedModRevision (0
	// matches any). It returns the removed value and the deletion revision.
	Delete(ctx context.Context, key string, expectedModRevision int64) (prev KeyValue, revision int64, err error)
	// Watch delivers every change under prefix with a revision greater than
	// sinceRevision. sinceRevision 0 means "from the current revision".
	// ErrCompacted if sinceRevision is older than the retained history.
	Watch(ctx context.Context, prefix string, sinceRevision int64) (Watcher, error)
	// CurrentRevision is the revision of the last committed write (or of
	// the empty store).
	CurrentRevision(ctx context.Context) (int64, error)
	// CompactRevision is the oldest revision from which Watch and List can
	// still start: history at or below it is gone.
	CompactRevision(ctx context.Context) (int64, error)
	// Compact discards history up to and including revision.
	Compact(ctx context.Context, revision int64) error
	// Close flushes and releases the store. Pending and later calls fail
	// with ErrClosed; open watches end with ErrClosed.
	Close() error
}

// Stats describe a store for operators. Backends implement StatsReporter.
type Stats struct {
	Backend         string `json:"backend"`
	Revision        int64  `json:"revision"`
	CompactRevision int64  `json:"compactRevision"`
	Keys            int64  `json:"keys"`
	// SizeBytes is the on-disk size, 0 when not applicable.
	SizeBytes int64 `json:"sizeBytes"`
	// DataBytes is the bytes of keys and values the quota counts, and
	// QuotaBytes that quota; 0 when the backend keeps no such count.
	DataBytes  int64 `json:"dataBytes,omitempty"`
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
}

// StaleReader is implemented by backends whose Get pays for being
// linearizable (etcd: a quorum round through the raft leader) and that
// have a cheaper read of the member's own applied state, which may lag
// writes acknowledged elsewhere. Its only safe use is the read that a
// compare-and-swap on the revision read then checks (engine's update
// loop): never an answer to a client.
type StaleReader interface {
	// GetStale returns key as the backend last applied it, or
	// ErrNotFound; it may miss writes acknowledged elsewhere.
	GetStale(ctx context.Context, key string) (KeyValue, error)
}

// StatsReporter is implemented by backends that can describe themselves.
type StatsReporter interface {
	Stats(ctx context.Context) (Stats, error)
}

// Backuper is an optional capability: a backend whose whole database can
// be copied, consistently, while it keeps serving (bbolt's one file). The
// server offers such a copy at GET /leasehold/v1/backup; a backend
// without it (etcd, which has its own snapshots) offers none.
type Backuper interface {
	// Backup writes a consistent copy of the database to w and returns
	// the number of bytes written.
	Backup(ctx context.Context, w io.Writer) (int64, error)
}

// BackupBarrier is an optional capability of a Backuper whose copy could
// miss writes acknowledged elsewhere: a cluster member may lag its quorum
// or be cut off from it. The server calls BackupBarrier before it starts
// a copy and refuses the backup when it fails; the revision it returns is
// at least that of every write acknowledged before the call, and the
// copy that follows must reach it (the server sends it to the client,
// which checks).
type BackupBarrier interface {
	BackupBarrier(ctx context.Context) (int64, error)
}

// MemoryReleaser is an optional capability: a backend that can give
// memory back while the server is idle (bbolt drops its mapped pages from
// the resident set). The server calls ReleaseMemory with its own idle-time
// release.
type MemoryReleaser interface {
	ReleaseMemory()
}

// Elector is implemented by backends that several leasehold replicas can
// share (etcd), so that work which must not run twice at once (the
// election controller, the candidate garbage collector) runs on one replica
// at a time. A backend private to one process (bbolt) grants leadership at
// once.
type Elector interface {
	// Campaign blocks until this process leads the election called name,
	// or fails with ctx's error when ctx ends first. Leadership lasts until
	// the returned channel closes: when ctx ends (the process resigns, so
	// another replica takes over at once), when the store closes, or when
	// the backend can no longer vouch for it (an etcd lease that could not
	// be kept alive). Work done as leader must stop when lost closes.
	Campaign(ctx context.Context, name string) (lost <-chan struct{}, err error)
}

// Lead runs fn each time this process becomes the leader of name on e, with
// a context that ends when leadership is lost, and campaigns again after fn
// returns, until ctx ends. A failed campaign (the backend unreachable) is
// logged and retried after retry.
func Lead(ctx context.Context, e Elector, name string, retry time.Duration, log *slog.Logger, fn func(ctx context.Context)) {
	for ctx.Err() == nil {
		term, resign := context.WithCancel(ctx)
		lost, err := e.Campaign(term, name)
		if err != nil {
			resign()
			if ctx.Err() == nil {
				log.WarnContext(ctx, "Campaign failed; retrying", "election", name, "retry", retry, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(retry):
				}
			}
			continue
		}
		go func() {
			select {
			case <-lost:
				resign()
			case <-term.Done():
			}
		}()
		log.InfoContext(ctx, "Leading", "election", name)
		fn(term)
		resign()
		<-lost // the backend has released leadership before the next campaign
		if ctx.Err() == nil {
			log.InfoContext(ctx, "Lost leadership; campaigning again", "election", name)
		}
	}
}

// PrefixEnd returns the smallest key greater than every key with prefix
// (etcd's "range end"), or "" when no such key exists.
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
