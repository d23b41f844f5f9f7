package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// Bucket bounds, in seconds. leasehold answers most requests in well under
// a millisecond, so the buckets start lower than apiserver_request_duration's.
var (
	requestBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	commitBuckets  = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// Registry holds leasehold's series. The zero value is not usable: call New.
type Registry struct {
	set *vm.Set

	mu        sync.RWMutex
	requests  map[RequestLabels]*vm.Counter
	durations map[durationKey]*histogram

	watches      atomic.Int64
	commits      *histogram
	commitWrites *vm.Counter
	commitErrors *vm.Counter
	// lastBackup is when the last backup was served in full, in Unix
	// seconds; 0 until one is.
	lastBackup atomic.Int64

	sources atomic.Pointer[Sources]
	// perLease adds the leasehold_lease_* series: opt-in, as they reveal
	// every namespace's holders, and one series per lease is too many for
	// large fleets.
	perLease atomic.Bool
}

// RequestLabels label one request in leasehold_http_requests_total, as
// apiserver_request_total: the upper-case verb (LIST, WATCH, ...; the
// method for non-resource requests), group, version, resource and code.
type RequestLabels struct {
	Verb, Group, Version, Resource string
	Code                           int
}

type durationKey struct{ verb, group, version, resource string }

// New returns an empty registry with per-lease series off: they label
// every lease with its namespace and holder, so whoever may scrape
// /metrics would learn every namespace's holders. SetPerLease turns them on.
func New() *Registry {
	// The # HELP/# TYPE lines make the output self-describing; the flag
	// is package-wide in VictoriaMetrics/metrics.
	vm.ExposeMetadata(true)
	r := &Registry{
		set:       vm.NewSet(),
		requests:  map[RequestLabels]*vm.Counter{},
		durations: map[durationKey]*histogram{},
		commits:   newHistogram(commitBuckets),
	}
	r.commitWrites = r.set.NewCounter("leasehold_storage_commit_writes_total")
	r.commitErrors = r.set.NewCounter("leasehold_storage_commit_errors_total")
	r.set.NewGauge("leasehold_watch_streams", func() float64 { return float64(r.watches.Load()) })
	return r
}

// SetSources sets (or replaces) the scrape-time sources.
func (r *Registry) SetSources(s Sources) { r.sources.Store(&s) }

// SetPerLease turns the per-lease series on or off.
func (r *Registry) SetPerLease(on bool) { r.perLease.Store(on) }

// ObserveRequest counts one finished request and its latency.
func (r *Registry) ObserveRequest(l RequestLabels, d time.Duration) {
	r.mu.RLock()
	c := r.requests[l]
	h := r.durations[durationKey{l.Verb, l.Group, l.Version, l.Resource}]
	r.mu.RUnlock()
	if c == nil || h == nil {
		c, h = r.slowPath(l)
	}
	c.Inc()
	h.observe(d.Seconds())
}

func (r *Registry) slowPath(l RequestLabels) (*vm.Counter, *histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.requests[l]
	if c == nil {
		c = r.set.GetOrCreateCounter(fmt.Sprintf(`leasehold_http_requests_total{verb=%s,group=%s,version=%s,resource=%s,code="%d"}`,
			quote(l.Verb), quote(l.Group), quote(l.Version), quote(l.Resource), l.Code))
		r.requests[l] = c
	}
	k := durationKey{l.Verb, l.Group, l.Version, l.Resource}
	h := r.durations[k]
	if h == nil {
		h = newHistogram(requestBuckets)
		r.durations[k] = h
	}
	return c, h
}

// WatchStarted counts an open watch stream; call the result when it ends.
func (r *Registry) WatchStarted() (ended func()) {
	r.watches.Add(1)
	var once sync.Once
	return func() { once.Do(func() { r.watches.Add(-1) }) }
}

// ObserveCommit records one storage commit: how long the fsynced
// transaction took and how many writes it carried. It fits
// boltdb.Options.OnCommit.
func (r *Registry) ObserveCommit(d time.Duration, writes int, err error) {
	if err != nil {
		r.commitErrors.Inc()
		return
	}
	r.commits.observe(d.Seconds())
	r.commitWrites.Add(writes)
}

// ObserveBackup records a backup served in full at at.
func (r *Registry) ObserveBackup(at time.Time) { r.lastBackup.Store(at.Unix()) }

// WritePrometheus writes every series in the Prometheus text format.
func (r *Registry) WritePrometheus(ctx context.Context, w io.Writer) {
	var set bytes.Buffer
	r.set.WritePrometheus(&set)
	fillHelp(w, set.Bytes())
	r.writeDurations(w)
	help(w, "leasehold_storage_commit_duration_seconds", "histogram", "Duration of fsynced storage commits (one per group of writes).")
	r.commits.write(w, "leasehold_storage_commit_duration_seconds", "")
	if at := r.lastBackup.Load(); at != 0 {
		// Left out until a backup is served: a 0 would read as "the last
		// backup is 56 years old" right after every restart.
		help(w, "leasehold_backup_last_success_timestamp_seconds", "gauge", "When this server last served a backup (GET /leasehold/v1/backup, leasehold backup) in full since it started, as a Unix timestamp.")
		fmt.Fprintf(w, "leasehold_backup_last_success_timestamp_seconds %d\n", at)
	}
	if src := r.sources.Load(); src != nil {
		r.writeSources(ctx, w, src)
	}
	var process bytes.Buffer
	vm.WriteProcessMetrics(&process)
	fillHelp(w, process.Bytes())
}

func (r *Registry) writeDurations(w io.Writer) {
	r.mu.RLock()
	keys := make([]durationKey, 0, len(r.durations))
	for k := range r.durations {
		keys = append(keys, k)
	}
	r.mu.RUnlock()
	if len(keys) == 0 {
		return
	}
	sortKeys(keys)
	const name = "leasehold_http_request_duration_seconds"
	help(w, name, "histogram", "Response latency by verb, group, version and resource (watches: until the stream starts).")
	for _, k := range keys {
		r.mu.RLock()
		h := r.durations[k]
		r.mu.RUnlock()
		h.write(w, name, fmt.Sprintf("verb=%s,group=%s,version=%s,resource=%s", quote(k.verb), quote(k.group), quote(k.version), quote(k.resource)))
	}
}

// help writes the metadata lines of a family.
func help(w io.Writer, name, typ, text string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, typ)
}

// quote renders a label value with the text format's three escapes
// (backslash, double quote, newline); holder identities are arbitrary
// strings, so nothing else may be assumed.
func quote(v string) string {
	if !strings.ContainsAny(v, "\\\"\n") {
		return `"` + v + `"`
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
