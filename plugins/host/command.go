package host

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/leasehold/leasehold/plugins/abi"
)

// Command implements "leasehold plugin vet|test" (args follow "plugin")
// and returns the exit code: vet checks a strategy module against the
// plugin ABI and prints its VetReport; test runs it offline on an
// abi.Input (--input, default a built-in sample) and prints its decision
// and timing.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "vet" && args[0] != "test") {
		fmt.Fprintln(stderr, "usage: leasehold plugin vet FILE.wasm | leasehold plugin test FILE.wasm [--input snapshot.json]")
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("leasehold plugin "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "", "`file` with the abi.Input JSON to decide on (default: a built-in sample)")
	// Accept the module path before or after the flags.
	var file string
	rest := args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		file, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		fmt.Fprintf(stderr, "leasehold plugin %s: expected exactly one FILE.wasm\n", sub)
		return 2
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold plugin %s: %v\n", sub, err)
		return 1
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
