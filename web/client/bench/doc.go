// Package bench is leasehold's load generator ("leasehold bench"): the
// lease renewal workload exactly as client-go's LeaseLock sends it (GET the
// Lease, then PUT it back with a new spec.renewTime and the GET's
// resourceVersion) over H leases from C concurrent clients, optionally with
// W watchers measuring event lag and LeaseCandidate churn, and a LIST
// timing, and optionally a noisy neighbour beside a rate-capped renewal
// load (--noise: LIST loops, re-listing watchers, large patches or idle
// connections over --noise-objects leases; noise.go, docs/noisy.sh),
// reporting the share of offered renewals done and the server's peak RSS
// (VmHWM). It reports renewals/s, latency percentiles, conflicts, errors,
// watch lag and, given the server's PID, the server's CPU time per renewal
// from /proc/<pid>/stat.
//
// The generator shares the machine (often the same two cores) with the
// server, so it is built to be cheap: one fasthttp HostClient with pooled
// connections, no JSON decoding on the renewal path (the PUT body is the
// GET body with the renewTime bytes replaced, which is what client-go
// sends: the object it read, spec updated, resourceVersion unchanged),
// per-goroutine histograms merged at the end, and watchers that read raw
// chunked HTTP and only locate the renewTime in each event.
//
// It speaks plain HTTP with an optional bearer token; it lives under web/client/
// because it is an HTTP client of the API, and imports no server code.
package bench
