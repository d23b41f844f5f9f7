package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/leasehold/leasehold/internal/datadir"
)

// Staged is a snapshot StageRestore put in place.
type Staged struct {
	Info SnapshotInfo
	// Snapshot is where it waits for the next --cluster-init.
	Snapshot string
	// KeptAs is where a member's old files were moved ("" when there
	// were none).
	KeptAs string
}

// StageRestore checks the snapshot at file and puts a copy (made by
// copyFile, which syncs it) where the next "serve --cluster-init" in dir
// starts a new cluster from it: "leasehold restore" of a member. A
// member's files already in dir are moved aside, never deleted; a member
// still running there is refused.
func StageRestore(ctx context.Context, file string, dir datadir.Layout, copyFile func(ctx context.Context, src, dst string) error) (Staged, error) {
	info, err := CheckSnapshot(ctx, file, "", nil)
	if err != nil {
		return Staged{Info: info}, err
	}
	return stage(info, dir, func(dst string) error { return copyFile(ctx, file, dst) })
}

// stage moves the member's files in dir aside and has place put the
// checked snapshot (info) at the path it is given, from where it is
// renamed to the staged snapshot's place.
func stage(info SnapshotInfo, dir datadir.Layout, place func(dst string) error) (Staged, error) {
	out := Staged{Info: info}
	p := dir.Member()
	if _, err := os.Stat(p.Dir); err == nil {
		if InUse(p) {
			return out, fmt.Errorf("the cluster member in %s is running: stop it first", p.Dir)
		}
		out.KeptAs = dir.MemberKeptAside(time.Now())
		if err := os.Rename(p.Dir, out.KeptAs); err != nil {
			return out, fmt.Errorf("keep the old member's files: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return out, err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return out, err
	}
	tmp := p.RestoreSnapshot + ".tmp"
	if err := place(tmp); err != nil {
		_ = os.Remove(tmp)
		return out, err
	}
	if err := os.Rename(tmp, p.RestoreSnapshot); err != nil {
		return out, err
	}
	out.Snapshot = p.RestoreSnapshot
	return out, nil
}
