package run

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"
)

// attempt is the result of one renewal.
type attempt struct {
	out  outcome
	sent time.Time
	err  error
}

// tenure is one term of leadership: the child's runs, the renewals and
// the way it ends. Its methods are lead's event handlers; each returns
// true when the term is over (code and again then say what follows).
type tenure struct {
	r    *runner
	ctx  context.Context
	log  *slog.Logger
	spec childSpec

	ch        *child
	childDone <-chan int
	renewing  bool
	inFlight  bool
	renewDone chan attempt
	renewT    *time.Timer
	deadlineT *time.Timer
	killT     *time.Timer
	killC     <-chan time.Time
	startC    <-chan time.Time // a delayed first start, or a rerun
	shutdownC <-chan struct{}
	gone      <-chan termEnd // the lease watch: the lease is no longer ours
	shutdown  bool           // a shutdown was requested
	lost      string         // why leadership ended, "" while leading
	stepDown  bool           // it ended because the holder was asked to step down
	sigCount  int
	lastCode  int

	code  int
	again bool
}

// lead runs the child while renewing the lease. It returns the exit code
// and whether to campaign again.
func (r *runner) lead(ctx context.Context) (code int, again bool) {
	t := r.el.term
	te := &tenure{
		r: r, ctx: ctx, log: r.log.With("transitions", t.Transitions), spec: r.spec,
		renewing: true, renewDone: make(chan attempt, 1), shutdownC: ctx.Done(),
		renewT:    time.NewTimer(r.cfg.RetryPeriod),
		deadlineT: time.NewTimer(time.Until(r.lastRenew.Add(r.cfg.RenewDeadline))),
	}
	te.spec.env = slices.Concat(r.spec.env, []string{ // a copy: terms must not share it
		EnvTransitions + "=" + strconv.Itoa(int(t.Transitions)),
		EnvAcquireTime + "=" + t.AcquireTime.UTC().Format(rfc3339Micro),
	})
	te.log.Info("Acquired the lease", "acquire_time", t.AcquireTime.UTC().Format(rfc3339Micro))
	wctx, stopWatch := context.WithCancel(ctx)
	gone := make(chan termEnd, 1)
	te.gone = gone
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); r.watchTerm(wctx, t, gone) }()
	defer func() {
		stopWatch()
		<-watchDone
		te.renewT.Stop()
		te.deadlineT.Stop()
		if te.killT != nil {
			te.killT.Stop()
		}
		if te.inFlight {
			<-te.renewDone // the elector is ours again only after this
		}
	}()
	if wait := time.Until(t.NotBefore); wait > 0 {
		// The lease was freed by force: its previous holder may still run
		// its child until its own lease would have run out.
		te.log.Info("Waiting out the previous holder's lease before starting the child", "wait", wait.Round(time.Millisecond).String())
		te.startC = time.After(wait)
	} else if !te.start() {
		r.release(ctx)
		return te.lastCode, false
	}
	for !te.step() {
	}
	return te.code, te.again
}

// step waits for the next event and handles it; true when the term is over.
func (te *tenure) step() bool {
	var renewC, deadlineC <-chan time.Time
	if te.renewing {
		renewC, deadlineC = te.renewT.C, te.deadlineT.C
	}
	select {
	case <-renewC:
		te.renew()
	case a := <-te.renewDone:
		return te.renewed(a)
	case <-deadlineC:
		te.lose("renew deadline passed", false)
		return te.ch == nil && te.finish()
	case end := <-te.gone:
		te.lose(end.reason, end.stepDown)
		return te.ch == nil && te.finish()
	case <-te.killC:
		te.killC = nil
		if te.ch != nil {
			te.log.Warn("The child outlived its grace period; sending SIGKILL", "pid", te.ch.pid)
			if err := te.ch.signalGroup(sigKill); err != nil {
				te.log.Error("Cannot kill the child", "err", err)
			}
		}
	case s := <-te.r.sigs:
		return te.signaled(s)
	case <-te.shutdownC:
		return te.canceled()
	case code := <-te.childDone:
		return te.childExited(code)
	case <-te.startC:
		te.startC = nil
		return !te.start() && te.finish()
	}
	return false
}

func (te *tenure) start() bool {
	c, err := te.spec.start()
	if err != nil {
		te.log.Error("Cannot start the child", "command", te.r.cfg.Command[0], "err", err)
		te.lastCode = startErrorCode(err)
		return false
	}
	te.ch, te.childDone = c, c.done
	te.log.Info("Started the child", "pid", c.pid, "command", te.r.cfg.Command[0])
	return true
}

// renew starts one renewal in the background, unless one is in flight.
func (te *tenure) renew() {
	r := te.r
	if te.inFlight {
		te.renewT.Reset(r.cfg.RetryPeriod)
		return
	}
	te.inFlight = true
	// No attempt outlives the deadline: past it the child is being
	// stopped whatever the answer.
	actx, cancel := context.WithDeadline(context.WithoutCancel(te.ctx), r.lastRenew.Add(r.cfg.RenewDeadline))
	go func() {
		out, sent, err := r.el.try(actx)
		cancel()
		te.renewDone <- attempt{out, sent, err}
	}()
}

// renewed handles a renewal's answer.
func (te *tenure) renewed(a attempt) bool {
	r := te.r
	te.inFlight = false
	if !te.renewing {
		return false
	}
	switch a.out {
	case leading:
		if a.sent.After(r.lastRenew) {
			r.lastRenew = a.sent
		}
		te.deadlineT.Reset(time.Until(r.lastRenew.Add(r.cfg.RenewDeadline)))
		te.log.Debug("Renewed the lease", "sent", a.sent.Format(time.RFC3339Nano))
	case steppedOut, displaced, drainedOut:
		te.lose(a.out.String(), a.out != displaced)
		if te.ch == nil { // before the first start or between two reruns
			return te.finish()
		}
	default:
		te.log.Warn("Renewal failed", "outcome", a.out.String(), "err", a.err,
			"stop_child_in", time.Until(r.lastRenew.Add(r.cfg.RenewDeadline)).Round(time.Millisecond))
	}
	if te.renewing {
		te.renewT.Reset(r.cfg.RetryPeriod)
	}
	return false
}

// hardKill is the latest moment the child may still be alive: after it
// only lease-duration − renew-deadline − grace-period of margin is left
// before others may take over.
func (te *tenure) hardKill() time.Time {
	return te.r.lastRenew.Add(te.r.cfg.RenewDeadline + te.r.cfg.GracePeriod)
}

func (te *tenure) armKill(at time.Time) {
	if h := te.hardKill(); at.After(h) {
		at = h
	}
	if te.killT == nil {
		te.killT = time.NewTimer(time.Until(at))
	} else {
		te.killT.Reset(time.Until(at))
	}
	te.killC = te.killT.C
}

// lose ends leadership: no more renewals, and the child is asked to stop.
func (te *tenure) lose(reason string, stepDown bool) {
	if te.lost != "" {
		return
	}
	r := te.r
	te.lost, te.stepDown, te.renewing = reason, stepDown, false
	te.startC = nil // a delayed start or rerun never comes
	te.renewT.Stop()
	te.deadlineT.Stop()
	te.log.Warn("Lost the lease; stopping the child", "reason", reason,
		"last_renew", r.lastRenew.Format(time.RFC3339Nano),
		"others_may_take_over_at", r.lastRenew.Add(r.cfg.LeaseDuration).Format(time.RFC3339Nano))
	if te.ch != nil {
		if err := te.ch.signalGroup(sigTerm); err != nil {
			te.log.Error("Cannot signal the child", "err", err)
		}
		te.armKill(time.Now().Add(r.cfg.GracePeriod))
	}
}

// signaled handles a signal sent to us.
func (te *tenure) signaled(s os.Signal) bool {
	if !isShutdownSignal(s) {
		if te.ch != nil {
			_ = te.ch.signalGroup(s)
		}
		return false
	}
	if te.sigCount++; te.sigCount > 1 {
		if te.ch != nil {
			te.log.Warn("Second signal; sending SIGKILL to the child", "pid", te.ch.pid)
			_ = te.ch.signalGroup(sigKill)
		}
		return false
	}
	if te.shutdown { // already stopping through ctx
		return false
	}
	return te.stop(s)
}

// canceled handles the cancellation of ctx: main cancels it on the same
// signal we were sent, so that one (SIGINT stays SIGINT) is forwarded when
// it is already queued for us.
func (te *tenure) canceled() bool {
	te.shutdownC = nil
	if te.shutdown {
		return false
	}
	sig := sigTerm
	select {
	case s := <-te.r.sigs:
		if isShutdownSignal(s) {
			sig = s
			te.sigCount++
		} else if te.ch != nil {
			_ = te.ch.signalGroup(s)
		}
	default:
	}
	return te.stop(sig)
}

// stop begins a requested shutdown by forwarding sig to the child.
func (te *tenure) stop(sig os.Signal) bool {
	te.shutdown = true
	te.startC = nil
	te.log.Info("Stopping: forwarding the signal to the child", "signal", sig.String())
	if te.ch == nil {
		return te.finish()
	}
	_ = te.ch.signalGroup(sig)
	return false
}

// childExited handles the child's end.
func (te *tenure) childExited(code int) bool {
	// Whatever the child left behind in its group goes with it: it must
	// not outlive our claim on the lease.
	_ = te.ch.signalGroup(sigKill)
	te.ch, te.childDone, te.lastCode = nil, nil, code
	te.killC = nil
	r := te.r
	if te.lost != "" {
		te.log.Info("Stopped the child", "exit_code", code,
			"margin_before_takeover", time.Until(r.lastRenew.Add(r.cfg.LeaseDuration)).Round(time.Millisecond).String())
		return te.finish()
	}
	if te.shutdown || r.cfg.OnExit != OnExitRerun {
		return te.finish()
	}
	te.log.Info("The child exited; running it again", "exit_code", code, "in", r.cfg.RetryPeriod)
	te.startC = time.After(r.cfg.RetryPeriod)
	return false
}

// finish decides what follows the child's end (or a loss between runs)
// and always reports the term over.
func (te *tenure) finish() bool {
	r := te.r
	if te.inFlight {
		<-te.renewDone
		te.inFlight = false
	}
	switch {
	case te.shutdown:
		r.release(te.ctx)
		te.log.Info("Stopped on request", "exit_code", te.lastCode)
		te.code, te.again = te.lastCode, false
	case te.lost != "":
		r.release(te.ctx) // only if the record still names us
		r.el.resign()
		if te.stepDown && r.cand == nil {
			// Give the other runners the turn we were asked to give up.
			r.holdOff = time.Now().Add(r.cfg.LeaseDuration)
		}
		te.code, te.again = 0, true
		if r.cfg.OnLost == OnLostExit {
			te.code, te.again = ExitLost, false
		}
	case r.cfg.OnExit == OnExitKeep:
		r.el.resign()
		te.log.Info("The child exited; keeping the lease until it runs out", "exit_code", te.lastCode)
		te.code, te.again = te.lastCode, false
	default:
		r.release(te.ctx)
		te.log.Info("The child exited; released the lease", "exit_code", te.lastCode)
		te.code, te.again = te.lastCode, false
	}
	return true
}
