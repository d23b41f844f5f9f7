package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Import limits: etcd refuses a transaction of more than 128 operations
// (--max-txn-ops) or a request above 1.5 MiB (--max-request-bytes).
const (
	importTxnOps   = 128
	importTxnBytes = 1 << 20
)

// ImportResult is what Import carried over.
type ImportResult struct {
	Records        int
	SourceRevision int64 // the other store's
	Revision       int64 // the new cluster's
}

// Import builds the etcd data directory of cfg's new cluster from records
// of another store: each calls put for every record, whose key is written
// under prefix, and returns the other store's revision. The records go into a temporary member on cfg's own
// listeners (the real one has not started), whose snapshot is then
// restored as the new cluster with its revision bumped past
// sourceRevision and everything older marked compacted: no resourceVersion
// a client holds from the old store lies in the cluster's future, and a
// watch resuming from one ends with 410 Gone, so the client relists.
//
// The data directory appears whole or not at all (Restore); a crash
// midway leaves only the temporary directory, which the next attempt
// removes, so an import is never half done nor applied twice.
func Import(ctx context.Context, cfg Config, prefix string,
	each func(put func(key string, value []byte) error) (sourceRevision int64, err error)) (ImportResult, error) {
	var res ImportResult
	if err := os.RemoveAll(cfg.Paths.ImportDir); err != nil {
		return res, fmt.Errorf("cluster: import: %w", err)
	}
	defer os.RemoveAll(cfg.Paths.ImportDir)
	tmp := cfg
	tmp.Paths.EtcdDir = filepath.Join(cfg.Paths.ImportDir, "etcd")
	tmp.InitialCluster, tmp.Join, tmp.scratch = "", false, true
	m, err := Start(ctx, tmp)
	if err != nil {
		return res, fmt.Errorf("cluster: import: %w", err)
	}
	defer m.Close()

	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if _, err := m.client.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("cluster: import: %w", err)
		}
		ops, size = ops[:0], 0
		return nil
	}
	sourceRevision, err := each(func(key string, value []byte) error {
		k := prefix + key
		if len(ops) == importTxnOps || (len(ops) > 0 && size+len(k)+len(value) > importTxnBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(k, string(value)))
		size += len(k) + len(value)
		res.Records++
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return res, err
	}
	snap := filepath.Join(cfg.Paths.ImportDir, "import.snapshot")
	info, err := m.SaveSnapshot(ctx, snap)
	if err != nil {
		return res, fmt.Errorf("cluster: import: %w", err)
	}
	m.Close()
	if err := Restore(ctx, snap, cfg, sourceRevision); err != nil {
		return res, fmt.Errorf("cluster: import: %w", err)
	}
	res.SourceRevision, res.Revision = sourceRevision, info.Revision+sourceRevision
	return res, nil
}
