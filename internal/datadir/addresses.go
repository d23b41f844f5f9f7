package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Addresses are where the last start of a server on this directory served
// the API, so that a restart with --data-dir alone serves there again
// rather than at --listen's default (and rewrites no kubeconfig to it). A
// cluster member's peer and client addresses and its advertised URLs are
// recorded beside its etcd data (MemberFiles.State), which its cluster
// knows it by.
type Addresses struct {
	// Listen is serve's --listen as given: a port 0 stays 0 (any port).
	Listen string `json:"listen"`
}

// AddressesFile records the Addresses (JSON).
func (l Layout) AddressesFile() string { return filepath.Join(l.Dir, "addresses.json") }

// LoadAddresses reads the recorded addresses; a directory without the
// file (new, or written before it existed) has none: the zero Addresses.
func (l Layout) LoadAddresses() (Addresses, error) {
	var a Addresses
	data, err := os.ReadFile(l.AddressesFile())
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return a, fmt.Errorf("data directory %s: %w", l.Dir, err)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("data directory %s: %s: %w (remove it to serve at the flags' addresses)", l.Dir, l.AddressesFile(), err)
	}
	return a, nil
}

// SaveAddresses records a atomically.
func (l Layout) SaveAddresses(a Addresses) error {
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(l.AddressesFile(), append(data, '\n'), 0o644)
}

// WriteFile writes data to path atomically: a temporary file in the same
// directory, synced, renamed over path, and the directory synced, so that
// a crash leaves the old file or the new one, never a part.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename's directory entry; not every filesystem syncs a directory
		_ = d.Close()
	}
	return nil
}
