package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/web/client/lease"
)

// DrainCommand is "leasehold drain": maintenance mode for an identity.
var DrainCommand = cli.Command{
	Name:     "drain",
	Synopsis: drainSynopsis,
	Summary:  "take an identity out of service: never granted a lease, its leases handed over",
	Run:      drainCommand,
}

// UndrainCommand is "leasehold undrain".
var UndrainCommand = cli.Command{
	Name:     "undrain",
	Synopsis: undrainSynopsis,
	Summary:  "put a drained identity back in service",
	Run:      undrainCommand,
}

const drainSynopsis = "drain IDENTITY [-n NS] [--force] [--server URL] [--kubeconfig F]"

const drainAbout = `Drains an identity (a device, a process) of a namespace: maintenance mode.
The server records who drained it and when, per namespace and identity, so
the drain survives the LeaseCandidate's garbage collection and re-creation.

A drained identity is never granted a lease, whatever the strategy says; a
lease it holds is handed over to the next-best candidate that answers
(preferredHolder), within one lease duration. "leasehold run" (plain, not
--candidate) under a drained identity stops its command, releases the lease
and stops campaigning until undrained.

Draining the only live candidate of a lease is refused (exit 1, the server's
409 says which lease) unless --force: then a holder with nobody to hand
over to is asked to step down, and the lease stays vacant.

The same as annotating a LeaseCandidate leasehold.dev/drain=true (or
=force) with kubectl, or the Drain button of the web UI.`

const undrainSynopsis = "undrain IDENTITY [-n NS] [--server URL] [--kubeconfig F]"

const undrainAbout = `Undrains an identity drained with "leasehold drain", the web UI or the
leasehold.dev/drain annotation: it may be granted leases again, and
"leasehold run" under it campaigns again. Exit 1 when it was not drained.`

func drainCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(drainSynopsis, drainAbout, stderr)
	var conn connFlags
	conn.registerServer(fs)
	fs.StringVar(&conn.Namespace, "namespace", "", "`namespace` of the identity (default the kubeconfig context's, else \"default\")")
	fs.Alias("n", "namespace")
	force := fs.Bool("force", false, "drain even the only live candidate of a lease")
	identity, err := fs.ParseWithArg(args, "IDENTITY")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	cl, _, err := conn.client("leasehold-drain", 10*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold drain: %v\n", err)
		return cli.ExitFailure
	}
	d, err := cl.DrainIdentity(ctx, conn.Namespace, identity, *force)
	var se *lease.StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusConflict:
		fmt.Fprintf(stderr, "leasehold drain: %v\n(--force drains it anyway)\n", err)
		return cli.ExitFailure
	case err != nil:
		fmt.Fprintf(stderr, "leasehold drain: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "%s/%s drained by %s at %s\n", d.Namespace, d.Identity, d.By, d.Time.UTC().Format(time.RFC3339))
	return cli.ExitOK
}

func undrainCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(undrainSynopsis, undrainAbout, stderr)
	var conn connFlags
	conn.registerServer(fs)
	fs.StringVar(&conn.Namespace, "namespace", "", "`namespace` of the identity (default the kubeconfig context's, else \"default\")")
	fs.Alias("n", "namespace")
	identity, err := fs.ParseWithArg(args, "IDENTITY")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	cl, _, err := conn.client("leasehold-undrain", 10*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold undrain: %v\n", err)
		return cli.ExitFailure
	}
	d, err := cl.UndrainIdentity(ctx, conn.Namespace, identity)
	switch {
	case lease.IsNotFound(err):
		fmt.Fprintf(stderr, "leasehold undrain: %s/%s is not drained\n", conn.Namespace, identity)
		return cli.ExitFailure
	case err != nil:
		fmt.Fprintf(stderr, "leasehold undrain: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "%s/%s undrained (drained by %s at %s)\n", d.Namespace, d.Identity, d.By, d.Time.UTC().Format(time.RFC3339))
	return cli.ExitOK
}
