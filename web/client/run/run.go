package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/cli"
)

// Environment handed to the child.
const (
	EnvNamespace   = "LEASEHOLD_LEASE_NAMESPACE"
	EnvLease       = "LEASEHOLD_LEASE_NAME"
	EnvIdentity    = "LEASEHOLD_HOLDER_IDENTITY"
	EnvTransitions = "LEASEHOLD_LEASE_TRANSITIONS"
	EnvAcquireTime = "LEASEHOLD_ACQUIRE_TIME"
	EnvServer      = "LEASEHOLD_SERVER"     // also --server's own twin
	EnvKubeconfig  = "LEASEHOLD_KUBECONFIG" // also --kubeconfig's own twin
)

// rfc3339Micro is the Lease API's MicroTime format.
const rfc3339Micro = "2006-01-02T15:04:05.000000Z07:00"

// runCommand implements "leasehold run" and returns the process exit code.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseRunFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold run: %v\n%s\n", err, cli.HelpHint("leasehold run"))
		return cli.ExitUsage
	}
	// client-go's NewFromKubeconfig bounds each request by half the renew
	// deadline (at least 1 s), so one attempt can retry within it.
	cl, ccfg, err := cfg.conn.client("leasehold-run/"+filepath.Base(cfg.Command[0]), max(cfg.RenewDeadline/2, time.Second))
	if err != nil {
		fmt.Fprintf(stderr, "leasehold run: %v\n", err)
		return 1
	}
	ns, name := cfg.conn.Namespace, cfg.conn.Lease
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel).With("lease", ns+"/"+name, "identity", cfg.Identity)
	fence := &turnFence{me: cfg.Identity}
	r := &runner{
		cfg:   cfg,
		log:   log,
		fence: fence,
		el: &elector{
			c: cl, ns: ns, name: name, id: cfg.Identity,
			seconds:     int32(cfg.LeaseDuration / time.Second),
			coordinated: cfg.Candidate,
			fence:       fence,
			log:         log,
		},
		spec: childSpec{argv: cfg.Command, stdout: stdout, stderr: stderr},
	}
	r.spec.env = append(os.Environ(), EnvNamespace+"="+ns, EnvLease+"="+name, EnvIdentity+"="+cfg.Identity, EnvServer+"="+ccfg.Server)
	if cfg.conn.usedKubeconfig != "" {
		r.spec.env = append(r.spec.env, EnvKubeconfig+"="+cfg.conn.usedKubeconfig)
	}
	if cfg.Candidate {
		r.cand = &candidate{
			c: cl, ns: ns, name: cfg.Identity, lease: name,
			binaryVersion: cfg.BinaryVersion, emulationVersion: cfg.EmulationVersion,
			strategy: coordinationv1.CoordinatedLeaseStrategy(cfg.Strategy),
			log:      log,
		}
	}
	return r.run(ctx)
}

// runner alternates between campaigning and leading.
type runner struct {
	cfg  runConfig
	log  *slog.Logger
	el   *elector
	cand *candidate
	spec childSpec
	sigs chan os.Signal

	// fence is when a child may start after a forced release (fence.go).
	fence *turnFence

	// lastRenew is when (monotonic) the last successful acquire or renew
	// was sent. Every safety deadline is computed from it.
	lastRenew time.Time
	// holdOff: after stepping down on request, no campaigning before it.
	holdOff time.Time
}

func (r *runner) run(ctx context.Context) int {
	r.sigs = make(chan os.Signal, 8)
	signal.Notify(r.sigs, forwarded...)
	defer signal.Stop(r.sigs)
	if r.cand != nil {
		// The candidate lives until we exit, independently of ctx: it
		// must keep acking while a shutdown waits for the child.
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		var wg sync.WaitGroup
		wg.Go(func() { r.cand.run(cctx) })
		defer func() {
			cancel()
			wg.Wait()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RenewDeadline)
			defer cancel()
			r.cand.remove(dctx)
		}()
	}
	for {
		if !r.campaign(ctx) {
			return 0
		}
		code, again := r.lead(ctx)
		if !again {
			return code
		}
	}
}

// campaign tries to acquire the lease every retry period (jittered by up
// to 20 %, as client-go's JitterUntil), and at once when a watch of the
// lease shows it granted to us or released, until it succeeds (true) or a
// shutdown is requested (false). After a step-down it first sits out its
// hold-off.
func (r *runner) campaign(ctx context.Context) bool {
	mode := "campaigning"
	if r.cand != nil {
		mode = "waiting for the election controller"
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wake := make(chan struct{}, 1)
	go r.watchForTurn(wctx, wake)
	if d := time.Until(r.holdOff); d > 0 {
		r.log.Info("Stepped down; standing by before campaigning again", "for", d.Round(time.Millisecond).String())
		if !r.pause(ctx, d, nil) {
			return false
		}
	}
	r.log.Info("Standing by for the lease", "mode", mode)
	var lastErr string
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RenewDeadline)
		out, sent, err := r.el.try(actx)
		cancel()
		if out == leading {
			r.lastRenew = sent
			if ctx.Err() == nil {
				return true
			}
			r.release(ctx) // won just as we were asked to stop
			return false
		}
		if err != nil && err.Error() != lastErr {
			r.log.Warn("Cannot reach the lease", "err", err)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		if !r.pause(ctx, r.cfg.RetryPeriod+rand.N(r.cfg.RetryPeriod/5+1), wake) {
			return false
		}
	}
}

// pause waits d, or less when wake fires, and reports false when a
// shutdown was requested meanwhile.
func (r *runner) pause(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case s := <-r.sigs:
			if isShutdownSignal(s) {
				return false
			}
		case <-timer.C:
			return true
		case <-wake:
			return true
		}
	}
}

// release gives the lease back, bounded by the renew deadline, and logs a
// failure: the lease then simply runs out.
func (r *runner) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RenewDeadline)
	defer cancel()
	if err := r.el.release(rctx); err != nil {
		r.log.Warn("Could not release the lease; it will run out", "err", err)
	}
}
