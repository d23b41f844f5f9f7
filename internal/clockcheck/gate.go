package clockcheck

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// Gate is what a server knows of its wall clock before it starts: the
// floor from its build and the certificates it holds, and whether it
// waits for the clock to pass it.
type Gate struct {
	Floor Floor
	// Waits is set for a server that speaks TLS or runs on a cluster's
	// TLS, where a clock before the floor fails handshakes or mints
	// certificates valid from 1970. A plain single device only warns:
	// its leases are judged on the monotonic clock, and nothing it
	// serves checks time.
	Waits bool
}

// NewGate is the gate of a server holding the certificates of files (the
// floor is the latest of this build's and theirs); readBuildInfo is
// debug.ReadBuildInfo outside tests.
func NewGate(waits bool, readBuildInfo func() (*debug.BuildInfo, bool), files ...string) Gate {
	return Gate{Floor: Latest(BuildFloor(readBuildInfo), CertFloor(files...)), Waits: waits}
}

// Wait blocks until the wall clock has passed the floor (Wait, with o),
// saying why in log; a gate that does not wait only warns, once, when the
// clock looks unset.
func (g Gate) Wait(ctx context.Context, log *slog.Logger, o Options) error {
	if !g.Waits {
		if note := g.Floor.Note(time.Now()); note != "" {
			log.Warn("Serving with a wall clock that looks unset (no TLS here, and leases are timed on the monotonic clock)", "reason", note)
		}
		return nil
	}
	return Wait(ctx, g.Floor, log, o)
}

// Ready is a readiness check: on a gate that waits, it fails while the
// wall clock reads before the floor (stepped back below it after the
// start); on one that does not, it passes, and Note says why the clock
// looks unset.
func (g Gate) Ready() error {
	if !g.Waits {
		return nil
	}
	return g.Floor.Behind(time.Now())
}

// Note is "" on a gate that waits (Ready fails instead), else the floor's
// Note for now.
func (g Gate) Note() string {
	if g.Waits {
		return ""
	}
	return g.Floor.Note(time.Now())
}
