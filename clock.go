package main

// The wait for a set wall clock before "leasehold serve" starts
// (internal/clockcheck; docs/cluster.md, "Clocks").

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/leasehold/leasehold/internal/clockcheck"
	"github.com/leasehold/leasehold/storage/backend"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/sdnotify"
)

// clockGate is what serve knows of its wall clock before it starts.
type clockGate struct {
	floor clockcheck.Floor
	// waits: the server speaks TLS or runs on the cluster's TLS, where a
	// clock before the floor fails handshakes or mints certificates
	// valid from 1970. A plain single device only warns: its leases are
	// judged on the monotonic clock, and nothing it serves checks time.
	waits bool
}

// newClockGate computes the floor from this build and the certificates
// the data directory (or --tls-cert-file) already holds.
func newClockGate(cfg serveConfig) clockGate {
	host, _, _ := net.SplitHostPort(cfg.Listen)
	tlsOn := cfg.Security.TLSEnabled(host)
	files := []string{}
	if tlsOn {
		if cfg.Security.TLSCertFile != "" {
			files = append(files, cfg.Security.TLSCertFile)
		} else {
			files = append(files, cfg.Layout.TLSCA(), filepath.Join(cfg.Layout.TLS(), "serving.crt"))
		}
	}
	switch cfg.StorageMode {
	case backend.Member:
		m := cfg.Layout.Member()
		files = append(files, m.CAFile, m.CertFile)
	case backend.Replica:
		r := cfg.Layout.Replica()
		files = append(files, r.CAFile, r.CertFile)
	}
	return clockGate{
		floor: clockcheck.Latest(clockcheck.BuildFloor(debug.ReadBuildInfo), clockcheck.CertFloor(files...)),
		waits: tlsOn || cfg.StorageMode != backend.SingleDevice,
	}
}

// wait blocks until the wall clock has passed the floor, saying why in
// the log and in systemd's status line; then it refuses to start a member
// or replica whose certificate expired while the device was off, with
// what to do, instead of letting its peers' handshakes fail.
func (g clockGate) wait(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	log = log.With("component", "clock")
	if !g.waits {
		if note := g.floor.Note(time.Now()); note != "" {
			log.Warn("Serving with a wall clock that looks unset (no TLS here, and leases are timed on the monotonic clock)", "reason", note)
		}
		return nil
	}
	notifier, _ := sdnotify.FromEnv() // a malformed watchdog setting is reported where the watchdog starts
	err := clockcheck.Wait(ctx, g.floor, log, clockcheck.Options{Status: func(s string) {
		if s == "" {
			s = "starting"
		}
		_ = notifier.Send("STATUS=" + s)
	}})
	if err != nil {
		return err
	}
	switch cfg.StorageMode {
	case backend.Member:
		m := cfg.Layout.Member()
		if err := clockcheck.Expired(time.Now(), m.CertFile, m.CAFile); err != nil {
			name := "NAME"
			if st, err := cluster.LoadState(m); err == nil {
				name = st.Name
			}
			return fmt.Errorf("%w; the other members refuse it. To bring the device back: on another member, "+
				"\"leasehold cluster remove %s\" (it rotates the cluster token); here, move %s aside and start again "+
				"with --join URL --cluster-token-file and the new token (that member's cluster/token); docs/cluster.md, \"Clocks\"", err, name, m.Dir)
		}
	case backend.Replica:
		r := cfg.Layout.Replica()
		if err := clockcheck.Expired(time.Now(), r.CertFile, r.CAFile); err != nil {
			return fmt.Errorf("%w; the members refuse it. To bring the replica back: \"leasehold cluster revoke NAME\" on a member, "+
				"move %s aside and start again with --replica --join URL and the new cluster token; docs/cluster.md, \"Clocks\"", err, r.Dir)
		}
	}
	return nil
}

// readyCheck is /readyz's "clock": on a server that waits on its clock,
// it fails while the wall clock reads before the floor (stepped back below
// it after the start), naming why; on one that does not, it passes with
// that reason as a note in ?verbose output.
func (g clockGate) readyCheck() web.Check {
	behind := func() error { return g.floor.Behind(time.Now()) }
	if g.waits {
		return web.Check{Name: "clock", Check: behind}
	}
	return web.Check{Name: "clock", Check: func() error { return nil }, Note: func() string { return g.floor.Note(time.Now()) }}
}
