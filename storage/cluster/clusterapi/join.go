package clusterapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/url"
	"regexp"
	"strconv"
)

// The membership endpoints of a server running an embedded etcd member.
const (
	// JoinNoncePath answers POST with a NonceResponse: the challenge a
	// joiner's proof must cover.
	JoinNoncePath = "/leasehold/v1/cluster/join/nonce"
	// JoinPath is where a joiner POSTs its JoinRequest.
	JoinPath = "/leasehold/v1/cluster/join"
	// StatusPath answers GET with the Status.
	StatusPath = "/leasehold/v1/cluster"
	// MembersPath, followed by a member's name, removes it on DELETE.
	MembersPath = "/leasehold/v1/cluster/members/"
	// LeaderPath moves the raft leadership on POST (a MoveLeaderRequest).
	LeaderPath = "/leasehold/v1/cluster/leader"
)

// The labels of the two proofs and of the exported keying material. The
// version in the labels changed with the challenge (v1 had no nonce and
// covered none of the request): a proof of one version never verifies as
// the other.
const (
	JoinProofLabel   = "leasehold cluster join v2: joiner"
	MemberProofLabel = "leasehold cluster join v2: member"
	EKMLabel         = "EXPORTER-leasehold-cluster-join"
	EKMLength        = 32
)

// Bounds of a join request, checked before any of it is logged or used.
const (
	// MaxJoinBodyBytes bounds the body of a JoinRequest.
	MaxJoinBodyBytes = 16 << 10
	// MaxURLBytes bounds PeerURL and ClientURL.
	MaxURLBytes = 256
	// MaxHosts and MaxHostBytes bound Hosts.
	MaxHosts     = 16
	MaxHostBytes = 253
	// MaxCSRBytes bounds the PEM certificate request.
	MaxCSRBytes = 4 << 10
	// NonceBytes is the size of a nonce (hex-encoded on the wire).
	NonceBytes = 32
)

// NonceResponse is the answer to POST JoinNoncePath.
type NonceResponse struct {
	// Nonce is NonceBytes random bytes in hex, valid once, for
	// ExpiresInSeconds.
	Nonce            string `json:"nonce"`
	ExpiresInSeconds int    `json:"expiresInSeconds"`
}

// JoinRequest is a joiner's POST to JoinPath.
type JoinRequest struct {
	Name string `json:"name"`
	// PeerURL and ClientURL are the joiner's advertised etcd URLs.
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL"`
	// Hosts are the names and addresses its certificate must cover.
	Hosts []string `json:"hosts"`
	// Replica asks for no membership, only a client certificate and the
	// members' client URLs: an API-only replica on the members' etcd.
	// PeerURL, ClientURL and Hosts are then empty.
	Replica bool `json:"replica,omitempty"`
	// CSR is a PEM x509 certificate request for Name, signed by the key
	// the joiner generated for itself: the key never leaves the joiner,
	// the member signs only its public half.
	CSR string `json:"csr"`
	// Nonce is the one the member answered to POST JoinNoncePath.
	Nonce string `json:"nonce"`
	// Proof is JoinProof(token, ekm, the request).
	Proof string `json:"proof"`
}

// JoinResponse admits the joiner: the cluster CA (certificate and key, so
// that every member can admit further members), the joiner's certificate
// (signed from its CSR) and etcd's initial cluster with the joiner in it.
// A replica gets the CA certificate without its key, a client certificate,
// the voting members' client URLs and the key prefix the members store
// under.
type JoinResponse struct {
	CACert         string   `json:"caCert"`
	CAKey          string   `json:"caKey,omitempty"`
	Cert           string   `json:"cert"`
	InitialCluster string   `json:"initialCluster"`
	ClientURLs     []string `json:"clientURLs"`
	EtcdPrefix     string   `json:"etcdPrefix,omitempty"`
	// Proof is MemberProof(token, ekm, the request, this answer): the
	// joiner trusts the CA above only with it.
	Proof string `json:"proof"`
}

// ErrInvalidRequest marks a join request that is malformed or out of
// bounds (answered 400); its message names the field, never echoes it.
var ErrInvalidRequest = errors.New("invalid join request")

// validName is what a member's or replica's name may be.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validDNSName is a host name a certificate may cover.
var validDNSName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// ValidName reports whether name may name a member or replica.
func ValidName(name string) bool { return validName.MatchString(name) }

func bad(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidRequest, field, why) }

// Validate checks every field's shape and size, so that what is logged or
// used afterwards is bounded. Its errors match ErrInvalidRequest and name
// the field without quoting it (the value is the sender's).
func (r *JoinRequest) Validate() error {
	if !validName.MatchString(r.Name) {
		return bad("name", "must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if len(r.Nonce) != 2*NonceBytes || !isHex(r.Nonce) {
		return bad("nonce", "must be the "+strconv.Itoa(2*NonceBytes)+" hex digits answered by POST "+JoinNoncePath+" (is the joiner an older leasehold?)")
	}
	if len(r.Proof) != 2*sha256.Size || !isHex(r.Proof) {
		return bad("proof", "must be "+strconv.Itoa(2*sha256.Size)+" hex digits")
	}
	return r.ValidateAdmission()
}

// ValidateAdmission is Validate without the handshake's fields (nonce and
// proof, which the HTTP side checks): what admitting a joiner reads.
func (r *JoinRequest) ValidateAdmission() error {
	if !validName.MatchString(r.Name) {
		return bad("name", "must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if r.CSR == "" || len(r.CSR) > MaxCSRBytes {
		return bad("csr", "must be a PEM certificate request of at most "+strconv.Itoa(MaxCSRBytes)+" bytes")
	}
	if r.Replica {
		if r.PeerURL != "" || r.ClientURL != "" || len(r.Hosts) != 0 {
			return bad("replica", "takes no peerURL, clientURL or hosts")
		}
		return nil
	}
	for _, f := range [...][2]string{{"peerURL", r.PeerURL}, {"clientURL", r.ClientURL}} {
		field, raw := f[0], f[1]
		if len(raw) > MaxURLBytes {
			return bad(field, "is longer than "+strconv.Itoa(MaxURLBytes)+" bytes")
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Port() == "" || !validHost(u.Hostname()) || u.Path != "" || u.User != nil || u.RawQuery != "" {
			return bad(field, "must be https://host:port")
		}
	}
	if len(r.Hosts) > MaxHosts {
		return bad("hosts", "holds more than "+strconv.Itoa(MaxHosts)+" names")
	}
	for _, h := range r.Hosts {
		if !validHost(h) {
			return bad("hosts", "must be IP addresses or DNS names of at most "+strconv.Itoa(MaxHostBytes)+" bytes")
		}
	}
	return nil
}

func validHost(h string) bool {
	if len(h) == 0 || len(h) > MaxHostBytes {
		return false
	}
	return net.ParseIP(h) != nil || validDNSName.MatchString(h)
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// JoinProof is the joiner's proof that it knows token: an HMAC-SHA256 under
// it over the joiner's label, the session's exported keying material (empty
// without TLS) and every field of req but the proof, the nonce included. A
// proof is therefore worth one request, on one TLS session, once: the
// member forgets the nonce when it is used.
func JoinProof(token, ekm []byte, req *JoinRequest) string {
	mac := hmac.New(sha256.New, token)
	writeField(mac, JoinProofLabel)
	writeField(mac, string(ekm))
	writeRequest(mac, req)
	return hex.EncodeToString(mac.Sum(nil))
}

// MemberProof is the member's proof that it knows token, over the same
// session and request (so over the joiner's fresh nonce and public key)
// and every field of its answer but the proof: the joiner trusts the CA it
// receives only with it.
func MemberProof(token, ekm []byte, req *JoinRequest, resp *JoinResponse) string {
	mac := hmac.New(sha256.New, token)
	writeField(mac, MemberProofLabel)
	writeField(mac, string(ekm))
	writeRequest(mac, req)
	for _, f := range []string{resp.CACert, resp.CAKey, resp.Cert, resp.InitialCluster, resp.EtcdPrefix} {
		writeField(mac, f)
	}
	writeList(mac, resp.ClientURLs)
	return hex.EncodeToString(mac.Sum(nil))
}

// writeRequest writes req's fields but the proof, each length-prefixed, so
// that no two requests write the same bytes.
func writeRequest(h hash.Hash, req *JoinRequest) {
	replica := "0"
	if req.Replica {
		replica = "1"
	}
	for _, f := range []string{req.Name, req.PeerURL, req.ClientURL, replica, req.CSR, req.Nonce} {
		writeField(h, f)
	}
	writeList(h, req.Hosts)
}

func writeList(h hash.Hash, list []string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(list)))
	h.Write(n[:])
	for _, s := range list {
		writeField(h, s)
	}
}

func writeField(h hash.Hash, s string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
