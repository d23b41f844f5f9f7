package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/web/cli"
)

// PluginCommand is "leasehold plugin vet|test": vet checks a strategy
// module against the plugin ABI and prints its VetReport; test runs it
// offline on an abi.Input (--input, default a built-in sample) and prints
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
		Summary:  "check a strategy module against the plugin ABI (vet), run it offline and\nprint its decision (test), sign modules (keygen, sign), list a server's (list)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 {
				if sub, ok := cli.Lookup(subs, args[0]); ok {
					return sub.Run(ctx, args[1:], stdout, stderr)
				}
			}
			return pluginCommand(ctx, args, stdout, stderr)
		},
	}
}

const pluginSynopsis = "plugin vet FILE.wasm\nplugin test FILE.wasm [--input snapshot.json]"

func pluginCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "vet" && args[0] != "test") {
		fs := cli.NewFlagSet("plugin vet|test|keygen|sign|list ...", "Run \"leasehold plugin SUBCOMMAND --help\" for each subcommand's flags and arguments.", stderr)
		err := fs.Parse(args)
		if err == nil {
			err = errors.New("expected a subcommand: vet, test, keygen, sign or list")
		}
		code, _ := fs.Stop(err)
		return code
	}
	sub := args[0]
	synopsis := "plugin vet FILE.wasm"
	if sub == "test" {
		synopsis = "plugin test FILE.wasm [--input snapshot.json]"
	}
	fs := cli.NewFlagSet(synopsis, "", stderr)
	input := fs.String("input", "", "`file` with the abi.Input JSON to decide on (default: a built-in sample)")
	file, err := fs.ParseWithArg(args[1:], "FILE.wasm")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	wasm, err := os.ReadFile(file)
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
		data, err := os.ReadFile(*input)
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
