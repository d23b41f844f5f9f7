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
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/cli"
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
		fmt.Fprintf(stderr, "leasehold run: %v\n", err)
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
	r := &runner{
		cfg: cfg,
		log: log,
		el: &elector{
			c: cl, ns: ns, name: name, id: cfg.Identity,
			seconds:     int32(cfg.LeaseDuration / time.Second),
			coordinated: cfg.Candidate,
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

	// lastRenew is when (monotonic) the last successful acquire or renew
	// was sent. Every safety deadline is computed from it.
	lastRenew time.Time
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
// shutdown is requested (false).
func (r *runner) campaign(ctx context.Context) bool {
	mode := "campaigning"
	if r.cand != nil {
		mode = "waiting for the election controller"
	}
	r.log.Info("Standing by for the lease", "mode", mode)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wake := make(chan struct{}, 1)
	go r.watchForTurn(wctx, wake)
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
		wait := r.cfg.RetryPeriod + rand.N(r.cfg.RetryPeriod/5+1)
		timer := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return false
			case s := <-r.sigs:
				if isShutdownSignal(s) {
					timer.Stop()
					return false
				}
			case <-timer.C:
				break waiting
			case <-wake:
				timer.Stop()
				break waiting
			}
		}
	}
}

// attempt is the result of one renewal.
type attempt struct {
	out  outcome
	sent time.Time
	err  error
}

// lead runs the child while renewing the lease. It returns the exit code
// and whether to campaign again.
func (r *runner) lead(ctx context.Context) (code int, again bool) {
	t := r.el.term
	log := r.log.With("transitions", t.Transitions)
	spec := r.spec
	spec.env = slices.Concat(r.spec.env, []string{ // a copy: terms must not share it
		EnvTransitions + "=" + strconv.Itoa(int(t.Transitions)),
		EnvAcquireTime + "=" + t.AcquireTime.UTC().Format(rfc3339Micro),
	})
	log.Info("Acquired the lease", "acquire_time", t.AcquireTime.UTC().Format(rfc3339Micro))

	var (
		ch        *child
		childDone <-chan int
		renewing  = true
		inFlight  bool
		renewDone = make(chan attempt, 1)
		renewT    = time.NewTimer(r.cfg.RetryPeriod)
		deadlineT = time.NewTimer(time.Until(r.lastRenew.Add(r.cfg.RenewDeadline)))
		killT     *time.Timer
		killC     <-chan time.Time
		rerunC    <-chan time.Time
		shutdownC = ctx.Done()
		shutdown  bool   // a shutdown was requested
		lost      string // why leadership ended, "" while leading
		sigCount  int
		lastCode  int
	)
	defer func() {
		renewT.Stop()
		deadlineT.Stop()
		if killT != nil {
			killT.Stop()
		}
		if inFlight {
			<-renewDone // the elector is ours again only after this
		}
	}()
	// hardKill is the latest moment the child may still be alive: after it
	// only lease-duration − renew-deadline − grace-period of margin is
	// left before others may take over.
	hardKill := func() time.Time { return r.lastRenew.Add(r.cfg.RenewDeadline + r.cfg.GracePeriod) }
	armKill := func(at time.Time) {
		if h := hardKill(); at.After(h) {
			at = h
		}
		if killT == nil {
			killT = time.NewTimer(time.Until(at))
		} else {
			killT.Reset(time.Until(at))
		}
		killC = killT.C
	}
	start := func() bool {
		c, err := spec.start()
		if err != nil {
			log.Error("Cannot start the child", "command", r.cfg.Command[0], "err", err)
			lastCode = startErrorCode(err)
			return false
		}
		ch, childDone = c, c.done
		log.Info("Started the child", "pid", c.pid, "command", r.cfg.Command[0])
		return true
	}
	lose := func(reason string) {
		if lost != "" {
			return
		}
		lost, renewing = reason, false
		renewT.Stop()
		deadlineT.Stop()
		log.Warn("Lost the lease; stopping the child", "reason", reason,
			"last_renew", r.lastRenew.Format(time.RFC3339Nano),
			"others_may_take_over_at", r.lastRenew.Add(r.cfg.LeaseDuration).Format(time.RFC3339Nano))
		if ch != nil {
			if err := ch.signalGroup(sigTerm); err != nil {
				log.Error("Cannot signal the child", "err", err)
			}
			armKill(time.Now().Add(r.cfg.GracePeriod))
		}
	}
	// finish decides what follows the child's end (or a loss between reruns).
	finish := func() (int, bool) {
		if inFlight {
			<-renewDone
			inFlight = false
		}
		switch {
		case shutdown:
			r.release(ctx)
			log.Info("Stopped on request", "exit_code", lastCode)
			return lastCode, false
		case lost != "":
			r.release(ctx) // only if the record still names us
			r.el.resign()
			if r.cfg.OnLost == OnLostExit {
				return ExitLost, false
			}
			return 0, true
		case r.cfg.OnExit == OnExitKeep:
			r.el.resign()
			log.Info("The child exited; keeping the lease until it runs out", "exit_code", lastCode)
			return lastCode, false
		default:
			r.release(ctx)
			log.Info("The child exited; released the lease", "exit_code", lastCode)
			return lastCode, false
		}
	}

	if !start() {
		r.release(ctx)
		return lastCode, false
	}
	for {
		var renewC, deadlineC <-chan time.Time
		if renewing {
			renewC, deadlineC = renewT.C, deadlineT.C
		}
		select {
		case <-renewC:
			if inFlight {
				renewT.Reset(r.cfg.RetryPeriod)
				continue
			}
			inFlight = true
			// No attempt outlives the deadline: past it the child is being
			// stopped whatever the answer.
			actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), r.lastRenew.Add(r.cfg.RenewDeadline))
			go func() {
				out, sent, err := r.el.try(actx)
				cancel()
				renewDone <- attempt{out, sent, err}
			}()
		case a := <-renewDone:
			inFlight = false
			if !renewing {
				continue
			}
			switch a.out {
			case leading:
				if a.sent.After(r.lastRenew) {
					r.lastRenew = a.sent
				}
				deadlineT.Reset(time.Until(r.lastRenew.Add(r.cfg.RenewDeadline)))
				log.Debug("Renewed the lease", "sent", a.sent.Format(time.RFC3339Nano))
			case steppedOut, displaced:
				lose(a.out.String())
				if ch == nil { // between two runs of --on-exit rerun
					return finish()
				}
			default:
				log.Warn("Renewal failed", "outcome", a.out.String(), "err", a.err,
					"stop_child_in", time.Until(r.lastRenew.Add(r.cfg.RenewDeadline)).Round(time.Millisecond))
			}
			if renewing {
				renewT.Reset(r.cfg.RetryPeriod)
			}
		case <-deadlineC:
			lose("renew deadline passed")
			if ch == nil {
				return finish()
			}
		case <-killC:
			killC = nil
			if ch != nil {
				log.Warn("The child outlived its grace period; sending SIGKILL", "pid", ch.pid)
				if err := ch.signalGroup(sigKill); err != nil {
					log.Error("Cannot kill the child", "err", err)
				}
			}
		case s := <-r.sigs:
			if !isShutdownSignal(s) {
				if ch != nil {
					_ = ch.signalGroup(s)
				}
				continue
			}
			if sigCount++; sigCount > 1 {
				if ch != nil {
					log.Warn("Second signal; sending SIGKILL to the child", "pid", ch.pid)
					_ = ch.signalGroup(sigKill)
				}
				continue
			}
			if shutdown { // already stopping through ctx
				continue
			}
			shutdown = true
			log.Info("Stopping: forwarding the signal to the child", "signal", s.String())
			if ch == nil {
				return finish()
			}
			_ = ch.signalGroup(s)
		case <-shutdownC:
			shutdownC = nil
			if shutdown {
				continue
			}
			// main cancels ctx on the same signal we were sent: forward that
			// one (SIGINT stays SIGINT) when it is already queued for us.
			sig := sigTerm
			select {
			case s := <-r.sigs:
				if isShutdownSignal(s) {
					sig = s
					sigCount++
				} else if ch != nil {
					_ = ch.signalGroup(s)
				}
			default:
			}
			shutdown = true
			log.Info("Stopping: forwarding the signal to the child", "signal", sig.String())
			if ch == nil {
				return finish()
			}
			_ = ch.signalGroup(sig)
		case code := <-childDone:
			// Whatever the child left behind in its group goes with it:
			// it must not outlive our claim on the lease.
			_ = ch.signalGroup(sigKill)
			ch, childDone, lastCode = nil, nil, code
			killC = nil
			if lost != "" {
				log.Info("Stopped the child", "exit_code", code,
					"margin_before_takeover", time.Until(r.lastRenew.Add(r.cfg.LeaseDuration)).Round(time.Millisecond).String())
				return finish()
			}
			if shutdown || r.cfg.OnExit != OnExitRerun {
				return finish()
			}
			log.Info("The child exited; running it again", "exit_code", code, "in", r.cfg.RetryPeriod)
			rerunC = time.After(r.cfg.RetryPeriod)
		case <-rerunC:
			rerunC = nil
			if !start() {
				return finish()
			}
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
