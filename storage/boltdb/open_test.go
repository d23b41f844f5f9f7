package boltdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/storage"
)

func TestReopenKeepsDataAndRevision(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, Options{})
	a, err := s.Create(ctx, "/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := s.Update(ctx, "/a", []byte("2"), a.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Create(ctx, "/b", []byte("x"))
	_, delRev, err := s.Delete(ctx, "/b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(ctx, path, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.Get(ctx, "/a")
	if err != nil || string(got.Value) != "2" || got.CreateRevision != a.CreateRevision || got.ModRevision != a2.ModRevision {
		t.Fatalf("after reopen /a = %+v, %v", got, err)
	}
	if _, err := s2.Get(ctx, "/b"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted key after reopen: %v", err)
	}
	rev, _ := s2.CurrentRevision(ctx)
	crev, _ := s2.CompactRevision(ctx)
	if rev != delRev || crev != rev || b.ModRevision >= rev {
		t.Fatalf("after reopen revision %d compact %d, want both %d", rev, crev, delRev)
	}
	// History is gone after a restart, so older revisions are compacted.
	if _, err := s2.Watch(ctx, "/", a.ModRevision); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from before the restart: %v", err)
	}
	// The next write continues the revision sequence.
	c, err := s2.Create(ctx, "/c", nil)
	if err != nil || c.ModRevision != rev+1 {
		t.Fatalf("first write after reopen at %d, %v; want %d", c.ModRevision, err, rev+1)
	}
	if err := s2.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	garbage := filepath.Join(dir, "garbage.db")
	junk := bytes.Repeat([]byte("not a database "), 1024)
	if err := os.WriteFile(garbage, junk, 0o600); err != nil {
		t.Fatal(err)
	}

	foreign := filepath.Join(dir, "foreign.db")
	writeBolt(t, foreign, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("somebody-else"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})

	future := filepath.Join(dir, "future.db")
	writeBolt(t, future, func(tx *bolt.Tx) error {
		if err := initOrCheck(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, []byte("leasehold-bolt/v99"))
	})

	badRecord := filepath.Join(dir, "badrecord.db")
	writeBolt(t, badRecord, func(tx *bolt.Tx) error {
		if err := initOrCheck(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketKV).Put([]byte("/k"), []byte("short"))
	})

	for _, c := range []struct {
		path, want string
		format     bool
	}{
		{garbage, "meta pages are unreadable", false},
		{foreign, "no \"meta\" bucket", true},
		{future, "leasehold-bolt/v99", true},
		{badRecord, "shorter than its header", true},
	} {
		before, _ := os.ReadFile(c.path)
		s, err := Open(ctx, c.path, Options{Logger: quietLogger})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", filepath.Base(c.path))
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: error %q does not mention %q and the path", filepath.Base(c.path), err, c.want)
		}
		if c.format && !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v does not wrap ErrFormat", filepath.Base(c.path), err)
		}
		after, _ := os.ReadFile(c.path)
		if !bytes.Equal(before, after) {
			t.Errorf("%s: Open modified a file it refused", filepath.Base(c.path))
		}
	}
}

func writeBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenInUseIsNotDamaged: a second open of a file another store holds
// and writes is refused as in use, never as damaged (which would send the
// operator to restore a healthy database), and the first store's data is
// untouched.
func TestOpenInUseIsNotDamaged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the first store keeps writing pages meanwhile
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Create(ctx, fmt.Sprintf("/k%06d", i), bytes.Repeat([]byte("v"), 512)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	_, err = Open(ctx, path, Options{OpenTimeout: 300 * time.Millisecond})
	close(stop)
	<-done
	if !errors.Is(err, ErrInUse) || errors.Is(err, ErrDamaged) {
		t.Fatalf("second open: %v; want ErrInUse, not ErrDamaged", err)
	}
	if !strings.Contains(err.Error(), "another leasehold") {
		t.Errorf("the refusal should say what holds the file: %v", err)
	}
}
