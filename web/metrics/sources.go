package metrics

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// Sources supply the state read at scrape time. Every field is optional:
// a nil source's series are left out.
type Sources struct {
	// Leases lists the coordination.k8s.io/v1 Leases for the per-lease
	// series.
	Leases func(ctx context.Context) ([]Lease, error)
	// Storage describes the store.
	Storage func(ctx context.Context) (engine.StorageStats, error)
	// Election returns the election controller's counters; ok is false
	// while this replica runs no controller.
	Election func() (e election.Stats, ok bool)
	// Plugins lists the strategy modules with their call statistics.
	Plugins func() []Plugin
	// Undecodable reports the stored values the engine cannot decode.
	Undecodable func() engine.UndecodableStats
	// Watches reports the watch queues.
	Watches func() engine.WatchStats
	// RaftLeader reports whether this cluster member knows a raft leader
	// (cluster members only).
	RaftLeader func() bool
	// LeaderSlow reports whether this cluster member finds the raft
	// leader slow while a healthier member answers, and its last quorum
	// round trip (nil on a single device).
	LeaderSlow func() (bool, time.Duration)
	// Snapshots reports the scheduled snapshots (nil: none scheduled).
	Snapshots func(ctx context.Context) clusterapi.Snapshots
	// Certificates lists the certificates the server presents, for
	// their expiry.
	Certificates func() []Certificate
}

// Certificate is one certificate the server presents.
type Certificate struct {
	// Use says what it is for ("serving"); Subject is its subject's
	// common name, Serial its serial number in hexadecimal.
	Use, Subject, Serial string
	NotAfter             time.Time
}

// Lease is what the per-lease series report of one Lease.
type Lease struct {
	Namespace, Name, Holder string
	// RenewTime is zero when the lease was never renewed.
	RenewTime            time.Time
	LeaseDurationSeconds int32
	Transitions          int32
}

// Plugin is one strategy module's call statistics.
type Plugin struct {
	Name       string
	Builtin    bool
	Calls      uint64
	Errors     uint64
	LatencyP50 time.Duration
	LatencyP99 time.Duration
	LatencySum time.Duration
}
