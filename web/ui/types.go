package ui

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/status"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// Sources supply the facts the Kubernetes API does not carry. Every field
// is optional: a nil source makes its view say "no data" instead of
// failing, so the UI works before election or plugins are wired.
type Sources struct {
	// Storage describes the store (revision, size); main passes
	// storage.Stats through engine.StorageStats, as the store reports it.
	Storage func(ctx context.Context) (engine.StorageStats, error)
	// StoragePath is the database file shown on the system view.
	StoragePath string
	// Modules lists the loaded strategy modules: (*host.Host).Modules
	// fits as is.
	Modules func() []status.Module
	// Decisions is the election's decision history: the decisions
	// endpoint reads it and operator actions append to it (without it
	// they answer 501). engine/history's *Store fits.
	Decisions DecisionHistory
	// Timelines keeps the lease timelines across restarts; without it
	// they are kept in memory only. engine/history's *Store fits.
	Timelines TimelineStore
	// HandOverPreview asks the election controller what it would do if
	// the lease's spec.preferredHolder named candidate now, without
	// writing anything (election.Controller.PreviewHandOver); nil when
	// no controller is wired (the preview endpoint then answers 501). An
	// error wrapping election.ErrPreviewUnavailable is a 503.
	HandOverPreview func(ctx context.Context, ns, name, candidate string) (election.HandOverPreview, error)
	// Cluster reports the embedded etcd cluster this server is a member
	// of, JSON-encoded as it is (GET /leasehold/v1/cluster's body); nil on
	// a single device.
	Cluster func(ctx context.Context) (any, error)
	// Snapshots reports the scheduled snapshots (the system page's
	// Snapshots card); nil when none are scheduled.
	Snapshots func(ctx context.Context) clusterapi.Snapshots
}

// DecisionHistory is what the UI needs of the decision history.
type DecisionHistory interface {
	// Decisions returns the history of one Lease, oldest first.
	Decisions(ctx context.Context, ns, name string) ([]history.DecisionRecord, error)
	// RecordDecision appends rec, keeping the newest keep records (0: the
	// history's default).
	RecordDecision(ctx context.Context, ns, name string, rec history.DecisionRecord, keep int) error
}

// TimelineStore keeps the lease timelines (TimelineDoc, as JSON) across
// restarts.
type TimelineStore interface {
	SaveTimeline(ctx context.Context, ns, name string, doc []byte) error
	Timelines(ctx context.Context) (map[types.NamespacedName][]byte, error)
	DeleteTimeline(ctx context.Context, ns, name string) error
}

// Check is one readiness check as /readyz runs it.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
}

// SystemStatus is the body of /ui/api/v1/system.
type SystemStatus struct {
	// ServerTime lets the page correct its countdowns for clock skew
	// with millisecond precision (the Date header has whole seconds).
	ServerTime time.Time    `json:"serverTime"`
	StartTime  time.Time    `json:"startTime"`
	Version    version.Info `json:"version"`
	// Storage is nil when no source is wired; StorageError says why it
	// is missing when the source failed.
	Storage      *engine.StorageStats `json:"storage"`
	StoragePath  string               `json:"storagePath,omitempty"`
	StorageError string               `json:"storageError,omitempty"`
	// Cluster is the embedded etcd cluster's status, absent on a single
	// device; ClusterError says why it is missing when the source failed.
	Cluster      any    `json:"cluster,omitempty"`
	ClusterError string `json:"clusterError,omitempty"`
	// Snapshots is the scheduled snapshots, absent when none are
	// scheduled.
	Snapshots *clusterapi.Snapshots `json:"snapshots,omitempty"`
	// Modules is nil (JSON null, "no data") when no source is wired.
	Modules    []status.Module `json:"modules"`
	Checks     []Check         `json:"checks"`
	Ready      bool            `json:"ready"`
	Goroutines int             `json:"goroutines"`
	HeapBytes  uint64          `json:"heapBytes"`
}

// Decisions is the body of the decisions endpoint. Available is false
// when no decision source is wired, so the page can tell "no election
// data" from "no decisions yet".
type Decisions struct {
	Available bool                     `json:"available"`
	Items     []history.DecisionRecord `json:"items"`
	// Holders is the lease's recent holder changes as the server saw
	// them, for plain and coordinated leases alike; nil (JSON null) when
	// the server does not watch leases (yet).
	Holders *HolderHistory `json:"holders"`
	// Timeline is who held the lease over the last day, with expiries
	// and gaps; nil (JSON null) when the server does not watch leases.
	Timeline *TimelineView `json:"timeline"`
}
