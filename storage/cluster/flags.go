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
	// StaleLearnerAfter is how long a learner may stay unreachable (added
	// by a join that never started it, or started and lost before its
	// promotion) before the etcd leader's member removes it.
	StaleLearnerAfter time.Duration
	// MoveSlowLeader lets a member that has found the raft leader slow,
	// with a healthier member answering, move the leadership off it by
	// standing for election (leadership.go).
	MoveSlowLeader bool
	// LargeWriteBytesPerSec paces the writes of values over 64 KiB of a
	// member's or replica's store (storage/etcd's Options), so that a
	// storm of large writes cannot hold the raft log and every member's
	// WAL while renewals queue behind it; 0 leaves them unlimited.
	LargeWriteBytesPerSec int64
	// CertValidity is how long the certificates this member issues last
	// (its own, joiners', replicas', and their renewals): they renew at
	// about two thirds of it (renew.go). 0 is pki.DefaultCertValidity.
	CertValidity time.Duration
	// Given are the flags given (on the command line or by their
	// environment twins), not left at their defaults: a restart applies a
	// given address over the recorded one, or refuses it. nil: none.
	Given *GivenFlags
}

// GivenFlags are the names of the flags given to a start.
type GivenFlags struct{ names map[string]bool }

// NewGivenFlags is the set of the flags called names.
func NewGivenFlags(names map[string]bool) *GivenFlags { return &GivenFlags{names: names} }

// Has reports whether the flag called name was given.
func (g *GivenFlags) Has(name string) bool { return g != nil && g.names[name] }

// given reports whether the flag called name was given.
func (f *Flags) given(name string) bool { return f.Given.Has(name) }

// MinTokenBytes is the shortest cluster token accepted: the token is all
// that admits a device, and a short one can be guessed.
const MinTokenBytes = 16

// givenToken is the token of --cluster-token-file or --cluster-token (""
// when neither is given). It is read once per start, by whichever of
// Provision and PrepareReplica runs.
// A token under MinTokenBytes is refused, saying how to make one.
func (f *Flags) givenToken() (string, error) {
	token, source := f.Token, "--cluster-token"
	if f.TokenFile != "" {
		data, err := os.ReadFile(f.TokenFile)
		if err != nil {
			return "", fmt.Errorf("--cluster-token-file: %w", err)
		}
		token, source = strings.TrimSpace(string(data)), "--cluster-token-file "+f.TokenFile
		if token == "" {
			return "", fmt.Errorf("%s is empty", source)
		}
	}
	if token != "" && len(token) < MinTokenBytes {
		return "", fmt.Errorf("%s: the cluster token is %d bytes; it must have at least %d (a short token can be guessed): use `openssl rand -hex 32`, or start --cluster-init without one to have one generated",
			source, len(token), MinTokenBytes)
	}
	return token, nil
}
