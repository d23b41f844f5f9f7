package backend

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/datadir"
)

// parsed is the storage configuration of serve's storage flags args.
func parsed(t *testing.T, args ...string) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestResolveModes: the flags and what the data directory holds resolve
// to one mode, and Resolve writes nothing.
func TestResolveModes(t *testing.T) {
	empty := datadir.At(t.TempDir())
	member := datadir.At(t.TempDir())
	touch(t, member.Member().State)
	replica := datadir.At(t.TempDir())
	touch(t, replica.Replica().State)
	for _, c := range []struct {
		dir  datadir.Layout
		args []string
		want Mode
	}{
		{empty, nil, SingleDevice},
		{empty, []string{"--storage", "etcd", "--etcd-endpoints", "https://e:2379"}, ExternalEtcd},
		{empty, []string{"--cluster-init", "--cluster-token", "t"}, Member},
		{empty, []string{"--join", "https://m:6443"}, Member},
		{member, nil, Member}, // a member restarts whatever the flags say
		{empty, []string{"--replica", "--join", "https://m:6443"}, Replica},
		{replica, nil, Replica}, // and so does a replica
	} {
		cfg := parsed(t, c.args...)
		before := cfg
		got, err := cfg.Resolve(c.dir)
		if err != nil || got != c.want {
			t.Errorf("%q in %s: mode %v, err %v; want %v", c.args, c.dir.Dir, got, err, c.want)
		}
		if cfg != before {
			t.Errorf("%q: Resolve changed the configuration", c.args)
		}
	}
	if entries, _ := os.ReadDir(empty.Dir); len(entries) != 0 {
		t.Errorf("Resolve wrote into the data directory: %v", entries)
	}
	for _, c := range []struct {
		dir  datadir.Layout
		args []string
		want string
	}{
		{empty, []string{"--storage", "etcd"}, "--etcd-endpoints"},
		{empty, []string{"--storage", "nfs"}, "use bbolt or etcd"},
		{empty, []string{"--cluster-init", "--join", "https://m:6443"}, "exclude each other"},
		{empty, []string{"--cluster-init", "--storage", "etcd"}, "cannot be combined"},
		{empty, []string{"--join", "https://m:6443", "--cluster-token", "a", "--cluster-token-file", "f"}, "not both"},
		{empty, []string{"--cluster-init", "--peer-listen", "nope"}, "--peer-listen"},
		{empty, []string{"--replica", "--cluster-init"}, "not --cluster-init"},
		{member, []string{"--replica", "--join", "https://m:6443"}, "a member cannot become a replica"},
	} {
		cfg := parsed(t, c.args...)
		if _, err := cfg.Resolve(c.dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want one saying %q", c.args, err, c.want)
		}
	}
}

// TestResolveRefusesAStagedSnapshot: a data directory holding a snapshot
// that "leasehold restore" staged starts only with --cluster-init; serving
// a fresh single-device database beside it, or joining another cluster as
// a replica, would leave the restore undone without a word.
func TestResolveRefusesAStagedSnapshot(t *testing.T) {
	dir := datadir.At(t.TempDir())
	touch(t, dir.Member().RestoreSnapshot)
	for _, args := range [][]string{nil, {"--replica", "--join", "https://m:6443"}} {
		cfg := parsed(t, args...)
		if _, err := cfg.Resolve(dir); err == nil || !strings.Contains(err.Error(), "--cluster-init") {
			t.Errorf("%q beside a staged snapshot: %v, want a refusal naming --cluster-init", args, err)
		}
	}
	cfg := parsed(t, "--cluster-init", "--cluster-token", "t")
	if mode, err := cfg.Resolve(dir); err != nil || mode != Member {
		t.Errorf("--cluster-init beside a staged snapshot: mode %v, err %v", mode, err)
	}
}
