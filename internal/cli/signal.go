package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext is cancelled by the first SIGTERM or SIGINT. With
// exitOnSecond (the server), a second signal ends the process at once
// with exit code 1, as kube-apiserver does, for an operator who does not
// want to wait for the graceful drain. Other commands (leasehold run
// forwards signals to its child) handle repeated signals themselves.
func SignalContext(exitOnSecond bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		// The cause names the signal: a start it interrupts says so
		// (context.Cause), rather than a bare "context canceled".
		cancel(fmt.Errorf("received signal %s: %w", <-ch, context.Canceled))
		if !exitOnSecond {
			return
		}
		sig := <-ch
		fmt.Fprintf(os.Stderr, "leasehold: second signal (%s), exiting immediately\n", sig)
		os.Exit(1)
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}
