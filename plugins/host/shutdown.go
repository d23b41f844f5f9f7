package host

import (
	"context"
	"time"
)

// LoaderShutdownWait bounds how long CloseAfterRun waits for the plugins
// directory's loader (Run) to notice it is over.
const LoaderShutdownWait = 2 * time.Second

// CloseAfterRun releases the strategy modules' runtime once Run, which
// closes runDone when it returns, has stopped (runDone nil: it never
// started). A loader still compiling a module is left to the process's
// exit, since a compile cannot be interrupted and shutdown must not wait
// for it (nothing it writes is half-written: the compilation cache
// renames its files into place).
func (h *Host) CloseAfterRun(ctx context.Context, runDone <-chan struct{}) {
	if runDone == nil {
		_ = h.Close(context.WithoutCancel(ctx))
		return
	}
	select {
	case <-runDone:
		_ = h.Close(context.WithoutCancel(ctx))
	case <-time.After(LoaderShutdownWait):
		h.log.Warn("Stopping while a strategy module compiles; not waiting for it", "waited", LoaderShutdownWait.String())
	}
}
