package snapshots

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// CheckedWhenWritten is SnapshotFile.Checked of a file not checked again:
// a snapshot gets its name only once it checked out.
const CheckedWhenWritten = "checked when written"

// List returns the snapshots in dir, newest first (a missing dir holds
// none). With recheck, each is checked again (Check) and its Checked
// says "ok" or why not.
func List(ctx context.Context, dir string, recheck bool) ([]clusterapi.SnapshotFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []clusterapi.SnapshotFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	files := []clusterapi.SnapshotFile{}
	for _, e := range entries {
		t, rev, ok := ParseName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile (pruned)
		}
		f := clusterapi.SnapshotFile{Name: e.Name(), Time: t, Revision: rev, SizeBytes: info.Size(), Checked: CheckedWhenWritten}
		if recheck {
			f.Checked = "ok"
			if got, err := Check(ctx, filepath.Join(dir, e.Name())); err != nil {
				f.Checked = err.Error()
			} else if got != rev {
				f.Checked = fmt.Sprintf("its revision is %d, not the %d its name says", got, rev)
			}
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool {
		if !files[i].Time.Equal(files[j].Time) {
			return files[i].Time.After(files[j].Time)
		}
		return files[i].Revision > files[j].Revision
	})
	return files, nil
}

// Check verifies the snapshot at path, as "leasehold backup" checks its
// copy, and returns its revision: a cluster member's etcd snapshot by its
// digest, bbolt's page-level check and every stored revision; a single
// device's bbolt file by its format marker, bbolt's check and every
// record.
func Check(ctx context.Context, path string) (int64, error) {
	snap, err := cluster.IsSnapshot(path)
	if err != nil {
		return 0, err
	}
	if snap {
		info, err := cluster.CheckSnapshot(ctx, path, "", nil)
		return info.Revision, err
	}
	if err := boltdb.CheckFile(ctx, path); err != nil {
		return 0, err
	}
	return boltdb.ExportFile(ctx, path, func(string, []byte) error { return nil })
}
