// Package boltdb is leasehold's embedded storage backend: one bbolt file
// behind the storage.Interface contract.
//
// # Layout on disk
//
// The file holds two buckets. "kv" maps each key to a record of
// 8 bytes create revision, 8 bytes modification revision (both big-endian)
// and the value. "meta" holds a format marker, so that Open refuses a
// foreign or damaged file with a clear error instead of silently starting
// empty, and the current revision. Only the current state of each key is
// stored: there is no revision history on disk, so the file never grows
// with write volume and needs no defragmentation.
//
// # Opening
//
// Before bbolt maps the file, Open checks it (precheck.go) and refuses
// what bbolt would silently reset or crash on; the walk of every page is
// skipped only when the file is byte for byte what the last clean Close
// left (cleanclose.go), never after a crash.
//
// # Revisions
//
// An empty store is at revision 1, like etcd; the first write gets
// revision 2. Every accepted write gets its own revision; rejected writes
// (conflict, exists, not found) consume none.
//
// # Memory and group commit
//
// The whole current state lives in memory, loaded at Open, so Get and List
// never touch bbolt. It is published as an immutable snapshot behind an
// atomic pointer (snapshot.go): a persistent treap of the keys (index.go;
// a write copies only the O(log n) nodes on its path) plus the revisions
// and the history. Readers load the pointer and take no lock, so a slow
// LIST never holds up a commit and a commit never holds up a Get.
// A single writer goroutine drains a queue of write requests: each round
// validates every compare-and-swap against memory (including earlier ops
// of the same round), writes all accepted ops in one fsynced bbolt
// transaction, and only then builds and publishes the next snapshot, records history,
// fans events out to watchers and answers the callers. By default there is
// no batch timer: an idle queue commits at once, a busy one amortises the
// fsync over everything that queued up meanwhile (db.Batch is avoided
// because it waits on a 10 ms timer). Options.CommitDelay opts into a
// window: the round then waits that long after its first write for more,
// trading latency for fewer pages written per write (flash wear; see the
// README's "Flash wear").
//
// # Quota
//
// Every key and value is held in memory, so the data is bounded by
// Options.QuotaBytes: the round counts the bytes of keys and values as it
// validates, and a put that would grow them past the quota fails with
// storage.ErrQuotaExceeded, as does one of a value over LargeValueBytes
// that would take the large values past a quarter of it. A put that does
// not grow the data (a renewal, usually) and a delete always pass, so a
// client filling the store with big objects cannot stop renewals.
//
// # History
//
// Recent events are kept in memory only, bounded by Options.HistoryWindow,
// Options.HistoryMaxEvents and Options.HistoryMaxBytes; trimming advances
// the compact revision.
// Watch and List at an older revision are served from it. After a restart
// the history is empty, so the compact revision equals the current
// revision: clients resuming from an older resourceVersion get
// ErrCompacted and relist, as they would after an etcd compaction.
package boltdb
