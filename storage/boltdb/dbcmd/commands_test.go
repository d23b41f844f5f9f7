package dbcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// TestBackupRefusesToOverwrite: an existing FILE is replaced only with
// --force; without it the backup exits 1, names the flag, and leaves the
// file (and its directory) as they were.
func TestBackupRefusesToOverwrite(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	st, err := boltdb.Open(ctx, datadir.At(dataDir).Database(), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, "/registry/leases/default/a", []byte("value")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var checked []string
	check := func(key string, _ []byte) error {
		checked = append(checked, key)
		return nil
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := BackupCommand(nil, nil, check).Run(ctx, append([]string{"--data-dir", dataDir}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	out := t.TempDir()
	fresh := filepath.Join(out, "fresh.db")
	if code, stdout, stderr := run(fresh); code != cli.ExitOK || !strings.HasPrefix(stdout, "wrote "+fresh) {
		t.Fatalf("backup to a new file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if err := boltdb.CheckFile(ctx, fresh); err != nil || len(checked) != 1 {
		t.Fatalf("the new backup: %v, records checked %q", err, checked)
	}

	for _, existing := range []string{fresh, filepath.Join(out, "notes.txt")} {
		if existing != fresh {
			if err := os.WriteFile(existing, []byte("not a backup"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		before, err := os.ReadFile(existing)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := run(existing)
		if code != cli.ExitFailure || stdout != "" || stderr != "leasehold backup: "+existing+" exists: pass --force to replace it\n" {
			t.Errorf("backup over %s: exit %d, stdout %q, stderr %q; want 1 and the remedy", existing, code, stdout, stderr)
		}
		if after, err := os.ReadFile(existing); err != nil || !bytes.Equal(after, before) {
			t.Errorf("backup without --force changed %s (%v)", existing, err)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 2 {
		t.Errorf("backup directory holds %d entries (%v), want fresh.db and notes.txt only: a refused backup leaves no temporary file", len(entries), err)
	}

	notes := filepath.Join(out, "notes.txt")
	if code, stdout, stderr := run("--force", notes); code != cli.ExitOK || !strings.HasPrefix(stdout, "wrote "+notes) {
		t.Fatalf("backup --force: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if err := boltdb.CheckFile(ctx, notes); err != nil {
		t.Errorf("backup --force did not replace the file with a backup: %v", err)
	}
}

// TestPublishWithoutReplace: the last step links instead of renaming, so a
// FILE that appeared while the copy was made is not replaced either.
func TestPublishWithoutReplace(t *testing.T) {
	dir := t.TempDir()
	tmp, file := filepath.Join(dir, ".tmp"), filepath.Join(dir, "file")
	for _, p := range []string{tmp, file} {
		if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(tmp, file, false); err == nil || !strings.Contains(err.Error(), "pass --force") {
		t.Errorf("publish over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != file {
		t.Errorf("file now holds %q", b)
	}
	if err := publish(tmp, filepath.Join(dir, "new"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left after publish: %v", err)
	}
}

// TestRestoreRefusesASingleDeviceBackupIntoAMember: a member's data is
// etcd's; a bbolt file restored beside it would never be served.
func TestRestoreRefusesASingleDeviceBackupIntoAMember(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	st, err := boltdb.Open(ctx, datadir.At(src).Database(), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(datadir.At(dir).Member().Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(datadir.At(dir).Member().Dir, "member.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := RestoreCommand.Run(ctx, []string{"--data-dir", dir, datadir.At(src).Database()}, &stdout, &stderr)
	if code != cli.ExitFailure || !strings.Contains(stderr.String(), "holds a cluster member") {
		t.Errorf("restore: exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(datadir.At(dir).Database()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore wrote %s anyway (%v)", datadir.At(dir).Database(), err)
	}
}

// TestBackupRefusesACopyBelowTheBarrier: a copy whose revision is below
// the barrier revision the server names (a cluster member's linearizable
// read before its snapshot) misses acknowledged writes: it is refused,
// exit 1, and FILE is not written. At the barrier it is written, and its
// revision printed.
func TestBackupRefusesACopyBelowTheBarrier(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	db := datadir.At(dataDir).Database()
	st, err := boltdb.Open(ctx, db, boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rev int64
	for _, k := range []string{"a", "b", "c"} {
		kv, err := st.Create(ctx, "/registry/leases/default/"+k, []byte("value"))
		if err != nil {
			t.Fatal(err)
		}
		rev = kv.ModRevision
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(barrier int64, file string) (int, string, string) {
		// The server's answer: the store's copy, and the barrier.
		remote := func(ctx context.Context, _ string, w io.Writer) (int64, string, int64, error) {
			n, err := boltdb.BackupFile(ctx, db, w)
			return n, "https://member", barrier, err
		}
		var stdout, stderr bytes.Buffer
		code := BackupCommand(remote, nil, nil).Run(ctx, []string{"--data-dir", dataDir, "--kubeconfig", "member.kubeconfig", file}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	below := filepath.Join(t.TempDir(), "below.db")
	code, stdout, stderr := run(rev+1, below)
	if code != cli.ExitFailure || !strings.Contains(stderr, "misses acknowledged writes") {
		t.Errorf("a copy at revision %d under a barrier at %d: exit %d, stdout %q, stderr %q; want a refusal", rev, rev+1, code, stdout, stderr)
	}
	if _, err := os.Stat(below); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused copy was written (%v)", err)
	}
	at := filepath.Join(t.TempDir(), "at.db")
	code, stdout, stderr = run(rev, at)
	if want := fmt.Sprintf("wrote %s (", at); code != cli.ExitOK || !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, fmt.Sprintf(", revision %d, from the server at https://member)", rev)) {
		t.Errorf("a copy at the barrier's revision %d: exit %d, stdout %q, stderr %q", rev, code, stdout, stderr)
	}
}
