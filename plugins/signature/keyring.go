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
	ReasonLegacy    Reason = "legacy signature"
	ReasonUntrusted Reason = "untrusted key id"
	ReasonDigest    Reason = "digest mismatch"
	// ReasonOtherFile, ReasonOtherKind and ReasonOtherStrategy refuse a
	// valid statement made for something else: a signed file copied under
	// another name, settings signed as a module, a module or its settings
	// signed for another strategy.
	ReasonOtherFile     Reason = "signed for another file"
	ReasonOtherKind     Reason = "signed for another kind"
	ReasonOtherStrategy Reason = "signed for another strategy"
	// ReasonRollback refuses a statement older than the newest accepted
	// for its strategy and kind (or one reusing its sequence for other
	// content); ReasonBelowMinimum one under the operator's pinned
	// minimum (Sequences).
	ReasonRollback     Reason = "rollback"
	ReasonBelowMinimum Reason = "below the pinned minimum sequence"
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
// does not exist) is a valid statement by a trusted key about a file of
// this kind, named file (its base name), whose sha256 is digest. It
// returns the signature file, whose Statement names the strategy and
// sequence that the caller checks next (the module's info, Sequences), or
// a *RefusedError. The checks run in a fixed order, so that the reason is
// the first thing wrong: missing, malformed (bad signature), format 1
// (legacy), untrusted key id, the Ed25519 verification (bad signature),
// then what the statement is for: kind, file name, digest.
func (k *Keyring) Verify(kind Kind, file string, digest [sha256.Size]byte, sig []byte) (File, error) {
	if sig == nil {
		return File{}, &RefusedError{Reason: ReasonMissing}
	}
	f, err := ParseFile(sig)
	if errors.Is(err, ErrLegacy) {
		return f, &RefusedError{Reason: ReasonLegacy, KeyID: f.KeyID, Detail: err.Error()}
	}
	if err != nil {
		return f, &RefusedError{Reason: ReasonBad, KeyID: f.KeyID, Detail: err.Error()}
	}
	pub, ok := k.keys[f.KeyID]
	if !ok {
		return f, &RefusedError{Reason: ReasonUntrusted, KeyID: f.KeyID, Detail: f.KeyID}
	}
	raw, _ := base64.StdEncoding.DecodeString(f.Signature) // ParseFile checked it
	if !ed25519.Verify(pub, Message(f.Statement), raw) {
		return f, &RefusedError{Reason: ReasonBad, KeyID: f.KeyID, Detail: "Ed25519 verification failed"}
	}
	if f.Kind != kind {
		return f, &RefusedError{Reason: ReasonOtherKind, KeyID: f.KeyID,
			Detail: fmt.Sprintf("signed as %s %s, this is %s %s", f.Kind, f.File, kind, file)}
	}
	if f.File != file {
		return f, &RefusedError{Reason: ReasonOtherFile, KeyID: f.KeyID,
			Detail: fmt.Sprintf("signed for %s, this is %s", f.File, file)}
	}
	shaHex := hex.EncodeToString(digest[:])
	if f.SHA256 != shaHex {
		return f, &RefusedError{Reason: ReasonDigest, KeyID: f.KeyID,
			Detail: fmt.Sprintf("signed %s, file is %s", short(f.SHA256), short(shaHex))}
	}
	return f, nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
