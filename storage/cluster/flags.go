package cluster

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Flags are serve's flags of an embedded etcd member (--cluster-init,
// --join) and of an API-only replica (--replica); storage/backend
// registers them with the other storage flags and resolves which of the
// two, if any, runs.
type Flags struct {
	Init bool
	Join string // any member's API URL
	// Replica makes --join obtain a client certificate and the members'
	// client URLs instead of running a member: the server is then an
	// API-only replica on the etcd backend.
	Replica       bool
	Token         string
	TokenFile     string
	PeerListen    string // host:port of the etcd peer listener
	ClientListen  string // host:port of the etcd client listener
	Name          string // the member's name (default: host name and peer port)
	AdvertiseHost string // the address other members reach this one at
	// RequestTimeout bounds each storage request of a member, so that one
	// cut off from its quorum answers errors instead of hanging.
	RequestTimeout time.Duration
}

// givenToken is the token of --cluster-token-file or --cluster-token (""
// when neither is given). It is read once per start, by whichever of
// Provision and PrepareReplica runs.
func (f *Flags) givenToken() (string, error) {
	if f.TokenFile == "" {
		return f.Token, nil
	}
	data, err := os.ReadFile(f.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--cluster-token-file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("--cluster-token-file %s is empty", f.TokenFile)
	}
	return token, nil
}
