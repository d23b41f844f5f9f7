// Command leasehold serves the Kubernetes Lease API (coordination.k8s.io) from
// one binary and one bbolt file, for edge devices that need leader election
// without a Kubernetes control plane.
//
// Usage:
//
//	leasehold [serve] [flags]   run the server (the default command)
//	leasehold version           print version information
//
// Every serve flag has an environment twin, LEASEHOLD_<FLAG> in upper snake
// case (--data-dir is LEASEHOLD_DATA_DIR). A flag given on the command line
// wins over its environment variable, which wins over the default.
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
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
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
  leasehold version           print version information
`)
}

// serveConfig is the parsed and validated configuration of "leasehold serve".
type serveConfig struct {
	Listen          string
	DataDir         string
	WriteKubeconfig string
	LogFormat       string
	LogLevel        slog.Level
	WatchHistory    time.Duration
	MaxBodyBytes    int
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
	fs.IntVar(&cfg.MaxBodyBytes, "max-request-body-bytes", 3<<20, "largest request body accepted, in `bytes` (larger bodies get 413)")
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
	if cfg.MaxBodyBytes <= 0 {
		return cfg, fmt.Errorf("invalid --max-request-body-bytes %d: must be positive", cfg.MaxBodyBytes)
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

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	dbPath := filepath.Join(cfg.DataDir, "leasehold.db")
	store, err := boltdb.Open(ctx, dbPath, boltdb.Options{HistoryWindow: cfg.WatchHistory})
	if err != nil {
		return fmt.Errorf("open database %s: %w", dbPath, err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("Closing database failed", "path", dbPath, "err", err)
		}
	}()

	eng, err := engine.New(engine.Options{Store: store, Logger: logger.With("component", "engine")})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}

	srv, err := web.NewServer(web.Options{
		Engine:              eng,
		Logger:              logger.With("component", "web"),
		Version:             versionInfo(),
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
	})
	if err != nil {
		return fmt.Errorf("create HTTP server: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	addr := ln.Addr().String()
	serverURL := "http://" + addr

	if cfg.WriteKubeconfig != "-" {
		if err := writeKubeconfig(cfg.WriteKubeconfig, serverURL); err != nil {
			ln.Close()
			return err
		}
		abs, _ := filepath.Abs(cfg.WriteKubeconfig)
		logger.Info("Wrote kubeconfig", "path", abs, "hint", "export KUBECONFIG="+abs)
	}

	logger.Info("Serving the Lease API", "url", serverURL, "database", dbPath,
		"version", Version, "startup", time.Since(start).Round(time.Millisecond).String())
	if ready != nil {
		ready(addr)
	}
	if err := srv.Serve(ctx, ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
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

// writeKubeconfig writes a kubeconfig pointing at serverURL with mode 0600,
// atomically (a reader never sees a half-written file).
func writeKubeconfig(path, serverURL string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: leasehold
  cluster:
    server: %s
contexts:
- name: leasehold
  context:
    cluster: leasehold
    user: leasehold
    namespace: default
current-context: leasehold
users:
- name: leasehold
  user: {}
preferences: {}
`, serverURL)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
