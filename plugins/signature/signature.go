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
	FormatVersion = 1
	// Algorithm is the only signature algorithm.
	Algorithm = "ed25519"
	// MaxFileBytes bounds what a verifier reads of a signature file: a
	// valid one is about 250 bytes.
	MaxFileBytes = 16 << 10

	messagePrefix = "leasehold-plugin-signature-v1 sha256:"
)

// File is the content of a MODULE.wasm.sig file.
type File struct {
	Version   int    `json:"version"`
	Algorithm string `json:"algorithm"`
	// KeyID names the public key that verifies Signature (KeyID).
	KeyID string `json:"keyId"`
	// SHA256 is the signed module's digest, lower-case hex.
	SHA256 string `json:"sha256"`
	// Signature is Ed25519 over message(SHA256), standard base64.
	Signature string `json:"signature"`
}

// KeyID is the short, stable name of a public key: the first 8 bytes of
// sha256 over its raw 32 bytes, in hex. Logs, signature files and the
// module list show it.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// message is what is signed: a fixed, versioned prefix binds the signature
// to this use, so an Ed25519 key used elsewhere cannot be tricked into
// signing a module digest by accident.
func message(sha256Hex string) []byte {
	return []byte(messagePrefix + sha256Hex)
}

// Sign returns the signature file for a module whose sha256 is digest.
func Sign(priv ed25519.PrivateKey, digest [sha256.Size]byte) ([]byte, error) {
	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok || len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("signature: not an Ed25519 private key")
	}
	shaHex := hex.EncodeToString(digest[:])
	f := File{Version: FormatVersion, Algorithm: Algorithm, KeyID: KeyID(pub), SHA256: shaHex,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, message(shaHex)))}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("signature: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// ParseFile decodes a signature file strictly: one JSON object, no
// unknown fields, a known version and algorithm, well-formed fields.
func ParseFile(data []byte) (File, error) {
	var f File
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
	if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
		return f, fmt.Errorf("sha256 %q is not 64 hex digits", f.SHA256)
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
