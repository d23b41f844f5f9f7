package web

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Observability is how "leasehold serve" reports on itself: its log
// format and level, the per-lease series of /metrics, and the optional
// profiling listener (StartProfiling).
type Observability struct {
	LogFormat string // "text" or "json"
	LogLevel  slog.Level
	// MetricsPerLease exports the leasehold_lease_* series, one per lease.
	MetricsPerLease bool
	// ProfilingListen serves /debug/pprof/ on its own address ("": off).
	ProfilingListen string

	logLevel string // the flag's text, parsed by Validate
}

// RegisterFlags adds the observability flags to fs.
func (o *Observability) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format: `text` or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "minimum log `level`: debug, info, warn or error")
	fs.BoolVar(&o.MetricsPerLease, "metrics-per-lease", false, "export the leasehold_lease_* series (one per lease, labelled with its namespace and holder): whoever may read /metrics then learns every namespace's holders")
	fs.StringVar(&o.ProfilingListen, "profiling-listen", "", "loopback `address` to serve unauthenticated Go profiling endpoints (/debug/pprof/) on, e.g. 127.0.0.1:6060 (default off; other addresses need --insecure-allow-unauthenticated-network)")
}

// Validate checks the parsed flags and sets LogLevel.
func (o *Observability) Validate() error {
	if err := o.LogLevel.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", o.logLevel)
	}
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return fmt.Errorf("invalid --log-format %q: use text or json", o.LogFormat)
	}
	return nil
}

// NewLogger returns the logger the configuration asks for, writing to w.
func (o *Observability) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: o.LogLevel}
	if o.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
