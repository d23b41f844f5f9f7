package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/web/client/lease"
)

// RemoveWaiting removes the member called name, and while the member
// answers that it cannot yet but will (503 with Retry-After: its cluster
// is electing a leader right after the leader's member died, or etcd waits
// until it has been connected to a quorum for a while), it tries again
// until ctx ends, printing what it waits for to progress: at the first
// wait, when the reason changes, and every 5 seconds. Any other answer,
// a missing quorum included, ends it at once. A member gone after a wait
// was removed by an earlier attempt, applied after its answer.
func RemoveWaiting(ctx context.Context, c *lease.Client, name string, progress io.Writer) error {
	start := time.Now()
	bound := "no bound"
	if dl, ok := ctx.Deadline(); ok {
		bound = dl.Sub(start).Round(time.Second).String()
	}
	var said string
	var saidAt time.Time
	var last error // the last "try again"
	for waited := false; ; waited = true {
		err := Remove(ctx, c, name)
		if last != nil && ctx.Err() != nil {
			// The bound passed during the attempt: the reason waited for
			// says more than the context's error.
			return fmt.Errorf("%w (gave up after %s)", last, time.Since(start).Round(100*time.Millisecond))
		}
		if waited && lease.IsNotFound(err) {
			// An attempt the member answered "try again" may still have
			// been applied, once the new leader committed it.
			fmt.Fprintf(progress, "the member is gone: an earlier attempt removed it\n")
			return nil
		}
		retry, ok := tryAgain(err)
		if !ok {
			return err
		}
		last = err
		if msg := err.Error(); msg != said || time.Since(saidAt) >= 5*time.Second {
			fmt.Fprintf(progress, "waiting (%s of %s): %s\n", time.Since(start).Round(100*time.Millisecond), bound, msg)
			said, saidAt = msg, time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up after %s)", err, time.Since(start).Round(100*time.Millisecond))
		case <-time.After(retry):
		}
	}
}

// tryAgain reports whether err is a 503 with Retry-After, and after how long.
func tryAgain(err error) (time.Duration, bool) {
	var se *lease.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || se.Status.Details == nil || se.Status.Details.RetryAfterSeconds <= 0 {
		return 0, false
	}
	return time.Duration(se.Status.Details.RetryAfterSeconds) * time.Second, true
}
