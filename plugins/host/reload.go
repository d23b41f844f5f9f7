package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/signature"
)

// Run loads Options.Dir and rescans it every PollInterval until ctx ends:
// new and changed files (by sha256) are compiled, checked and self-tested
// off the decision path and swapped in atomically; a file whose new
// content fails keeps serving its previous good version; a removed file
// stops serving (a built-in it overrode serves again). Polling, not
// inotify, so there is no new dependency and it works on any filesystem.
// Writers should create the file elsewhere and rename it into place.
func (h *Host) Run(ctx context.Context) error {
	if h.opts.Dir == "" {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(h.opts.PollInterval)
	defer t.Stop()
	for {
		h.Scan(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Scan runs one pass over Options.Dir (Run calls it on every tick; tests
// and the CLI may call it directly).
func (h *Host) Scan(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Even a failed first scan ends the wait for it: its error is logged,
	// and waiting longer would not make the directory readable.
	defer h.markLoaded()
	if h.closed || h.opts.Dir == "" {
		return
	}
	entries, err := os.ReadDir(h.opts.Dir)
	if err != nil {
		h.log.Warn("cannot read plugin directory", "dir", h.opts.Dir, "err", err)
		return
	}
	seen := map[string]bool{}
	var retired []*module // released after publish, so Lookup never returns a closed module
	changed := false
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".wasm") || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(h.opts.Dir, name)
		seen[path] = true
		ok, old := h.scanFile(ctx, path)
		changed = changed || ok
		if old != nil {
			retired = append(retired, old)
		}
	}
	for path, f := range h.files {
		if seen[path] {
			continue
		}
		delete(h.files, path)
		if f.mod != nil {
			h.log.Info("strategy module removed", "file", path, "strategy", f.mod.info.Name)
			retired = append(retired, f.mod)
			changed = true
		}
	}
	if changed {
		h.publish()
	}
	for _, m := range retired {
		m.release() // closes it once the calls already running return
	}
	if changed && h.opts.OnChange != nil {
		h.opts.OnChange()
	}
}

// scanFile (re)loads path if its content (or, with TrustKeys, its
// signature file) changed; it reports whether the serving set changed and
// the module it replaced, for the caller to release after publishing.
func (h *Host) scanFile(ctx context.Context, path string) (bool, *module) {
	f := h.files[path]
	if f == nil {
		f = &fileState{path: path}
		h.files[path] = f
	}
	info, err := os.Stat(path)
	if err != nil {
		return false, nil // vanished between ReadDir and Stat: next scan removes it
	}
	trust := h.opts.TrustKeys
	// The settings file is small (abi.MaxSettingsBytes): read on every
	// scan, so that an edit within one mtime tick is not missed either.
	set := h.readSettings(path)
	sigPath := path + signature.Suffix
	var sigInfo os.FileInfo
	if trust != nil {
		sigInfo, _ = os.Stat(sigPath) // nil when missing; a read error is handled below
	}
	// Cheap check first (same inode, size and mtime, and the mtime was
	// already old at the previous scan, so a same-size rewrite within one
	// mtime tick cannot hide); sha256 decides below.
	if sameSettled(f.info, info, f.settled) && (trust == nil || sameSettledOrBothMissing(f.sigInfo, sigInfo, f.sigSettled)) &&
		set.sum == f.setSum {
		return false, nil
	}
	f.info, f.settled = info, time.Since(info.ModTime()) > 2*time.Second
	f.sigInfo, f.sigSettled = sigInfo, sigInfo != nil && time.Since(sigInfo.ModTime()) > 2*time.Second
	wasm, err := readLimited(path, h.opts.MaxModuleBytes)
	if err != nil {
		h.fileFailed(f, "", "", err)
		return false, nil
	}
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	var sig []byte
	var sigErr error
	sigSum := ""
	if trust != nil {
		sig, sigErr = readSignature(sigPath)
		sigSum = digestOrState(sig, sigErr)
	}
	if sha == f.sha && sigSum == f.sigSum && set.sum == f.setSum {
		return false, nil
	}
	f.sha, f.sigSum, f.setSum = sha, sigSum, set.sum
	signer := ""
	if trust != nil {
		// Verified before compiling: a refused module's code is never
		// compiled, instantiated or called.
		if sigErr == nil {
			signer, err = trust.Verify(sum, sig)
		} else {
			err = &signature.RefusedError{Reason: signature.ReasonBad, Detail: sigErr.Error()}
		}
		if err != nil {
			claimed := ""
			if r, ok := errors.AsType[*signature.RefusedError](err); ok {
				claimed = r.KeyID
			}
			h.fileFailed(f, sha, claimed, err)
			return false, nil
		}
		if set.err != nil {
			h.fileFailed(f, sha, set.claimed, set.err)
			return false, nil
		}
		if f.mod != nil && f.mod.sha == sha && f.mod.settingsSHA == set.sha {
			// The serving module, signed anew (a rotated key, say):
			// nothing to reload.
			if f.signer != signer || f.err != nil {
				h.log.Info("strategy module signature accepted", "file", path, "strategy", f.mod.info.Name, "sha256", sha, "key_id", signer)
			}
			f.signer, f.err, f.errSHA, f.errKey = signer, nil, "", ""
			return false, nil
		}
	}
	if set.err != nil {
		h.fileFailed(f, sha, set.claimed, set.err)
		return false, nil
	}
	m, _, err := h.r.loadWithSettings(ctx, wasm, set.data, path, h.log)
	if err == nil {
		if set.data != nil {
			m.settingsFile = set.path
		}
		if other := h.owner(m.info.Name, path); other != "" {
			m.release()
			err = fmt.Errorf("%w: strategy %q is already served by %s", ErrInvalidModule, m.info.Name, other)
		}
	}
	if err != nil {
		h.fileFailed(f, sha, signer, err)
		return false, nil
	}
	old := f.mod
	f.mod, f.signer, f.err, f.errSHA, f.errKey = m, signer, nil, "", ""
	attrs := []any{"file", path, "strategy", m.info.Name, "version", m.info.Version, "sha256", sha}
	if signer != "" {
		attrs = append(attrs, "key_id", signer)
	}
	if set.data != nil {
		attrs = append(attrs, "settings", set.path, "settings_sha256", set.sha)
		if set.signer != "" {
			attrs = append(attrs, "settings_key_id", set.signer)
		}
	}
	if _, ok := h.builtins[m.info.Name]; ok {
		attrs = append(attrs, "overrides_builtin", true)
	}
	h.log.Info("strategy module loaded", attrs...)
	return true, old
}

// settingsFile is a module's settings document as one scan read it.
type settingsFile struct {
	path string
	data []byte // nil: no settings file
	sha  string // sha256 of data
	// sum names content and signature state, for change detection.
	sum string
	// signer is the key id that signed the settings (with TrustKeys);
	// claimed is the one a refused signature file names.
	signer, claimed string
	err             error
}

// SettingsPath is where the settings of module file path live: NAME.json
// beside NAME.wasm.
func SettingsPath(path string) string { return strings.TrimSuffix(path, ".wasm") + ".json" }

// readSettings reads and checks the settings file of module path: a JSON
// object of at most abi.MaxSettingsBytes and, with TrustKeys, a valid
// signature from a trusted key in NAME.json.sig, like the module's (the
// settings steer the module's decisions as much as its code does).
func (h *Host) readSettings(path string) settingsFile {
	s := settingsFile{path: SettingsPath(path), sum: "none"}
	data, err := readLimitedBytes(s.path, abi.MaxSettingsBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s
	case errors.Is(err, errTooLarge):
		err = fmt.Errorf("settings: over the %d-byte limit", abi.MaxSettingsBytes)
	case err == nil:
		err = abi.ValidateSettings(data)
	}
	sum := sha256.Sum256(data)
	s.data, s.sha = data, hex.EncodeToString(sum[:])
	s.sum = s.sha
	if err != nil {
		s.sum = "invalid: " + err.Error()
		s.err = fmt.Errorf("%w: %s: %w", ErrInvalidModule, s.path, err)
		return s
	}
	if trust := h.opts.TrustKeys; trust != nil {
		sig, sigErr := readSignature(s.path + signature.Suffix)
		s.sum += " " + digestOrState(sig, sigErr)
		if sigErr == nil {
			s.signer, err = trust.Verify(sum, sig)
		} else {
			err = &signature.RefusedError{Reason: signature.ReasonBad, Detail: sigErr.Error()}
		}
		if err != nil {
			if r, ok := errors.AsType[*signature.RefusedError](err); ok {
				s.claimed = r.KeyID
			}
			s.err = fmt.Errorf("settings %s: %w", s.path, err)
		}
	}
	return s
}

// sameSettled reports whether a file looks unchanged since prev was read
// and its mtime was already old then.
func sameSettled(prev, cur os.FileInfo, settled bool) bool {
	return prev != nil && cur != nil && os.SameFile(prev, cur) && cur.ModTime().Equal(prev.ModTime()) &&
		cur.Size() == prev.Size() && settled
}

func sameSettledOrBothMissing(prev, cur os.FileInfo, settled bool) bool {
	return (prev == nil && cur == nil) || sameSettled(prev, cur, settled)
}

// readSignature reads a module's signature file: nil, nil when there is
// none.
func readSignature(path string) ([]byte, error) {
	b, err := readLimitedBytes(path, signature.MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// digestOrState names a signature file's content for change detection.
func digestOrState(sig []byte, err error) string {
	switch {
	case err != nil:
		return "unreadable: " + err.Error()
	case sig == nil:
		return "missing"
	}
	sum := sha256.Sum256(sig)
	return hex.EncodeToString(sum[:])
}

// fileFailed records why the content sha of f does not serve: a refusal
// (signature) or a load error. Logged once per content: the next scan
// skips an unchanged module and signature.
func (h *Host) fileFailed(f *fileState, sha, keyID string, err error) {
	f.err, f.errSHA, f.errKey, f.errAt = err, sha, keyID, time.Now()
	keep := "none"
	if f.mod != nil {
		keep = f.mod.info.Name + " " + f.mod.short()
	}
	if r, ok := errors.AsType[*signature.RefusedError](err); ok {
		h.log.Warn("strategy module refused", "file", f.path, "sha256", sha, "reason", string(r.Reason),
			"detail", r.Detail, "key_id", r.KeyID, "still_serving", keep)
		return
	}
	h.log.Warn("strategy module rejected", "file", f.path, "sha256", sha, "err", err, "still_serving", keep)
}

// owner returns the path of another file already serving name.
func (h *Host) owner(name, except string) string {
	for path, f := range h.files {
		if path != except && f.mod != nil && f.mod.info.Name == name {
			return path
		}
	}
	return ""
}

func readLimited(path string, max int64) ([]byte, error) {
	b, err := readLimitedBytes(path, max)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%w: %s is over the %d-byte limit", ErrInvalidModule, path, max)
	}
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	return b, nil
}

var errTooLarge = errors.New("file too large")

func readLimitedBytes(path string, max int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", path, errTooLarge, max)
	}
	return b, nil
}
