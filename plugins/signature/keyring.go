package signature

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Reason says why a module was refused; the module list shows it after
// "refused: ".
type Reason string

// The reasons Verify refuses a module for.
const (
	ReasonMissing   Reason = "missing signature"
	ReasonBad       Reason = "bad signature"
	ReasonUntrusted Reason = "untrusted key id"
	ReasonDigest    Reason = "digest mismatch"
)

// ErrRefused matches every *RefusedError with errors.Is.
var ErrRefused = errors.New("module refused")

// RefusedError is Verify's answer to a module it does not trust.
type RefusedError struct {
	Reason Reason
	// KeyID is the key id the signature file claims, if it could be read.
	KeyID  string
	Detail string
}

func (e *RefusedError) Error() string {
	if e.Detail == "" {
		return string(e.Reason)
	}
	return string(e.Reason) + ": " + e.Detail
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Keyring is a set of trusted public keys by key id; immutable once built
// and safe for concurrent use.
type Keyring struct {
	keys map[string]ed25519.PublicKey
}

// NewKeyring trusts keys. Listing a key twice is harmless.
func NewKeyring(keys ...ed25519.PublicKey) *Keyring {
	k := &Keyring{keys: map[string]ed25519.PublicKey{}}
	for _, pub := range keys {
		k.keys[KeyID(pub)] = pub
	}
	return k
}

// LoadKeyring reads the trust files at paths, each holding one or more
// PEM public keys. A missing, unreadable or keyless file is an error: a
// server told to verify must not start trusting nothing by accident.
func LoadKeyring(paths ...string) (*Keyring, error) {
	if len(paths) == 0 {
		return nil, errors.New("no trust key file given")
	}
	var all []ed25519.PublicKey
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("trust keys: %w", err)
		}
		keys, err := ParsePublicKeys(data)
		if err != nil {
			return nil, fmt.Errorf("trust keys %s: %w", p, err)
		}
		all = append(all, keys...)
	}
	return NewKeyring(all...), nil
}

// IDs lists the trusted key ids, sorted (for the start-up log).
func (k *Keyring) IDs() []string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Verify checks that sig (a signature file's content; nil when the file
// does not exist) is a valid signature by a trusted key over the module
// whose sha256 is digest. It returns the signer's key id, or a
// *RefusedError. The checks run in a fixed order, so that the reason is
// the first thing wrong: missing, malformed (bad signature), untrusted
// key id, digest mismatch, then the Ed25519 verification (bad signature).
func (k *Keyring) Verify(digest [sha256.Size]byte, sig []byte) (string, error) {
	if sig == nil {
		return "", &RefusedError{Reason: ReasonMissing}
	}
	f, err := ParseFile(sig)
	if err != nil {
		return "", &RefusedError{Reason: ReasonBad, KeyID: f.KeyID, Detail: err.Error()}
	}
	pub, ok := k.keys[f.KeyID]
	if !ok {
		return "", &RefusedError{Reason: ReasonUntrusted, KeyID: f.KeyID, Detail: f.KeyID}
	}
	shaHex := hex.EncodeToString(digest[:])
	if f.SHA256 != shaHex {
		return "", &RefusedError{Reason: ReasonDigest, KeyID: f.KeyID,
			Detail: fmt.Sprintf("signed %s, module is %s", short(f.SHA256), short(shaHex))}
	}
	raw, _ := base64.StdEncoding.DecodeString(f.Signature) // ParseFile checked it
	if !ed25519.Verify(pub, message(shaHex), raw) {
		return "", &RefusedError{Reason: ReasonBad, KeyID: f.KeyID, Detail: "Ed25519 verification failed"}
	}
	return f.KeyID, nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
