package backend

import (
	"context"
	"errors"
	"log/slog"
)

// Serving is the context a server serves store under: ctx and, on a
// cluster member, only until its etcd member stops (removed from the
// cluster, or failed): answering from a member that is no longer one
// would be wrong. done, called once serving ended, releases the context
// and says whether the member's stop ended it.
func Serving(ctx context.Context, store Store, log *slog.Logger) (serveCtx context.Context, done func() error) {
	ms, ok := store.(*MemberStore)
	if !ok {
		return ctx, func() error { return nil }
	}
	stopped := ms.Member().Stopped()
	serveCtx, stopServing := context.WithCancel(ctx)
	go func() {
		select {
		case <-stopped:
			log.Error("The embedded etcd member stopped (removed from the cluster?); stopping the server")
			stopServing()
		case <-serveCtx.Done():
		}
	}()
	return serveCtx, func() error {
		stopServing()
		select {
		case <-stopped:
			return errors.New("the embedded etcd member stopped")
		default:
			return nil
		}
	}
}
