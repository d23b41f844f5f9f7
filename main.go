// Command leasehold serves the Kubernetes Lease API (coordination.k8s.io) from
// one binary and one bbolt file, for edge devices that need leader election
// without a Kubernetes control plane.
//
// Usage:
//
//	leasehold [serve] [flags]   run the server (the default command)
//	leasehold run [flags] -- COMMAND   run COMMAND only while holding a lease
//	leasehold leader [flags]    print a lease's holder
//	leasehold version           print version information
//
// Every serve flag has an environment twin, LEASEHOLD_<FLAG> in upper snake
// case (--data-dir is LEASEHOLD_DATA_DIR). A flag given on the command line
// wins over its environment variable, which wins over the default.
//
// This file is the wiring only: the command switch, serve's flags and the
// assembly of storage, engine, election, plugins and web, signals, and the
// thin glue of the offline commands. The logic lives in the packages
// (README.md, Layout).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/leaseclient"
	"github.com/leasehold/leasehold/web/leaserun"
	"github.com/leasehold/leasehold/web/loadgen"
	"github.com/leasehold/leasehold/web/metrics"
	"github.com/leasehold/leasehold/web/sdnotify"
	"github.com/leasehold/leasehold/web/security"
	"github.com/leasehold/leasehold/web/ui"
)

// Version is leasehold's own version, set at build time with
// -ldflags "-X main.Version=v0.1.0".
var Version = "v0.1.0-dev"

// The Kubernetes release whose coordination.k8s.io API leasehold implements;
// /version reports it, as kubectl and client-go expect a kube-apiserver to.
const (
	kubeMajor          = "1"
	kubeMinor          = "37"
	kubeMinCompatMinor = "36"
)

// ---------------------------------------------------------------------------
// Entry point, command switch and signals
// ---------------------------------------------------------------------------

func main() {
	ctx, stop := signalContext(isServeCommand(os.Args[1:]))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := parseServeFlags(args, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "leasehold serve: %v\n", err)
			return 2
		}
		if err := serve(ctx, cfg, stdout); err != nil {
			fmt.Fprintf(stderr, "leasehold: %v\n", err)
			return 1
		}
		return 0
	case "plugin":
		return host.Command(ctx, args, stdout, stderr)
	case "bench":
		return loadgen.Main(ctx, args, stdout, stderr)
	case "run":
		return leaserun.Run(ctx, args, stdout, stderr)
	case "leader":
		return leaserun.Leader(ctx, args, stdout, stderr)
	case "kubeconfig":
		return runKubeconfig(args, stdout, stderr)
	case "healthcheck":
		return runHealthcheck(ctx, args, stdout, stderr)
	case "backup":
		return runBackup(ctx, args, stdout, stderr)
	case "restore":
		return runRestore(ctx, args, stdout, stderr)
	case "compact":
		return runCompact(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "leasehold %s (Kubernetes API v%s.%s, %s %s/%s)\n",
			Version, kubeMajor, kubeMinor, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "leasehold: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `leasehold serves the Kubernetes Lease API (coordination.k8s.io) from one binary.

Usage:
  leasehold [serve] [flags]   run the server (default command; see "leasehold serve --help")
  leasehold plugin vet FILE.wasm
                              check a strategy module against the plugin ABI
  leasehold plugin test FILE.wasm [--input snapshot.json]
                              run a strategy module offline and print its decision
  leasehold run --lease NAME [flags] -- COMMAND [ARGS...]
                              run COMMAND only while holding the lease (see "leasehold run --help")
  leasehold leader --lease NAME [--watch]
                              print the lease's current holder (and follow changes)
  leasehold kubeconfig --server URL [--token-file F | --client-certificate F --client-key F]
                              print a kubeconfig for a server (-o yaml|json)
  leasehold healthcheck [--url URL]
                              exit 0 when the local server is ready (for Docker HEALTHCHECK)
  leasehold backup [--data-dir D] FILE
                              write a consistent copy of the database (from the running server or the file)
  leasehold restore [--data-dir D] FILE
                              replace the database with a checked backup (server stopped)
  leasehold compact [--data-dir D]
                              rewrite the database file to reclaim free space (server stopped)
  leasehold bench [flags]     measure renewals/s, latency and server CPU against a server
                              (see "leasehold bench --help" and docs/bench.sh)
  leasehold version           print version information
`)
}

// signalContext is cancelled by the first SIGTERM or SIGINT. With
// exitOnSecond (the server), a second signal ends the process at once
// with exit code 1, as kube-apiserver does, for an operator who does not
// want to wait for the graceful drain. Other commands (leasehold run
// forwards signals to its child) handle repeated signals themselves.
func signalContext(exitOnSecond bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ch
		cancel()
		if !exitOnSecond {
			return
		}
		sig := <-ch
		fmt.Fprintf(os.Stderr, "leasehold: second signal (%s), exiting immediately\n", sig)
		os.Exit(1)
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}

// isServeCommand reports whether args run the server (the default
// command).
func isServeCommand(args []string) bool {
	return len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == "serve"
}

// ---------------------------------------------------------------------------
// serve: flags and their environment twins
// ---------------------------------------------------------------------------

// serveConfig is the parsed and validated configuration of "leasehold serve".
type serveConfig struct {
	Listen          string
	DataDir         string
	WriteKubeconfig string
	// ReadyFile receives the server's URL once it accepts requests ("": off).
	ReadyFile    string
	LogFormat    string
	LogLevel     slog.Level
	WatchHistory time.Duration
	// WatchHistoryMaxBytes bounds the memory of the bbolt backend's history.
	WatchHistoryMaxBytes int64
	PluginsDir           string
	PluginTimeout        time.Duration
	MaxBodyBytes         int
	// ProfilingListen serves /debug/pprof/ on its own address ("": off).
	ProfilingListen string
	// Storage is the backend: "bbolt" (one file in DataDir) or "etcd".
	Storage         string
	EtcdEndpoints   string // comma-separated client URLs
	EtcdPrefix      string
	EtcdCAFile      string
	EtcdCertFile    string
	EtcdKeyFile     string
	EtcdDialTimeout time.Duration
	// Security holds TLS, authentication, authorization and limits.
	Security *security.Config
	// onCommit observes storage commits (set by serve for bbolt).
	onCommit func(d time.Duration, writes int, err error)
}

// envPrefix is the prefix of every flag's environment twin.
const envPrefix = "LEASEHOLD_"

// envName returns the environment twin of a flag: data-dir -> LEASEHOLD_DATA_DIR.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func parseServeFlags(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("leasehold serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      serveConfig
		logLevel string
	)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address (`host:port`) to serve the API on")
	fs.StringVar(&cfg.DataDir, "data-dir", "leasehold-data", "`directory` holding the database (leasehold.db) and generated files")
	fs.StringVar(&cfg.WriteKubeconfig, "write-kubeconfig", "", "`path` to write a kubeconfig for local clients to (default <data-dir>/kubeconfig; \"-\" disables)")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: `text` or json")
	fs.StringVar(&logLevel, "log-level", "info", "minimum log `level`: debug, info, warn or error")
	fs.DurationVar(&cfg.WatchHistory, "watch-history", 5*time.Minute, "how long recent changes are kept for resuming watches and paginated lists (older resourceVersions get 410 Expired)")
	fs.Int64Var(&cfg.WatchHistoryMaxBytes, "watch-history-max-bytes", boltdb.DefaultHistoryMaxBytes, "most memory, in `bytes`, the recent changes of --watch-history may hold (bbolt storage): under heavy write load this bound, not the duration, decides how far back watches can resume")
	fs.StringVar(&cfg.PluginsDir, "plugins-dir", "", "`directory` watched for election strategy modules (*.wasm) (default <data-dir>/plugins)")
	fs.DurationVar(&cfg.PluginTimeout, "plugin-timeout", host.DefaultDecisionTimeout(false), "wall-clock limit of one strategy decision (1s on wazero's compiler, 5s on its interpreter on 32-bit ARM); a module that exceeds it is cut off and the built-in strategy decides")
	fs.IntVar(&cfg.MaxBodyBytes, "max-request-body-bytes", 3<<20, "largest request body accepted, in `bytes` (larger bodies get 413)")
	fs.StringVar(&cfg.ProfilingListen, "profiling-listen", "", "`address` to serve unauthenticated Go profiling endpoints (/debug/pprof/) on, e.g. 127.0.0.1:6060 (default off)")
	fs.StringVar(&cfg.ReadyFile, "ready-file", "", "`path` to write the server's URL (e.g. http://127.0.0.1:41234) to once it accepts requests, and to remove when it stops: tells a parent process which port --listen host:0 chose (default off)")
	fs.StringVar(&cfg.Storage, "storage", "bbolt", "storage `backend`: bbolt (one file in the data directory) or etcd (an etcd cluster that several replicas share)")
	fs.StringVar(&cfg.EtcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client `URLs` (with --storage etcd), e.g. https://etcd-0:2379,https://etcd-1:2379")
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "/leasehold", "etcd key `prefix`, so that several installations can share one etcd cluster")
	fs.StringVar(&cfg.EtcdCAFile, "etcd-cafile", "", "PEM `file` with the CA certificates that verify the etcd servers (default: system roots, when the endpoints use https)")
	fs.StringVar(&cfg.EtcdCertFile, "etcd-certfile", "", "PEM client certificate `file` for etcd (with --etcd-keyfile)")
	fs.StringVar(&cfg.EtcdKeyFile, "etcd-keyfile", "", "PEM client key `file` for etcd (with --etcd-certfile)")
	fs.DurationVar(&cfg.EtcdDialTimeout, "etcd-dial-timeout", 5*time.Second, "how long to wait for etcd at startup before giving up")
	cfg.Security = security.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: leasehold serve [flags]\n\nFlags (each also read from its environment variable):\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(fs.Output(), "  --%s %s\n    \t%s (env %s", f.Name, name, usage, envName(f.Name))
			if f.DefValue != "" {
				fmt.Fprintf(fs.Output(), ", default %q", f.DefValue)
			}
			fmt.Fprintln(fs.Output(), ")")
		})
	}
	// Environment twins become the defaults, so that explicit flags win.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %w", v, envName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		return cfg, envErr
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return cfg, fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", logLevel)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return cfg, fmt.Errorf("invalid --log-format %q: use text or json", cfg.LogFormat)
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
	if cfg.PluginTimeout <= 0 {
		return cfg, fmt.Errorf("invalid --plugin-timeout %s: must be positive", cfg.PluginTimeout)
	}
	if cfg.MaxBodyBytes <= 0 {
		return cfg, fmt.Errorf("invalid --max-request-body-bytes %d: must be positive", cfg.MaxBodyBytes)
	}
	switch cfg.Storage {
	case "bbolt":
	case "etcd":
		if len(splitList(cfg.EtcdEndpoints)) == 0 {
			return cfg, errors.New("--storage etcd needs --etcd-endpoints")
		}
		if cfg.EtcdDialTimeout <= 0 {
			return cfg, fmt.Errorf("invalid --etcd-dial-timeout %s: must be positive", cfg.EtcdDialTimeout)
		}
	default:
		return cfg, fmt.Errorf("invalid --storage %q: use bbolt or etcd", cfg.Storage)
	}
	if err := cfg.Security.Validate(cfg.Listen); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ---------------------------------------------------------------------------
// serve: wiring storage, engine, election, plugins and web
// ---------------------------------------------------------------------------

// serve runs the server until ctx is done.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer) error {
	logger := newLogger(stdout, cfg.LogFormat, cfg.LogLevel)
	start := time.Now()
	if err := web.StartProfiling(ctx, cfg.ProfilingListen, logger); err != nil {
		return err
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	sec, err := cfg.Security.Build(cfg.Listen, cfg.DataDir, logger)
	if err != nil {
		return err
	}
	ops := newServeOps(cfg.Security)
	cfg.onCommit = ops.onCommit
	store, dbPath, err := openStore(ctx, cfg, logger.With("component", "storage"))
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("Closing storage failed", "storage", dbPath, "err", err)
		}
	}()

	eng, err := engine.New(engine.Options{Store: store, Logger: logger.With("component", "engine")})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}

	// Strategy modules: the embedded built-ins are compiled (from the disk
	// cache when warm) before the server reports ready; the plugins
	// directory is then watched for new, changed and removed modules.
	// ctrl is the election controller this replica runs, nil while another
	// replica sharing the store leads.
	var ctrl atomic.Pointer[election.Controller]
	plugins, err := host.New(ctx, host.Options{
		DataDir: cfg.DataDir,
		Dir:     cfg.PluginsDir,
		Logger:  logger,
		OnChange: func() {
			if c := ctrl.Load(); c != nil {
				c.Resync()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("load strategy plugins: %w", err)
	}
	defer plugins.Close(context.WithoutCancel(ctx))

	electionOpts := election.Options{Engine: eng, Registry: plugins, Logger: logger.With("component", "election"),
		// The one limit of a decision: the host cuts its guest off at this
		// deadline of the call's context.
		DecideTimeout: cfg.PluginTimeout}
	if fb, ok := plugins.Builtin(abi.BuiltinStrategy); ok {
		electionOpts.Fallback = fb
	}
	first, err := election.New(electionOpts)
	if err != nil {
		return fmt.Errorf("start election controller: %w", err)
	}
	if cfg.Storage == "bbolt" {
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
		storage.Lead(bgCtx, store, "election-controller", time.Second, logger.With("component", "election"), func(ctx context.Context) {
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
		Engine:              eng,
		Logger:              logger.With("component", "web"),
		Version:             versionInfo(),
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
		UI: ui.Sources{
			Storage: func(ctx context.Context) (ui.StorageStats, error) {
				st, err := store.Stats(ctx)
				return ui.StorageStats(st), err
			},
			StoragePath: dbPath,
			Modules:     plugins.Modules,
			Decisions:   eng.Decisions,
		},
	}
	if r, ok := store.(interface{ ReleaseMemory() }); ok {
		wopts.OnIdle = r.ReleaseMemory
	}
	ops.configure(&wopts, cfg.Security, sec, store, plugins, &ctrl)
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
			err = leaseclient.WriteKubeconfig(cfg.WriteKubeconfig, content)
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
	notifySystemd(bgCtx, ctx, &background, wopts.ReadyChecks, serverURL, logger)
	if err := srv.Serve(ctx, ln); err != nil {
		stopBackground()
		return fmt.Errorf("serve: %w", err)
	}
	stopBackground()
	logger.Info("Stopped serving")
	return nil
}

// notifySystemd tells a Type=notify unit (web/sdnotify) that the server is
// ready once every readiness check passes, that it drains when ctx ends,
// and pings the unit's watchdog while the storage check passes. Outside
// systemd ($NOTIFY_SOCKET unset) it does nothing.
func notifySystemd(bgCtx, ctx context.Context, background *sync.WaitGroup, checks []web.Check, url string, logger *slog.Logger) {
	n, err := sdnotify.FromEnv()
	if err != nil {
		logger.Warn("Ignoring the systemd watchdog setting", "err", err)
	}
	if !n.Active() {
		return
	}
	ready := func() error {
		for _, c := range checks {
			if err := c.Check(); err != nil {
				return err
			}
		}
		return nil
	}
	background.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for ready() != nil {
			select {
			case <-bgCtx.Done():
				return
			case <-t.C:
			}
		}
		if err := n.Ready("serving the Lease API at " + url); err != nil {
			logger.Warn("Notifying systemd failed", "err", err)
		}
		var storage func() error
		for _, c := range checks {
			if c.Name == "storage" {
				storage = c.Check
			}
		}
		go n.Watchdog(bgCtx, storage)
		select {
		case <-ctx.Done():
			_ = n.Stopping()
		case <-bgCtx.Done():
		}
	})
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

// backend is what serve needs of a storage backend.
type backend interface {
	storage.Interface
	storage.StatsReporter
	storage.Elector
}

// openStore opens the configured backend. The returned string names it in
// logs and the UI: the bbolt file, or the etcd endpoints and prefix.
func openStore(ctx context.Context, cfg serveConfig, log *slog.Logger) (backend, string, error) {
	if cfg.Storage == "etcd" {
		tlsCfg, err := etcd.TLSConfig(cfg.EtcdCAFile, cfg.EtcdCertFile, cfg.EtcdKeyFile)
		if err != nil {
			return nil, "", err
		}
		s, err := etcd.Open(ctx, etcd.Options{
			Endpoints:   splitList(cfg.EtcdEndpoints),
			Prefix:      cfg.EtcdPrefix,
			TLS:         tlsCfg,
			DialTimeout: cfg.EtcdDialTimeout,
			// etcd keeps history until compacted: compact so that
			// --watch-history of it stays, as on bbolt.
			CompactInterval: cfg.WatchHistory,
			Logger:          log,
		})
		if err != nil {
			return nil, "", err
		}
		return s, "etcd " + cfg.EtcdEndpoints + " " + cfg.EtcdPrefix, nil
	}
	dbPath := filepath.Join(cfg.DataDir, "leasehold.db")
	s, err := boltdb.Open(ctx, dbPath, boltdb.Options{HistoryWindow: cfg.WatchHistory, HistoryMaxBytes: cfg.WatchHistoryMaxBytes, Logger: log, OnCommit: cfg.onCommit})
	if err != nil {
		return nil, "", fmt.Errorf("open database %s: %w", dbPath, err)
	}
	return s, dbPath, nil
}

// serveOps wires the operational side of serve: metrics, the named
// readiness checks and the online backup.
type serveOps struct {
	metrics *metrics.Registry
	// commitErr is the error of the last storage commit, nil after a
	// successful one: the "storage" check fails while writes fail.
	commitErr atomic.Pointer[error]
}

func newServeOps(c *security.Config) *serveOps {
	o := &serveOps{metrics: metrics.New()}
	o.metrics.SetPerLease(c.MetricsPerLease)
	return o
}

// onCommit fits boltdb.Options.OnCommit.
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
func (o *serveOps) configure(opts *web.Options, c *security.Config, sec *security.Security, store backend,
	plugins *host.Host, ctrl *atomic.Pointer[election.Controller]) {
	opts.TLS, opts.Auth, opts.Policies = sec.TLS, sec.Auth, sec.Policies
	opts.Limits = c.Limits()
	opts.ShutdownDelay = c.ShutdownDelay
	opts.Metrics = o.metrics
	opts.Election = func() (election.Stats, bool) {
		if c := ctrl.Load(); c != nil {
			return c.Stats(), true
		}
		return election.Stats{}, false
	}
	if b, ok := store.(*boltdb.Store); ok {
		opts.Backup = func(ctx context.Context, w io.Writer) (int64, error) { return b.Backup(ctx, w) }
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
			if c := ctrl.Load(); c != nil && !c.Synced() {
				return errors.New("election controller has not synced yet")
			}
			return nil
		}},
	}
}

// ---------------------------------------------------------------------------
// Client commands: kubeconfig, healthcheck
// ---------------------------------------------------------------------------

// runKubeconfig implements "leasehold kubeconfig": print a kubeconfig for
// a server, for clients on other machines.
func runKubeconfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("leasehold kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec leaseclient.KubeconfigSpec
	var caFile, certFile, keyFile, tokenFile, output string
	fs.StringVar(&spec.Server, "server", "", "server `URL`, e.g. https://lease-server:8443 (required)")
	fs.StringVar(&spec.Token, "token", "", "bearer `token` (prefer --token-file: command lines are visible to other users)")
	fs.StringVar(&tokenFile, "token-file", "", "`file` holding the bearer token")
	fs.StringVar(&certFile, "client-certificate", "", "PEM client certificate `file` (with --client-key)")
	fs.StringVar(&keyFile, "client-key", "", "PEM client key `file`")
	fs.StringVar(&caFile, "certificate-authority", "", "PEM CA `file` that verifies the server (e.g. <data-dir>/pki/ca.crt)")
	fs.BoolVar(&spec.Insecure, "insecure-skip-tls-verify", false, "do not verify the server's certificate (testing only)")
	fs.StringVar(&spec.Namespace, "namespace", "default", "the context's `namespace`")
	fs.StringVar(&spec.User, "user", "leasehold", "the kubeconfig's user entry `name`")
	fs.StringVar(&output, "o", "yaml", "output `format`: yaml or json")
	fs.StringVar(&output, "output", "yaml", "output `format`: yaml or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "leasehold kubeconfig: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected arguments: %q", fs.Args())
	case spec.Server == "":
		return fail("--server is required")
	case output != "yaml" && output != "json":
		return fail("invalid -o %q: use yaml or json", output)
	case spec.Token != "" && tokenFile != "":
		return fail("--token and --token-file exclude each other")
	case (certFile == "") != (keyFile == ""):
		return fail("--client-certificate and --client-key go together")
	}
	var err error
	read := func(path string) []byte {
		if path == "" || err != nil {
			return nil
		}
		var b []byte
		b, err = os.ReadFile(path)
		return b
	}
	if tokenFile != "" {
		spec.Token = strings.TrimRight(string(read(tokenFile)), "\r\n ")
	}
	spec.CAPEM = read(caFile)
	spec.CertPEM, spec.KeyPEM = read(certFile), read(keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold kubeconfig: %v\n", err)
		return 1
	}
	out, err := leaseclient.RenderKubeconfig(spec, output)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold kubeconfig: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

// runHealthcheck implements "leasehold healthcheck": GET /readyz on the
// local server and exit 0 when it answers 200, 1 otherwise. Distroless
// images have no curl, so the Docker HEALTHCHECK runs this. Without --url
// the address comes from --listen (LEASEHOLD_LISTEN, as serve reads it);
// HTTPS is tried first, then plain HTTP. The server is verified with
// <data-dir>/pki/ca.crt when it exists.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("healthcheck", stderr)
	listen := "127.0.0.1:8080"
	if v, ok := os.LookupEnv(envName("listen")); ok {
		listen = v
	}
	fs.StringVar(&listen, "listen", listen, "the server's `address` (env "+envName("listen")+")")
	url := fs.String("url", "", "full `URL` to probe instead, e.g. https://127.0.0.1:8443/readyz")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	urls := []string{*url}
	if *url == "" {
		var err error
		if urls, err = leaseclient.ReadyzURLs(listen); err != nil {
			fmt.Fprintf(stderr, "leasehold healthcheck: invalid --listen %q: %v\n", listen, err)
			return 2
		}
	}
	if err := leaseclient.ProbeReady(ctx, urls, filepath.Join(*dir, "pki", "ca.crt")); err != nil {
		fmt.Fprintf(stderr, "leasehold healthcheck: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// ---------------------------------------------------------------------------
// Database commands: backup, restore, compact
// ---------------------------------------------------------------------------

// dataDirFlags parses "--data-dir D [FILE]" style command lines with the
// serve flags' environment twin for --data-dir.
func dataDirFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("leasehold "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := "leasehold-data"
	if v, ok := os.LookupEnv(envName("data-dir")); ok {
		def = v
	}
	dir := fs.String("data-dir", def, "the server's data `directory` (env "+envName("data-dir")+")")
	return fs, dir
}

// parseWithFile parses args with exactly one positional FILE, before or
// after the flags.
func parseWithFile(fs *flag.FlagSet, args []string) (string, error) {
	var file string
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		return "", errors.New("expected exactly one FILE")
	}
	return file, nil
}

// runBackup implements "leasehold backup FILE". With no server running
// the database file is copied directly (read-only); while a server holds
// it, the copy is streamed from the server's /leasehold/v1/backup with
// the kubeconfig it wrote (or --kubeconfig). Either way the copy is one
// consistent snapshot, checked before it replaces FILE.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("backup", stderr)
	kubeconfig := fs.String("kubeconfig", "", "back up through the server this kubeconfig names (default: <data-dir>/kubeconfig when the database is in use)")
	file, err := parseWithFile(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return 2
	}
	dbPath := filepath.Join(*dir, "leasehold.db")
	tmp, err := os.CreateTemp(filepath.Dir(file), ".leasehold-backup-*")
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return 1
	}
	defer os.Remove(tmp.Name())
	n, via, err := backupTo(ctx, tmp, dbPath, *dir, *kubeconfig)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = boltdb.CheckFile(ctx, tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes, %s)\n", file, n, via)
	return 0
}

// backupTo copies the database to w: from the file when no server holds
// it, else through the running server's backup endpoint.
func backupTo(ctx context.Context, w io.Writer, dbPath, dir, kubeconfig string) (int64, string, error) {
	if kubeconfig == "" {
		n, err := boltdb.BackupFile(ctx, dbPath, w)
		if !errors.Is(err, boltdb.ErrLocked) {
			return n, "from " + dbPath, err
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if _, serr := os.Stat(kubeconfig); serr != nil {
			return 0, "", fmt.Errorf("%w; and no %s to reach the running server: pass --kubeconfig", err, kubeconfig)
		}
	}
	cfg, err := leaseclient.LoadKubeconfig(kubeconfig, "")
	if err != nil {
		return 0, "", err
	}
	c, err := leaseclient.New(cfg)
	if err != nil {
		return 0, "", err
	}
	n, err := c.Download(ctx, "/leasehold/v1/backup", w)
	return n, "from the server at " + c.Server(), err
}

// runRestore implements "leasehold restore FILE": with the server
// stopped, check FILE and swap it in (the old file is kept as
// leasehold.db.pre-restore).
func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("restore", stderr)
	file, err := parseWithFile(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return 2
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return 1
	}
	dbPath := filepath.Join(*dir, "leasehold.db")
	if err := boltdb.Restore(ctx, file, dbPath); err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %s from %s; watches resume with a relist (the history starts afresh)\n", dbPath, file)
	return 0
}

// runCompact implements "leasehold compact": with the server stopped,
// rewrite the database file without its free pages.
func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("compact", stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "leasehold compact: unexpected arguments %q\n", fs.Args())
		return 2
	}
	dbPath := filepath.Join(*dir, "leasehold.db")
	before, after, err := boltdb.CompactFile(ctx, dbPath)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold compact: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "compacted %s: %d -> %d bytes\n", dbPath, before, after)
	return 0
}
