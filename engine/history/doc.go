// Package history keeps what leasehold remembers about Leases beside the
// Kubernetes API: the coordinated election's decision history (why each
// grant and hand-over happened) and the web UI's lease timelines (who held
// each Lease over the last day). Both are stored as JSON documents in the
// same store as the API objects, under key prefixes no Kubernetes list or
// watch reads, so that they survive a restart without ever showing up in
// (or disturbing the history of) a resource.
//
// A Store is built over storage.Interface and handed explicitly to the
// two users: engine/election records and collects decisions, web/ui
// reads decisions, records operator actions and keeps its timelines. The
// engine itself neither reads nor writes them.
package history
