package signature

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// SignModule signs the module at modulePath with the private key at
// keyPath and writes modulePath+".sig" (replacing an older signature), by
// writing a temporary file and renaming it so that a watching server never
// reads half a signature. It returns the signature path and key id.
func SignModule(keyPath, modulePath string) (string, string, error) {
	keyData, err := os.ReadFile(keyPath)
	if err != nil {
		return "", "", err
	}
	priv, err := ParsePrivateKey(keyData)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", keyPath, err)
	}
	wasm, err := os.ReadFile(modulePath)
	if err != nil {
		return "", "", err
	}
	sig, err := Sign(priv, sha256.Sum256(wasm))
	if err != nil {
		return "", "", err
	}
	sigPath := modulePath + Suffix
	tmp, err := os.CreateTemp(filepath.Dir(sigPath), ".tmp-"+filepath.Base(sigPath)+"-*")
	if err != nil {
		return "", "", err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(sig); err != nil {
		tmp.Close()
		return "", "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", "", err
	}
	if err := tmp.Close(); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp.Name(), sigPath); err != nil {
		return "", "", err
	}
	return sigPath, KeyID(priv.Public().(ed25519.PublicKey)), nil
}
