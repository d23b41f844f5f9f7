package boltdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/internal/datadir"
)

// ErrLocked reports a database file held by another process (a running
// server): the offline operations below refuse to touch it.
var ErrLocked = errors.New("boltdb: the database is in use by another process (a running server?)")

// lockWait is how long the offline operations wait for the file lock.
const lockWait = 500 * time.Millisecond

// openFile opens an existing leasehold store without loading it, read-only
// (a shared lock) or for writing (an exclusive lock), and checks its
// format marker.
func openFile(path string, readOnly bool) (*bolt.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("boltdb: %w", err)
	}
	// The same walk Open makes: bbolt's Check panics in a goroutine of
	// its own on some damage. Reading on the older meta page is allowed
	// here (backup and export are how data is rescued); CheckFile reports
	// that fallback itself.
	if _, _, err := checkFile(path, true, ""); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	db, err := openBolt(path, 0o600, &bolt.Options{ReadOnly: readOnly, Timeout: lockWait})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, path, err)
	}
	if err := db.View(checkFormatSafe); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return db, nil
}

// checkFormatSafe is checkFormat that reports bbolt's panics on damaged
// pages as ErrFormat.
func checkFormatSafe(tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading the file panicked: %v", ErrFormat, p)
		}
	}()
	if tx.Bucket(bucketMeta) == nil {
		return fmt.Errorf("%w: no meta bucket", ErrFormat)
	}
	return checkFormat(tx)
}

// BackupFile writes a consistent copy of the store at path to w while no
// server runs (a running server holds the lock: ErrLocked; back it up
// through the server instead).
func BackupFile(ctx context.Context, path string, w io.Writer) (int64, error) {
	db, err := openFile(path, true)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(ctxWriter{ctx: ctx, w: w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("boltdb: backup %s: %w", path, err)
	}
	return n, nil
}

// CheckFile validates the store at path: the format marker and bbolt's
// page-level consistency check.
func CheckFile(ctx context.Context, path string) error {
	if _, _, err := checkFile(path, false, ""); err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	db, err := openFile(path, true)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: %s: checking the file panicked: %v", ErrFormat, path, p)
			}
		}()
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: %s: %w", ErrFormat, path, errors.Join(errs...))
		}
		return ctx.Err()
	})
}

// Restore replaces the store at dst with a validated copy of src. dst must
// not be in use (ErrLocked); it is kept as dst+".pre-restore" when it
// exists, and the swap is a rename, so a crash leaves either file whole.
func Restore(ctx context.Context, src, dst string) error {
	if err := CheckFile(ctx, src); err != nil {
		return fmt.Errorf("boltdb: restore: %w", err)
	}
	if _, _, err := checkFile(dst, true, ""); err == nil {
		// Hold the exclusive lock while swapping so a server cannot open
		// the old file meanwhile. A damaged dst, which no server opens
		// either, is not opened: bbolt may crash on it.
		db, err := openBolt(dst, 0o600, &bolt.Options{Timeout: lockWait})
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("boltdb: restore: %w: %s", ErrLocked, dst)
		}
		if err == nil {
			defer db.Close()
		}
		// A damaged dst cannot be opened; it is replaced all the same.
	}
	tmp := dst + ".restore.tmp"
	if err := CopyFile(ctx, src, tmp); err != nil {
		return fmt.Errorf("boltdb: restore: %w", err)
	}
	defer os.Remove(tmp)
	if _, err := os.Stat(dst); err == nil {
		if err := os.Rename(dst, dst+".pre-restore"); err != nil {
			return fmt.Errorf("boltdb: restore: keep the old file: %w", err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("boltdb: restore: %w", err)
	}
	return syncDir(filepath.Dir(dst))
}

// CompactFile rewrites the store at path into a new file holding only its
// live pages and swaps it in, returning the sizes before and after. bbolt
// never shrinks a file by itself: pages freed by deletes are reused but
// not returned to the filesystem. The server must be stopped (ErrLocked).
func CompactFile(ctx context.Context, path string) (before, after int64, err error) {
	src, err := openFile(path, false)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if src != nil {
			_ = src.Close()
		}
	}()
	if fi, err := os.Stat(path); err == nil {
		before = fi.Size()
	}
	tmp := path + ".compact.tmp"
	_ = os.Remove(tmp)
	defer os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockWait})
	if err != nil {
		return before, 0, fmt.Errorf("boltdb: compact: %w", err)
	}
	if err := bolt.Compact(dst, src, 1<<20); err != nil {
		_ = dst.Close()
		return before, 0, fmt.Errorf("boltdb: compact %s: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		return before, 0, fmt.Errorf("boltdb: compact: %w", err)
	}
	if err := CheckFile(ctx, tmp); err != nil {
		return before, 0, fmt.Errorf("boltdb: compact: the new file fails its check, the old one is kept: %w", err)
	}
	// The source stays locked until the rename, so no server opens it
	// in between.
	if err := os.Rename(tmp, path); err != nil {
		return before, 0, fmt.Errorf("boltdb: compact: %w", err)
	}
	_ = src.Close()
	src = nil
	if fi, err := os.Stat(path); err == nil {
		after = fi.Size()
	}
	return before, after, syncDir(filepath.Dir(path))
}

// CopyFile copies src to dst (mode 0600, replacing a leftover), fsyncs it,
// and stops early when ctx ends: backups and staged snapshots are copied
// to a temporary name and renamed into place.
func CopyFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(ctxWriter{ctx: ctx, w: out}, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	if err := datadir.SyncDir(dir); err != nil {
		return fmt.Errorf("boltdb: %w", err)
	}
	return nil
}

// ScanFile calls fn with the key and value of every record of the store
// at path, in key order, read-only; fn's value is only valid during the
// call. It stops at fn's first error and returns it.
func ScanFile(ctx context.Context, path string, fn func(key string, value []byte) error) error {
	_, err := ExportFile(ctx, path, fn)
	return err
}

// ExportFile calls fn with the key and value of every record of the store
// at path, as ScanFile does, and returns the store's revision (its last
// write's), all in one read transaction: a one-way move of the records
// elsewhere knows exactly which revision it carried over.
func ExportFile(ctx context.Context, path string, fn func(key string, value []byte) error) (int64, error) {
	db, err := openFile(path, true)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var rev int64
	err = db.View(func(tx *bolt.Tx) error {
		rev = int64(decodeRev(tx.Bucket(bucketMeta).Get(metaRevision)))
		c := tx.Bucket(bucketKV).Cursor()
		for k, rec := c.First(); k != nil; k, rec = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			kv, err := decodeRecord(k, rec)
			if err != nil {
				return err
			}
			if err := fn(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		return nil
	})
	return rev, err
}
