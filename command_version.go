package main

// "leasehold version", and the version /version reports.

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/leasehold/leasehold/internal/buildversion"
	"github.com/leasehold/leasehold/internal/cli"
)

// versionFile is the VERSION file at the repository's root: the release
// being worked toward, the one source of every version string (.ci/version).
//
//go:embed VERSION
var versionFile string

// Version is leasehold's own version. .ci/build (the Dockerfile, make build,
// make dist) sets it with -ldflags "-X main.Version=$(.ci/version)": v0.1.0
// for a tagged release, v0.1.0-dev+1a2b3c4 otherwise. A plain go build or
// go run leaves it empty and init derives the same development form from
// VERSION and the commit Go stamps into the binary.
var Version string

func init() {
	if Version == "" {
		Version = buildversion.Dev(versionFile, debug.ReadBuildInfo)
	}
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
			Version, buildversion.KubeMajor, buildversion.KubeMinor, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return cli.ExitOK
	},
}
