package bench

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
)

// Config is one load run.
type Config struct {
	// Server is the API's base URL (http only).
	Server string `json:"server"`
	// Token is sent as "Authorization: Bearer <Token>" when set.
	Token string `json:"-"`
	// Namespace holds the benchmark's leases (and candidates).
	Namespace string `json:"namespace"`
	// Leases is H, the number of leases renewed, named <Prefix><index>.
	Leases int    `json:"leases"`
	Prefix string `json:"prefix"`
	// Clients is C, concurrent renewers; client i renews the leases with
	// index = i mod C, so no two clients share a lease and conflicts
	// mean a server bug.
	Clients int `json:"clients"`
	// Duration is the measured window, after Warmup.
	Duration time.Duration `json:"duration_ns"`
	Warmup   time.Duration `json:"warmup_ns"`
	// Rate caps the total renewals per second (0: each client renews
	// back to back, as fast as the server answers).
	Rate float64 `json:"rate"`
	// Watchers is W, watches of the namespace's leases started before
	// the load; each must see every renewal.
	Watchers int `json:"watchers"`
	// Candidates is the number of LeaseCandidate churners (create, a few
	// renewals, delete, repeat).
	Candidates int `json:"candidates"`
	// ServerPID, when set, is the server process measured for CPU time
	// and RSS (/proc/<pid>).
	ServerPID int `json:"server_pid,omitempty"`
	// NoSetup skips creating missing leases.
	NoSetup bool `json:"no_setup"`
	// ListRuns lists the whole namespace this many times after the load
	// and reports the latency.
	ListRuns int `json:"list_runs"`
	// Output is "text" or "json".
	Output string `json:"-"`
}

// Defaults are the target workload: 64 clients over 1,000 leases.
func Defaults() Config {
	return Config{
		Server: "http://127.0.0.1:8080", Namespace: "bench", Prefix: "bench-",
		Leases: 1000, Clients: 64, Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Output: "text",
	}
}

const synopsis = "bench [flags]"

const about = `Measures renewals/s, latency and the server's CPU per renewal under the lease
renewal workload of client-go's LeaseLock (GET, then PUT with a new renewTime)
over --leases leases from --clients concurrent clients, optionally with
watchers, LeaseCandidate churn and a LIST timing (see docs/bench.sh).

Exit codes: 0 clean run; 1 errors or conflicts during the run; 2 usage error.`

// ParseFlags reads "leasehold bench" flags over Defaults.
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := Defaults()
	fs := cli.NewFlagSet(synopsis, about, stderr)
	fs.StringVar(&cfg.Server, "server", cfg.Server, "API server `URL` (http)")
	fs.StringVar(&cfg.Token, "token", "", "bearer `token` to send")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "namespace of the benchmark's leases")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "lease name prefix")
	fs.IntVar(&cfg.Leases, "leases", cfg.Leases, "number of leases renewed (H)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent renewing clients (C), each owning leases i with i mod C = its index")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured duration (D)")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured load before the measured window")
	fs.Float64Var(&cfg.Rate, "rate", 0, "cap on total renewals per second (0: closed loop, as fast as answered)")
	fs.IntVar(&cfg.Watchers, "watchers", 0, "watches of the namespace's leases measuring event lag (W)")
	fs.IntVar(&cfg.Candidates, "candidates", 0, "LeaseCandidate churners (create, renew, delete, repeat)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "server `pid`, to report its CPU time per renewal and RSS")
	fs.BoolVar(&cfg.NoSetup, "no-setup", false, "do not create missing leases")
	fs.IntVar(&cfg.ListRuns, "list", 0, "after the load, LIST the namespace this many times and report the latency")
	fs.StringVar(&cfg.Output, "output", cfg.Output, "report format: `text` or json")
	fs.Alias("n", "namespace")
	fs.Alias("o", "output")
	if err := fs.ParseNoArgs(args); err != nil {
		return cfg, err
	}
	return cfg, cfg.validate()
}

func (c *Config) validate() error {
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("invalid --server %q: want http://host:port", c.Server)
	}
	switch {
	case c.Leases <= 0:
		return errors.New("--leases must be positive")
	case c.Clients <= 0:
		return errors.New("--clients must be positive")
	case c.Clients > c.Leases:
		return fmt.Errorf("--clients %d exceeds --leases %d: clients would share no lease", c.Clients, c.Leases)
	case c.Duration <= 0:
		return errors.New("--duration must be positive")
	case c.Warmup < 0 || c.Rate < 0 || c.Watchers < 0 || c.Candidates < 0 || c.ListRuns < 0:
		return errors.New("--warmup, --rate, --watchers, --candidates and --list must not be negative")
	case c.Output != "text" && c.Output != "json":
		return fmt.Errorf("invalid --output %q: use text or json", c.Output)
	}
	return nil
}

// host is the server's host:port.
func (c *Config) host() string {
	u, _ := url.Parse(c.Server)
	return u.Host
}

func (c *Config) leaseName(i int) string { return fmt.Sprintf("%s%06d", c.Prefix, i) }

func (c *Config) leasesPath() string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + c.Namespace + "/leases"
}
