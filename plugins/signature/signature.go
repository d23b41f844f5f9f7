package signature

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/plugins/abi"
)

// File names and format constants.
const (
	// Suffix is appended to a module's path to name its signature file.
	Suffix = ".sig"
	// PublicKeySuffix is appended to a private key's path to name the
	// public key file keygen writes beside it.
	PublicKeySuffix = ".pub"
	// FormatVersion is the signature file's "version"; a verifier refuses
	// versions it does not know rather than guessing.
	FormatVersion = 2
	// LegacyFormatVersion is the format of signatures over a digest alone
	// (before ABI 1.2): they say nothing of the file, strategy or
	// sequence they were made for, so they are refused with ErrLegacy.
	LegacyFormatVersion = 1
	// Algorithm is the only signature algorithm.
	Algorithm = "ed25519"
	// MaxFileBytes bounds what a verifier reads of a signature file: a
	// valid one is about 400 bytes.
	MaxFileBytes = 16 << 10

	messageHeader = "leasehold-plugin-statement-v2\n"
)

// Kind says what a statement signs: a strategy module or its settings.
type Kind string

// The kinds of signed files.
const (
	KindModule   Kind = "module"   // NAME.wasm
	KindSettings Kind = "settings" // NAME.json beside it
)

// KindOf is the kind of a file of the plugins directory by its name.
func KindOf(file string) (Kind, error) {
	switch {
	case strings.HasSuffix(file, ".wasm"):
		return KindModule, nil
	case strings.HasSuffix(file, ".json"):
		return KindSettings, nil
	}
	return "", fmt.Errorf("%s: not a module (.wasm) or settings (.json) file", file)
}

// Statement is what a signature vouches for: this content (SHA256), as
// this kind of file, named File in the plugins directory, for strategy
// Strategy, at Sequence. A host refuses a statement made for another file,
// kind or strategy (a signed file copied under another name), and one
// older than the newest it accepted for the strategy (a rollback).
type Statement struct {
	Kind Kind `json:"kind"`
	// File is the base name the file must have in the plugins directory.
	File string `json:"file"`
	// Strategy is the name the module's info declares (for settings: the
	// module they configure).
	Strategy string `json:"strategy"`
	// SHA256 is the signed content's digest, lower-case hex.
	SHA256 string `json:"sha256"`
	// Sequence orders the statements for one strategy and kind: a host
	// never goes back to a smaller one unless its operator allows it.
	Sequence uint64 `json:"sequence"`
}

// Validate checks that every field is well formed.
func (s Statement) Validate() error {
	kind, err := KindOf(s.File)
	if err != nil {
		return fmt.Errorf("file %q: %w", s.File, err)
	}
	if s.Kind != KindModule && s.Kind != KindSettings {
		return fmt.Errorf("kind %q, want %q or %q", s.Kind, KindModule, KindSettings)
	}
	if kind != s.Kind {
		return fmt.Errorf("file %q is not a %s file", s.File, s.Kind)
	}
	if filepath.Base(s.File) != s.File || strings.ContainsAny(s.File, "/\\") || strings.HasPrefix(s.File, ".") || !printable(s.File) {
		return fmt.Errorf("file %q is not a plain file name", s.File)
	}
	if err := abi.ValidateStrategyName(s.Strategy); err != nil {
		return err
	}
	if b, err := hex.DecodeString(s.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(s.SHA256) != s.SHA256 {
		return fmt.Errorf("sha256 %q is not 64 lower-case hex digits", s.SHA256)
	}
	if s.Sequence == 0 {
		return errors.New("sequence must be at least 1")
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return s != ""
}

// File is the content of a FILE.sig file: a signed Statement.
type File struct {
	Version   int    `json:"version"`
	Algorithm string `json:"algorithm"`
	// KeyID names the public key that verifies Signature (KeyID).
	KeyID string `json:"keyId"`
	Statement
	// Signature is Ed25519 over Message(Statement), standard base64.
	Signature string `json:"signature"`
}

// KeyID is the short, stable name of a public key: the first 8 bytes of
// sha256 over its raw 32 bytes, in hex. Logs, signature files and the
// module list show it.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Message is what is signed: a fixed, versioned header (so that an
// Ed25519 key used elsewhere cannot be tricked into signing a statement
// by accident), then one "field=value" line per Statement field in a fixed
// order. Validate guarantees no value holds a line break.
func Message(s Statement) []byte {
	return []byte(messageHeader +
		"kind=" + string(s.Kind) + "\n" +
		"file=" + s.File + "\n" +
		"strategy=" + s.Strategy + "\n" +
		"sha256=" + s.SHA256 + "\n" +
		"sequence=" + strconv.FormatUint(s.Sequence, 10) + "\n")
}

// Sign returns the signature file for statement s.
func Sign(priv ed25519.PrivateKey, s Statement) ([]byte, error) {
	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok || len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("signature: not an Ed25519 private key")
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	f := File{Version: FormatVersion, Algorithm: Algorithm, KeyID: KeyID(pub), Statement: s,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, Message(s)))}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("signature: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// ErrLegacy is ParseFile's error for a signature file of format 1, which
// signed a digest alone: it could be copied to any file of the same
// content under any name, and put back after a newer one.
var ErrLegacy = errors.New("format 1 signature binds no file name, strategy or sequence; re-sign with \"leasehold plugin sign --key KEYFILE FILE\"")

// ParseFile decodes a signature file strictly: one JSON object, no
// unknown fields, a known version and algorithm, a valid statement and a
// well-formed signature. A format 1 file is ErrLegacy.
func ParseFile(data []byte) (File, error) {
	var f File
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err == nil && probe.Version == LegacyFormatVersion {
		var legacy struct {
			KeyID string `json:"keyId"`
		}
		_ = json.Unmarshal(data, &legacy)
		f.Version, f.KeyID = probe.Version, legacy.KeyID
		return f, ErrLegacy
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("not a signature file: %w", err)
	}
	if dec.More() {
		return f, errors.New("not a signature file: data after the JSON object")
	}
	if f.Version != FormatVersion {
		return f, fmt.Errorf("signature file version %d, this server reads %d", f.Version, FormatVersion)
	}
	if f.Algorithm != Algorithm {
		return f, fmt.Errorf("algorithm %q, want %q", f.Algorithm, Algorithm)
	}
	if err := f.Statement.Validate(); err != nil {
		return f, fmt.Errorf("statement: %w", err)
	}
	if b, err := base64.StdEncoding.DecodeString(f.Signature); err != nil || len(b) != ed25519.SignatureSize {
		return f, errors.New("signature is not a base64 Ed25519 signature")
	}
	return f, nil
}

// EncodePrivateKey and EncodePublicKey write the PEM key files' content.
func EncodePrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("signature: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePublicKey writes a public key file's content.
func EncodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("signature: encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePrivateKey reads a PEM "PRIVATE KEY" (PKCS #8) Ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("no PEM \"PRIVATE KEY\" block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key is %T, want Ed25519", k)
	}
	return priv, nil
}

// ParsePublicKeys reads every PEM "PUBLIC KEY" (PKIX) Ed25519 key in data.
// Other PEM blocks and text between blocks (comments) are ignored; a
// "PUBLIC KEY" block that is not Ed25519 is an error, so that a trust file
// never silently trusts less than its author meant.
func ParsePublicKeys(data []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			continue
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key %d: %w", len(keys)+1, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key %d is %T, want Ed25519", len(keys)+1, k)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM \"PUBLIC KEY\" block")
	}
	return keys, nil
}
