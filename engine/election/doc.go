// Package election is leasehold's coordinated leader election (KEP-4355):
// a controller that watches LeaseCandidates and Leases, pings candidates,
// and grants or hands over leases to the candidate a strategy ranks best.
//
// A strategy (abi.Strategy) is a pure function from a deterministic
// snapshot (abi.Input) to a ranking (abi.Decision). Strategies are usually
// WebAssembly modules run by plugins/host; the contract lives in
// plugins/abi, and this package keeps every safety rule: a decision's
// deadline (Options.DecideTimeout, through its context), validation of
// the answer against the candidates, a progress check, failure backoff,
// and: a live lease is never handed to another identity (only
// preferredHolder is set), grants go only to candidates that answered in
// this round, a decision naming a non-candidate (or any other invalid
// answer, error, panic or timeout) counts as a strategy failure, so does
// a well-formed one that elects nobody on a vacant lease while a
// candidate answered (progress.go), and a failing strategy falls back to
// Options.Fallback, then to the native OldestEmulationVersion, without
// preempting anybody.
//
// The Controller (New, Run) is compatible with client-go's
// leaderelection.NewCandidate and LeaderElector{Coordinated: true} as
// kube-apiserver's coordinator is: it creates the Lease, writes pingTime
// on candidates and waits for their renewTime acks, grants a free or
// expired lease (holderIdentity, leaseDurationSeconds = GrantDuration,
// renewTime), sets preferredHolder on a live holder when a better
// candidate answered, and deletes stale candidates. It acts only through
// the engine (as manager "leasehold-election-controller"), so its writes
// are validated and watched like any client's.
//
// Deliberate differences from upstream (kubernetes
// pkg/controlplane/controller/leaderelection):
//
//   - Expiry and liveness use the server's observation times (when the
//     controller saw a renewal), never foreign renewTime values against
//     our clock; pingTime is written after the candidate's renewTime so
//     that a candidate whose clock runs ahead still acks. Every
//     observation, deadline and wait is on the monotonic clock
//     (Options.Clock, clock.go): a step of the server's wall clock (a
//     device that booted in 1970 and is set by NTP) neither expires a
//     lease renewed on time nor delays the failover of a dead holder.
//   - Precise timers (lease expiry, ping deadline, candidate validity)
//     instead of a 5 s requeue: with 4 s leases a dead holder is replaced
//     in about 4-4.5 s (upstream ~9.5 s). A vacant lease waits at most
//     GrantAckWait (1 s), not the whole ping window, for better-ranked
//     candidates.
//   - A grant needs an ack from after the vacancy began, so a holder that
//     just died is not re-granted on an ack from before its death. Once
//     one candidate of the round answered, a better one is awaited about
//     twice as long as that ack took (at most GrantAckWait): a dead
//     holder or a dead component's leftover LeaseCandidate does not hold
//     a vacant lease back, and a better candidate that answers late gets
//     the still unconfirmed grant moved to it.
//   - The grant of a missing or vacant lease whose candidates appeared
//     after the vacancy began waits a ping round (FirstGrantWait, 300 ms)
//     from when the first of them was seen, so that the best of
//     candidates starting together gets it rather than the first to
//     register.
//   - A grant its holder has not confirmed yet (no renewal since:
//     AnnotationGrantedRenewTime still equals spec.renewTime) is moved to
//     a better candidate at once, by compare-and-swap on the
//     resourceVersion, instead of setting preferredHolder and waiting for
//     the expiry of a lease nobody leads (upstream). Exactly one of the
//     holder's confirming renewal and the move succeeds; client-go and
//     leasehold run --candidate lead only after their renewal succeeded.
//   - A lease whose strategy is missing is not decided before the
//     strategy modules are loaded (Options.StrategiesLoaded, bounded by
//     StrategiesLoadWait; then it gets the fallback, audited); a lease
//     whose strategy is served is decided at once.
//   - A candidate that cannot be served (no renewTime, expired, ignoring
//     pings, strategy without a module, left out of the ranking) is
//     logged once per reason and recorded ("unserved") in the decision
//     history; upstream ignores it silently.
//   - A nil holder is a free lease (upstream panics); an expired lease
//     whose best candidate is the old holder is re-granted; a stale
//     preferredHolder is cleared (upstream stalls, kubernetes#138066);
//     leaseTransitions and acquireTime are maintained.
//   - Strategy resolution and rankings do not depend on list order; a
//     strategy conflict or an unknown strategy name is logged and
//     recorded once per incident and the lease is left alone.
//   - A candidate that ignored a ping is not pinged again for
//     UnresponsiveRetry unless it renews by itself (upstream re-pings
//     dead-but-valid candidates every round).
//   - A live lease without spec.strategy is held by a plain elector, which
//     ignores preferredHolder: it is left to expire instead of starting
//     upstream's write ping-pong.
//   - A holder's routine renewal does not re-run the strategy: while only
//     renewals changed, the lease's last decision is reused (up to
//     ResyncPeriod, or until Resync). Upstream re-decides on every Lease
//     event, which costs a strategy call per lease every RetryPeriod.
//   - Only the leases coordinated election concerns are cached and
//     reconciled: those with spec.strategy or spec.preferredHolder set or
//     with a LeaseCandidate (upstream's informer keeps every Lease). A
//     plain client-go lease costs a map lookup per renewal, not a copy
//     and a reconcile; when its first candidate appears, the lease is
//     read from the engine before the decision (concern.go).
//   - A strategy module that failed on a lease is not called again for
//     that lease for a backoff window (FailureBackoff doubling to
//     MaxFailureBackoff, reset on success or when another module version
//     is loaded); the fallback decides meanwhile, so a looping module
//     costs one timeout per window and lease instead of one per event.
//     Windows and failure incidents are per (lease, module): an input
//     that makes a module fail on one lease leaves it deciding the
//     others.
//   - A well-formed decision that would leave a vacant lease waiting on
//     candidates that do not answer (say, ranking only the dead holder)
//     while another candidate answered is a strategy failure too; a
//     ranking that made no progress has the candidates it left out
//     pinged, so that the controller learns whether one is alive.
//   - Every decision is auditable: grants annotate the Lease
//     (AnnotationStrategy, AnnotationModule, AnnotationReason,
//     AnnotationFallbackFrom) and each decision is appended to a bounded
//     history (Options.History: engine/history's Store, which the web UI
//     reads too).
package election
