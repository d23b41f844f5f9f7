package web

import "testing"

// TestBuildVersionGitVersion checks /version's gitVersion for a release and
// a development build: one "+" (semver's build metadata), leasehold's version
// after it.
func TestBuildVersionGitVersion(t *testing.T) {
	for v, want := range map[string]string{
		"v0.1.0":                   "v1.37.0+leasehold-0.1.0",
		"v0.1.0-dev+d0872c9":       "v1.37.0+leasehold-0.1.0-dev.d0872c9",
		"v0.1.0-dev+d0872c9.dirty": "v1.37.0+leasehold-0.1.0-dev.d0872c9.dirty",
	} {
		if got := BuildVersion("1", "37", "36", v).GitVersion; got != want {
			t.Errorf("BuildVersion(%q).GitVersion = %q, want %q", v, got, want)
		}
	}
}
