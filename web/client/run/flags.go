package run

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/web/client/lease"
)

// DefaultServer is where the commands look for a server when neither
// --server, --kubeconfig nor $KUBECONFIG says otherwise: "leasehold serve"'s
// default listen address.
const DefaultServer = "http://127.0.0.1:8080"

// connFlags are the flags both commands use to reach the lease.
type connFlags struct {
	Server     string
	Kubeconfig string
	Context    string
	Namespace  string
	Lease      string

	usedKubeconfig string // the kubeconfig actually read, if any
}

func (c *connFlags) register(fs *cli.FlagSet) {
	c.registerServer(fs)
	fs.StringVar(&c.Namespace, "namespace", "", "`namespace` of the lease (default the kubeconfig context's, else \"default\")")
	fs.StringVar(&c.Lease, "lease", "", "`name` of the Lease (required)")
	fs.Alias("n", "namespace")
}

// registerServer registers the flags that say which server to reach and
// how, for commands about the server rather than one lease.
func (c *connFlags) registerServer(fs *cli.FlagSet) {
	fs.StringVar(&c.Server, "server", "", "API server `URL` (overrides the kubeconfig's; default "+DefaultServer+" without a kubeconfig)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig `file` for the server URL, bearer token and TLS settings (default $KUBECONFIG when --server is not given)")
	fs.StringVar(&c.Context, "context", "", "kubeconfig `context` to use (default its current-context)")
}

// client resolves the connection flags into a Lease API client. The
// kubeconfig is read from --kubeconfig, or from $KUBECONFIG when no
// --server is given (as kubectl would); --server overrides its URL.
func (c *connFlags) client(userAgent string, timeout time.Duration) (*lease.Client, lease.Config, error) {
	path := c.Kubeconfig
	if path == "" && c.Server == "" {
		// $KUBECONFIG may list several files; like kubectl, the first
		// one that exists is the one that defines the context here.
		for _, p := range strings.Split(os.Getenv("KUBECONFIG"), string(os.PathListSeparator)) {
			if _, err := os.Stat(p); p != "" && err == nil {
				path = p
				break
			}
		}
	}
	cfg := lease.Config{Server: DefaultServer}
	if path != "" {
		var err error
		if cfg, err = lease.LoadKubeconfig(path, c.Context); err != nil {
			return nil, cfg, err
		}
		c.usedKubeconfig = path
	}
	if c.Server != "" {
		cfg.Server = c.Server
	}
	if c.Namespace == "" {
		c.Namespace = cfg.Namespace
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	cfg.UserAgent, cfg.Timeout = userAgent, timeout
	cl, err := lease.New(cfg)
	return cl, cfg, err
}

// On-exit and on-lost policies.
const (
	OnExitRelease = "release" // release the lease and exit with the child's code
	OnExitKeep    = "keep"    // exit with the child's code; the lease runs out by itself
	OnExitRerun   = "rerun"   // start the child again while still holding the lease

	OnLostRecampaign = "recampaign" // stand by and campaign again
	OnLostExit       = "exit"       // exit with ExitLost
)

// ExitLost is the exit code of "leasehold run --on-lost exit" after it lost
// the lease and stopped the child (EX_TEMPFAIL: try again later).
const ExitLost = 75

// runConfig is the validated configuration of "leasehold run".
type runConfig struct {
	conn             connFlags
	Identity         string
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration
	GracePeriod      time.Duration
	OnExit           string
	OnLost           string
	Candidate        bool
	BinaryVersion    string
	EmulationVersion string
	Strategy         string
	LogFormat        string
	LogLevel         slog.Level
	Command          []string
}

const runSynopsis = "run --lease NAME [flags] -- COMMAND [ARGS...]"

const runAbout = `Campaigns for a coordination.k8s.io/v1 Lease as client-go's LeaderElector does,
runs COMMAND only while holding it, and renews it every --retry-period while
COMMAND runs. COMMAND runs in its own process group; signals go to the whole
group. The child's environment adds LEASEHOLD_LEASE_NAMESPACE,
LEASEHOLD_LEASE_NAME, LEASEHOLD_HOLDER_IDENTITY, LEASEHOLD_LEASE_TRANSITIONS
(a fencing token: it grows with every change of holder), LEASEHOLD_ACQUIRE_TIME
(RFC 3339, microseconds) and LEASEHOLD_SERVER.

Safety rule: leadership counts as lost when no renewal has succeeded for
--renew-deadline, measured on this process's monotonic clock from the moment
the last successful renewal was sent. COMMAND then gets SIGTERM, and SIGKILL
--grace-period later. Other candidates may take over only --lease-duration
after they saw that renewal, so the flags must satisfy
  renew-deadline + grace-period < lease-duration
(the remainder is the margin for clock-rate differences and for the kill to
land), and renew-deadline > 1.2 x retry-period as in client-go.

If leasehold run itself is killed with SIGKILL, Linux kills COMMAND
(PR_SET_PDEATHSIG), but not processes COMMAND started in the background; run
such programs under a service manager that kills the whole tree.

Setting spec.preferredHolder to another identity (with a spec.strategy, as
validation requires) makes the holder stop COMMAND and release the lease; the
preferred identity then gets one lease duration to take it before the others.
The annotation leasehold.dev/step-down=IDENTITY (the web UI's "Ask the holder
to step down") makes that holder stop COMMAND, release the lease and stand by
for one lease duration, so that another runner takes over at once.

A forced release (holderIdentity cleared by someone else, as the web UI's
"Force release" does, or the lease deleted) never runs two COMMANDs at once:
the holder watches its lease and stops COMMAND as soon as it sees another or no
holder, and the runner that takes such a lease starts COMMAND only after the
previous holder's lease would have run out (the last renewal it saw + that
lease's duration + a tenth for clock drift, on its own monotonic clock).

SIGTERM or SIGINT is forwarded to COMMAND; once it exits the lease is released
and leasehold run exits with COMMAND's code (128+N if a signal N ended it). A
second signal sends SIGKILL. SIGHUP, SIGUSR1 and SIGUSR2 are forwarded.

With --candidate, leasehold run registers a coordination.k8s.io/v1beta1
LeaseCandidate named --identity and waits for the server's coordinated
election to grant it the lease, as client-go's NewCandidate plus
LeaderElector{Coordinated: true} do; it steps down when preferredHolder is set.

Exit codes: COMMAND's; 0 when stopped before leading; 1 on setup errors; 2 on
usage errors; 75 after a lost lease with --on-lost exit; 126/127 when COMMAND
cannot be started.
`

func parseRunFlags(args []string, stderr io.Writer) (runConfig, error) {
	fs := cli.NewFlagSet(runSynopsis, runAbout, stderr)
	var cfg runConfig
	var logLevel string
	cfg.conn.register(fs)
	fs.StringVar(&cfg.Identity, "identity", "", "holder `identity` written to the lease, unique per process (default <hostname>_<random>)")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", 15*time.Second, "how long others wait after the last renewal they saw before taking over (whole seconds)")
	fs.DurationVar(&cfg.RenewDeadline, "renew-deadline", 10*time.Second, "how long renewals may fail before the child is stopped")
	fs.DurationVar(&cfg.RetryPeriod, "retry-period", 2*time.Second, "interval between acquire or renew attempts")
	fs.DurationVar(&cfg.GracePeriod, "grace-period", 0, "time between SIGTERM and SIGKILL of the child (default (lease-duration - renew-deadline) / 2)")
	fs.StringVar(&cfg.OnExit, "on-exit", OnExitRelease, "when the child exits by itself: `release` the lease and exit, keep it (exit, the lease runs out) or rerun the child")
	fs.StringVar(&cfg.OnLost, "on-lost", OnLostRecampaign, "after the lease was lost and the child stopped: `recampaign` or exit (code 75)")
	fs.BoolVar(&cfg.Candidate, "candidate", false, "register a LeaseCandidate and wait for coordinated election instead of campaigning")
	fs.StringVar(&cfg.BinaryVersion, "binary-version", "", "LeaseCandidate binaryVersion (`semver`; required with --candidate)")
	fs.StringVar(&cfg.EmulationVersion, "emulation-version", "", "LeaseCandidate emulationVersion (`semver`; default the binary version)")
	fs.StringVar(&cfg.Strategy, "strategy", "OldestEmulationVersion", "LeaseCandidate `strategy`")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: `text` or json")
	fs.StringVar(&logLevel, "log-level", "info", "minimum log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.Command = fs.Args()
	if len(cfg.Command) == 0 {
		return cfg, errors.New("no COMMAND given (leasehold run --lease NAME [flags] -- COMMAND [ARGS...])")
	}
	if cfg.conn.Lease == "" {
		return cfg, errors.New("--lease is required")
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return cfg, fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", logLevel)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return cfg, fmt.Errorf("invalid --log-format %q: use text or json", cfg.LogFormat)
	}
	switch cfg.OnExit {
	case OnExitRelease, OnExitKeep, OnExitRerun:
	default:
		return cfg, fmt.Errorf("invalid --on-exit %q: use release, keep or rerun", cfg.OnExit)
	}
	switch cfg.OnLost {
	case OnLostRecampaign, OnLostExit:
	default:
		return cfg, fmt.Errorf("invalid --on-lost %q: use recampaign or exit", cfg.OnLost)
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = (cfg.LeaseDuration - cfg.RenewDeadline) / 2
	}
	if err := validateTimers(cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod, cfg.GracePeriod); err != nil {
		return cfg, err
	}
	if cfg.Identity == "" {
		id, err := defaultIdentity()
		if err != nil {
			return cfg, err
		}
		cfg.Identity = id
	}
	if cfg.Candidate {
		if cfg.BinaryVersion == "" {
			return cfg, errors.New("--candidate needs --binary-version")
		}
		if cfg.EmulationVersion == "" {
			cfg.EmulationVersion = cfg.BinaryVersion
		}
		if cfg.Strategy == "" {
			return cfg, errors.New("--strategy must not be empty with --candidate")
		}
	}
	return cfg, nil
}

// validateTimers enforces the safety rule explained in the help text.
func validateTimers(lease, deadline, retry, grace time.Duration) error {
	switch {
	case lease < time.Second || lease%time.Second != 0:
		return fmt.Errorf("invalid --lease-duration %s: must be a whole number of seconds, at least 1s (the Lease stores leaseDurationSeconds)", lease)
	case retry <= 0:
		return fmt.Errorf("invalid --retry-period %s: must be positive", retry)
	case deadline <= retry*12/10:
		return fmt.Errorf("invalid --renew-deadline %s: must be greater than 1.2 x --retry-period (%s)", deadline, retry*12/10)
	case grace <= 0:
		return fmt.Errorf("invalid --grace-period %s: must be positive", grace)
	case deadline+grace >= lease:
		return fmt.Errorf("--renew-deadline %s + --grace-period %s must be less than --lease-duration %s: the child must be dead before another holder may take over", deadline, grace, lease)
	}
	return nil
}

// defaultIdentity is <hostname>_<8 random hex digits>, as kube-controller-
// manager names itself: unique per process, so that two processes on one
// host never both believe they hold the lease.
func defaultIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "leasehold"
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b[:]), nil
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
