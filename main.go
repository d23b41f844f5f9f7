// Command leasehold serves the Kubernetes Lease API (coordination.k8s.io) from
// one binary and one bbolt file, for edge devices that need leader election
// without a Kubernetes control plane.
//
// Usage:
//
//	leasehold [serve] [flags]   run the server (the default command)
//	leasehold plugin vet|test FILE.wasm
//	                            check a strategy module, or run it offline
//	leasehold plugin keygen|sign|list
//	                            sign modules; list a server's modules
//	leasehold run [flags] -- COMMAND
//	                            run COMMAND only while holding a lease
//	leasehold leader [flags]    print a lease's holder
//	leasehold kubeconfig [flags]
//	                            print a kubeconfig for a server
//	leasehold healthcheck [flags]
//	                            exit 0 when the local server is ready
//	leasehold backup FILE       copy the database (from the server or the file), checking every record
//	leasehold restore FILE      replace the database with a backup
//	leasehold compact           reclaim the database file's free space
//	leasehold bench [flags]     measure renewals/s and latency against a server
//	leasehold version           print version information
//
// Every command answers --help, and every flag has an environment twin,
// LEASEHOLD_<FLAG> in upper snake case (--data-dir is LEASEHOLD_DATA_DIR).
// A flag given on the command line wins over its environment variable,
// which wins over the default.
//
// Package main is the composition root. This file holds the table of
// commands, their dispatch and signals; serve.go holds serve's flags and
// the assembly of storage, engine, election, plugins and web. Every other
// command lives in the package that owns its work (README.md, Layout), and
// web/cli holds what all commands share.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/leasehold/leasehold/cli"
	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/storage/boltdb/dbcmd"
	"github.com/leasehold/leasehold/web/client/bench"
	clusterclient "github.com/leasehold/leasehold/web/client/cluster"
	"github.com/leasehold/leasehold/web/client/lease"
	"github.com/leasehold/leasehold/web/client/run"
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

// commands is leasehold's table of commands, in the order "leasehold help"
// lists them. Each runs with the arguments after its name.
var commands = []cli.Command{
	serveCommand,
	// "plugin list" and "plugin replay" ask a server over HTTP, so they
	// live with the clients; replay runs the module with the host.
	host.PluginCommandWith(run.PluginListCommand, run.PluginReplayCommand(host.ReplayMain)),
	run.Command,
	run.LeaderCommand,
	lease.KubeconfigCommand,
	lease.HealthcheckCommand,
	// A backup while the server runs goes through its API: the client
	// code downloads it, so that storage need not know HTTP.
	dbcmd.BackupCommand(lease.DownloadBackup, engine.CheckStoredValue),
	dbcmd.RestoreCommand,
	clusterclient.Command,
	dbcmd.CompactCommand,
	bench.Command,
	versionCommand,
}

func main() {
	ctx, stop := signalContext(isServeCommand(os.Args[1:]))
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs one command line and returns the process exit code.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// "leasehold --help" asks about leasehold, not about serve (the
	// default command): it lists the commands, as "leasehold help" does.
	// "leasehold help NAME" is "leasehold NAME --help".
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		args = []string{"help"}
	}
	name := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		if name == "help" && len(args) == 1 {
			if cmd, ok := cli.Lookup(commands, args[0]); ok {
				return cmd.Run(ctx, []string{"--help"}, stdout, stderr)
			}
		}
		usage(stdout)
		return cli.ExitOK
	}
	cmd, ok := cli.Lookup(commands, name)
	if !ok {
		fmt.Fprintf(stderr, "leasehold: unknown command %q\n\n", name)
		usage(stderr)
		return cli.ExitUsage
	}
	return cmd.Run(ctx, args, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, "leasehold serves the Kubernetes Lease API (coordination.k8s.io) from one binary.\n\nUsage:\n")
	cli.WriteList(w, commands)
	fmt.Fprint(w, "\nRun \"leasehold COMMAND --help\" (or \"leasehold help COMMAND\") for a command's flags and\narguments; \"leasehold serve --help\" lists the server's. Every flag --foo-bar also reads\nLEASEHOLD_FOO_BAR.\n")
}

var versionCommand = cli.Command{
	Name:     "version",
	Synopsis: "version",
	Summary:  "print version information",
	Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		fs := cli.NewFlagSet("version", "Prints leasehold's version, the Kubernetes API version it implements, and the\nGo toolchain and platform it was built with.", stderr)
		if code, stop := fs.Stop(fs.ParseNoArgs(args)); stop {
			return code
		}
		fmt.Fprintf(stdout, "leasehold %s (Kubernetes API v%s.%s, %s %s/%s)\n",
			Version, kubeMajor, kubeMinor, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return cli.ExitOK
	},
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
