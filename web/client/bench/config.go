package bench

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
)

// Config is one load run.
type Config struct {
	// Server is the API's base URL: http, or https for the renewals only
	// (no watchers or noise), to drive a peer such as kube-apiserver.
	Server string `json:"server"`
	// InsecureSkipTLSVerify accepts any certificate of an https Server.
	InsecureSkipTLSVerify bool `json:"-"`
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
	// MemberPIDs are the other members of a cluster whose member
	// ServerPID is (the renewals go to ServerPID's member only): their CPU
	// time is added to the server's in the cluster figures, since every
	// write costs each member its replication, WAL and apply.
	MemberPIDs []int `json:"member_pids,omitempty"`
	// NoSetup skips creating missing leases.
	NoSetup bool `json:"no_setup"`
	// ListRuns lists the whole namespace this many times after the load
	// and reports the latency.
	ListRuns int `json:"list_runs"`
	// Noise, when set, runs a noisy neighbour beside the renewals: one of
	// NoiseList, NoiseWatch, NoisePatch, NoiseIdle.
	Noise string `json:"noise,omitempty"`
	// NoiseNamespace holds NoiseObjects leases, created before the run,
	// that the neighbour lists, watches or patches.
	NoiseNamespace string `json:"noise_namespace,omitempty"`
	NoiseObjects   int    `json:"noise_objects,omitempty"`
	// NoiseClients is the neighbour's concurrency (0: the mode's
	// default, see noiseDefaults).
	NoiseClients int `json:"noise_clients,omitempty"`
	// NoiseProcess runs the neighbour in a child process (see
	// noiseProcess); NoiseOnly is that child: the neighbour alone, until
	// stdin closes.
	NoiseProcess bool `json:"noise_process,omitempty"`
	NoiseOnly    bool `json:"-"`
	// NoiseBytes is the annotation size of NoisePatch's patches.
	NoiseBytes int `json:"noise_bytes,omitempty"`
	// Output is "text" or "json".
	Output string `json:"-"`
}

// noiseDefaults are the neighbours' default concurrency: the 48
// LIST loops, 200 re-listing watchers, 16 large patchers, 2,000 idle
// connections.
var noiseDefaults = map[string]int{NoiseList: 48, NoiseWatch: 200, NoisePatch: 16, NoiseIdle: 2000}

// Defaults are the target workload: 64 clients over 1,000 leases.
func Defaults() Config {
	return Config{
		Server: "http://127.0.0.1:8080", Namespace: "bench", Prefix: "bench-",
		Leases: 1000, Clients: 64, Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Output: "text", NoiseNamespace: "big", NoiseObjects: 10000, NoiseBytes: 200000,
	}
}

const synopsis = "bench [flags]"

const about = `Measures renewals/s, latency and the server's CPU per renewal under the lease
renewal workload of client-go's LeaseLock (GET, then PUT with a new renewTime)
over --leases leases from --clients concurrent clients, optionally with
watchers, LeaseCandidate churn, a LIST timing (see docs/bench.sh), or a noisy
neighbour beside the renewals (--noise; see docs/noisy.sh).

Exit codes: 0 clean run; 1 errors or conflicts during the run; 2 usage error.`

// ParseFlags reads "leasehold bench" flags over Defaults.
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := Defaults()
	fs := cli.NewFlagSet(synopsis, about, stderr)
	fs.StringVar(&cfg.Server, "server", cfg.Server, "API server `URL` (http; https for renewals only, e.g. kube-apiserver as the peer)")
	fs.StringVar(&cfg.Token, "token", "", "bearer `token` to send")
	fs.BoolVar(&cfg.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "with an https --server, accept any certificate (a benchmark peer on loopback)")
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
	fs.Func("member-pids", "comma-separated `pids` of the other members of a cluster whose member --server-pid is: their CPU is summed with the server's (the cluster figures)", func(v string) error {
		pids, err := parsePIDs(v)
		cfg.MemberPIDs = append(cfg.MemberPIDs, pids...)
		return err
	})
	fs.BoolVar(&cfg.NoSetup, "no-setup", false, "do not create missing leases")
	fs.IntVar(&cfg.ListRuns, "list", 0, "after the load, LIST the namespace this many times and report the latency")
	fs.StringVar(&cfg.Noise, "noise", "", "noisy neighbour beside the renewals: list (LIST loops), watch (re-listing watchers), patch (large patches) or idle (idle connections)")
	fs.StringVar(&cfg.NoiseNamespace, "noise-namespace", cfg.NoiseNamespace, "namespace of the neighbour's leases")
	fs.IntVar(&cfg.NoiseObjects, "noise-objects", cfg.NoiseObjects, "leases created in --noise-namespace for the neighbour")
	fs.IntVar(&cfg.NoiseClients, "noise-clients", 0, "the neighbour's concurrency (0: 48 LIST loops, 200 watchers, 16 patchers or 2000 idle connections)")
	fs.IntVar(&cfg.NoiseBytes, "noise-bytes", cfg.NoiseBytes, "annotation `bytes` of each --noise patch")
	fs.BoolVar(&cfg.NoiseProcess, "noise-process", true, "run the neighbour in a child process, so that it does not share the renewers' Go runtime (false: in this process)")
	fs.BoolVar(&cfg.NoiseOnly, "noise-only", false, "run only the neighbour until stdin closes, then print its report as JSON (what --noise-process starts)")
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
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid --server %q: want http://host:port", c.Server)
	}
	if u.Scheme == "https" && (c.Watchers > 0 || c.Noise != "") {
		return fmt.Errorf("invalid --server %q: --watchers and --noise speak plain http only", c.Server)
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
	case c.NoiseOnly && c.Noise == "":
		return errors.New("--noise-only needs --noise")
	case c.Noise != "" && noiseDefaults[c.Noise] == 0:
		return fmt.Errorf("invalid --noise %q: use list, watch, patch or idle", c.Noise)
	case c.Noise != "" && (c.NoiseObjects <= 0 || c.NoiseClients < 0 || c.NoiseBytes < 0 || c.NoiseNamespace == "" || c.NoiseNamespace == c.Namespace):
		return errors.New("--noise needs positive --noise-objects, non-negative --noise-clients and --noise-bytes, and a --noise-namespace other than --namespace")
	case len(c.MemberPIDs) > 0 && c.ServerPID <= 0:
		return errors.New("--member-pids needs --server-pid (the member the renewals go to)")
	case c.Output != "text" && c.Output != "json":
		return fmt.Errorf("invalid --output %q: use text or json", c.Output)
	}
	if c.Noise != "" && c.NoiseClients == 0 {
		c.NoiseClients = noiseDefaults[c.Noise]
	}
	return nil
}

// parsePIDs reads a comma-separated list of process IDs.
func parsePIDs(v string) ([]int, error) {
	var pids []int
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("invalid pid %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// tls reports whether the server is reached over https.
func (c *Config) tls() bool { return strings.HasPrefix(c.Server, "https://") }

// host is the server's host:port.
func (c *Config) host() string {
	u, _ := url.Parse(c.Server)
	return u.Host
}

func (c *Config) leaseName(i int) string { return fmt.Sprintf("%s%06d", c.Prefix, i) }

func (c *Config) leasesPath() string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + c.Namespace + "/leases"
}
