package main

// "leasehold serve": its configuration (serveConfig, which
// command_serve.go resolves from the flags) and the assembly of storage,
// engine, election, plugins and web into the server from it.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/internal/buildversion"
	"github.com/leasehold/leasehold/internal/clockcheck"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/backend"
	"github.com/leasehold/leasehold/storage/snapshots"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/metrics"
	"github.com/leasehold/leasehold/web/sdnotify"
	"github.com/leasehold/leasehold/web/security"
	"github.com/leasehold/leasehold/web/ui"
)

// serveConfig is the parsed and validated configuration of "leasehold
// serve": the server's own flags here, the rest by concern.
type serveConfig struct {
	Listen string
	// ListenRecorded is where the last start on the data directory served
	// ("" when none is recorded); ListenFromRecord says Listen is it,
	// since --listen was not given.
	ListenRecorded   string
	ListenFromRecord bool
	// DataDir is --data-dir; Layout names every file under it.
	DataDir         string
	Layout          datadir.Layout
	WriteKubeconfig string
	// ReadyFile receives the server's URL once it accepts requests ("": off).
	ReadyFile     string
	MaxBodyBytes  int
	ShutdownDelay time.Duration

	Engine   engine.Flags
	Election election.Flags
	Plugins  host.Flags
	Storage  backend.Config
	// StorageMode is which storage runs, resolved from Storage and the
	// data directory before anything starts.
	StorageMode   backend.Mode
	Security      *security.Config
	Limits        web.Limits
	Observability web.Observability
}

// server is one "leasehold serve" as it is assembled.
type server struct {
	cfg     serveConfig
	log     *slog.Logger
	clock   clockcheck.Gate
	commits web.CommitHealth
	store   backend.Store
	dbPath  string // the storage as logs and the UI name it
	eng     *engine.Engine
	hist    *history.Store
	drains  *history.DrainSet
	plugins *host.Host
	elect   election.Supervisor
	// snaps takes the scheduled snapshots (nil: none).
	snaps *snapshots.Scheduler
}

// serve runs the server until ctx is done.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer) error {
	logger := cfg.Observability.NewLogger(stdout)
	start := time.Now()
	if err := web.StartProfiling(ctx, cfg.Observability.ProfilingListen, cfg.Security.AllowUnauthenticatedNetwork, logger); err != nil {
		return err
	}
	if _, err := datadir.Open(cfg.DataDir); err != nil {
		return err
	}
	clock, err := waitForClock(ctx, cfg, logger)
	if err != nil {
		return err
	}
	sec, err := cfg.Security.Build(cfg.Listen, cfg.Layout.TLS(), logger)
	if err != nil {
		return err
	}
	s := &server{cfg: cfg, log: logger, clock: clock, commits: web.CommitHealth{Metrics: metrics.New()}}
	s.commits.Metrics.SetPerLease(cfg.Observability.MetricsPerLease)
	// A cluster member or a replica is provisioned (or joins) first.
	s.store, s.dbPath, err = backend.Open(ctx, backend.Options{
		Config: cfg.Storage, Mode: cfg.StorageMode, Dir: cfg.Layout, OnCommit: s.commits.Observe,
		Logger: logger.With("component", "storage"), GRPCLogger: logger,
		ClusterLogger: logger.With("component", "cluster"), EtcdLogger: logger.With("component", "etcd"),
		ControllerElection: election.ControllerElection,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := s.store.Close(); err != nil {
			logger.Error("Closing storage failed", "storage", s.dbPath, "err", err)
		}
	}()
	if err := s.startEngine(ctx); err != nil {
		return err
	}
	listenHost, _, _ := net.SplitHostPort(cfg.Listen)
	s.plugins, err = cfg.Plugins.Open(ctx, host.Serving{CacheDir: cfg.Layout.WASMCache(), SequencesFile: cfg.Layout.PluginSequences(),
		Listen: cfg.Listen, Exposed: !security.IsLoopbackHost(listenHost), OnChange: s.elect.Resync, Logger: logger})
	if err != nil {
		return err
	}
	// The plugins directory's loader is not part of the background work
	// waited for below: a module compile cannot be interrupted (a cold Go
	// guest takes seconds, tens of them on a busy small device), and
	// shutdown must not wait for it. It touches no storage.
	var loaderDone chan struct{} // made when the loader starts
	defer func() { s.plugins.CloseAfterRun(ctx, loaderDone) }()
	if err := s.elect.Prepare(s.electionOptions(), cfg.StorageMode.Shared()); err != nil {
		return err
	}
	// Background work stops before the database closes (deferred above).
	var background sync.WaitGroup
	defer background.Wait()
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	loaderDone = make(chan struct{})
	go func() {
		defer close(loaderDone)
		_ = s.plugins.Run(bgCtx)
	}()
	background.Go(func() { s.elect.Run(bgCtx, s.store) })
	background.Go(func() { s.drains.Run(bgCtx) })
	if s.snaps = backend.NewSnapshots(s.store, cfg.Storage.Snapshots, cfg.Layout, logger.With("component", "snapshots")); s.snaps != nil {
		background.Go(func() { s.snaps.Run(bgCtx) })
	}

	wopts := s.webOptions(sec)
	srv, err := web.NewServer(wopts)
	if err != nil {
		return fmt.Errorf("create HTTP server: %w", err)
	}
	ln, serverURL, err := s.listen(sec)
	if err != nil {
		return err
	}
	logger.Info("Serving the Lease API", "url", serverURL, "storage", s.dbPath,
		"version", Version, "startup", time.Since(start).Round(time.Millisecond).String())
	backend.LogJoinHint(s.store, serverURL, logger)
	backend.AnnounceAPI(s.store, serverURL)
	if cfg.ReadyFile != "" {
		if err := sdnotify.WriteReadyFile(cfg.ReadyFile, serverURL); err != nil {
			ln.Close()
			return err
		}
		defer os.Remove(cfg.ReadyFile)
	}
	sdnotify.Follow(bgCtx, ctx, &background, web.AllPass(wopts.ReadyChecks), web.CheckNamed(wopts.ReadyChecks, "storage"),
		"serving the Lease API at "+serverURL, logger)
	serveCtx, served := backend.Serving(ctx, s.store, logger)
	if err = srv.Serve(serveCtx, ln); err != nil {
		err = fmt.Errorf("serve: %w", err)
	}
	if stopped := served(); err == nil {
		err = stopped
	}
	stopBackground()
	if err == nil {
		logger.Info("Stopped serving")
	}
	return err
}

// waitForClock: before any certificate is made or used, a device that
// booted in 1970 waits for NTP (internal/clockcheck; docs/cluster.md,
// "Clocks"), and a member or replica whose certificate expired meanwhile
// says what to do.
func waitForClock(ctx context.Context, cfg serveConfig, log *slog.Logger) (clockcheck.Gate, error) {
	certs, tlsOn := cfg.Security.CertFiles(cfg.Listen, cfg.Layout.TLS())
	clock := clockcheck.NewGate(tlsOn || cfg.StorageMode != backend.SingleDevice, debug.ReadBuildInfo, append(certs, cfg.StorageMode.CertFiles(cfg.Layout)...)...)
	if err := clock.Wait(ctx, log.With("component", "clock"), clockcheck.Options{Status: sdnotify.StatusFromEnv()}); err != nil {
		return clock, err
	}
	return clock, cfg.StorageMode.CheckExpired(cfg.Layout, time.Now())
}

// startEngine starts the Kubernetes semantics over the store.
func (s *server) startEngine(ctx context.Context) error {
	opts := s.cfg.Engine.Options
	opts.Store, opts.Logger = s.store, s.log.With("component", "engine")
	opts.WatchQueueBytes, opts.WatchQueueBytesTotal = int64(s.cfg.Limits.WatchQueueBytes), int64(s.cfg.Limits.WatchQueueBytesTotal)
	// Decision histories, lease timelines and drains live beside the API
	// objects; the drains are also kept in memory for the LeaseCandidate
	// table's Drained column.
	s.hist = history.New(s.store, s.log.With("component", "history"))
	s.drains = s.hist.NewDrainSet()
	opts.Drained = s.drains.Drained
	eng, err := engine.New(opts)
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	s.eng = eng
	return eng.Start(ctx)
}

// electionOptions are the election controller's: a single server runs
// it at once, and is ready only once it synced.
func (s *server) electionOptions() election.Options {
	opts := election.Options{Engine: s.eng, History: s.hist, Drains: s.hist, Registry: s.plugins, Logger: s.log.With("component", "election"),
		// The one limit of a decision: the host cuts its guest off at this
		// deadline of the call's context.
		DecideTimeout: s.cfg.Plugins.Timeout,
		// A lease whose strategy is not served yet waits for the plugins
		// directory's first load (bounded by the controller's
		// StrategiesLoadWait), so that a custom strategy is not judged
		// missing at every start.
		StrategiesLoaded: s.plugins.Loaded(),
		FirstGrantWait:   s.cfg.Election.FirstGrantWait}
	if fb, ok := s.plugins.Builtin(abi.BuiltinStrategy); ok {
		opts.Fallback = fb
	}
	return opts
}

// webOptions are the web server's options: the API, security, limits,
// metrics, kube-apiserver-like named readiness checks (/readyz/storage,
// /readyz/plugins, /readyz/election-controller; the server adds shutdown)
// and the online backup. A cluster member serves its membership
// endpoints (and only while its etcd member runs: backend.Serving).
func (s *server) webOptions(sec *security.Security) web.Options {
	opts := web.Options{
		AllowedHosts: s.cfg.Security.AllowedHosts(s.cfg.Listen),
		Engine:       s.eng, Logger: s.log.With("component", "web"),
		Version:             web.BuildVersion(buildversion.KubeMajor, buildversion.KubeMinor, buildversion.KubeMinCompatMinor, Version),
		MaxRequestBodyBytes: s.cfg.MaxBodyBytes,
		Drains:              s.hist,
		UI:                  ui.Sources{Storage: s.store.Stats, StoragePath: s.dbPath, Modules: s.plugins.Modules, Decisions: s.hist, Timelines: s.hist},
		TLS:                 sec.TLS, Auth: sec.Auth, Policies: sec.Policies,
		Limits: s.cfg.Limits, ShutdownDelay: s.cfg.ShutdownDelay, Metrics: s.commits.Metrics,
		Election: s.elect.Stats,
		ReadyChecks: []web.Check{
			s.commits.StorageCheck(func(ctx context.Context) error { _, err := s.store.Stats(ctx); return err }),
			{Name: "plugins", Check: s.plugins.Ready},
			{Name: "election-controller", Check: s.elect.Deciding},
			// On a server that waits on its clock, /readyz fails while the
			// wall clock reads before the floor (stepped back after the
			// start); on one that does not, ?verbose notes it.
			{Name: "clock", Check: s.clock.Ready, Note: s.clock.Note},
		},
	}
	opts.UI.HandOverPreview = s.elect.PreviewHandOver
	opts.OnIdle = s.eng.ReleaseMemory
	if r, ok := s.store.(storage.MemoryReleaser); ok {
		opts.OnIdle = func() { s.eng.ReleaseMemory(); r.ReleaseMemory() }
	}
	if b, ok := s.store.(storage.Backuper); ok {
		opts.Backup = b.Backup
	}
	if b, ok := s.store.(storage.BackupBarrier); ok {
		opts.BackupBarrier = b.BackupBarrier
	}
	if s.snaps != nil {
		opts.Snapshots = s.snaps.Status
	}
	if ms, ok := s.store.(*backend.MemberStore); ok {
		opts.Cluster = ms.Membership()
		opts.UI.Cluster = func(ctx context.Context) (any, error) { return ms.Membership().Status(ctx) }
	}
	return opts
}

// listen opens the API's listener and writes the kubeconfig for it.
func (s *server) listen(sec *security.Security) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	serverURL := security.ServerURL(sec.Scheme(), ln.Addr().String())
	if err := s.cfg.Layout.RecordListen(s.cfg.Listen, s.cfg.ListenRecorded, s.log); err != nil {
		ln.Close()
		return nil, "", err
	}
	if path := s.cfg.WriteKubeconfig; path != "-" {
		if err := sec.WriteKubeconfig(path, serverURL, s.log); err != nil {
			ln.Close()
			return nil, "", err
		}
	}
	return ln, serverURL, nil
}
