package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/builtin"
	"github.com/leasehold/leasehold/plugins/signature"
	"github.com/leasehold/leasehold/plugins/status"
)

// Host is the strategy registry: embedded built-ins plus the modules of
// Options.Dir. Lookup is lock-free (an atomic pointer to an immutable
// name->module map), so a reload never blocks a decision.
type Host struct {
	r    *runner
	opts Options
	log  *slog.Logger

	active atomic.Pointer[map[string]*module]

	// loaded is closed when the first scan of Options.Dir is over (at once
	// without a directory); loadedOnce guards the close.
	loaded     chan struct{}
	loadedOnce sync.Once

	// scanMu serialises scans: only the scanner writes files. loading is
	// held (shared) while a scan compiles, so that Close never closes the
	// runtime under a compile; neither is held while a file is read.
	scanMu  sync.Mutex
	loading sync.RWMutex

	mu       sync.Mutex // guards the fields below; never held across file I/O or a compile
	builtins map[string]*module
	files    map[string]*fileState
	closed   bool
}

var _ abi.Registry = (*Host)(nil)

// fileState is what the poller knows about one file of Options.Dir.
type fileState struct {
	path    string
	sha     string // last content seen
	mod     *module
	signer  string // key id that signed mod's content (with TrustKeys)
	seq     uint64 // sequence of mod's signed statement (with TrustKeys)
	err     error  // load error or refusal of content errSHA (mod, if any, is older)
	errSHA  string
	errKey  string // key id the refused content's signature file claims
	errAt   time.Time
	info    os.FileInfo // at the last read
	settled bool        // info's mtime was over 2 s old when read

	// With TrustKeys, the same for the signature file (sigInfo nil: none)
	// and a digest of its content, so that a signature written, replaced
	// or removed after its module is noticed like a module change.
	sigInfo    os.FileInfo
	sigSettled bool
	sigSum     string
	// setSum names the settings file's content (and, with TrustKeys, its
	// signature's) as last read: "none" without one.
	setSum string
}

// New compiles and self-tests the built-in strategies and creates
// Options.Dir; call Run to load and watch the directory.
func New(ctx context.Context, opts Options) (*Host, error) {
	opts = opts.withDefaults()
	r, err := newRunner(ctx, opts, nil)
	if err != nil {
		return nil, err
	}
	if opts.TrustKeys != nil && opts.Sequences == nil {
		opts.Sequences = signature.NewSequences(signature.Pins{})
	}
	h := &Host{r: r, opts: opts, log: opts.Logger.With("component", "plugins"),
		builtins: map[string]*module{}, files: map[string]*fileState{}, loaded: make(chan struct{})}
	for _, b := range builtin.Modules() {
		m, _, err := r.load(ctx, b.Wasm, "builtin:"+b.File, true, h.log)
		if err != nil {
			_ = r.close(ctx)
			return nil, fmt.Errorf("plugins: built-in %s: %w", b.File, err)
		}
		h.builtins[m.info.Name] = m
	}
	if opts.Dir != "" {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			_ = r.close(ctx)
			return nil, fmt.Errorf("plugins: create %s: %w", opts.Dir, err)
		}
	}
	h.publish()
	if opts.Dir == "" {
		h.markLoaded()
	}
	return h, nil
}

// Loaded is closed once the first scan of Options.Dir is over, whatever
// it found (at once when there is no directory): from then on Lookup
// answers for every module the directory held at start. The election
// controller waits for it, so that it does not judge a strategy missing
// whose module is still being compiled.
func (h *Host) Loaded() <-chan struct{} { return h.loaded }

func (h *Host) markLoaded() { h.loadedOnce.Do(func() { close(h.loaded) }) }

// Lookup returns the module currently serving name.
func (h *Host) Lookup(name string) (abi.Strategy, bool) {
	m, ok := (*h.active.Load())[name]
	if !ok {
		return nil, false
	}
	return m, true
}

// Builtin returns the embedded module for name even when a file in
// Options.Dir overrides it: the controller's fallback after a failure.
func (h *Host) Builtin(name string) (abi.Strategy, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.builtins[name]
	if !ok {
		return nil, false
	}
	return m, true
}

// Ready reports whether the host can decide: built-ins loaded, not closed.
func (h *Host) Ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("plugins: host closed")
	}
	if _, ok := h.builtins[abi.BuiltinStrategy]; !ok {
		return fmt.Errorf("plugins: built-in %s not loaded", abi.BuiltinStrategy)
	}
	return nil
}

// Close stops serving and releases the runtime; decisions still running
// fail (and their caller falls back).
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	empty := map[string]*module{}
	h.active.Store(&empty)
	h.mu.Unlock()
	// A scan stuck on a file holds scanMu, not this: only a compile in
	// flight is waited for.
	h.loading.Lock()
	defer h.loading.Unlock()
	return h.r.close(ctx)
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// publish rebuilds the name->module map: built-ins, then files in path
// order (a file may override a built-in; load rejects a second file with
// a name another file serves). Callers hold mu or own h exclusively.
func (h *Host) publish() {
	next := make(map[string]*module, len(h.builtins)+len(h.files))
	for name, m := range h.builtins {
		next[name] = m
	}
	for _, path := range h.sortedPaths() {
		if m := h.files[path].mod; m != nil {
			next[m.info.Name] = m
		}
	}
	h.active.Store(&next)
}

func (h *Host) sortedPaths() []string {
	paths := make([]string, 0, len(h.files))
	for p := range h.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// Modules lists built-ins, then directory files by path.
func (h *Host) Modules() []status.Module {
	h.mu.Lock()
	defer h.mu.Unlock()
	active := *h.active.Load()
	var out []status.Module
	names := make([]string, 0, len(h.builtins))
	for n := range h.builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, h.status(h.builtins[n], active))
	}
	for _, p := range h.sortedPaths() {
		f := h.files[p]
		st := status.Module{File: p, SHA256: f.sha, SignerKeyID: f.errKey}
		if f.mod != nil {
			st = h.status(f.mod, active)
			st.SignerKeyID, st.SignedSequence = f.signer, f.seq
		}
		if f.err != nil {
			st.LoadError = f.err.Error()
			if f.mod == nil {
				st.LastError, st.LastErrorAt = f.err.Error(), f.errAt
				st.State = status.StateRefusedPrefix + f.err.Error()
			} else {
				st.RefusedSHA256 = f.errSHA
			}
		}
		out = append(out, st)
	}
	return out
}

func (h *Host) status(m *module, active map[string]*module) status.Module {
	st := status.Module{Name: m.info.Name, File: m.file, SHA256: m.sha, Version: m.info.Version,
		Description: m.info.Description, Builtin: m.builtin, Active: active[m.info.Name] == m, LoadedAt: m.loadedAt,
		ABIVersion: strconv.Itoa(int(m.abi)), State: status.StateLoaded, ABIMinor: m.info.ABIMinor,
		SettingsFile: m.settingsFile, SettingsSHA256: m.settingsSHA}
	m.stats.fill(&st)
	return st
}
