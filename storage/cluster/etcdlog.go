package cluster

import (
	"context"
	"log/slog"
	"strings"
)

// A new member's etcd logs "failed to update storage version ... missing
// term information" (an error) and "Failed to detect schema version" (a
// warning) in its first second, and nothing is wrong. etcd 3.6 writes the
// storage version into its backend once the cluster version is set, and
// reads first which version the backend has; a backend without one counts
// as 3.5 only if it holds the raft term, which etcd writes with the
// consistent index at each backend commit. A member commits its backend
// once a second (BackendBatchInterval, for flash wear), and a new
// cluster's version is set a few hundred milliseconds after its start, so
// the first attempt finds no term yet. etcd tries again every 4 s
// (monitorStorageVersion), when the commit has happened, and that attempt
// succeeds (TestNewMemberLogsNoError). The snapshot settings (sizing.go)
// play no part in it. etcdFirstCommitLog lowers exactly these two lines,
// with exactly that cause, to debug; any other failure to set the storage
// version stays an error.

// termNotCommitted is the cause etcd gives while its backend holds no
// term yet (etcd's schema.UnsafeDetectSchemaVersion).
const termNotCommitted = "missing term information"

// etcdFirstCommitLog is a slog handler passing everything to next, except
// the two lines above at debug.
type etcdFirstCommitLog struct{ next slog.Handler }

func (h etcdFirstCommitLog) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h etcdFirstCommitLog) Handle(ctx context.Context, r slog.Record) error {
	if (r.Message == "failed to update storage version" || r.Message == "Failed to detect schema version") && r.Level > slog.LevelDebug {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" && strings.Contains(a.Value.String(), termNotCommitted) {
				r.Level = slog.LevelDebug
				return false
			}
			return true
		})
		if r.Level == slog.LevelDebug && !h.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
	}
	return h.next.Handle(ctx, r)
}

func (h etcdFirstCommitLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return etcdFirstCommitLog{h.next.WithAttrs(attrs)}
}

func (h etcdFirstCommitLog) WithGroup(name string) slog.Handler {
	return etcdFirstCommitLog{h.next.WithGroup(name)}
}
