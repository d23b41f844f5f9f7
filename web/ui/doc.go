// Package ui is leasehold's built-in web UI, an operator's console: who
// leads each Lease, for how long, and why, updated live; who held it over
// the last day; and step-down, forced release, hand-over and delete, done
// through the API with the user's own token.
//
// The UI is plain HTML, CSS and vanilla JavaScript modules embedded with
// go:embed, so `go build` needs neither npm nor network, and edge devices
// that are offline still get the whole page (no fonts or CDNs). The page
// reads Leases and LeaseCandidates through the real Kubernetes API, list
// then watch, exactly as kubectl and client-go do, so what it shows cannot
// disagree with them. Only facts the API does not carry come from the small
// JSON endpoints under /ui/api/v1: the system status and the election
// decision history, both supplied by the caller through Sources so that
// this package (like the rest of web) never touches storage or plugins,
// and each Lease's recent holder changes and timeline (tenures, expiries,
// gaps), which the handler keeps itself by watching Leases through the
// engine (WatchHolders, on engine/listwatch; bounded, see holders.go and
// timeline.go) and stores across restarts in Sources.Timelines: the object
// names only its current holder. Operator actions are written by the page
// through the Kubernetes API, then recorded with the authenticated user in
// Sources.Decisions (actions.go). Both are engine/history's Store in the
// server, handed over explicitly as the interfaces this package declares.
//
// Routes, all answered by Handler.Serve:
//
//	GET /                   redirected to /ui/ (the address people type)
//	GET /ui/                index.html (never cached)
//	GET /ui/a/<hash>/<file> static assets; the hash covers every asset, so
//	                        they are cached for a year and a new build
//	                        changes every URL at once
//	GET /ui/api/v1/system
//	GET /ui/api/v1/namespaces/<ns>/leases/<name>/decisions (and holder changes)
//	GET /ui/api/v1/transitions  every lease's changes of hands per hour, last day
//	POST /ui/api/v1/namespaces/<ns>/leases/<name>/actions/<stepdown|release|handover|delete>
//	                        records an operator action the page did through
//	                        the API, with the authenticated user (actions.go)
//	POST /ui/api/v1/namespaces/<ns>/leases/<name>/handover-preview
//	                        what the election would do with a hand-over to
//	                        {"candidate": ...}, written nowhere (actions.go)
//
// Every response carries a strict Content-Security-Policy (no inline
// scripts or styles), nosniff, no-referrer and frame denial.
package ui
