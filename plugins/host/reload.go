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
// and the CLI may call it directly). Files are read and modules compiled
// without holding the lock that Ready, Modules and Close take: whatever a
// file does, health, metrics, the UI and shutdown keep answering.
func (h *Host) Scan(ctx context.Context) {
	h.scanMu.Lock()
	defer h.scanMu.Unlock()
	// Even a failed first scan ends the wait for it: its error is logged,
	// and waiting longer would not make the directory readable.
	defer h.markLoaded()
	if h.isClosed() || h.opts.Dir == "" {
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
	defer func() {
		for _, m := range retired {
			m.release() // closes it once the calls already running return
		}
	}()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".wasm") || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(h.opts.Dir, name)
		seen[path] = true
		// Only this goroutine (scanMu) writes h.files: reading it
		// unlocked is safe, and the new state is committed under mu.
		f, ok, old := h.scanFile(ctx, path, h.files[path])
		h.mu.Lock()
		closed := h.closed
		if !closed {
			h.files[path] = f
		}
		h.mu.Unlock()
		if closed {
			if ok {
				retired = append(retired, f.mod)
			}
			return
		}
		changed = changed || ok
		if old != nil {
			retired = append(retired, old)
		}
	}
	h.mu.Lock()
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
	if changed && !h.closed {
		h.publish()
	}
	h.mu.Unlock()
	if changed && h.opts.OnChange != nil {
		h.opts.OnChange()
	}
}

// scanFile (re)loads path if its content (or, with TrustKeys, its
// signature file) changed, working on a copy of prev (nil: a new file); it
// returns the file's new state, whether the serving set changed and the
// module it replaced, for the caller to commit, publish and release.
func (h *Host) scanFile(ctx context.Context, path string, prev *fileState) (*fileState, bool, *module) {
	f := &fileState{path: path}
	if prev != nil {
		*f = *prev
	}
	info, err := h.statFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, false, nil // vanished between ReadDir and Stat: next scan removes it
	}
	if err != nil {
		// Not a regular file (a FIFO, a device, a symbolic link without
		// FollowSymlinks): never opened, reported once per kind.
		if f.err == nil || f.err.Error() != err.Error() {
			h.fileFailed(f, "", "", err)
		}
		f.info, f.sha = nil, ""
		return f, false, nil
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
		return f, false, nil
	}
	f.info, f.settled = info, time.Since(info.ModTime()) > 2*time.Second
	f.sigInfo, f.sigSettled = sigInfo, sigInfo != nil && time.Since(sigInfo.ModTime()) > 2*time.Second
	wasm, err := h.readLimited(path, h.opts.MaxModuleBytes)
	if err != nil {
		h.fileFailed(f, "", "", err)
		return f, false, nil
	}
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	var sig []byte
	var sigErr error
	sigSum := ""
	if trust != nil {
		sig, sigErr = h.readSignature(sigPath)
		sigSum = digestOrState(sig, sigErr)
	}
	if sha == f.sha && sigSum == f.sigSum && set.sum == f.setSum {
		return f, false, nil
	}
	f.sha, f.sigSum, f.setSum = sha, sigSum, set.sum
	var signed *signature.File
	if trust != nil {
		var done bool
		if signed, done = h.checkSignature(f, path, trust, sum, sha, sig, sigErr, &set); done {
			return f, false, nil
		}
	}
	if set.err != nil {
		h.fileFailed(f, sha, set.claimed, set.err)
		return f, false, nil
	}
	return h.install(ctx, f, path, wasm, sha, signed, &set)
}

// checkSignature verifies the module's signed statement before it is
// compiled, so that a refused module's code is never compiled,
// instantiated or called: a trusted key, this file's name and kind, its
// content, the same strategy as its settings' statement, and sequences
// that are no rollback (Options.Sequences). The module's own strategy name
// is checked once it is loaded (install). done is set when scanFile has
// nothing more to do: the module (or its settings) was refused, or it is
// the serving one signed anew.
func (h *Host) checkSignature(f *fileState, path string, trust *signature.Keyring, sum [sha256.Size]byte, sha string, sig []byte, sigErr error, set *settingsFile) (signed *signature.File, done bool) {
	var sf signature.File
	var err error
	if sigErr == nil {
		sf, err = trust.Verify(signature.KindModule, filepath.Base(path), sum, sig)
	} else {
		err = &signature.RefusedError{Reason: signature.ReasonBad, Detail: sigErr.Error()}
	}
	if err == nil {
		err = h.opts.Sequences.Check(sf.Statement, sf.KeyID)
	}
	if err != nil {
		claimed := ""
		if r, ok := errors.AsType[*signature.RefusedError](err); ok {
			claimed = r.KeyID
		}
		h.fileFailed(f, sha, claimed, err)
		return nil, true
	}
	if set.err == nil && set.signed != nil {
		if set.signed.Strategy != sf.Strategy {
			set.err = fmt.Errorf("settings %s: %w", set.path, &signature.RefusedError{Reason: signature.ReasonOtherStrategy, KeyID: set.signer,
				Detail: fmt.Sprintf("settings signed for %s, module for %s", set.signed.Strategy, sf.Strategy)})
		} else if err := h.opts.Sequences.Check(set.signed.Statement, set.signer); err != nil {
			set.err = fmt.Errorf("settings %s: %w", set.path, err)
		}
		if set.err != nil {
			set.claimed = set.signer
		}
	}
	if set.err != nil {
		h.fileFailed(f, sha, set.claimed, set.err)
		return nil, true
	}
	if f.mod != nil && f.mod.sha == sha && f.mod.settingsSHA == set.sha {
		// The serving module, signed anew (a rotated key, a new
		// sequence): nothing to reload, unless the statement names
		// another strategy than the module's.
		if err := strategyMatches(f.mod, &sf); err != nil {
			h.fileFailed(f, sha, sf.KeyID, err)
			return nil, true
		}
		if f.signer != sf.KeyID || f.seq != sf.Sequence || f.err != nil {
			h.log.Info("strategy module signature accepted", "file", path, "strategy", f.mod.info.Name, "sha256", sha,
				"key_id", sf.KeyID, "sequence", sf.Sequence)
		}
		f.signer, f.seq, f.err, f.errSHA, f.errKey = sf.KeyID, sf.Sequence, nil, "", ""
		h.acceptSequences(path, &sf, set)
		return &sf, true
	}
	return &sf, false
}

// strategyMatches refuses a loaded module whose info names another
// strategy than its signed statement: the statement is what the signer
// vouched for.
func strategyMatches(m *module, sf *signature.File) error {
	if sf == nil || m.info.Name == sf.Strategy {
		return nil
	}
	return &signature.RefusedError{Reason: signature.ReasonOtherStrategy, KeyID: sf.KeyID,
		Detail: fmt.Sprintf("signed for %s, the module is %s", sf.Strategy, m.info.Name)}
}

// acceptSequences records the statements of a module that now serves (and
// of its settings) as the newest accepted for its strategy.
func (h *Host) acceptSequences(path string, sf *signature.File, set *settingsFile) {
	if err := h.opts.Sequences.Accept(sf.KeyID, sf.Statement); err != nil {
		h.log.Warn("cannot record the accepted module's sequence: after a restart an older signed version could load", "file", path, "err", err)
	}
	if set.signed != nil {
		if err := h.opts.Sequences.Accept(set.signer, set.signed.Statement); err != nil {
			h.log.Warn("cannot record the accepted settings' sequence: after a restart older signed settings could load", "file", set.path, "err", err)
		}
	}
}

// install compiles the checked module into f, unless another file already
// serves its strategy (or its signed statement names another), and logs
// the load; it returns scanFile's results.
func (h *Host) install(ctx context.Context, f *fileState, path string, wasm []byte, sha string, signed *signature.File, set *settingsFile) (*fileState, bool, *module) {
	signer := ""
	if signed != nil {
		signer = signed.KeyID
	}
	m, err := h.load(ctx, wasm, set.data, path)
	if err == nil {
		if set.data != nil {
			m.settingsFile = set.path
		}
		if err = strategyMatches(m, signed); err != nil {
			m.release()
		} else if other := h.owner(m.info.Name, path); other != "" {
			m.release()
			err = fmt.Errorf("%w: strategy %q is already served by %s", ErrInvalidModule, m.info.Name, other)
		}
	}
	if err != nil {
		h.fileFailed(f, sha, signer, err)
		return f, false, nil
	}
	old := f.mod
	f.mod, f.signer, f.err, f.errSHA, f.errKey = m, signer, nil, "", ""
	attrs := []any{"file", path, "strategy", m.info.Name, "version", m.info.Version, "sha256", sha}
	if signed != nil {
		f.seq = signed.Sequence
		attrs = append(attrs, "key_id", signer, "sequence", signed.Sequence)
		h.acceptSequences(path, signed, set)
	}
	if set.data != nil {
		attrs = append(attrs, "settings", set.path, "settings_sha256", set.sha)
		if set.signed != nil {
			attrs = append(attrs, "settings_key_id", set.signer, "settings_sequence", set.signed.Sequence)
		}
	}
	if _, ok := h.builtins[m.info.Name]; ok {
		attrs = append(attrs, "overrides_builtin", true)
	}
	h.log.Info("strategy module loaded", attrs...)
	return f, true, old
}

// load compiles and checks a module of the directory unless the host is
// closing: Close waits for a load in flight (CPU only, bounded by the
// module's size and CallLimit), never for a file.
func (h *Host) load(ctx context.Context, wasm, settings []byte, path string) (*module, error) {
	h.loading.RLock()
	defer h.loading.RUnlock()
	if h.isClosed() {
		return nil, errors.New("plugins: host closed")
	}
	m, _, err := h.r.loadWithSettings(ctx, wasm, settings, path, h.log)
	return m, err
}

// settingsFile is a module's settings document as one scan read it.
type settingsFile struct {
	path string
	data []byte // nil: no settings file
	sha  string // sha256 of data
	// sum names content and signature state, for change detection.
	sum string
	// signer is the key id that signed the settings (with TrustKeys) and
	// signed its verified statement; claimed is the key id a refused
	// signature file names.
	signer, claimed string
	signed          *signature.File
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
	data, err := readLimitedBytes(s.path, abi.MaxSettingsBytes, h.opts.FollowSymlinks)
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
		sig, sigErr := h.readSignature(s.path + signature.Suffix)
		s.sum += " " + digestOrState(sig, sigErr)
		if sigErr == nil {
			var sf signature.File
			if sf, err = trust.Verify(signature.KindSettings, filepath.Base(s.path), sum, sig); err == nil {
				s.signer, s.signed = sf.KeyID, &sf
			}
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
func (h *Host) readSignature(path string) ([]byte, error) {
	b, err := readLimitedBytes(path, signature.MaxFileBytes, h.opts.FollowSymlinks)
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

func (h *Host) readLimited(path string, max int64) ([]byte, error) {
	b, err := readLimitedBytes(path, max, h.opts.FollowSymlinks)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%w: %s is over the %d-byte limit", ErrInvalidModule, path, max)
	}
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	return b, nil
}

// statFile describes a module file of the directory, refusing anything but
// a regular file (a symbolic link to one only with FollowSymlinks).
func (h *Host) statFile(path string) (os.FileInfo, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if info.Mode()&fs.ModeSymlink != 0 && h.opts.FollowSymlinks {
		if info, err = os.Stat(path); err != nil {
			return nil, err
		}
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info.Mode())
	}
	return info, nil
}

var (
	errTooLarge   = errors.New("file too large")
	errNotRegular = errors.New("not a regular file")
)

func notRegular(path string, mode fs.FileMode) error {
	kind := "a " + strings.TrimPrefix(mode.Type().String(), "-")
	switch {
	case mode&fs.ModeSymlink != 0:
		kind = "a symbolic link (followed only with --plugin-follow-symlinks)"
	case mode&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case mode&fs.ModeDevice != 0:
		kind = "a device"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case mode.IsDir():
		kind = "a directory"
	}
	return fmt.Errorf("%w: %s: %w: it is %s", ErrInvalidModule, path, errNotRegular, kind)
}

// readLimitedBytes reads a regular file of at most max bytes. It opens
// non-blocking and without following a final symbolic link (unless
// follow), then checks what it opened: a FIFO named like a module, a
// settings or a signature file must not hang the scan, and a file swapped
// for a link between a check and the open is refused too.
func readLimitedBytes(path string, max int64, follow bool) ([]byte, error) {
	if info, err := os.Lstat(path); err == nil && info.Mode()&fs.ModeSymlink != 0 && !follow {
		return nil, notRegular(path, info.Mode())
	}
	flags := os.O_RDONLY | openNonblock
	if !follow {
		flags |= openNoFollow
	}
	fh, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info.Mode())
	}
	if info.Size() > max {
		return nil, fmt.Errorf("%s: %w (%d bytes, over %d)", path, errTooLarge, info.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", path, errTooLarge, max)
	}
	return b, nil
}
