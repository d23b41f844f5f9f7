package history

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/storage"
)

// Decision history: the coordinated election controller (engine/election)
// records why it did what it did to each Lease, so that an operator (and
// the web UI) can audit every grant and hand-over. The web UI records the
// operator's own actions in it too.

// DecisionKeyPrefix is the storage key prefix of decision histories; the
// history of Lease <ns>/<name> is stored at DecisionKeyPrefix+"<ns>/<name>".
const DecisionKeyPrefix = "/leasehold/decisions/"

// DefaultDecisionHistory is how many records RecordDecision keeps per
// Lease when the caller passes no limit.
const DefaultDecisionHistory = 50

// DecisionModule identifies the strategy code that made a decision.
type DecisionModule struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Builtin bool   `json:"builtin,omitempty"`
	// SettingsSHA256 is the sha256 of the module's settings document
	// (NAME.json beside NAME.wasm), empty when it has none.
	SettingsSHA256 string `json:"settingsSha256,omitempty"`
}

// DecisionCandidate is one LeaseCandidate as the controller saw it when it
// decided.
type DecisionCandidate struct {
	Name             string `json:"name"`
	BinaryVersion    string `json:"binaryVersion,omitempty"`
	EmulationVersion string `json:"emulationVersion,omitempty"`
	Strategy         string `json:"strategy,omitempty"`
	// Acked reports that the candidate answered a ping (or renewed) within
	// the ping window, which makes it eligible for a grant.
	Acked bool `json:"acked"`
	// State is the candidate's liveness: "acked", "pending" (pinged, not
	// answered yet), "unresponsive" (ignored its last ping), or "unknown"
	// (not pinged this round).
	State string `json:"state,omitempty"`
}

// DecisionRecord is one audited election decision on one Lease.
type DecisionRecord struct {
	// Time is when the controller decided (server clock).
	Time time.Time `json:"time"`
	// Seq increases with every decision the controller makes on the lease
	// during one run.
	Seq int64 `json:"seq,omitempty"`
	// Trigger is why a decision was needed (abi.Reason: "lease_missing",
	// "lease_expired", "no_holder", "candidate_changed", ...).
	Trigger string `json:"trigger,omitempty"`
	// Strategy is the strategy name resolved from the candidates.
	Strategy string `json:"strategy,omitempty"`
	// Module is the code that produced the ranking (the fallback's when
	// Fallback is set).
	Module DecisionModule `json:"module"`
	// Fallback is set when the lease's strategy failed and the fallback
	// strategy decided instead (never preempting a live holder).
	Fallback bool `json:"fallback,omitempty"`
	// Holder is the lease holder before the decision, empty if none.
	Holder string `json:"holder,omitempty"`
	// Candidates are the candidates considered, sorted by name.
	Candidates []DecisionCandidate `json:"candidates,omitempty"`
	// Ranking is the strategy's ranking, best first.
	Ranking []string `json:"ranking,omitempty"`
	// Chosen is the candidate the lease was granted or handed over to.
	Chosen string `json:"chosen,omitempty"`
	// Action is what the controller did: "grant", "prefer" (set
	// preferredHolder), "clear-preferred", "abstain", "conflict",
	// "no-candidate", "strategy-error".
	Action string `json:"action"`
	// Reason is a short human explanation (the strategy's reason, or the
	// controller's for conflicts and failures).
	Reason string `json:"reason,omitempty"`
	// Outcome is "ok" when the write succeeded, or the error text.
	Outcome string `json:"outcome,omitempty"`
	// Input is the whole snapshot the lease's strategy was asked to decide
	// on (the fallback saw the same, under its own strategy name), so that
	// `leasehold plugin replay` can run another module on exactly it. Nil
	// for records without a strategy decision (conflicts, no candidate)
	// and for records written before inputs were kept.
	Input *abi.Input `json:"input,omitempty"`
	// Decision is the strategy's answer as given (action and preempt
	// included), which Ranking and Reason only summarise.
	Decision *abi.Decision `json:"decision,omitempty"`
	// SettingsRef is set in storage only: the key in the stored
	// document's settings of the Input's settings (Decisions puts them
	// back and clears it).
	SettingsRef string `json:"settingsRef,omitempty"`
}

// decisionHistory is the stored document. A settings document (up to
// abi.MaxSettingsBytes) is kept once per distinct content in Settings,
// keyed by its sha256, instead of in every record's Input: the history
// of a lease stays about keep records of a few KiB each, plus its few
// settings versions.
type decisionHistory struct {
	Records  []DecisionRecord           `json:"records"`
	Settings map[string]json.RawMessage `json:"settings,omitempty"`
}

// settingsKey names a settings document in decisionHistory.Settings.
func settingsKey(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// compact moves each record's settings into h.Settings and drops the
// documents no record refers to any more. Records share the Input
// pointers of their callers, so an Input is copied before it is changed.
func (h *decisionHistory) compact() {
	used := map[string]json.RawMessage{}
	for i := range h.Records {
		r := &h.Records[i]
		switch {
		case r.Input != nil && len(r.Input.Settings) > 0:
			cp := *r.Input
			r.SettingsRef = settingsKey(cp.Settings)
			used[r.SettingsRef] = cp.Settings
			cp.Settings = nil
			r.Input = &cp
		case r.SettingsRef != "":
			if doc, ok := h.Settings[r.SettingsRef]; ok {
				used[r.SettingsRef] = doc
			}
		}
	}
	h.Settings = nil
	if len(used) > 0 {
		h.Settings = used
	}
}

// expand puts the settings back into each record's Input, as the
// strategy saw them.
func (h *decisionHistory) expand() {
	for i := range h.Records {
		r := &h.Records[i]
		if r.Input != nil && r.SettingsRef != "" {
			r.Input.Settings = h.Settings[r.SettingsRef]
		}
		r.SettingsRef = ""
	}
	h.Settings = nil
}

func decisionKey(ns, name string) string { return DecisionKeyPrefix + ns + "/" + name }

// RecordDecision appends rec to the decision history of Lease ns/name and
// keeps only the newest keep records (DefaultDecisionHistory when keep <=
// 0). The write is a compare-and-swap on the stored history, retried on
// conflict, so concurrent writers never lose each other's records.
func (s *Store) RecordDecision(ctx context.Context, ns, name string, rec DecisionRecord, keep int) error {
	if err := checkLease(ns, name); err != nil {
		return fmt.Errorf("record decision: %w", err)
	}
	if keep <= 0 {
		keep = DefaultDecisionHistory
	}
	key := decisionKey(ns, name)
	err := s.rewrite(ctx, key, func(old []byte) ([]byte, error) {
		var h decisionHistory
		if old != nil {
			if err := json.Unmarshal(old, &h); err != nil {
				// A corrupt history is not worth failing elections for:
				// start a new one.
				s.log.WarnContext(ctx, "Discarding undecodable decision history", "key", key, "err", err)
				h = decisionHistory{}
			}
		}
		h.Records = append(h.Records, rec)
		if n := len(h.Records); n > keep {
			h.Records = append([]DecisionRecord(nil), h.Records[n-keep:]...)
		}
		h.compact()
		return json.Marshal(&h)
	})
	if err != nil {
		return fmt.Errorf("record decision for %s/%s: %w", ns, name, err)
	}
	return nil
}

// Decisions returns the decision history of Lease ns/name, oldest first;
// an empty slice (and no error) when there is none.
func (s *Store) Decisions(ctx context.Context, ns, name string) ([]DecisionRecord, error) {
	kv, err := s.kv.Get(ctx, decisionKey(ns, name))
	if errors.Is(err, storage.ErrNotFound) {
		return []DecisionRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decisions for %s/%s: %w", ns, name, err)
	}
	var h decisionHistory
	if err := json.Unmarshal(kv.Value, &h); err != nil {
		return nil, fmt.Errorf("decisions for %s/%s: %w", ns, name, err)
	}
	if h.Records == nil {
		h.Records = []DecisionRecord{}
	}
	h.expand()
	return h.Records, nil
}

// DeleteDecisions removes the decision history of Lease ns/name; a
// missing history is not an error.
func (s *Store) DeleteDecisions(ctx context.Context, ns, name string) error {
	if err := s.remove(ctx, decisionKey(ns, name)); err != nil {
		return fmt.Errorf("delete decisions for %s/%s: %w", ns, name, err)
	}
	return nil
}

// DecisionLeases lists the Leases that have a decision history, sorted by
// namespace and name, so that stale histories can be collected.
func (s *Store) DecisionLeases(ctx context.Context) ([]types.NamespacedName, error) {
	out := []types.NamespacedName{}
	err := s.leases(ctx, DecisionKeyPrefix, func(ns, name string, _ []byte) {
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	})
	if err != nil {
		return nil, fmt.Errorf("list decision histories: %w", err)
	}
	return out, nil
}
