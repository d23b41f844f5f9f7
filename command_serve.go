package main

// "leasehold serve": its flags, by concern, resolved once into a
// serveConfig before anything starts; serve.go assembles the server from
// it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/web/security"
)

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

func parseServeFlags(fs *cli.FlagSet, args []string) (serveConfig, error) {
	var cfg serveConfig
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address (`host:port`) to serve the API on; recorded in the data directory, so that a restart without it serves where the last start did")
	fs.StringVar(&cfg.DataDir, "data-dir", datadir.Default, "`directory` holding the database (leasehold.db) and generated files")
	fs.StringVar(&cfg.WriteKubeconfig, "write-kubeconfig", "", "`path` to write a kubeconfig for local clients to (default <data-dir>/kubeconfig; \"-\" disables)")
	fs.IntVar(&cfg.MaxBodyBytes, "max-request-body-bytes", 3<<20, "largest request body accepted, in `bytes` (larger bodies get 413)")
	fs.StringVar(&cfg.ReadyFile, "ready-file", "", "`path` to write the server's URL (e.g. http://127.0.0.1:41234) to once it accepts requests, and to remove when it stops: tells a parent process which port --listen host:0 chose (default off)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay-duration", 0, "on SIGTERM, keep serving with /readyz failing for this long before closing, so load balancers stop sending requests first")
	cfg.Engine.RegisterFlags(fs.FlagSet)
	cfg.Election.RegisterFlags(fs.FlagSet)
	cfg.Plugins.RegisterFlags(fs.FlagSet)
	cfg.Storage.RegisterFlags(fs.FlagSet)
	cfg.Security = security.RegisterFlags(fs.FlagSet)
	cfg.Limits.RegisterFlags(fs.FlagSet)
	cfg.Observability.RegisterFlags(fs.FlagSet)
	if err := fs.ParseNoArgs(args); err != nil {
		return cfg, err
	}
	given := fs.Given()
	cfg.Storage.Cluster.Given = cluster.NewGivenFlags(given)
	if err := cfg.Observability.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.Engine.Validate(); err != nil {
		return cfg, err
	}
	if cfg.DataDir == "" {
		return cfg, errors.New("--data-dir must not be empty")
	}
	cfg.Layout = datadir.At(cfg.DataDir)
	var err error
	if cfg.Listen, cfg.ListenRecorded, cfg.ListenFromRecord, err = cfg.Layout.ResolveListen(cfg.Listen, given["listen"]); err != nil {
		return cfg, err
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return cfg, fmt.Errorf("invalid --listen %q: %w", cfg.Listen, err)
	}
	if cfg.WriteKubeconfig == "" {
		cfg.WriteKubeconfig = cfg.Layout.Kubeconfig()
	}
	if err := cfg.Plugins.Resolve(cfg.Layout.Plugins()); err != nil {
		return cfg, err
	}
	if err := cfg.Election.Validate(); err != nil {
		return cfg, err
	}
	if cfg.MaxBodyBytes <= 0 {
		return cfg, fmt.Errorf("invalid --max-request-body-bytes %d: must be positive", cfg.MaxBodyBytes)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return cfg, err
	}
	// Which storage runs is decided here, once, from the flags and what
	// the data directory holds; nothing is written until serve starts.
	if cfg.StorageMode, err = cfg.Storage.Resolve(cfg.Layout); err != nil {
		return cfg, err
	}
	if err := cfg.Security.Validate(cfg.Listen); err != nil {
		if cfg.ListenFromRecord {
			return cfg, fmt.Errorf("%w (--listen %s is the address the last start served at, recorded in %s: give --listen to serve elsewhere)",
				err, cfg.Listen, cfg.Layout.AddressesFile())
		}
		return cfg, err
	}
	return cfg, nil
}
