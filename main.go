// Command leasehold serves the Kubernetes Lease API (coordination.k8s.io) from
// one binary and one bbolt file, for edge devices that need leader election
// without a Kubernetes control plane.
//
// "leasehold help" lists the commands (the table below); "leasehold" with
// no command, or with flags only, is "leasehold serve".
//
// Every command answers --help, and every flag has an environment twin,
// LEASEHOLD_<FLAG> in upper snake case (--data-dir is LEASEHOLD_DATA_DIR).
// A flag given on the command line wins over its environment variable,
// which wins over the default.
//
// Package main is the composition root. This file holds the table of
// commands, their dispatch and signals; command_serve.go resolves serve's
// flags into its configuration, serve.go assembles storage, engine,
// election, plugins and web from it, and command_version.go is "version".
// Every other command lives in the package that owns its work (README.md,
// Layout), and package cli holds what all commands share.
package main

import (
	"context"
	"io"
	"os"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/storage/boltdb/dbcmd"
	"github.com/leasehold/leasehold/web/client/bench"
	clusterclient "github.com/leasehold/leasehold/web/client/cluster"
	"github.com/leasehold/leasehold/web/client/lease"
	"github.com/leasehold/leasehold/web/client/run"
)

// commands is leasehold's table of commands, in the order "leasehold help"
// lists them. Each runs with the arguments after its name.
var commands = []cli.Command{
	serveCommand,
	// "plugin list" and "plugin replay" ask a server over HTTP, so they
	// live with the clients; replay runs the module with the host.
	host.PluginCommandWith(run.PluginListCommand, run.PluginReplayCommand(host.ReplayMain)),
	run.Command,
	run.LeaderCommand,
	run.DrainCommand,
	run.UndrainCommand,
	lease.KubeconfigCommand,
	lease.HealthcheckCommand,
	// A backup while the server runs goes through its API: the client
	// code downloads it, so that storage need not know HTTP.
	dbcmd.BackupCommand(lease.DownloadBackup, lease.ListSnapshots, engine.CheckStoredValue),
	dbcmd.RestoreCommand,
	// "cluster reset" works on a stopped member's data, with storage.
	clusterclient.CommandWith(dbcmd.ClusterResetCommand),
	dbcmd.CompactCommand,
	bench.Command,
	versionCommand,
}

// program is leasehold with its commands; serve is the default.
var program = cli.Program{
	Commands: commands,
	Default:  "serve",
	Intro:    "leasehold serves the Kubernetes Lease API (coordination.k8s.io) from one binary.\n\nUsage:\n",
	Outro:    "\nRun \"leasehold COMMAND --help\" (or \"leasehold help COMMAND\") for a command's flags and\narguments; \"leasehold serve --help\" lists the server's. Every flag --foo-bar also reads\nLEASEHOLD_FOO_BAR.\n",
}

func main() {
	// A second signal ends the server at once, as kube-apiserver does;
	// other commands (leasehold run forwards signals to its child) handle
	// repeated signals themselves.
	ctx, stop := cli.SignalContext(program.RunsDefault(os.Args[1:]))
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs one command line and returns the process exit code.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return program.Dispatch(ctx, args, stdout, stderr)
}
