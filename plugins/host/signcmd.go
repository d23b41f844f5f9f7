package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/plugins/signature"
)

// keygenSubcommand is "leasehold plugin keygen KEYFILE".
var keygenSubcommand = cli.Command{
	Name:     "keygen",
	Synopsis: keygenSynopsis,
	Summary:  "write a new Ed25519 signing key to KEYFILE (0600) and its public key to KEYFILE.pub",
	Run:      keygenCommand,
}

// signSubcommand is "leasehold plugin sign --key KEYFILE FILE".
var signSubcommand = cli.Command{
	Name:     "sign",
	Synopsis: signSynopsis,
	Summary:  "write FILE.sig, a statement servers with --plugin-trust-keys verify: this module\n(NAME.wasm) or settings (NAME.json), this name, this strategy, this sequence",
	Run:      signCommand,
}

const (
	keygenSynopsis = "plugin keygen KEYFILE"
	signSynopsis   = "plugin sign --key KEYFILE [--strategy NAME] [--sequence N] FILE"
)

const keygenAbout = `Writes a new Ed25519 private key to KEYFILE (PEM, PKCS #8, mode 0600) and its
public key to KEYFILE.pub (PEM, PKIX), and prints the key id. Refuses to
overwrite either file. Keep KEYFILE off the servers: they need only the .pub,
in the file --plugin-trust-keys names.`

const signAbout = `Signs FILE, a strategy module NAME.wasm or its settings NAME.json, with the
private key KEYFILE and writes FILE.sig beside it (replacing an older one): a
statement of what the signature is for (the kind, module or settings; the
file's name; the strategy; the content's sha256; a sequence number) with the
signer's key id and the Ed25519 signature. Copy both files into the plugins
directory under the same name; a server started with --plugin-trust-keys
loads the file only if the statement is valid, by a key it trusts, made for
that name, kind and strategy, and not older than the newest sequence it has
accepted for the strategy (a rollback) or under its --plugin-min-sequence.

The strategy is the module's own (its info's name); for settings, that of
NAME.wasm beside them, or --strategy (which must agree with the module's;
it is used as given when this binary cannot load the module). The sequence defaults to the current
Unix time in seconds (or one more than FILE.sig's, if that is not smaller),
so that a later signature outranks an earlier one; give --sequence to use
release numbers instead, and keep them increasing per strategy.`

func keygenCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(keygenSynopsis, keygenAbout, stderr)
	path, err := fs.ParseWithArg(args, "KEYFILE")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	id, err := signature.GenerateKey(path)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin keygen: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "wrote %s (private, keep it secret) and %s%s (public)\nkey id %s\n",
		path, path, signature.PublicKeySuffix, id)
	return cli.ExitOK
}

func signCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(signSynopsis, signAbout, stderr)
	key := fs.String("key", "", "private key `file` written by \"leasehold plugin keygen\" (required)")
	strategy := fs.String("strategy", "", "the strategy `name` the statement is for (default: the module's, or for settings that of NAME.wasm beside them); must match the module's")
	seq := fs.Uint64("sequence", 0, "the statement's sequence `number`, at least 1 (default: the Unix time, or FILE.sig's plus one if that is larger)")
	file, err := fs.ParseWithArg(args, "FILE")
	if err == nil && *key == "" {
		err = fmt.Errorf("--key is required")
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	name, err := signedStrategy(ctx, file, *strategy)
	if err != nil && *strategy != "" && !errors.Is(err, errStrategyMismatch) {
		// A module this binary cannot load (a newer ABI, say) is signed
		// for the strategy given: the server checks the name at load.
		fmt.Fprintf(stderr, "leasehold plugin sign: cannot read the module's strategy (%v): signing for --strategy %s\n", err, *strategy)
		name, err = *strategy, nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin sign: %v\n", err)
		return cli.ExitFailure
	}
	sigPath, id, st, err := signature.SignFile(*key, file, name, *seq)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin sign: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "wrote %s (key id %s): %s %s for strategy %s, sequence %d\n", sigPath, id, st.Kind, st.File, st.Strategy, st.Sequence)
	return cli.ExitOK
}

// signedStrategy is the strategy a statement about file is for: the
// module's own name (file, or for settings NAME.wasm beside them), which
// given must match when both are known, or given alone for settings
// without their module at hand.
func signedStrategy(ctx context.Context, file, given string) (string, error) {
	kind, err := signature.KindOf(file)
	if err != nil {
		return "", err
	}
	module := file
	if kind == signature.KindSettings {
		module = strings.TrimSuffix(file, ".json") + ".wasm"
	}
	wasm, err := readModuleFile(module)
	if errors.Is(err, fs.ErrNotExist) && kind == signature.KindSettings {
		if given == "" {
			return "", fmt.Errorf("%s: no module %s beside the settings to take the strategy name from: give --strategy", file, module)
		}
		return given, nil
	}
	if err != nil {
		return "", err
	}
	name, err := ModuleStrategy(ctx, wasm)
	if err != nil {
		return "", fmt.Errorf("%s: %w", module, err)
	}
	if given != "" && given != name {
		return "", fmt.Errorf("%w: --strategy %s, but %s is strategy %s", errStrategyMismatch, given, module, name)
	}
	return name, nil
}

var errStrategyMismatch = errors.New("wrong strategy")

// ModuleStrategy returns the strategy name a module's info declares,
// after the load-time checks (not the self-test).
func ModuleStrategy(ctx context.Context, wasm []byte) (string, error) {
	r, err := newRunner(ctx, Options{Logger: slog.New(slog.DiscardHandler)}.withDefaults(), offlineCache())
	if err != nil {
		return "", err
	}
	defer r.close(ctx)
	m, err := r.loadUnchecked(ctx, wasm, nil, r.opts.Logger)
	if err != nil {
		return "", err
	}
	defer m.release()
	return m.info.Name, nil
}
