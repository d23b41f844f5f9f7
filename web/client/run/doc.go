// Package run implements "leasehold run" and "leasehold leader": run
// any program only while holding a coordination.k8s.io Lease, and print
// who holds one. It is the Lease API counterpart of "consul lock" and
// "etcdctl lock/elect" for workloads that are not Go programs.
//
// The runner campaigns exactly as client-go's LeaderElector with a
// LeaseLock does (elector.go): another holder's expiry is judged on our
// own clock from when we observed its record change, an empty
// holderIdentity is free, a takeover adds one to leaseTransitions, writes
// are PUTs conditional on the resourceVersion (409: lost the race), and
// the leader renews with a fast-path PUT from its cached copy. With
// --candidate it instead registers a v1beta1 LeaseCandidate (candidate.go)
// and renews only a lease the server's election controller granted it,
// like NewCandidate plus LeaderElector{Coordinated: true}.
//
// Safety comes from one rule, enforced in run.go and by flag validation:
// the child is stopped before anyone else may take over. Leadership is
// judged on the runner's monotonic clock from the moment the last
// successful renewal was sent (every other party observed it later), the
// child gets SIGTERM at that moment + renew-deadline and SIGKILL at most
// grace-period later, and renew-deadline + grace-period < lease-duration.
// The child runs in its own process group, and on Linux dies with the
// runner (PR_SET_PDEATHSIG) if the runner is killed outright.
//
// A forced release (anyone clearing holderIdentity, or deleting the
// lease) keeps the same promise from both ends (fence.go, standby.go): the
// holder watches its lease and stops its child as soon as the lease no
// longer names it, and the runner that takes a lease freed that way starts
// its child only once the previous holder's lease would have run out (its
// last renewal as first seen here + its leaseDurationSeconds + a tenth,
// on our monotonic clock). A holder's own release (client-go's:
// holderIdentity "" with leaseDurationSeconds 1 and a fresh renewTime)
// costs no wait, and the leasehold.dev/step-down annotation asks the
// holder it names for one.
//
// Every wait and deadline above is on the monotonic clock, so a step of
// the wall clock (NTP setting a device that booted in 1970) moves none of
// them; the wall clock only goes into the renewTime and acquireTime we
// write, for other readers, and into "leasehold leader"'s one-shot answer
// (a single read: it can only compare renewTime with our wall clock, as
// kubectl does). An ack of a ping is written after the ping even when our
// wall clock reads before it (candidate.go).
//
// Known limits: the monotonic clock does not advance while the machine is
// suspended, so a device that sleeps while leading can resume with a
// child running after others took over, until its next renewal fails;
// and the fencing token (leaseTransitions at acquisition) is only as good
// as the downstream system's check of it.
//
// The package imports only the standard library, k8s.io API types and
// web/client/lease: never the server's engine, storage or HTTP server.
package run
