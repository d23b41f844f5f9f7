package sdnotify

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Follow reports a server's life to a Type=notify unit: READY once ready
// passes (polled every 50 ms), STOPPING when drain ends, and watchdog
// pings while alive passes. Its goroutines are added to background and end
// with ctx. Outside systemd ($NOTIFY_SOCKET unset) it does nothing.
func Follow(ctx, drain context.Context, background *sync.WaitGroup, ready, alive func() error, status string, logger *slog.Logger) {
	n, err := FromEnv()
	if err != nil {
		logger.Warn("Ignoring the systemd watchdog setting", "err", err)
	}
	if !n.Active() {
		return
	}
	background.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for ready() != nil {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		if err := n.Ready(status); err != nil {
			logger.Warn("Notifying systemd failed", "err", err)
		}
		go n.Watchdog(ctx, alive)
		select {
		case <-drain.Done():
			_ = n.Stopping()
		case <-ctx.Done():
		}
	})
}
