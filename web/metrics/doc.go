// Package metrics is leasehold's /metrics: Prometheus text format written
// with github.com/VictoriaMetrics/metrics (by fasthttp's author, three small
// dependencies, writes to any io.Writer, go_* and process_* included).
//
// Request, watch and storage-commit series are recorded as they happen.
// Everything that is state rather than an event (per-lease gauges, storage
// revision and size, election and plugin counters) is read from Sources at
// scrape time, so nothing has to be kept in sync and a scrape costs one
// in-memory list of leases.
//
// Histograms use Prometheus' cumulative "le" buckets (histogram.go):
// VictoriaMetrics' own histograms use "vmrange" buckets, which
// Prometheus' histogram_quantile cannot read.
package metrics
