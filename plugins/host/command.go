package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/plugins/abi"
)

// PluginCommand is "leasehold plugin vet|test": vet checks a strategy
// module against the plugin ABI and prints its VetReport; test runs it
// offline on an abi.Input (a file, default a built-in sample) and prints
// its decision and timing.
var PluginCommand = PluginCommandWith()

// PluginCommandWith is PluginCommand plus subcommands implemented
// elsewhere: "plugin list" asks a server over HTTP, so it lives with the
// HTTP clients, which this package may not import. Besides vet and test,
// it has keygen and sign (signcmd.go).
func PluginCommandWith(more ...cli.Command) cli.Command {
	subs := append([]cli.Command{keygenSubcommand, signSubcommand}, more...)
	synopsis := pluginSynopsis
	for _, s := range subs {
		synopsis += "\n" + s.Synopsis
	}
	return cli.Command{
		Name:     "plugin",
		Synopsis: synopsis,
		Summary:  "check a strategy module against the plugin ABI (vet), run it offline and\nprint its decision (test), sign modules (keygen, sign), list a server's (list),\nreplay a server's recorded decisions through a module (replay)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 {
				if sub, ok := cli.Lookup(subs, args[0]); ok {
					return sub.Run(ctx, args[1:], stdout, stderr)
				}
			}
			return pluginCommand(ctx, synopsis, args, stdout, stderr)
		},
	}
}

const (
	pluginVetSynopsis  = "plugin vet FILE.wasm"
	pluginTestSynopsis = "plugin test FILE.wasm [INPUT.json]"
	pluginSynopsis     = pluginVetSynopsis + "\n" + pluginTestSynopsis

	pluginAbout = `Works on strategy modules: "vet" runs the load-time checks offline and prints
the report, "test" runs one decision offline and prints it with timings,
"keygen" and "sign" make a signing key and a module's detached signature,
"list" shows the modules a server has seen, "replay" runs a module on a
server's recorded decisions and compares. Run "leasehold plugin SUBCOMMAND
--help" for each.`
	pluginVetAbout = `Runs the checks the server runs before it serves a strategy module (ABI
version, imports and exports, info, the self-test on the golden samples) and
prints the report as JSON: sha256, size, info, imports, exports, memory,
compile time and each sample's action and latency. Exits 1 with the reason
when the server would reject the module.`
	pluginTestAbout = `Runs one decision of the strategy module offline on INPUT.json (an abi.Input
document, as docs/plugins.md describes; --input names it too), or on a
built-in sample without one, and prints the decision with the instantiate and
call times as JSON.`
)

// pluginCommand runs vet and test; synopsis is the whole command's, with
// the subcommands added by PluginCommandWith, for "plugin --help".
func pluginCommand(ctx context.Context, synopsis string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "vet" && args[0] != "test") {
		fs := cli.NewFlagSet(synopsis, pluginAbout, stderr)
		err := fs.Parse(args)
		if err == nil {
			err = errors.New("expected a subcommand: vet, test, keygen, sign, list or replay")
		}
		code, _ := fs.Stop(err)
		return code
	}
	sub := args[0]
	synopsis, about := pluginVetSynopsis, pluginVetAbout
	if sub == "test" {
		synopsis, about = pluginTestSynopsis, pluginTestAbout
	}
	fs := cli.NewFlagSet(synopsis, about, stderr)
	var input *string
	if sub == "test" {
		input = fs.String("input", "", "`file` with the abi.Input JSON to decide on, the same as INPUT.json (default: a built-in sample)")
	}
	pos, err := fs.ParseInterspersed(args[1:])
	var file string
	switch {
	case err != nil:
	case len(pos) == 0:
		err = errors.New("expected FILE.wasm")
	case sub == "vet" && len(pos) > 1:
		err = fmt.Errorf("expected one FILE.wasm, got %q", pos)
	case len(pos) > 2:
		err = fmt.Errorf("expected FILE.wasm and at most one INPUT.json, got %q", pos)
	case len(pos) == 2 && *input != "":
		err = errors.New("give the input once: INPUT.json or --input")
	default:
		file = pos[0]
		if len(pos) == 2 {
			*input = pos[1]
		}
	}
	if code, stop := fs.Stop(err); stop {
		return code
	}
	wasm, err := readModuleFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin %s: %v\n", sub, err)
		return cli.ExitFailure
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if sub == "vet" {
		rep, err := Vet(ctx, wasm)
		_ = enc.Encode(rep)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold plugin vet: %s: %v\n", file, err)
			return 1
		}
		fmt.Fprintf(stderr, "%s: ok (strategy %q, version %q)\n", file, rep.Info.Name, rep.Info.Version)
		return 0
	}
	var in *abi.Input
	if *input != "" {
		data, err := readLimitedBytes(*input, maxInputFileBytes, true)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold plugin test: %v\n", err)
			return 1
		}
		in = new(abi.Input)
		if err := json.Unmarshal(data, in); err != nil {
			fmt.Fprintf(stderr, "leasehold plugin test: %s is not an abi.Input: %v\n", *input, err)
			return 1
		}
	}
	decision, timing, err := TestRun(ctx, wasm, in)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin test: %s: %v\n", file, err)
		return 1
	}
	_ = enc.Encode(struct {
		Decision *abi.Decision `json:"decision"`
		Timing   Timing        `json:"timing"`
	}{decision, timing})
	return 0
}

// maxInputFileBytes bounds an INPUT.json of `plugin test`: an abi.Input
// for thousands of candidates is a few MiB.
const maxInputFileBytes = 64 << 20

// readModuleFile reads a module named on the command line, bounded like
// the plugins directory's (the default MaxModuleBytes).
func readModuleFile(path string) ([]byte, error) {
	return readLimitedBytes(path, Options{}.withDefaults().MaxModuleBytes, true)
}
