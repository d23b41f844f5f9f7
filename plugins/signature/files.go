package signature

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// GenerateKey writes a new Ed25519 private key to path (mode 0600) and its
// public key to path+".pub" (mode 0644), and returns the key id. It never
// overwrites: if either file exists, nothing is written.
func GenerateKey(path string) (string, error) {
	pubPath := path + PublicKeySuffix
	for _, p := range []string{path, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", fmt.Errorf("%s already exists: refusing to overwrite a key", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	privPEM, err := EncodePrivateKey(priv)
	if err != nil {
		return "", err
	}
	pubPEM, err := EncodePublicKey(pub)
	if err != nil {
		return "", err
	}
	// O_EXCL closes the race with another writer between the check above
	// and here.
	if err := writeExclusive(path, privPEM, 0o600); err != nil {
		return "", err
	}
	if err := writeExclusive(pubPath, pubPEM, 0o644); err != nil {
		_ = os.Remove(path)
		return "", err
	}
	return KeyID(pub), nil
}

func writeExclusive(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// SignFile signs path (a module NAME.wasm or its settings NAME.json) for
// strategy with the private key at keyPath, at sequence seq (0: the next
// one, NextSequence), and writes path+".sig" (replacing an older
// signature) by writing a temporary file and renaming it, so that a
// watching server never reads half a signature. The statement names the
// file by its base name: the signed file must keep it in the plugins
// directory. It returns the signature path, key id and statement.
func SignFile(keyPath, path, strategy string, seq uint64) (string, string, Statement, error) {
	keyData, err := os.ReadFile(keyPath)
	if err != nil {
		return "", "", Statement{}, err
	}
	priv, err := ParsePrivateKey(keyData)
	if err != nil {
		return "", "", Statement{}, fmt.Errorf("%s: %w", keyPath, err)
	}
	kind, err := KindOf(path)
	if err != nil {
		return "", "", Statement{}, err
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return "", "", Statement{}, err
	}
	sigPath := path + Suffix
	if seq == 0 {
		seq = NextSequence(sigPath, time.Now())
	}
	sum := sha256.Sum256(content)
	st := Statement{Kind: kind, File: filepath.Base(path), Strategy: strategy, SHA256: hex.EncodeToString(sum[:]), Sequence: seq}
	sig, err := Sign(priv, st)
	if err != nil {
		return "", "", st, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(sigPath), ".tmp-"+filepath.Base(sigPath)+"-*")
	if err != nil {
		return "", "", st, err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(sig); err != nil {
		tmp.Close()
		return "", "", st, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", "", st, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", "", st, err
	}
	if err := tmp.Close(); err != nil {
		return "", "", st, err
	}
	if err := os.Rename(tmp.Name(), sigPath); err != nil {
		return "", "", st, err
	}
	return sigPath, KeyID(priv.Public().(ed25519.PublicKey)), st, nil
}

// NextSequence is the sequence "leasehold plugin sign" uses when none is
// given: the Unix time in seconds, so that a later signature outranks an
// earlier one without bookkeeping, or one more than the sequence of the
// signature file already at sigPath if that is not smaller (two
// signatures within a second, or a signer whose clock went back).
func NextSequence(sigPath string, now time.Time) uint64 {
	seq := uint64(max(now.Unix(), 1))
	if data, err := os.ReadFile(sigPath); err == nil {
		if f, err := ParseFile(data); err == nil && f.Sequence >= seq {
			seq = f.Sequence + 1
		}
	}
	return seq
}
