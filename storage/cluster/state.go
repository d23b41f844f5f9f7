package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"

	"github.com/leasehold/leasehold/internal/datadir"
)

// State is what a member needs to restart with its data directory alone:
// its name and URLs. The certificates and the etcd data live beside it
// (Paths).
type State struct {
	Name            string `json:"name"`
	ListenPeer      string `json:"listenPeer"`
	ListenClient    string `json:"listenClient"`
	AdvertisePeer   string `json:"advertisePeer"`
	AdvertiseClient string `json:"advertiseClient"`
	// JoinedVia is the member's API URL this one joined through ("" for a
	// cluster's first member): a start whose certificate expired while
	// the device was off renews it there (rejoin.go).
	JoinedVia string `json:"joinedVia,omitempty"`
	// Import, when set, is the single-device database this member's new
	// cluster takes its records from (--cluster-init on a data directory
	// holding one). Done is set once the records are in etcd's data and
	// the file was moved to Backup, so that no restart imports it again.
	Import *ImportRecord `json:"import,omitempty"`
}

// ImportRecord records the one-way import of a single-device bbolt database.
type ImportRecord struct {
	Source string `json:"source"` // the bbolt file
	Backup string `json:"backup"` // where it is kept once imported
	Done   bool   `json:"done"`
	// Records and the revisions are what the import carried over: the
	// last revision of the bbolt file, and the cluster's first.
	Records        int   `json:"records,omitempty"`
	SourceRevision int64 `json:"sourceRevision,omitempty"`
	Revision       int64 `json:"revision,omitempty"`
}

// Paths are the files of a member under its cluster directory, as the
// data directory's layout names them (datadir.Layout.Member).
type Paths = datadir.MemberFiles

// PathsIn lays the member's files out in the cluster directory dir.
func PathsIn(dir string) Paths { return datadir.MemberFilesIn(dir) }

// LoadState reads the state file; it fails with an error matching
// fs.ErrNotExist when the directory holds no member yet, or one whose
// first start failed before etcd wrote its data (it then starts afresh).
func LoadState(p Paths) (State, error) {
	var st State
	data, err := os.ReadFile(p.State)
	if err != nil {
		return st, fmt.Errorf("cluster state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("cluster state %s: %w", p.State, err)
	}
	if st.Name == "" || st.AdvertisePeer == "" || st.AdvertiseClient == "" {
		return st, fmt.Errorf("cluster state %s: name or URLs missing", p.State)
	}
	if _, err := os.Stat(filepath.Join(p.EtcdDir, "member")); errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("cluster state %s: etcd never started in %s: %w", p.State, p.EtcdDir, err)
	}
	return st, nil
}

// SaveState writes the state file atomically.
func SaveState(p Paths, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	return WriteFile(p.State, append(data, '\n'), 0o600)
}

// WriteFile writes data to path atomically (a temporary file renamed over
// it), creating the directory.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err == nil {
		_, err = tmp.Write(data)
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("cluster: write %s: %w", path, err)
		}
	} else {
		tmp.Close()
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// InUse reports whether a running etcd member holds the data in p: it
// keeps its write-ahead log files locked.
func InUse(p Paths) bool {
	wals, _ := filepath.Glob(filepath.Join(p.EtcdDir, "member", "wal", "*.wal"))
	for _, w := range wals {
		f, err := fileutil.TryLockFile(w, os.O_RDWR, fileutil.PrivateFileMode)
		if errors.Is(err, fileutil.ErrLocked) {
			return true
		}
		if err == nil {
			_ = f.Close()
		}
	}
	return false
}
