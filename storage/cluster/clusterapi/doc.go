// Package clusterapi is the wire contract of leasehold's embedded etcd
// cluster, shared by every side that must agree on its bytes: the member
// that admits joiners and reports the cluster (storage/cluster, served over
// HTTP by web), the joiner (storage/cluster) and "leasehold cluster"
// (web/client/cluster). It holds the join handshake's bodies and proof,
// the cluster status, and the errors that pick the HTTP status of an
// answer. It is a leaf: the standard library only.
//
// Each side of the join proves it knows the cluster token with an HMAC
// over the TLS session's exported keying material (RFC 5705), a nonce the
// member handed out for this join alone (Nonces) and the whole request
// (the member's proof also over its answer), so the token never crosses
// the wire, a proof made on one TLS session is worthless on another (a man
// in the middle, who must run two sessions, can neither relay nor forge
// it), and a captured body is worthless once its nonce is used. On
// loopback without TLS the keying material is empty and the nonce alone
// refuses replays. The request carries a certificate request, never a
// private key, and is bounded (Validate) before any of it is logged.
package clusterapi
