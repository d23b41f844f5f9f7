package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// ExportFunc calls put for every record of the single-device store at
// path and returns its revision (storage/boltdb's ExportFile).
type ExportFunc func(ctx context.Context, path string, put func(key string, value []byte) error) (int64, error)

// PrepareData gives a new member (p.Config) its first data before it
// starts: the snapshot "leasehold restore" staged, or the records of the
// single-device database it replaces, read with export and stored under
// the members' prefix. Each step is done once: it is
// complete when etcd's data directory exists (written beside it and
// renamed), and what is left after a crash (moving the imported file
// aside, removing the staged snapshot) is finished at the next start.
func (pv *Provisioned) PrepareData(ctx context.Context, export ExportFunc, log *slog.Logger) error {
	mc := &pv.Config
	p := mc.Paths
	_, err := os.Stat(filepath.Join(p.EtcdDir, "member"))
	started := err == nil
	if _, err := os.Stat(p.RestoreSnapshot); err == nil {
		if !started {
			start := time.Now()
			if err := Restore(ctx, p.RestoreSnapshot, *mc, RestoreRevisionBump); err != nil {
				return err
			}
			log.Info("Restored a new cluster from the snapshot; its revision jumped past the old cluster's and older resourceVersions are compacted: clients relist",
				"snapshot", p.RestoreSnapshot, "member", mc.Name, "revision_bump", RestoreRevisionBump, "took", time.Since(start).Round(time.Millisecond))
		}
		if err := os.Remove(p.RestoreSnapshot); err != nil {
			return fmt.Errorf("remove the restored snapshot: %w", err)
		}
		return nil
	}
	imp := mc.State.Import
	if imp == nil || imp.Done {
		return nil
	}
	if !started {
		start := time.Now()
		res, err := Import(ctx, *mc, pv.prefix, func(put func(key string, value []byte) error) (int64, error) {
			return export(ctx, imp.Source, put)
		})
		if err != nil {
			return fmt.Errorf("import %s into the new cluster: %w", imp.Source, err)
		}
		imp.Records, imp.SourceRevision, imp.Revision = res.Records, res.SourceRevision, res.Revision
		log.Info("Imported the single-device database into the new cluster", "file", imp.Source, "records", res.Records,
			"took", time.Since(start).Round(time.Millisecond))
	}
	// The data is in etcd: the file moves aside, then the import is
	// marked done. A crash in between repeats only this part.
	if _, err := os.Stat(imp.Source); err == nil {
		if err := os.Rename(imp.Source, imp.Backup); err != nil {
			return fmt.Errorf("keep the imported database as %s: %w", imp.Backup, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	imp.Done = true
	if err := SaveState(p, mc.State); err != nil {
		return err
	}
	log.Info("The single-device database is imported; it is kept, unused, as a backup. resourceVersions changed (etcd revisions now): clients relist",
		"backup", imp.Backup, "records", imp.Records, "bbolt_revision", imp.SourceRevision, "cluster_revision", imp.Revision)
	return nil
}
