package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/leasehold/leasehold/plugins/abi"
)

// resolveStrategy applies upstream's pickBestStrategy rule without its
// dependence on list order: the strategy of the candidates with
// the highest binaryVersion (unparsable counts as 0.0.0) wins; different
// strategies at that version are a conflict, reported with a stable text.
func resolveStrategy(cands []*candEntry) (name string, conflict string) {
	var best abi.Version
	strategies := map[string][]string{}
	for i, e := range cands {
		v := abi.ParseVersion(e.obj.Spec.BinaryVersion)
		if !v.Valid {
			v = abi.Version{}
		}
		switch c := abi.CompareVersion(v, best); {
		case i == 0 || c > 0:
			best = v
			strategies = map[string][]string{}
		case c < 0:
			continue
		}
		s := string(e.obj.Spec.Strategy)
		strategies[s] = append(strategies[s], e.obj.Name)
	}
	if len(strategies) == 1 {
		for s := range strategies {
			return s, ""
		}
	}
	parts := make([]string, 0, len(strategies))
	for s, names := range strategies {
		sort.Strings(names)
		parts = append(parts, fmt.Sprintf("%s (%s)", s, strings.Join(names, ", ")))
	}
	sort.Strings(parts)
	return "", "candidates at the highest binary version declare different strategies: " + strings.Join(parts, "; ")
}

// decision is a validated strategy answer and who gave it.
type decision struct {
	d        *abi.Decision
	module   abi.ModuleInfo
	strategy string // name of the strategy that decided
	fallback bool
	// failure is the primary strategy's error when fallback is set.
	failure error
	// in is the input the lease's strategy was asked to decide on, kept
	// for the audit record (replay).
	in *abi.Input
}

// progressCheck judges a well-formed decision against what the controller
// knows of the candidates' liveness: a non-nil error (see stalls) makes
// the decision a strategy failure.
type progressCheck func(*abi.Decision) error

// decide asks s, then on any failure the configured fallback, then the
// native OldestEmulationVersion. Every answer is validated against in
// (known action, only candidate names, each once), so a module can never
// make the controller grant to a name that is not a live candidate, and
// then judged by progress, so that a module cannot stop an election with
// a well-formed answer either. A module within its failure backoff on
// lease k is not called: it counts as failed.
func (c *Controller) decide(ctx context.Context, k leaseKey, s abi.Strategy, in *abi.Input, progress progressCheck) decision {
	return c.decideAs(ctx, k, s, in, progress, false)
}

// decideAs is decide; a dry decision (a hand-over preview) calls the same
// strategies under the same deadline and backoff windows, but counts
// nothing and opens or closes no window: it leaves the controller as it
// found it.
func (c *Controller) decideAs(ctx context.Context, k leaseKey, s abi.Strategy, in *abi.Input, progress progressCheck, dry bool) decision {
	in.Settings = settingsOf(s)
	d, err := c.guardedCall(ctx, k, s, in, progress, dry)
	if err == nil {
		return decision{d: d, module: s.Module(), strategy: s.Name(), in: in}
	}
	if !dry {
		c.stats.fallbacks.Add(1)
	}
	for _, fb := range []abi.Strategy{c.opts.Fallback, NativeOldest} {
		if sameStrategy(fb, s) {
			continue
		}
		fin := *in
		fin.Strategy, fin.Settings = fb.Name(), settingsOf(fb)
		fd, ferr := c.guardedCall(ctx, k, fb, &fin, progress, dry)
		if ferr == nil {
			return decision{d: fd, module: fb.Module(), strategy: fb.Name(), fallback: true, failure: err, in: in}
		}
		err = errors.Join(err, ferr)
	}
	// Unreachable unless the native strategy fails: decide nothing.
	return decision{d: &abi.Decision{Action: abi.ActionKeep, Reason: "every strategy failed"},
		module: NativeOldest.Module(), strategy: NativeOldest.Name(), fallback: true, failure: err, in: in}
}

// settingsOf is the settings document s decides with, nil without one.
func settingsOf(s abi.Strategy) json.RawMessage {
	if cs, ok := s.(abi.Configured); ok {
		return cs.Settings()
	}
	return nil
}

// guardedCall is call behind the module's failure backoff on lease k,
// followed by the progress check. The native strategy is exempt from
// both: it is plain Go that cannot loop, and the last resort. Built-in
// modules (the embedded OldestEmulationVersion) are exempt from the
// progress check only: they are the reference the check falls back to,
// and their rules (e.g. no candidate with valid versions: nobody is
// eligible) stand.
func (c *Controller) guardedCall(ctx context.Context, k leaseKey, s abi.Strategy, in *abi.Input, progress progressCheck, dry bool) (*abi.Decision, error) {
	native := sameStrategy(s, NativeOldest)
	if !native {
		if err := c.backoff.blocked(k, s, c.now()); err != nil {
			if !dry {
				c.stats.backedOff.Add(1)
			}
			return nil, err
		}
	}
	d, err := c.call(ctx, s, in)
	if err == nil && !native && progress != nil && !s.Module().Builtin {
		if perr := progress(d); perr != nil {
			if !dry {
				c.stats.stalls.Add(1)
			}
			d, err = nil, fmt.Errorf("%w: %s: %w", abi.ErrStrategyFailed, s.Name(), perr)
		}
	}
	if dry {
		return d, err
	}
	if err != nil {
		c.stats.strategyErrors.Add(1)
		if !native {
			// The window starts after the call, which may have taken the
			// whole DecideTimeout.
			wait := c.backoff.failed(k, s, err, c.now())
			c.log.Debug("Strategy module backing off", "lease", k.String(), "strategy", s.Name(),
				"module", moduleString(s.Module()), "for", wait)
		}
		return nil, err
	}
	c.backoff.succeeded(k, s)
	return d, nil
}

// sameStrategy compares by identity for audit, not with ==, which would
// panic on an implementation whose dynamic type is not comparable.
func sameStrategy(a, b abi.Strategy) bool {
	return a.Name() == b.Name() && a.Module() == b.Module()
}

// call runs one Decide under the decision deadline (DecideTimeout, the
// only limit on a live decision: the WASM host cuts its guest off at this
// context's deadline and reports the cause given here), turning panics,
// errors and invalid answers into errors wrapping ErrStrategyFailed. This
// is the one place a strategy's answer is validated and its failure
// wrapped, whatever implements the strategy.
func (c *Controller) call(ctx context.Context, s abi.Strategy, in *abi.Input) (d *abi.Decision, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.opts.DecideTimeout,
		fmt.Errorf("no decision within %v (the election's DecideTimeout)", c.opts.DecideTimeout))
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("%w: %s panicked: %v", abi.ErrStrategyFailed, s.Name(), r)
		}
	}()
	d, err = s.Decide(ctx, in)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", abi.ErrStrategyFailed, s.Name(), err)
	case d == nil:
		return nil, fmt.Errorf("%w: %s returned no decision", abi.ErrStrategyFailed, s.Name())
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %s: %w", abi.ErrStrategyFailed, s.Name(), context.Cause(ctx))
	}
	if verr := d.Validate(in); verr != nil {
		return nil, fmt.Errorf("%w: %s: %w", abi.ErrStrategyFailed, s.Name(), verr)
	}
	return d, nil
}

// moduleString renders a module for the audit annotation:
// "name@version sha256:hex", followed by " settings:sha256:hex" for a
// module with a settings document, so that a settings change shows on
// the lease and (through the reuse key) is a new decision.
func moduleString(m abi.ModuleInfo) string {
	s := m.Name
	if m.Version != "" {
		s += "@" + m.Version
	}
	if m.SHA256 != "" {
		s += " sha256:" + strings.TrimPrefix(m.SHA256, "sha256:")
	}
	if m.SettingsSHA256 != "" {
		s += " settings:sha256:" + m.SettingsSHA256
	}
	if m.Builtin {
		s += " (builtin)"
	}
	return s
}
