package buildversion

import (
	"runtime/debug"
	"testing"
)

// TestDev checks the form a build without -X main.Version takes:
// .ci/version's development form, from VERSION and the stamped commit.
func TestDev(t *testing.T) {
	info := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Settings: settings}, true }
	}
	for _, c := range []struct {
		name string
		read func() (*debug.BuildInfo, bool)
		want string
	}{
		{"no build info", func() (*debug.BuildInfo, bool) { return nil, false }, "v0.1.0-dev"},
		{"no VCS settings", info(), "v0.1.0-dev"},
		{"clean commit", info(debug.BuildSetting{Key: "vcs.revision", Value: "d0872c9e1f2a3b4c"}, debug.BuildSetting{Key: "vcs.modified", Value: "false"}), "v0.1.0-dev+d0872c9"},
		{"dirty tree", info(debug.BuildSetting{Key: "vcs.revision", Value: "d0872c9e1f2a3b4c"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "v0.1.0-dev+d0872c9.dirty"},
	} {
		if got := Dev("v0.1.0\n", c.read); got != c.want {
			t.Errorf("%s: Dev = %q, want %q", c.name, got, c.want)
		}
	}
}
