package host

import (
	"context"
	"fmt"
	"io"

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

// signSubcommand is "leasehold plugin sign --key KEYFILE MODULE.wasm".
var signSubcommand = cli.Command{
	Name:     "sign",
	Synopsis: signSynopsis,
	Summary:  "write MODULE.wasm.sig, a signature servers with --plugin-trust-keys verify",
	Run:      signCommand,
}

const (
	keygenSynopsis = "plugin keygen KEYFILE"
	signSynopsis   = "plugin sign --key KEYFILE MODULE.wasm"
)

const keygenAbout = `Writes a new Ed25519 private key to KEYFILE (PEM, PKCS #8, mode 0600) and its
public key to KEYFILE.pub (PEM, PKIX), and prints the key id. Refuses to
overwrite either file. Keep KEYFILE off the servers: they need only the .pub,
in the file --plugin-trust-keys names.`

const signAbout = `Signs MODULE.wasm with the private key KEYFILE and writes MODULE.wasm.sig beside
it (replacing an older one): a JSON document with the module's sha256, the
signer's key id and the Ed25519 signature. Copy both files into the plugins
directory; a server started with --plugin-trust-keys loads the module only if
the signature is valid and by a key it trusts.`

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
	module, err := fs.ParseWithArg(args, "MODULE.wasm")
	if err == nil && *key == "" {
		err = fmt.Errorf("--key is required")
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	sigPath, id, err := signature.SignModule(*key, module)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin sign: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "wrote %s (key id %s)\n", sigPath, id)
	return cli.ExitOK
}
