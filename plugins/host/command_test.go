package host

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/plugins/abi"
)

// TestPluginTestInputFile: "leasehold plugin test FILE.wasm INPUT.json"
// (how docs/plugins.md writes it) decides on INPUT.json, exactly as
// --input INPUT.json does, with the flag anywhere on the line.
func TestPluginTestInputFile(t *testing.T) {
	ctx := context.Background()
	module := filepath.Join("..", "builtin", "oldest.wasm")
	wasm, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	// Not the built-in sample, so that a decision on the sample instead
	// of the file cannot pass.
	in := abi.GenerateInput(3, 6, abi.BuiltinStrategy)
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(input, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want, _, err := TestRun(ctx, wasm, in)
	if err != nil {
		t.Fatal(err)
	}
	sample, _, err := TestRun(ctx, wasm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(want, sample) {
		t.Fatalf("the generated input decides as the built-in sample (%+v): the test could not tell them apart", want)
	}
	for _, args := range [][]string{
		{"test", module, input},
		{"test", module, "--input", input},
		{"test", "--input", input, module},
		{"test", module, input, "--"},
	} {
		var stdout, stderr bytes.Buffer
		if code := pluginCommand(ctx, pluginSynopsis, args, &stdout, &stderr); code != cli.ExitOK {
			t.Errorf("plugin %q: exit %d, stderr %s", args, code, stderr.String())
			continue
		}
		var got struct {
			Decision *abi.Decision `json:"decision"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || !reflect.DeepEqual(got.Decision, want) {
			t.Errorf("plugin %q: decision %+v (%v), want %+v", args, got.Decision, err, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"test", module, input, "--input", input}, "give the input once"},
		{[]string{"test", module, input, input}, "at most one INPUT.json"},
		{[]string{"test"}, "expected FILE.wasm"},
		{[]string{"vet", module, input}, "expected one FILE.wasm"},
		{[]string{"vet", module, "--input", input}, "flag provided but not defined: -input"},
	} {
		var stdout, stderr bytes.Buffer
		code := pluginCommand(ctx, pluginSynopsis, c.args, &stdout, &stderr)
		if code != cli.ExitUsage || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("plugin %q: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), cli.ExitUsage, c.want)
		}
	}
}
