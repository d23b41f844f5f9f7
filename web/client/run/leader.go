package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/web/client/lease"
)

// ExitNoHolder is the exit code of "leasehold leader" (without --watch)
// when the lease is missing, free or expired.
const ExitNoHolder = 3

const leaderSynopsis = "leader --lease NAME [-n NS] [--watch] [-o text|json]"

const leaderAbout = `Prints the identity holding a coordination.k8s.io/v1 Lease, or an empty line
when it is missing, released (holderIdentity "") or expired (renewTime +
leaseDurationSeconds is past by this machine's clock). With --watch it prints
a line whenever that changes, until interrupted. --output json prints one JSON
object per line with the lease's fields instead.

Exit codes: 0 held; 3 no holder; 1 server error; 2 usage error.
`

// holderView is what "leasehold leader" reports about a lease.
type holderView struct {
	Namespace            string     `json:"namespace"`
	Lease                string     `json:"lease"`
	Holder               string     `json:"holderIdentity"`
	Held                 bool       `json:"held"`
	Exists               bool       `json:"exists"`
	LeaseTransitions     int32      `json:"leaseTransitions"`
	LeaseDurationSeconds int32      `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          *time.Time `json:"acquireTime,omitempty"`
	RenewTime            *time.Time `json:"renewTime,omitempty"`
	PreferredHolder      string     `json:"preferredHolder,omitempty"`
	Strategy             string     `json:"strategy,omitempty"`
	// expiresAt is when, by our clock, a held lease runs out (zero: never
	// judged, e.g. without renewTime).
	expiresAt time.Time
}

func viewOf(ns, name string, l *coordinationv1.Lease, now time.Time) holderView {
	v := holderView{Namespace: ns, Lease: name}
	if l == nil {
		return v
	}
	s := l.Spec
	v.Exists = true
	v.Holder = deref(s.HolderIdentity)
	v.LeaseTransitions = deref(s.LeaseTransitions)
	v.LeaseDurationSeconds = deref(s.LeaseDurationSeconds)
	v.PreferredHolder = deref(s.PreferredHolder)
	v.Strategy = string(deref(s.Strategy))
	if s.AcquireTime != nil {
		t := s.AcquireTime.UTC()
		v.AcquireTime = &t
	}
	if s.RenewTime != nil {
		t := s.RenewTime.UTC()
		v.RenewTime = &t
		if s.LeaseDurationSeconds != nil {
			v.expiresAt = t.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
		}
	}
	v.Held = v.Holder != "" && (v.expiresAt.IsZero() || now.Before(v.expiresAt))
	return v
}

// leaderCommand implements "leasehold leader" and returns the exit code.
func leaderCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(leaderSynopsis, leaderAbout, stderr)
	var conn connFlags
	conn.register(fs)
	watch := fs.Bool("watch", false, "keep running and print a line whenever the holder changes")
	output := fs.String("output", "text", "output format: `text` (the holder identity) or json")
	fs.Alias("o", "output")
	err := fs.ParseNoArgs(args)
	if err == nil && conn.Lease == "" {
		err = errors.New("--lease is required")
	}
	if err == nil && *output != "text" && *output != "json" {
		err = fmt.Errorf("invalid --output %q: use text or json", *output)
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	cl, _, err := conn.client("leasehold-leader", 10*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold leader: %v\n", err)
		return 1
	}
	p := printer{w: stdout, json: *output == "json"}
	if !*watch {
		l, err := cl.GetLease(ctx, conn.Namespace, conn.Lease)
		if lease.IsNotFound(err) {
			// Scripts read the empty line; a person who mistyped the
			// name needs to be told which lease was not found.
			fmt.Fprintf(stderr, "leasehold leader: lease %s/%s not found\n", conn.Namespace, conn.Lease)
			l, err = nil, nil
		}
		if err != nil {
			fmt.Fprintf(stderr, "leasehold leader: %v\n", err)
			return 1
		}
		v := viewOf(conn.Namespace, conn.Lease, l, time.Now())
		p.print(v)
		if !v.Held {
			return ExitNoHolder
		}
		return 0
	}
	if err := follow(ctx, cl, conn.Namespace, conn.Lease, p, stderr); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "leasehold leader: %v\n", err)
		return 1
	}
	return 0
}

type printer struct {
	w    io.Writer
	json bool
	last *holderView
}

// print writes v unless it says the same as the previous line did.
func (p *printer) print(v holderView) {
	if p.last != nil && sameLine(*p.last, v, p.json) {
		return
	}
	p.last = &v
	if p.json {
		b, _ := json.Marshal(v)
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	if v.Held {
		fmt.Fprintln(p.w, v.Holder)
	} else {
		fmt.Fprintln(p.w)
	}
}

// sameLine reports whether a and b would print the same line, ignoring
// renewals (renewTime moves every retry period).
func sameLine(a, b holderView, asJSON bool) bool {
	if a.Held != b.Held || (a.Held && a.Holder != b.Holder) {
		return false
	}
	if !asJSON {
		return true
	}
	return a.Holder == b.Holder && a.Exists == b.Exists && a.LeaseTransitions == b.LeaseTransitions &&
		a.PreferredHolder == b.PreferredHolder && a.Strategy == b.Strategy
}

// follow lists and watches the lease, printing every change of holder,
// and a vacancy when a held lease expires without an event saying so.
func follow(ctx context.Context, cl *lease.Client, ns, name string, p printer, stderr io.Writer) error {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		lm, err := cl.GetLeaseForWatch(ctx, ns, name)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold leader: %v (retrying in %s)\n", err, backoff)
			if sleep(ctx, backoff) != nil {
				return nil
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
		cur := lm.Object
		p.print(viewOf(ns, name, cur, time.Now()))
		if err := watchOnce(ctx, cl, ns, name, lm.ResourceVersion, cur, &p); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "leasehold leader: watch: %v (relisting)\n", err)
		}
	}
	return nil
}

// watchOnce follows one watch stream until it ends.
func watchOnce(ctx context.Context, cl *lease.Client, ns, name, rv string, cur *coordinationv1.Lease, p *printer) error {
	w, err := cl.WatchLease(ctx, ns, name, rv, 300)
	if err != nil {
		return err
	}
	defer w.Close()
	events := make(chan lease.Event[coordinationv1.Lease])
	errc := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			ev, err := w.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case events <- ev:
			case <-wctx.Done():
				return
			}
		}
	}()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	arm := func() {
		expiry.Stop()
		if v := viewOf(ns, name, cur, time.Now()); v.Held && !v.expiresAt.IsZero() {
			expiry.Reset(time.Until(v.expiresAt) + time.Millisecond)
		}
	}
	arm()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case ev := <-events:
			switch ev.Type {
			case lease.Added, lease.Modified:
				cur = ev.Object
			case lease.Deleted:
				cur = nil
			default:
				continue
			}
			p.print(viewOf(ns, name, cur, time.Now()))
			arm()
		case <-expiry.C:
			p.print(viewOf(ns, name, cur, time.Now()))
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
