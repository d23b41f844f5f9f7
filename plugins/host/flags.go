package host

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/leasehold/leasehold/plugins/signature"
)

// Flags are serve's flags for the strategy modules of the plugins
// directory.
type Flags struct {
	// Dir is --plugins-dir; Resolve defaults it to <data-dir>/plugins.
	Dir string
	// FollowSymlinks lets files of Dir be symbolic links.
	FollowSymlinks bool
	// Timeout is the wall-clock limit of one decision.
	Timeout time.Duration
	// TrustKeys are the files of public keys whose signatures make a
	// module of Dir loadable (empty: no verification).
	TrustKeys []string
	trustKeys string
	// Pins are --plugin-min-sequence and --plugin-allow-rollback.
	Pins                       signature.Pins
	minSequence, allowRollback string
}

// RegisterFlags adds the plugin flags to fs.
func (f *Flags) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Dir, "plugins-dir", "", "`directory` watched for election strategy modules (*.wasm) (default <data-dir>/plugins)")
	fs.BoolVar(&f.FollowSymlinks, "plugin-follow-symlinks", false, "let module, settings and signature files of --plugins-dir be symbolic links (default: regular files only; anything else is refused unopened)")
	fs.DurationVar(&f.Timeout, "plugin-timeout", DefaultDecisionTimeout(false), "wall-clock limit of one strategy decision (1s on wazero's compiler, 5s on its interpreter on 32-bit ARM); a module that exceeds it is cut off and the built-in strategy decides")
	fs.StringVar(&f.minSequence, "plugin-min-sequence", "", "with --plugin-trust-keys, refuse signed modules and settings whose statement's sequence is smaller: comma-separated `N` (every strategy) or STRATEGY=N; anchors rollback protection when the data directory's plugin-sequences.json is lost")
	fs.StringVar(&f.allowRollback, "plugin-allow-rollback", "", "with --plugin-trust-keys, accept for these comma-separated `strategies` (\"*\": all) a signed module or settings file older than the newest accepted (a deliberate rollback; --plugin-min-sequence still applies)")
	fs.StringVar(&f.trustKeys, "plugin-trust-keys", "", "comma-separated `files` of PEM Ed25519 public keys (\"leasehold plugin keygen\" writes KEYFILE.pub; a file may hold several): load a module (and its settings) of --plugins-dir only with a valid FILE.sig by one of them, made for that file and strategy and no older than the newest accepted; built-ins are always trusted (default: no verification)")
}

// Resolve validates the parsed flags, defaults Dir to defaultDir (the
// data directory's plugins directory) and splits --plugin-trust-keys.
func (f *Flags) Resolve(defaultDir string) error {
	if f.Dir == "" {
		f.Dir = defaultDir
	}
	for _, k := range strings.Split(f.trustKeys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			f.TrustKeys = append(f.TrustKeys, k)
		}
	}
	pins, err := signature.ParsePins(f.minSequence, f.allowRollback)
	if err != nil {
		return err
	}
	f.Pins = pins
	if len(f.TrustKeys) == 0 && (pins.Min != 0 || len(pins.MinByStrategy) != 0 || len(pins.AllowRollback) != 0) {
		return fmt.Errorf("--plugin-min-sequence and --plugin-allow-rollback apply to signed modules: give --plugin-trust-keys too")
	}
	if f.Timeout <= 0 {
		return fmt.Errorf("invalid --plugin-timeout %s: must be positive", f.Timeout)
	}
	return nil
}

// Serving is what "leasehold serve" gives Open beside its flags.
type Serving struct {
	// CacheDir keeps compiled modules across restarts (Options.CacheDir).
	CacheDir string
	// SequencesFile remembers, with --plugin-trust-keys, the newest
	// signed statement accepted per strategy (signature.OpenSequences).
	SequencesFile string
	// Listen is the server's address; Exposed says it reaches beyond
	// loopback, where unverified modules are warned about.
	Listen  string
	Exposed bool
	// OnChange is Options.OnChange.
	OnChange func()
	Logger   *slog.Logger
}

// Open loads the trust keys and the accepted sequences of the flags and
// starts the host with them: the embedded built-in strategies compile
// (from the disk cache when warm) before it returns, and Run then watches
// the plugins directory.
func (f Flags) Open(ctx context.Context, s Serving) (*Host, error) {
	trust, err := signature.LoadTrust(f.TrustKeys, f.Dir, s.Exposed, s.Listen, s.Logger)
	if err != nil {
		return nil, err
	}
	var seqs *signature.Sequences
	if trust != nil {
		// The newest signed statement accepted per strategy survives a
		// restart, so that an older module put back is refused.
		if seqs, err = signature.OpenSequences(s.SequencesFile, f.Pins, s.Logger); err != nil {
			return nil, err
		}
	}
	h, err := New(ctx, Options{
		Dir:            f.Dir,
		CacheDir:       s.CacheDir,
		Logger:         s.Logger,
		OnChange:       s.OnChange,
		TrustKeys:      trust,
		Sequences:      seqs,
		FollowSymlinks: f.FollowSymlinks,
	})
	if err != nil {
		return nil, fmt.Errorf("load strategy plugins: %w", err)
	}
	return h, nil
}
