package main

// "leasehold serve": its flags, by concern, and the assembly of storage,
// engine, election, plugins and web into the server.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/plugins/signature"
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/backend"
	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/cli"
	"github.com/leasehold/leasehold/web/kubeconfig"
	"github.com/leasehold/leasehold/web/metrics"
	"github.com/leasehold/leasehold/web/sdnotify"
	"github.com/leasehold/leasehold/web/security"
	"github.com/leasehold/leasehold/web/ui"
)

// ---------------------------------------------------------------------------
// serve: flags, by concern
// ---------------------------------------------------------------------------

var serveCommand = cli.Command{
	Name:     "serve",
	Synopsis: "[serve] [flags]",
	Summary:  `run the server (default command; see "leasehold serve --help")`,
	Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		fs := cli.NewFlagSet("serve [flags]", serveAbout, stderr)
		cfg, err := parseServeFlags(fs, args)
		if code, stop := fs.Stop(err); stop {
			return code
		}
		if err := serve(ctx, cfg, stdout); err != nil {
			fmt.Fprintf(stderr, "leasehold: %v\n", err)
			return cli.ExitFailure
		}
		return cli.ExitOK
	},
}

const serveAbout = `Serves the Kubernetes Lease API (coordination.k8s.io: Leases and
LeaseCandidates, with the Namespaces and Events clients expect), discovery,
OpenAPI, health, metrics and the web UI from one process, with the database in --data-dir (or etcd, --storage etcd). It
runs the coordinated leader-election controller with the strategy modules of
--plugins-dir, and writes a kubeconfig for local clients. "leasehold" with no
command, or with flags only, is "leasehold serve".`

// serveConfig is the parsed and validated configuration of "leasehold
// serve": the server's own flags here, the rest by concern.
type serveConfig struct {
	Listen          string
	DataDir         string
	WriteKubeconfig string
	// ReadyFile receives the server's URL once it accepts requests ("": off).
	ReadyFile  string
	PluginsDir string
	// AllowedHosts are further names an unauthenticated request's Host
	// header may give (web.Options.AllowedHosts).
	AllowedHosts []string
	// PluginFollowSymlinks lets files of PluginsDir be symbolic links.
	PluginFollowSymlinks bool
	PluginTimeout        time.Duration
	// FirstGrantWait is election.Options.FirstGrantWait.
	FirstGrantWait time.Duration
	MaxBodyBytes   int
	ShutdownDelay  time.Duration

	// NamespaceLifecycle is --namespace-lifecycle (implicit or strict).
	NamespaceLifecycle engine.NamespaceLifecycle
	// EventTTL, EventMaxCount and EventMaxBytes bound the stored Events.
	EventTTL      time.Duration
	EventMaxCount int
	EventMaxBytes int

	// PluginTrustKeys are the files of public keys whose signatures make
	// a plugins-directory module loadable (empty: no verification).
	PluginTrustKeys []string

	Storage       backend.Config
	Security      *security.Config
	Limits        web.Limits
	Observability web.Observability
}

func parseServeFlags(fs *cli.FlagSet, args []string) (serveConfig, error) {
	var cfg serveConfig
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address (`host:port`) to serve the API on")
	fs.StringVar(&cfg.DataDir, "data-dir", "leasehold-data", "`directory` holding the database (leasehold.db) and generated files")
	fs.StringVar(&cfg.WriteKubeconfig, "write-kubeconfig", "", "`path` to write a kubeconfig for local clients to (default <data-dir>/kubeconfig; \"-\" disables)")
	fs.StringVar(&cfg.PluginsDir, "plugins-dir", "", "`directory` watched for election strategy modules (*.wasm) (default <data-dir>/plugins)")
	allowedHosts := fs.String("allowed-hosts", "", "comma-separated host `names` a request without credentials may address this server by, besides IP addresses, localhost and the --listen host (\".example.com\" allows its subdomains); other names are refused, so that a web page cannot reach the server through DNS rebinding")
	fs.BoolVar(&cfg.PluginFollowSymlinks, "plugin-follow-symlinks", false, "let module, settings and signature files of --plugins-dir be symbolic links (default: regular files only; anything else is refused unopened)")
	fs.DurationVar(&cfg.PluginTimeout, "plugin-timeout", host.DefaultDecisionTimeout(false), "wall-clock limit of one strategy decision (1s on wazero's compiler, 5s on its interpreter on 32-bit ARM); a module that exceeds it is cut off and the built-in strategy decides")
	trustKeys := fs.String("plugin-trust-keys", "", "comma-separated `files` of PEM Ed25519 public keys (\"leasehold plugin keygen\" writes KEYFILE.pub; a file may hold several): load a module of --plugins-dir only with a valid MODULE.wasm.sig by one of them; built-ins are always trusted (default: no verification)")
	fs.DurationVar(&cfg.FirstGrantWait, "election-first-grant-wait", election.DefaultFirstGrantWait, "how long the election controller waits, once the first candidate of a missing or vacant coordinated lease appears, for the others to register or answer a ping before it grants the lease, so that the best of candidates starting together gets it; also the most it waits for the ack of a holder whose lease expired (0: no wait)")
	fs.IntVar(&cfg.MaxBodyBytes, "max-request-body-bytes", 3<<20, "largest request body accepted, in `bytes` (larger bodies get 413)")
	fs.StringVar(&cfg.ReadyFile, "ready-file", "", "`path` to write the server's URL (e.g. http://127.0.0.1:41234) to once it accepts requests, and to remove when it stops: tells a parent process which port --listen host:0 chose (default off)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay-duration", 0, "on SIGTERM, keep serving with /readyz failing for this long before closing, so load balancers stop sending requests first")
	nsLifecycle := fs.String("namespace-lifecycle", string(engine.NamespacesImplicit), "what a create into a missing namespace does: \"implicit\" creates the namespace, \"strict\" answers 404 namespaces \"x\" not found as kube-apiserver")
	fs.DurationVar(&cfg.EventTTL, "event-ttl", engine.DefaultEventTTL, "how long an Event is kept after its last write")
	fs.IntVar(&cfg.EventMaxCount, "event-max-count", engine.DefaultEventMaxCount, "most Events stored; beyond it the oldest are deleted")
	fs.IntVar(&cfg.EventMaxBytes, "event-max-bytes", engine.DefaultEventMaxBytes, "most `bytes` of stored Events; beyond it the oldest are deleted")
	cfg.Storage.RegisterFlags(fs.FlagSet)
	cfg.Security = security.RegisterFlags(fs.FlagSet)
	cfg.Limits.RegisterFlags(fs.FlagSet)
	cfg.Observability.RegisterFlags(fs.FlagSet)
	if err := fs.ParseNoArgs(args); err != nil {
		return cfg, err
	}
	if err := cfg.Observability.Validate(); err != nil {
		return cfg, err
	}
	var err error
	if cfg.NamespaceLifecycle, err = engine.ParseNamespaceLifecycle(*nsLifecycle); err != nil {
		return cfg, fmt.Errorf("invalid --namespace-lifecycle: %w", err)
	}
	if cfg.EventTTL <= 0 || cfg.EventMaxCount <= 0 || cfg.EventMaxBytes <= 0 {
		return cfg, errors.New("--event-ttl, --event-max-count and --event-max-bytes must be positive")
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return cfg, fmt.Errorf("invalid --listen %q: %w", cfg.Listen, err)
	}
	if cfg.DataDir == "" {
		return cfg, errors.New("--data-dir must not be empty")
	}
	if cfg.WriteKubeconfig == "" {
		cfg.WriteKubeconfig = filepath.Join(cfg.DataDir, "kubeconfig")
	}
	if cfg.PluginsDir == "" {
		cfg.PluginsDir = filepath.Join(cfg.DataDir, "plugins")
	}
	for _, h := range strings.Split(*allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowedHosts = append(cfg.AllowedHosts, h)
		}
	}
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" {
		cfg.AllowedHosts = append(cfg.AllowedHosts, h)
	}
	for _, f := range strings.Split(*trustKeys, ",") {
		if f = strings.TrimSpace(f); f != "" {
			cfg.PluginTrustKeys = append(cfg.PluginTrustKeys, f)
		}
	}
	if cfg.PluginTimeout <= 0 {
		return cfg, fmt.Errorf("invalid --plugin-timeout %s: must be positive", cfg.PluginTimeout)
	}
	if cfg.FirstGrantWait < 0 {
		return cfg, fmt.Errorf("invalid --election-first-grant-wait %s: must not be negative", cfg.FirstGrantWait)
	}
	if cfg.MaxBodyBytes <= 0 {
		return cfg, fmt.Errorf("invalid --max-request-body-bytes %d: must be positive", cfg.MaxBodyBytes)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return cfg, err
	}
	// A data directory that holds a cluster member restarts it, whatever
	// the flags: serving a fresh bbolt database from it would split the
	// device off its cluster without a word.
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "cluster", "member.json")); err == nil {
		cfg.Storage.Cluster.Rejoin = true
	}
	// Likewise a replica of a cluster (--replica) restarts as one.
	if _, err := os.Stat(replicaFilesIn(cfg.DataDir).state); err == nil {
		cfg.Storage.Cluster.Replica = true
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "cluster", "restore.snapshot")); err == nil && !cfg.Storage.Cluster.Enabled() {
		return cfg, fmt.Errorf("%s holds a cluster snapshot staged by leasehold restore: start the restored cluster with --cluster-init (and the member flags), or remove it", cfg.DataDir)
	}
	if err := cfg.Storage.Validate(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Security.Validate(cfg.Listen)
}

// ---------------------------------------------------------------------------
// serve: wiring storage, engine, election, plugins and web
// ---------------------------------------------------------------------------

// serve runs the server until ctx is done.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer) error {
	logger := cfg.Observability.NewLogger(stdout)
	start := time.Now()
	if err := web.StartProfiling(ctx, cfg.Observability.ProfilingListen, cfg.Security.AllowUnauthenticatedNetwork, logger); err != nil {
		return err
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	sec, err := cfg.Security.Build(cfg.Listen, cfg.DataDir, logger)
	if err != nil {
		return err
	}
	cs, err := prepareCluster(ctx, &cfg, logger.With("component", "cluster"))
	if err != nil {
		return err
	}
	if err := prepareReplica(ctx, &cfg, logger.With("component", "cluster")); err != nil {
		return err
	}
	if cfg.Storage.Shared() {
		// gRPC (under the etcd client and server) would otherwise write
		// its errors unlabelled to standard error.
		etcd.RouteGRPCLogs(logger)
	}
	if m := cfg.Storage.Cluster.Member; m != nil {
		m.Logger = logger.With("component", "cluster")
		m.EtcdLogger = logger.With("component", "etcd")
	}
	ops := newServeOps(cfg.Observability)
	store, dbPath, err := backend.Open(ctx, cfg.Storage, cfg.DataDir, ops.onCommit, logger.With("component", "storage"))
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("Closing storage failed", "storage", dbPath, "err", err)
		}
	}()

	eng, err := engine.New(engine.Options{Store: store, Logger: logger.With("component", "engine"),
		WatchQueueBytes: int64(cfg.Limits.WatchQueueBytes), WatchQueueBytesTotal: int64(cfg.Limits.WatchQueueBytesTotal),
		NamespaceLifecycle: cfg.NamespaceLifecycle,
		EventTTL:           cfg.EventTTL, EventMaxCount: cfg.EventMaxCount, EventMaxBytes: int64(cfg.EventMaxBytes)})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}

	// Strategy modules: the embedded built-ins are compiled (from the disk
	// cache when warm) before the server reports ready; the plugins
	// directory is then watched for new, changed and removed modules.
	// ctrl is the election controller this replica runs, nil while another
	// replica sharing the store leads.
	var ctrl atomic.Pointer[election.Controller]
	trust, err := pluginTrust(cfg, logger)
	if err != nil {
		return err
	}
	plugins, err := host.New(ctx, host.Options{
		DataDir: cfg.DataDir,
		Dir:     cfg.PluginsDir,
		Logger:  logger,
		OnChange: func() {
			if c := ctrl.Load(); c != nil {
				c.Resync()
			}
		},
		TrustKeys:      trust,
		FollowSymlinks: cfg.PluginFollowSymlinks,
	})
	if err != nil {
		return fmt.Errorf("load strategy plugins: %w", err)
	}
	defer plugins.Close(context.WithoutCancel(ctx))

	electionOpts := election.Options{Engine: eng, Registry: plugins, Logger: logger.With("component", "election"),
		// The one limit of a decision: the host cuts its guest off at this
		// deadline of the call's context.
		DecideTimeout: cfg.PluginTimeout,
		// Decide only once the plugins directory's modules are loaded
		// (bounded by the controller's StrategiesLoadWait), so that a
		// custom strategy is not judged missing at every start.
		StrategiesLoaded: plugins.Loaded(),
		FirstGrantWait:   firstGrantWait(cfg.FirstGrantWait)}
	if fb, ok := plugins.Builtin(abi.BuiltinStrategy); ok {
		electionOpts.Fallback = fb
	}
	first, err := election.New(electionOpts)
	if err != nil {
		return fmt.Errorf("start election controller: %w", err)
	}
	if !cfg.Storage.Shared() {
		ctrl.Store(first) // a single server is ready only once its controller synced
	}
	// Background work stops before the database closes (deferred above).
	var background sync.WaitGroup
	defer background.Wait()
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	background.Go(func() { _ = plugins.Run(bgCtx) })
	// The controller and its candidate GC run on one replica at a time: the
	// store elects it (at once on bbolt), and a successor starts a fresh
	// controller with fresh caches.
	background.Go(func() {
		storage.Lead(bgCtx, store, electionControllerName, time.Second, logger.With("component", "election"), func(ctx context.Context) {
			c := first
			first = nil // each term gets a fresh controller
			if c == nil {
				var err error
				if c, err = election.New(electionOpts); err != nil {
					logger.Error("Starting the election controller failed", "err", err)
					return
				}
			}
			ctrl.Store(c)
			defer ctrl.Store(nil)
			_ = c.Run(ctx)
		})
	})

	wopts := web.Options{
		AllowedHosts:        cfg.AllowedHosts,
		Engine:              eng,
		Logger:              logger.With("component", "web"),
		Version:             versionInfo(),
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
		UI: ui.Sources{
			Storage:     store.Stats,
			StoragePath: dbPath,
			Modules:     plugins.Modules,
			Decisions:   eng.Decisions,
		},
	}
	if r, ok := store.(storage.MemoryReleaser); ok {
		wopts.OnIdle = r.ReleaseMemory
	}
	// A cluster member serves its membership endpoints, and stops serving
	// when its etcd member stops (removed from the cluster, or failed):
	// answering from a member that is no longer one would be wrong.
	var memberStopped <-chan struct{}
	if ms, ok := store.(*backend.MemberStore); ok && cs != nil {
		wopts.Cluster = cs.endpoints(ms.Member(), ms)
		wopts.UI.Cluster = wopts.Cluster.Status
		memberStopped = ms.Member().Stopped()
	}
	ops.configure(&wopts, cfg, sec, store, plugins, &ctrl)
	srv, err := web.NewServer(wopts)
	if err != nil {
		return fmt.Errorf("create HTTP server: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	serverURL := security.ServerURL(sec.Scheme(), ln.Addr().String())

	if cfg.WriteKubeconfig != "-" {
		content, err := sec.Kubeconfig(serverURL)
		if err == nil {
			err = kubeconfig.Write(cfg.WriteKubeconfig, content)
		}
		if err != nil {
			ln.Close()
			return err
		}
		abs, _ := filepath.Abs(cfg.WriteKubeconfig)
		logger.Info("Wrote kubeconfig", "path", abs, "mode", "0600", "user", sec.TokenUser, "hint", "export KUBECONFIG="+abs)
	}

	logger.Info("Serving the Lease API", "url", serverURL, "storage", dbPath,
		"version", Version, "startup", time.Since(start).Round(time.Millisecond).String())
	if cfg.ReadyFile != "" {
		if err := writeReadyFile(cfg.ReadyFile, serverURL); err != nil {
			ln.Close()
			return err
		}
		defer os.Remove(cfg.ReadyFile)
	}
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	var stoppedMember atomic.Bool
	if memberStopped != nil {
		background.Go(func() {
			select {
			case <-memberStopped:
				stoppedMember.Store(true)
				logger.Error("The embedded etcd member stopped (removed from the cluster?); stopping the server")
				stopServing()
			case <-bgCtx.Done():
			}
		})
	}
	sdnotify.Follow(bgCtx, ctx, &background, allPass(wopts.ReadyChecks), checkNamed(wopts.ReadyChecks, "storage"),
		"serving the Lease API at "+serverURL, logger)
	if err := srv.Serve(serveCtx, ln); err != nil {
		stopBackground()
		return fmt.Errorf("serve: %w", err)
	}
	stopBackground()
	if stoppedMember.Load() {
		return errors.New("the embedded etcd member stopped")
	}
	logger.Info("Stopped serving")
	return nil
}

// electionControllerName is the storage election that picks the one
// server (of replicas or cluster members) running the election controller.
const electionControllerName = "election-controller"

// firstGrantWait maps --election-first-grant-wait to
// election.Options.FirstGrantWait, where zero means the default and a
// negative value none.
func firstGrantWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// allPass is a readiness check that passes when every check does.
func allPass(checks []web.Check) func() error {
	return func() error {
		for _, c := range checks {
			if err := c.Check(); err != nil {
				return err
			}
		}
		return nil
	}
}

// checkNamed returns the check called name, nil when there is none.
func checkNamed(checks []web.Check, name string) func() error {
	for _, c := range checks {
		if c.Name == name {
			return c.Check
		}
	}
	return nil
}

// writeReadyFile writes url and a newline to path atomically (through a
// temporary file and a rename), so that a parent polling for the file never
// reads it half-written.
func writeReadyFile(path, url string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write ready file: %w", err)
	}
	return nil
}

// versionInfo is what /version reports: the Kubernetes release leasehold
// implements, with leasehold's own version as semver build metadata (as k3s
// does with "+k3s1").
func versionInfo() version.Info {
	commit, treeState, buildDate := "", "clean", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					treeState = "dirty"
				}
			case "vcs.time":
				buildDate = s.Value
			}
		}
	}
	return version.Info{
		Major:                 kubeMajor,
		Minor:                 kubeMinor,
		EmulationMajor:        kubeMajor,
		EmulationMinor:        kubeMinor,
		MinCompatibilityMajor: kubeMajor,
		MinCompatibilityMinor: kubeMinCompatMinor,
		GitVersion:            "v" + kubeMajor + "." + kubeMinor + ".0+leasehold-" + strings.TrimPrefix(Version, "v"),
		GitCommit:             commit,
		GitTreeState:          treeState,
		BuildDate:             buildDate,
		GoVersion:             runtime.Version(),
		Compiler:              runtime.Compiler,
		Platform:              runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// serveOps wires the operational side of serve: metrics, the named
// readiness checks and the online backup.
type serveOps struct {
	metrics *metrics.Registry
	// commitErr is the error of the last storage commit, nil after a
	// successful one: the "storage" check fails while writes fail.
	commitErr atomic.Pointer[error]
}

func newServeOps(c web.Observability) *serveOps {
	o := &serveOps{metrics: metrics.New()}
	o.metrics.SetPerLease(c.MetricsPerLease)
	return o
}

// onCommit observes the bbolt backend's commits (backend.Open).
func (o *serveOps) onCommit(d time.Duration, writes int, err error) {
	o.metrics.ObserveCommit(d, writes, err)
	if err != nil {
		o.commitErr.Store(&err)
	} else if o.commitErr.Load() != nil {
		o.commitErr.Store(nil)
	}
}

// configure adds security, limits, metrics, health checks and backup to
// the web server's options.
func (o *serveOps) configure(opts *web.Options, cfg serveConfig, sec *security.Security, store backend.Store,
	plugins *host.Host, ctrl *atomic.Pointer[election.Controller]) {
	opts.TLS, opts.Auth, opts.Policies = sec.TLS, sec.Auth, sec.Policies
	opts.Limits = cfg.Limits
	opts.ShutdownDelay = cfg.ShutdownDelay
	opts.Metrics = o.metrics
	opts.Election = func() (election.Stats, bool) {
		if c := ctrl.Load(); c != nil {
			return c.Stats(), true
		}
		return election.Stats{}, false
	}
	if b, ok := store.(storage.Backuper); ok {
		opts.Backup = b.Backup
	}
	// kube-apiserver-like named checks: /readyz/storage,
	// /readyz/plugins, /readyz/election-controller (and shutdown, added
	// by the server).
	opts.ReadyChecks = []web.Check{
		{Name: "storage", Check: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := store.Stats(ctx); err != nil {
				return fmt.Errorf("storage: %w", err)
			}
			if p := o.commitErr.Load(); p != nil {
				return fmt.Errorf("the last storage commit failed: %w", *p)
			}
			return nil
		}},
		{Name: "plugins", Check: plugins.Ready},
		{Name: "election-controller", Check: func() error {
			if c := ctrl.Load(); c != nil {
				return c.Deciding()
			}
			return nil
		}},
	}
}

// pluginTrust loads --plugin-trust-keys. Without it every module of the
// plugins directory is loaded, as before signing existed; a server that
// listens beyond loopback says so at start, since whoever can write that
// directory then decides every coordinated election.
func pluginTrust(cfg serveConfig, logger *slog.Logger) (*signature.Keyring, error) {
	if len(cfg.PluginTrustKeys) == 0 {
		if listenHost, _, err := net.SplitHostPort(cfg.Listen); err == nil && !security.IsLoopbackHost(listenHost) {
			logger.Warn("Strategy modules are not verified: any .wasm in the plugins directory is loaded; sign modules and pass --plugin-trust-keys",
				"plugins_dir", cfg.PluginsDir, "listen", cfg.Listen)
		}
		return nil, nil
	}
	trust, err := signature.LoadKeyring(cfg.PluginTrustKeys...)
	if err != nil {
		return nil, fmt.Errorf("--plugin-trust-keys: %w", err)
	}
	logger.Info("Strategy modules must be signed", "plugins_dir", cfg.PluginsDir, "trusted_key_ids", strings.Join(trust.IDs(), ","))
	return trust, nil
}
