package engine

import (
	"errors"
	"flag"
	"fmt"
)

// Flags are serve's flags for the engine: --namespace-lifecycle and the
// bounds of the stored Events, filling Options; serve adds the store and
// the rest.
type Flags struct {
	Options
	namespaceLifecycle string
}

// RegisterFlags adds the engine's flags to fs.
func (f *Flags) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.namespaceLifecycle, "namespace-lifecycle", string(NamespacesImplicit), "what a create into a missing namespace does: \"implicit\" creates the namespace, \"strict\" answers 404 namespaces \"x\" not found as kube-apiserver")
	fs.DurationVar(&f.EventTTL, "event-ttl", DefaultEventTTL, "how long an Event is kept after its last write")
	fs.IntVar(&f.EventMaxCount, "event-max-count", DefaultEventMaxCount, "most Events stored; beyond it the oldest are deleted")
	fs.Int64Var(&f.EventMaxBytes, "event-max-bytes", DefaultEventMaxBytes, "most `bytes` of stored Events; beyond it the oldest are deleted")
}

// Validate checks the parsed flags and sets Options.NamespaceLifecycle.
func (f *Flags) Validate() error {
	var err error
	if f.NamespaceLifecycle, err = ParseNamespaceLifecycle(f.namespaceLifecycle); err != nil {
		return fmt.Errorf("invalid --namespace-lifecycle: %w", err)
	}
	if f.EventTTL <= 0 || f.EventMaxCount <= 0 || f.EventMaxBytes <= 0 {
		return errors.New("--event-ttl, --event-max-count and --event-max-bytes must be positive")
	}
	return nil
}
