package buildversion

import (
	"runtime/debug"
	"strings"
)

// Dev is .ci/version's form for a build that is not a tagged release:
// VERSION-dev, plus +<short commit> (and .dirty) when the build carries its
// VCS settings. file is the VERSION file's content; readBuildInfo is
// debug.ReadBuildInfo outside tests.
func Dev(file string, readBuildInfo func() (*debug.BuildInfo, bool)) string {
	v := strings.TrimSpace(file) + "-dev"
	bi, ok := readBuildInfo()
	if !ok {
		return v
	}
	rev, dirty := "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ".dirty"
			}
		}
	}
	if rev == "" {
		return v
	}
	return v + "+" + rev[:min(7, len(rev))] + dirty
}
