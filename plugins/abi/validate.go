package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// BuiltinStrategy is the only strategy name without a "/" that Kubernetes
// accepts (coordination validation): upstream's OldestEmulationVersion,
// embedded as plugins/builtin and implemented natively by engine/election.
const BuiltinStrategy = "OldestEmulationVersion"

// Limits on what a module may say; the host enforces them.
const (
	MaxReasonBytes  = 1024
	MaxInfoBytes    = 4096
	MaxVersionBytes = 64
)

// ValidateStrategyName checks a strategy name as Kubernetes does for
// LeaseCandidate.spec.strategy: either the built-in name or a qualified
// name "prefix/name" whose prefix is a DNS subdomain.
func ValidateStrategyName(name string) error {
	if name == BuiltinStrategy {
		return nil
	}
	prefix, local, ok := strings.Cut(name, "/")
	if !ok {
		return fmt.Errorf("strategy %q: a name without '/' must be %q", name, BuiltinStrategy)
	}
	if !isDNSSubdomain(prefix) {
		return fmt.Errorf("strategy %q: prefix %q is not a DNS subdomain", name, prefix)
	}
	if !isQualifiedLocal(local) {
		return fmt.Errorf("strategy %q: name part %q must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric", name, local)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isQualifiedLocal(s string) bool {
	if s == "" || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.' {
			return false
		}
	}
	return true
}

func isDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Validate checks a module's self-description.
func (i *Info) Validate() error {
	if err := ValidateStrategyName(i.Name); err != nil {
		return err
	}
	if i.Version == "" || len(i.Version) > MaxVersionBytes || !printable(i.Version) {
		return fmt.Errorf("info: version must be 1-%d printable characters, got %q", MaxVersionBytes, i.Version)
	}
	if len(i.Description) > MaxReasonBytes || !utf8.ValidString(i.Description) {
		return fmt.Errorf("info: description must be at most %d bytes of UTF-8", MaxReasonBytes)
	}
	if i.ABIMinor < 0 {
		return fmt.Errorf("info: abiMinor must not be negative, got %d", i.ABIMinor)
	}
	return nil
}

// CheckABIMinor reports why a host of revision ABIMinor cannot serve a
// module that declared it needs i.ABIMinor.
func (i *Info) CheckABIMinor() error {
	if i.ABIMinor > ABIMinor {
		return fmt.Errorf("module needs lease-strategy ABI %d.%d, this server supports %d.%d",
			ABIVersion, i.ABIMinor, ABIVersion, ABIMinor)
	}
	return nil
}

// ValidateSettings checks a strategy's settings document: one JSON object
// of at most MaxSettingsBytes, nothing after it. An object, so that every
// SDK can hand it to the guest as a map or struct and settings can grow
// new keys.
func ValidateSettings(b []byte) error {
	if len(b) > MaxSettingsBytes {
		return fmt.Errorf("settings: %d bytes, over the %d-byte limit", len(b), MaxSettingsBytes)
	}
	if !utf8.Valid(b) {
		return errors.New("settings: not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("settings: not a JSON object: %w", err)
	}
	if obj == nil {
		return errors.New("settings: not a JSON object: null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("settings: data after the JSON object")
	}
	return nil
}

// ErrInvalidDecision is wrapped by every Decision.Validate error.
var ErrInvalidDecision = errors.New("invalid decision")

// Validate checks that d is a well-formed answer to in: a known action,
// ranking names that are candidates of in (each once), a bounded reason.
func (d *Decision) Validate(in *Input) error {
	switch d.Action {
	case ActionKeep, ActionPrefer, ActionAbstain:
	default:
		return fmt.Errorf("%w: unknown action %q", ErrInvalidDecision, d.Action)
	}
	if len(d.Reason) > MaxReasonBytes || !utf8.ValidString(d.Reason) {
		return fmt.Errorf("%w: reason must be at most %d bytes of UTF-8", ErrInvalidDecision, MaxReasonBytes)
	}
	if len(d.Ranking) > len(in.Candidates) {
		return fmt.Errorf("%w: ranking has %d names for %d candidates", ErrInvalidDecision, len(d.Ranking), len(in.Candidates))
	}
	known := make(map[string]bool, len(in.Candidates))
	for i := range in.Candidates {
		known[in.Candidates[i].Name] = false
	}
	for _, name := range d.Ranking {
		seen, ok := known[name]
		if !ok {
			return fmt.Errorf("%w: ranking names %q, which is not a candidate", ErrInvalidDecision, name)
		}
		if seen {
			return fmt.Errorf("%w: ranking names %q twice", ErrInvalidDecision, name)
		}
		known[name] = true
	}
	if d.Action == ActionPrefer && len(d.Ranking) == 0 {
		return fmt.Errorf("%w: action %q with an empty ranking", ErrInvalidDecision, d.Action)
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
