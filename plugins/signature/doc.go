// Package signature signs strategy modules and verifies them: Ed25519
// keys in PEM files, and a detached signature file (MODULE.wasm.sig) over
// the module's sha256 digest that names the signer's key id. It is the
// supply-chain half of the plugin host: "leasehold plugin keygen|sign"
// write keys and signatures, and the host (plugins/host), given a Keyring
// of trusted public keys, refuses any module in the plugins directory that
// a trusted key did not sign.
//
// Formats (docs/plugins.md, "Supply chain"):
//
//   - private key: PEM "PRIVATE KEY", PKCS #8 (as openssl genpkey -algorithm
//     ed25519 writes it), file mode 0600;
//   - public key: PEM "PUBLIC KEY", PKIX (as openssl pkey -pubout writes
//     it); a trust file holds one or more such blocks;
//   - key id: the first 8 bytes of sha256 over the raw 32-byte public key,
//     in lower-case hex (16 digits);
//   - signature file: one JSON object {"version":1,"algorithm":"ed25519",
//     "keyId":..., "sha256":..., "signature":...}, the signature being the
//     standard base64 of Ed25519 over the ASCII message
//     "leasehold-plugin-signature-v1 sha256:<module's sha256, lower-case hex>".
//
// Standard library only (crypto/ed25519, crypto/x509, encoding/pem).
package signature
