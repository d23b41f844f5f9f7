// Package signature signs strategy modules and their settings and
// verifies them: Ed25519 keys in PEM files, and a detached signature file
// (FILE.sig) holding a signed statement of what it is for. It is the
// supply-chain half of the plugin host: "leasehold plugin keygen|sign"
// write keys and signatures, and the host (plugins/host), given a Keyring
// of trusted public keys and the Sequences it accepted, refuses any module
// or settings file of the plugins directory that a trusted key did not
// sign for that file name, kind and strategy, or whose sequence is older
// than the newest accepted for its strategy (a rollback) or than the
// operator's pinned minimum.
//
// Formats (docs/plugins.md, "Supply chain"):
//
//   - private key: PEM "PRIVATE KEY", PKCS #8 (as openssl genpkey -algorithm
//     ed25519 writes it), file mode 0600;
//   - public key: PEM "PUBLIC KEY", PKIX (as openssl pkey -pubout writes
//     it); a trust file holds one or more such blocks;
//   - key id: the first 8 bytes of sha256 over the raw 32-byte public key,
//     in lower-case hex (16 digits);
//   - signature file, format 2: one JSON object {"version":2,
//     "algorithm":"ed25519", "keyId":..., "kind":"module"|"settings",
//     "file":..., "strategy":..., "sha256":..., "sequence":N,
//     "signature":...}, the signature being the standard base64 of Ed25519
//     over Message: "leasehold-plugin-statement-v2\n" then one
//     "field=value\n" line each for kind, file, strategy, sha256 and
//     sequence. Format 1 (a digest alone) is refused (ErrLegacy);
//   - sequence state: <data-dir>/plugin-sequences.json, 0600, written
//     atomically (Sequences).
//
// Standard library only (crypto/ed25519, crypto/x509, encoding/pem), with
// plugins/abi (strategy names) and internal/datadir (atomic writes).
package signature
