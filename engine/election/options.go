package election

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
)

// Defaults. Where upstream has the constant, the value is upstream's
// (kubernetes pkg/controlplane/controller/leaderelection).
const (
	// DefaultUserAgent names the controller in managedFields.
	DefaultUserAgent = "leasehold-election-controller"
	// DefaultPingWindow is upstream's electionDuration: how long a ping
	// waits for its ack, and how long an ack (or any observed renewal)
	// counts as proof of life.
	DefaultPingWindow = 5 * time.Second
	// DefaultGrantAckWait is the longest the election of a vacant lease
	// waits for better-ranked candidates that were pinged but have not
	// answered, before granting to the best one that has (once one has,
	// about twice its ack time: see planFor). Upstream waits the whole
	// ping window; a vacant lease means nobody leads, so we trade a
	// possibly sub-optimal first grant (corrected at once by moving the
	// unconfirmed grant, or through preferredHolder, when the better
	// candidate answers) for availability.
	DefaultGrantAckWait = time.Second
	// DefaultFirstGrantWait is how long a vacant (missing, free or
	// expired) lease whose candidates appeared after the vacancy began
	// waits, from when the controller saw the first of them, before its
	// first grant: a ping round in which the candidates that start
	// together register or answer, so that the best of them gets the
	// grant rather than the first to register. Upstream waits its whole
	// electionDuration (5 s) on every decision.
	DefaultFirstGrantWait = 300 * time.Millisecond
	// DefaultStrategiesLoadWait bounds how long a lease whose strategy is
	// missing waits for Options.StrategiesLoaded before the fallback
	// decides it. Leases whose strategy is served do not wait. Compiling a
	// cold Go guest takes seconds on a small or busy device; a lease left
	// alone that long keeps its holder (renewals need no decision), so
	// only a vacant one waits, and a wrong first grant is worse.
	DefaultStrategiesLoadWait = 30 * time.Second
	// DefaultGrantDuration is upstream's defaultLeaseDurationSeconds: the
	// leaseDurationSeconds written with a grant, a "time to take over" for
	// the new holder, which then writes its own duration.
	DefaultGrantDuration = 5 * time.Second
	// DefaultCandidateValidity is upstream's leaseCandidateValidDuration: a
	// candidate that has not renewed for this long is ignored and
	// garbage-collected.
	DefaultCandidateValidity = 30 * time.Minute
	// DefaultGCPeriod is upstream's LeaseCandidateGCPeriod.
	DefaultGCPeriod = 30 * time.Minute
	// DefaultUnresponsiveRetry is how long a candidate that ignored a ping
	// is left alone before it is pinged again (unless it renews by itself
	// first). Upstream never stops pinging it: it re-pings dead
	// candidates every round, which only churns writes.
	DefaultUnresponsiveRetry = time.Minute
	// DefaultDecideTimeout bounds one Strategy.Decide call: the deadline
	// of its context, which the WASM host enforces inside the guest.
	DefaultDecideTimeout = time.Second
	// DefaultResyncPeriod re-evaluates every lease even without events, as
	// a safety net under the precise timers.
	DefaultResyncPeriod = 5 * time.Minute
	// DefaultHistoryInput is how many earlier decisions a strategy sees.
	DefaultHistoryInput = 10
	// DefaultFailureBackoff is how long a strategy module that failed is
	// not called (the fallback decides instead); the window doubles with
	// each further failure up to DefaultMaxFailureBackoff.
	DefaultFailureBackoff = 5 * time.Second
	// DefaultMaxFailureBackoff bounds the window of DefaultFailureBackoff;
	// it equals DefaultResyncPeriod, the longest a decision is reused.
	DefaultMaxFailureBackoff = 5 * time.Minute
)

// DecisionHistory is what the controller needs of the decision history
// (see engine/history, whose *Store fits).
type DecisionHistory interface {
	RecordDecision(ctx context.Context, ns, name string, rec history.DecisionRecord, keep int) error
	Decisions(ctx context.Context, ns, name string) ([]history.DecisionRecord, error)
	DeleteDecisions(ctx context.Context, ns, name string) error
	DecisionLeases(ctx context.Context) ([]types.NamespacedName, error)
}

// Options configure a Controller. Zero durations take the defaults above.
type Options struct {
	// Engine is the API the controller acts through; required.
	Engine *engine.Engine
	// History is where the controller records its decisions, reads them
	// back after a restart (strategies see the recent ones) and deletes
	// those of deleted leases; required. engine/history's Store, over the
	// engine's store, is the one leasehold runs.
	History DecisionHistory
	// Drains are the drain records the controller enforces (drain.go);
	// nil means none. engine/history's Store is the one leasehold runs.
	Drains DrainSource
	// Registry resolves the strategy names candidates declare. Nil means
	// only the native OldestEmulationVersion.
	Registry abi.Registry
	// Fallback decides when the lease's strategy fails (error, timeout,
	// invalid decision); it never preempts a live holder. Nil means the
	// native OldestEmulationVersion, which is also the last resort when
	// Fallback itself fails.
	Fallback abi.Strategy
	// Logger defaults to slog.Default(). The caller names the component
	// (serve: component=election): one component field per line.
	Logger *slog.Logger
	// Clock separates the wall clock (what is written) from the
	// monotonic one (every expiry and wait); default SystemClock. The
	// engine's Options.Now should be Clock.Now, so that the objects the
	// controller creates and those it writes agree.
	Clock Clock
	// Now, when set and Clock is not, is both clocks at once (the form
	// before Clock): a jump of it is time passing, not a wall-clock step.
	Now func() time.Time
	// UserAgent is the Scope.UserAgent of every write (the managedFields
	// manager); default DefaultUserAgent.
	UserAgent string

	// StrategiesLoaded, when not nil, is closed once Registry serves every
	// strategy module it will serve at start (plugins/host's Loaded: the
	// first scan of the plugins directory). Until then a lease whose
	// strategy the registry does not serve is left alone, so that the
	// controller never judges a strategy missing whose module is still
	// loading; after StrategiesLoadWait such a lease is decided by
	// Fallback, audited as a fallback, until the module arrives.
	StrategiesLoaded   <-chan struct{}
	StrategiesLoadWait time.Duration

	PingWindow   time.Duration
	GrantAckWait time.Duration
	// FirstGrantWait is the ping round before the first grant to
	// candidates that appeared on a vacant lease, and the most the holder
	// of an expired lease is waited for (DefaultFirstGrantWait); negative
	// means none.
	FirstGrantWait    time.Duration
	GrantDuration     time.Duration
	CandidateValidity time.Duration
	GCPeriod          time.Duration
	UnresponsiveRetry time.Duration
	DecideTimeout     time.Duration
	// ResyncPeriod re-evaluates every lease, and is also the longest a
	// decision is reused while only the holder's renewals change.
	ResyncPeriod time.Duration
	// FailureBackoff and MaxFailureBackoff bound the window during which
	// a failed strategy module is not called (see moduleBackoff).
	FailureBackoff    time.Duration
	MaxFailureBackoff time.Duration
	// HistoryLimit is how many decisions are kept per lease; default
	// history.DefaultDecisionHistory.
	HistoryLimit int
	// HistoryInput is how many earlier decisions a strategy sees.
	HistoryInput int
}

func (o Options) withDefaults() (Options, error) {
	if o.Engine == nil {
		return o, errors.New("election: Options.Engine is required")
	}
	if o.History == nil {
		return o, errors.New("election: Options.History is required")
	}
	if o.Registry == nil {
		o.Registry = NewStaticRegistry(NativeOldest)
	}
	if o.Fallback == nil {
		o.Fallback = NativeOldest
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Clock != nil:
	case o.Now != nil:
		o.Clock = funcClock(o.Now)
	default:
		o.Clock = SystemClock{}
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PingWindow, DefaultPingWindow)
	def(&o.GrantAckWait, DefaultGrantAckWait)
	if o.FirstGrantWait == 0 {
		o.FirstGrantWait = DefaultFirstGrantWait
	}
	o.FirstGrantWait = max(o.FirstGrantWait, 0)
	def(&o.StrategiesLoadWait, DefaultStrategiesLoadWait)
	def(&o.GrantDuration, DefaultGrantDuration)
	def(&o.CandidateValidity, DefaultCandidateValidity)
	def(&o.GCPeriod, DefaultGCPeriod)
	def(&o.UnresponsiveRetry, DefaultUnresponsiveRetry)
	def(&o.DecideTimeout, DefaultDecideTimeout)
	def(&o.ResyncPeriod, DefaultResyncPeriod)
	def(&o.FailureBackoff, DefaultFailureBackoff)
	def(&o.MaxFailureBackoff, DefaultMaxFailureBackoff)
	o.MaxFailureBackoff = max(o.MaxFailureBackoff, o.FailureBackoff)
	o.GrantAckWait = min(o.GrantAckWait, o.PingWindow)
	if o.HistoryLimit <= 0 {
		o.HistoryLimit = history.DefaultDecisionHistory
	}
	if o.HistoryInput <= 0 {
		o.HistoryInput = DefaultHistoryInput
	}
	return o, nil
}

// grantSeconds is GrantDuration as leaseDurationSeconds, rounded up and at
// least 1 (validation requires a positive duration).
func (o Options) grantSeconds() int32 {
	s := int32((o.GrantDuration + time.Second - 1) / time.Second)
	return max(s, 1)
}
