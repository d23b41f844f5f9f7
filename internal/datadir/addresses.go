package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// ResolveListen is where serve listens: at listen when --listen was given,
// else where the last start on the directory did (a restart with
// --data-dir alone), else at listen, --listen's default. Moving the API is
// always safe (the kubeconfig is rewritten for it). recorded is the
// recorded address ("" when none); fromRecord says addr is it.
func (l Layout) ResolveListen(listen string, given bool) (addr, recorded string, fromRecord bool, err error) {
	rec, err := l.LoadAddresses()
	if err != nil {
		return listen, "", false, err
	}
	if !given && rec.Listen != "" {
		return rec.Listen, rec.Listen, true, nil
	}
	return listen, rec.Listen, false, nil
}

// RecordListen records listen once the server listens there, so that a
// restart without --listen serves at the same address; recorded is what
// ResolveListen found recorded.
func (l Layout) RecordListen(listen, recorded string, log *slog.Logger) error {
	if listen == recorded {
		return nil
	}
	if recorded != "" {
		log.Info("The API moved; the new address is recorded for restarts", "listen", listen,
			"before", recorded, "file", l.AddressesFile())
	}
	if err := l.SaveAddresses(Addresses{Listen: listen}); err != nil {
		return fmt.Errorf("record the API's address: %w", err)
	}
	return nil
}
