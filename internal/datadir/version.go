package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Version is the layout this binary writes and reads. A change to where
// files live raises it and appends the step that moves an older
// directory's files to migrations.
const Version = 1

// Migration moves a directory's files from one version to the next.
type Migration func(l Layout) error

// migrations[i] migrates version i+1 to version i+2. Version 1 is the
// first with a version file, and nothing older exists to migrate.
var migrations []Migration

// ErrNewer is the error of a directory written by a newer leasehold.
var ErrNewer = errors.New("data directory written by a newer leasehold")

// Open readies dir for a server or a command that writes to it: it creates
// the directory, migrates an older layout to Version and records the
// version. A directory newer than this binary fails with ErrNewer and is
// left as it is.
func Open(dir string) (Layout, error) {
	return open(dir, Version, migrations)
}

// Inspect reads dir's layout version without writing anything (0 when
// dir does not exist); it fails with ErrNewer when the directory is newer
// than this binary, for commands that only read the directory.
func Inspect(dir string) (Layout, int, error) {
	l := At(dir)
	v, err := l.version()
	if err != nil {
		return l, v, err
	}
	return l, v, l.refuseNewer(v, Version)
}

func open(dir string, target int, steps []Migration) (Layout, error) {
	l := At(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return l, fmt.Errorf("create data directory: %w", err)
	}
	v, err := l.version()
	if err != nil {
		return l, err
	}
	if v == 0 {
		// A new, empty directory starts at the current layout.
		if err := l.writeVersion(target); err != nil {
			return l, err
		}
		return l, nil
	}
	if err := l.refuseNewer(v, target); err != nil {
		return l, err
	}
	for ; v < target; v++ {
		if v-1 >= len(steps) || steps[v-1] == nil {
			return l, fmt.Errorf("data directory %s: no migration from layout version %d to %d", dir, v, v+1)
		}
		if err := steps[v-1](l); err != nil {
			return l, fmt.Errorf("data directory %s: migrate layout version %d to %d: %w", dir, v, v+1, err)
		}
		// Each step is recorded at once: a crash repeats at most the next.
		if err := l.writeVersion(v + 1); err != nil {
			return l, err
		}
	}
	if _, err := os.Stat(l.VersionFile()); errors.Is(err, fs.ErrNotExist) {
		return l, l.writeVersion(target)
	}
	return l, nil
}

// version is the directory's layout version: the version file's, else 1
// when the directory holds anything (written before the file existed),
// else 0 (new or missing).
func (l Layout) version() (int, error) {
	data, err := os.ReadFile(l.VersionFile())
	if err == nil {
		v, perr := strconv.Atoi(strings.TrimSpace(string(data)))
		if perr != nil || v < 1 {
			return 0, fmt.Errorf("data directory %s: %s holds %q, not a layout version", l.Dir, l.VersionFile(), strings.TrimSpace(string(data)))
		}
		return v, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("data directory %s: %w", l.Dir, err)
	}
	entries, err := os.ReadDir(l.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("data directory %s: %w", l.Dir, err)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	return 1, nil
}

func (l Layout) refuseNewer(v, target int) error {
	if v > target {
		return fmt.Errorf("%w: %s has layout version %d, and this leasehold reads up to version %d: run the newer leasehold that wrote it, or restore a backup into another --data-dir", ErrNewer, l.Dir, v, target)
	}
	return nil
}

// writeVersion records v atomically (a temporary file renamed over it).
func (l Layout) writeVersion(v int) error {
	tmp, err := os.CreateTemp(l.Dir, ".layout-version-*")
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(strconv.Itoa(v) + "\n")
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), l.VersionFile())
	}
	if err != nil {
		return fmt.Errorf("data directory %s: write %s: %w", l.Dir, filepath.Base(l.VersionFile()), err)
	}
	return nil
}
