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
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/leaserun"
	"github.com/leasehold/leasehold/web/loadgen"
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

func main() {
	ctx, stop := signalContext(isServeCommand(os.Args[1:]))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code. ready,
// when not nil, is called with the listening address once the server
// accepts requests (tests use it).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(addr string)) int {
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
		if err := serve(ctx, cfg, stdout, ready); err != nil {
			fmt.Fprintf(stderr, "leasehold: %v\n", err)
			return 1
		}
		return 0
	case "plugin":
		return runPlugin(ctx, args, stdout, stderr)
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

// runPlugin implements "leasehold plugin vet|test".
func runPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "vet" && args[0] != "test") {
		fmt.Fprintln(stderr, "usage: leasehold plugin vet FILE.wasm | leasehold plugin test FILE.wasm [--input snapshot.json]")
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("leasehold plugin "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "", "`file` with the abi.Input JSON to decide on (default: a built-in sample)")
	// Accept the module path before or after the flags.
	var file string
	rest := args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		file, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		fmt.Fprintf(stderr, "leasehold plugin %s: expected exactly one FILE.wasm\n", sub)
		return 2
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin %s: %v\n", sub, err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if sub == "vet" {
		rep, err := host.Vet(ctx, wasm)
		_ = enc.Encode(rep)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold plugin vet: %s: %v\n", file, err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: ok (strategy %q, version %q)\n", file, rep.Info.Name, rep.Info.Version)
		return 0
	}
	var in *abi.Input
	if *input != "" {
		data, err := os.ReadFile(*input)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold plugin test: %v\n", err)
			return 1
		}
		in = new(abi.Input)
		if err := json.Unmarshal(data, in); err != nil {
			fmt.Fprintf(stderr, "leasehold plugin test: %s is not an abi.Input: %v\n", *input, err)
			return 1
		}
	}
	decision, timing, err := host.TestRun(ctx, wasm, in)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin test: %s: %v\n", file, err)
		return 1
	}
	_ = enc.Encode(struct {
		Decision *abi.Decision `json:"decision"`
		Timing   host.Timing   `json:"timing"`
	}{decision, timing})
	return 0
}

// serveConfig is the parsed and validated configuration of "leasehold serve".
type serveConfig struct {
	Listen          string
	DataDir         string
	WriteKubeconfig string
	LogFormat       string
	LogLevel        slog.Level
	WatchHistory    time.Duration
	PluginsDir      string
	PluginTimeout   time.Duration
	MaxBodyBytes    int
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
	Security securityConfig
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
	fs.StringVar(&cfg.PluginsDir, "plugins-dir", "", "`directory` watched for election strategy modules (*.wasm) (default <data-dir>/plugins)")
	fs.DurationVar(&cfg.PluginTimeout, "plugin-timeout", time.Second, "wall-clock limit of one strategy decision; a module that exceeds it is cut off and the built-in strategy decides")
	fs.IntVar(&cfg.MaxBodyBytes, "max-request-body-bytes", 3<<20, "largest request body accepted, in `bytes` (larger bodies get 413)")
	fs.StringVar(&cfg.ProfilingListen, "profiling-listen", "", "`address` to serve unauthenticated Go profiling endpoints (/debug/pprof/) on, e.g. 127.0.0.1:6060 (default off)")
	fs.StringVar(&cfg.Storage, "storage", "bbolt", "storage `backend`: bbolt (one file in the data directory) or etcd (an etcd cluster that several replicas share)")
	fs.StringVar(&cfg.EtcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client `URLs` (with --storage etcd), e.g. https://etcd-0:2379,https://etcd-1:2379")
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "/leasehold", "etcd key `prefix`, so that several installations can share one etcd cluster")
	fs.StringVar(&cfg.EtcdCAFile, "etcd-cafile", "", "PEM `file` with the CA certificates that verify the etcd servers (default: system roots, when the endpoints use https)")
	fs.StringVar(&cfg.EtcdCertFile, "etcd-certfile", "", "PEM client certificate `file` for etcd (with --etcd-keyfile)")
	fs.StringVar(&cfg.EtcdKeyFile, "etcd-keyfile", "", "PEM client key `file` for etcd (with --etcd-certfile)")
	fs.DurationVar(&cfg.EtcdDialTimeout, "etcd-dial-timeout", 5*time.Second, "how long to wait for etcd at startup before giving up")
	cfg.Security.register(fs)
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
	if err := cfg.Security.validate(cfg.Listen); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the server until ctx is done.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer, ready func(addr string)) error {
	logger := newLogger(stdout, cfg.LogFormat, cfg.LogLevel)
	start := time.Now()
	if err := startProfiling(ctx, cfg.ProfilingListen, logger); err != nil {
		return err
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	sec, err := loadSecurity(&cfg.Security, cfg.Listen, cfg.DataDir, logger)
	if err != nil {
		return err
	}
	ops := newServeOps(&cfg.Security)
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
		DataDir:     cfg.DataDir,
		Dir:         cfg.PluginsDir,
		CallTimeout: cfg.PluginTimeout,
		Logger:      logger,
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

	electionOpts := election.Options{Engine: eng, Registry: plugins, Logger: logger.With("component", "election")}
	if fb, ok := plugins.Builtin(election.OldestEmulationVersion); ok {
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
			Modules: func() []ui.Module {
				mods := plugins.Modules()
				out := make([]ui.Module, len(mods))
				for i, m := range mods {
					out[i] = ui.Module(m)
				}
				return out
			},
			Decisions: eng.Decisions,
		},
	}
	ops.configure(&wopts, &cfg, sec, store, plugins, &ctrl)
	srv, err := web.NewServer(wopts)
	if err != nil {
		return fmt.Errorf("create HTTP server: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	addr := ln.Addr().String()
	serverURL := kubeconfigServer(sec.scheme(), addr)

	if cfg.WriteKubeconfig != "-" {
		content, err := sec.kubeconfig(serverURL)
		if err == nil {
			err = writeKubeconfig(cfg.WriteKubeconfig, content)
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
	if ready != nil {
		ready(addr)
	}
	if err := srv.Serve(ctx, ln); err != nil {
		stopBackground()
		return fmt.Errorf("serve: %w", err)
	}
	stopBackground()
	logger.Info("Stopped serving")
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
	s, err := boltdb.Open(ctx, dbPath, boltdb.Options{HistoryWindow: cfg.WatchHistory, Logger: log, OnCommit: cfg.onCommit})
	if err != nil {
		return nil, "", fmt.Errorf("open database %s: %w", dbPath, err)
	}
	return s, dbPath, nil
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
