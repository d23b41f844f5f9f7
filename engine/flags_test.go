package engine

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestFlags: the defaults give a valid engine configuration (implicit
// namespaces); a bad lifecycle or a non-positive Event bound is refused,
// naming the flag.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (Flags, error) {
		var f Flags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f, f.Validate()
	}
	if f, err := parse(); err != nil || f.NamespaceLifecycle != NamespacesImplicit || f.EventTTL != DefaultEventTTL {
		t.Errorf("defaults: lifecycle %q, event TTL %s, %v; want implicit, %s", f.NamespaceLifecycle, f.EventTTL, err, DefaultEventTTL)
	}
	if f, err := parse("--namespace-lifecycle", "strict"); err != nil || f.NamespaceLifecycle != NamespacesStrict {
		t.Errorf("--namespace-lifecycle strict: %q, %v", f.NamespaceLifecycle, err)
	}
	if _, err := parse("--namespace-lifecycle", "lax"); err == nil || !strings.Contains(err.Error(), "--namespace-lifecycle") {
		t.Errorf("--namespace-lifecycle lax: %v, want an error naming the flag", err)
	}
	if _, err := parse("--event-max-count", "0"); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("--event-max-count 0: %v, want must be positive", err)
	}
}
