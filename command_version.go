package main

// "leasehold version", and the version /version reports.

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/leasehold/leasehold/internal/cli"
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
