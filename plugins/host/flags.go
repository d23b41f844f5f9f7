package host

import (
	"flag"
	"fmt"
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
