package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
}

// Paths are the files of a member under its cluster directory.
type Paths struct {
	Dir       string // the cluster directory
	State     string // member.json
	EtcdDir   string // etcd's data directory
	CAFile    string // the cluster CA certificate
	CAKeyFile string // the cluster CA key: every member can admit joiners
	CertFile  string // this member's peer and client certificate
	KeyFile   string
	TokenFile string // the cluster token, kept so a restart needs no flag
}

// PathsIn lays the member's files out in dir.
func PathsIn(dir string) Paths {
	return Paths{
		Dir:       dir,
		State:     filepath.Join(dir, "member.json"),
		EtcdDir:   filepath.Join(dir, "etcd"),
		CAFile:    filepath.Join(dir, "pki", "ca.crt"),
		CAKeyFile: filepath.Join(dir, "pki", "ca.key"),
		CertFile:  filepath.Join(dir, "pki", "member.crt"),
		KeyFile:   filepath.Join(dir, "pki", "member.key"),
		TokenFile: filepath.Join(dir, "token"),
	}
}

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
