package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestFlagSetEnvTwinsAliasesAndHelp(t *testing.T) {
	t.Setenv("LEASEHOLD_NAMESPACE", "from-env")
	t.Setenv("LEASEHOLD_N", "ignored: aliases have no twin")
	var stderr bytes.Buffer
	fs := NewFlagSet("leader --lease NAME [flags]", "Prints the holder.", &stderr)
	ns := fs.String("namespace", "default", "`name`space of the lease")
	watch := fs.Bool("watch", false, "keep running")
	fs.Alias("n", "namespace")
	if err := fs.ParseNoArgs(nil); err != nil || *ns != "from-env" {
		t.Fatalf("env twin: namespace %q, err %v", *ns, err)
	}
	if err := fs.ParseNoArgs([]string{"-n", "x", "--watch"}); err != nil || *ns != "x" || !*watch {
		t.Fatalf("-n x --watch: namespace %q watch %v err %v", *ns, *watch, err)
	}
	err := fs.Parse([]string{"--help"})
	if code, stop := fs.Stop(err); !stop || code != ExitOK || !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: err %v code %d stop %v", err, code, stop)
	}
	want := "Usage: leasehold leader --lease NAME [flags]\n\nPrints the holder.\n\n" +
		"Flags (each also read from its environment variable):\n" +
		"  -n, --namespace name\n    \tnamespace of the lease (env LEASEHOLD_NAMESPACE, default \"default\")\n" +
		"  --watch\n    \tkeep running (env LEASEHOLD_WATCH)\n"
	if got := stderr.String(); got != want {
		t.Errorf("help:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseWithArg(t *testing.T) {
	for _, args := range [][]string{{"f.db", "--x", "1"}, {"--x", "1", "f.db"}} {
		fs := NewFlagSet("backup FILE", "", &bytes.Buffer{})
		x := fs.Int("x", 0, "")
		if file, err := fs.ParseWithArg(args, "FILE"); err != nil || file != "f.db" || *x != 1 {
			t.Errorf("%q: file %q x %d err %v", args, file, *x, err)
		}
	}
	fs := NewFlagSet("backup FILE", "", &bytes.Buffer{})
	if _, err := fs.ParseWithArg([]string{"a", "b"}, "FILE"); err == nil || !strings.Contains(err.Error(), "exactly one FILE") {
		t.Errorf("two files: err %v", err)
	}
}

func TestWriteList(t *testing.T) {
	var b bytes.Buffer
	WriteList(&b, []Command{
		{Name: "version", Synopsis: "version", Summary: "print version information"},
		{Name: "plugin", Synopsis: "plugin vet FILE.wasm\nplugin test FILE.wasm", Summary: "check a module\n(second line)"},
	})
	want := "  leasehold version           print version information\n" +
		"  leasehold plugin vet FILE.wasm\n  leasehold plugin test FILE.wasm\n" +
		"                              check a module\n                              (second line)\n"
	if b.String() != want {
		t.Errorf("list:\n%q\nwant:\n%q", b.String(), want)
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		x    int
	}{
		{[]string{"a.wasm", "in.json"}, []string{"a.wasm", "in.json"}, 0},
		{[]string{"a.wasm", "--x", "2", "in.json"}, []string{"a.wasm", "in.json"}, 2},
		{[]string{"--x", "3", "a.wasm", "in.json", "--x=4"}, []string{"a.wasm", "in.json"}, 4},
		{[]string{"a.wasm", "--", "--x", "5"}, []string{"a.wasm", "--x", "5"}, 0},
		{[]string{"--x", "6", "--", "-b"}, []string{"-b"}, 6},
		{nil, nil, 0},
	} {
		fs := NewFlagSet("plugin test FILE.wasm [INPUT.json]", "", &bytes.Buffer{})
		x := fs.Int("x", 0, "")
		got, err := fs.ParseInterspersed(c.args)
		if err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") || *x != c.x {
			t.Errorf("%q: positional %q x %d err %v; want %q x %d", c.args, got, *x, err, c.want, c.x)
		}
	}
}

// A synopsis of several forms prints each under "Usage:" and names the
// flag set after the words they share.
func TestSeveralForms(t *testing.T) {
	var stderr bytes.Buffer
	fs := NewFlagSet("plugin vet FILE.wasm\nplugin test FILE.wasm [INPUT.json]", "Works on a module.", &stderr)
	if fs.Name() != "leasehold plugin" {
		t.Errorf("name %q, want %q", fs.Name(), "leasehold plugin")
	}
	_ = fs.Parse([]string{"--help"})
	want := "Usage: leasehold plugin vet FILE.wasm\n       leasehold plugin test FILE.wasm [INPUT.json]\n\nWorks on a module.\n"
	if stderr.String() != want {
		t.Errorf("help:\n%q\nwant:\n%q", stderr.String(), want)
	}
}

// A bad flag prints its error once, prefixed by the command, and one line
// on where the help is, not the whole usage (which scrolls the error away);
// it exits ExitUsage. So does a bad flag after a positional argument.
func TestBadFlagPrintsErrorAndHint(t *testing.T) {
	for _, c := range []struct {
		parse func(fs *FlagSet) error
		name  string
	}{
		{func(fs *FlagSet) error { return fs.ParseNoArgs([]string{"--nope"}) }, "ParseNoArgs"},
		{func(fs *FlagSet) error { _, err := fs.ParseInterspersed([]string{"a.wasm", "--nope"}); return err }, "ParseInterspersed"},
	} {
		var stderr bytes.Buffer
		fs := NewFlagSet("serve [flags]", "Runs the server.", &stderr)
		fs.Bool("watch", false, "keep running")
		code, stop := fs.Stop(c.parse(fs))
		want := "leasehold serve: flag provided but not defined: -nope\nRun 'leasehold serve --help' for usage.\n"
		if !stop || code != ExitUsage || stderr.String() != want {
			t.Errorf("%s --nope: code %d stop %v, stderr:\n%s\nwant exit %d and exactly:\n%s", c.name, code, stop, stderr.String(), ExitUsage, want)
		}
	}
}
