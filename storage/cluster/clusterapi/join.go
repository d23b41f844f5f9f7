package clusterapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// The membership endpoints of a server running an embedded etcd member.
const (
	// JoinPath is where a joiner POSTs its JoinRequest.
	JoinPath = "/leasehold/v1/cluster/join"
	// StatusPath answers GET with the Status.
	StatusPath = "/leasehold/v1/cluster"
	// MembersPath, followed by a member's name, removes it on DELETE.
	MembersPath = "/leasehold/v1/cluster/members/"
)

// The labels of the two proofs and of the exported keying material.
const (
	JoinProofLabel   = "leasehold cluster join v1: joiner"
	MemberProofLabel = "leasehold cluster join v1: member"
	EKMLabel         = "EXPORTER-leasehold-cluster-join"
	EKMLength        = 32
)

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
	// Proof is Proof(token, JoinProofLabel, keying material).
	Proof string `json:"proof"`
}

// JoinResponse admits the joiner: the cluster CA (certificate and key, so
// that every member can admit further members), its certificate, and
// etcd's initial cluster with the joiner in it. A replica gets the CA
// certificate without its key, a client certificate, the voting members'
// client URLs and the key prefix the members store under.
type JoinResponse struct {
	CACert         string   `json:"caCert"`
	CAKey          string   `json:"caKey"`
	Cert           string   `json:"cert"`
	Key            string   `json:"key"`
	InitialCluster string   `json:"initialCluster"`
	ClientURLs     []string `json:"clientURLs"`
	EtcdPrefix     string   `json:"etcdPrefix,omitempty"`
	// Proof is Proof(token, MemberProofLabel, keying material): the
	// joiner trusts the CA above only with it.
	Proof string `json:"proof"`
}

// Proof is the HMAC-SHA256 of label, a zero byte and ekm under token, in
// hex.
func Proof(token []byte, label string, ekm []byte) string {
	mac := hmac.New(sha256.New, token)
	mac.Write([]byte(label))
	mac.Write([]byte{0})
	mac.Write(ekm)
	return hex.EncodeToString(mac.Sum(nil))
}
