// Package listwatch keeps an in-process cache in step with the engine the
// way client-go's reflector keeps an informer's: list, then watch from the
// list's resourceVersion; when a watch merely ends (a timeout, or the
// engine closed it for falling behind) watch again from the last
// resourceVersion seen; when the history that needs is gone (410 Expired
// or Gone, or any ERROR event) list again. Failures are retried with a
// doubling backoff until the context ends.
//
// The election controller's lease and candidate caches (engine/election)
// and the web UI's holder tracker (web/ui) run on it, so the relist rules
// live in one place, next to the engine whose watch semantics they follow.
package listwatch
