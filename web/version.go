package web

import (
	"runtime"
	"runtime/debug"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// BuildVersion is what /version reports: the Kubernetes release leasehold
// implements (kubeMajor.kubeMinor, compatible back to kubeMinCompatMinor),
// with leasehold's own version as semver build metadata (as k3s does with
// "+k3s1"), and the build's VCS settings. leaseholdVersion is .ci/version's
// string (v0.1.0, v0.1.0-dev+1a2b3c4); semver allows one "+", so its own
// build metadata joins with a dot: v1.37.0+leasehold-0.1.0-dev.1a2b3c4.
func BuildVersion(kubeMajor, kubeMinor, kubeMinCompatMinor, leaseholdVersion string) version.Info {
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
		GitVersion:            "v" + kubeMajor + "." + kubeMinor + ".0+leasehold-" + strings.ReplaceAll(strings.TrimPrefix(leaseholdVersion, "v"), "+", "."),
		GitCommit:             commit,
		GitTreeState:          treeState,
		BuildDate:             buildDate,
		GoVersion:             runtime.Version(),
		Compiler:              runtime.Compiler,
		Platform:              runtime.GOOS + "/" + runtime.GOARCH,
	}
}
