package signature

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/datadir"
)

// Pins is what the operator fixes in configuration about sequences
// (serve's --plugin-min-sequence and --plugin-allow-rollback). Unlike the
// state file, which anyone able to write the data directory can delete,
// it comes with the server's configuration, so it still holds when the
// state is gone.
type Pins struct {
	// Min refuses statements with a smaller sequence, for every strategy.
	Min uint64
	// MinByStrategy does the same for one strategy (the larger of the two
	// applies).
	MinByStrategy map[string]uint64
	// AllowRollback accepts, for these strategies ("*": all), a statement
	// older than the newest accepted; the pinned minimums still apply.
	AllowRollback []string
}

// ParsePins reads --plugin-min-sequence (comma-separated "N" or
// "STRATEGY=N") and --plugin-allow-rollback (comma-separated strategy
// names, or "*").
func ParsePins(minSeq, allowRollback string) (Pins, error) {
	var p Pins
	for _, item := range strings.Split(minSeq, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, num := "", item
		if i := strings.LastIndex(item, "="); i >= 0 {
			name, num = item[:i], item[i+1:]
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return p, fmt.Errorf("--plugin-min-sequence %q: want N or STRATEGY=N", item)
		}
		if name == "" {
			p.Min = max(p.Min, n)
			continue
		}
		if p.MinByStrategy == nil {
			p.MinByStrategy = map[string]uint64{}
		}
		p.MinByStrategy[name] = max(p.MinByStrategy[name], n)
	}
	for _, name := range strings.Split(allowRollback, ",") {
		if name = strings.TrimSpace(name); name != "" {
			p.AllowRollback = append(p.AllowRollback, name)
		}
	}
	return p, nil
}

func (p Pins) min(strategy string) uint64 { return max(p.Min, p.MinByStrategy[strategy]) }

func (p Pins) rollbackAllowed(strategy string) bool {
	return slices.Contains(p.AllowRollback, "*") || slices.Contains(p.AllowRollback, strategy)
}

// Accepted is the newest statement a host accepted for one strategy and
// kind.
type Accepted struct {
	Kind     Kind      `json:"kind"`
	Strategy string    `json:"strategy"`
	Sequence uint64    `json:"sequence"`
	SHA256   string    `json:"sha256"`
	File     string    `json:"file"`
	KeyID    string    `json:"keyId"`
	At       time.Time `json:"at"`
}

// stateFile is the JSON of the state file.
type stateFile struct {
	Version  int        `json:"version"`
	Accepted []Accepted `json:"accepted"`
}

const stateVersion = 1

type seqKey struct {
	kind     Kind
	strategy string
}

// Sequences remembers the newest signed statement a host accepted per
// strategy and kind, so that an older one put back in the plugins
// directory (a rollback to a version with a known flaw) is refused. The
// memory lives in a state file of the data directory, written 0600 and
// atomically on every change; the operator's Pins anchor it when that
// file is lost. Safe for concurrent use.
type Sequences struct {
	path string // "" keeps the memory in this process only
	pins Pins
	log  *slog.Logger

	mu       sync.Mutex
	accepted map[seqKey]Accepted
}

// NewSequences keeps the memory in this process only: within one run a
// host still never goes back, and pins apply; a restart forgets.
func NewSequences(pins Pins) *Sequences {
	return &Sequences{pins: pins, log: slog.New(slog.DiscardHandler), accepted: map[seqKey]Accepted{}}
}

// OpenSequences loads the state file at path. A missing file is logged
// once, as a warning, and created empty: until something is accepted
// again, only the pinned minimums stop a rollback (on a first start that
// is expected; later, someone removed the file). A damaged file is an
// error: the operator decides whether to remove it.
func OpenSequences(path string, pins Pins, log *slog.Logger) (*Sequences, error) {
	s := &Sequences{path: path, pins: pins, log: log, accepted: map[seqKey]Accepted{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Warn("Strategy signature state is missing: a module or settings file signed earlier than the ones last accepted would load (a rollback) unless --plugin-min-sequence refuses it; expected on the first start with --plugin-trust-keys",
			"file", path, "min_sequence", pins.Min, "min_sequence_by_strategy", fmt.Sprint(pins.MinByStrategy))
		if err := s.save(nil); err != nil {
			return nil, err
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("strategy signature state: %w", err)
	}
	var st stateFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Version != stateVersion {
		if err == nil {
			err = fmt.Errorf("version %d, this server reads %d", st.Version, stateVersion)
		}
		return nil, fmt.Errorf("strategy signature state %s is damaged: %w (remove it to start over: --plugin-min-sequence then anchors rollback protection)", path, err)
	}
	for _, a := range st.Accepted {
		s.accepted[seqKey{a.Kind, a.Strategy}] = a
	}
	return s, nil
}

// Check refuses statement st (signed by a trusted key for the file at
// hand) with a *RefusedError when its sequence is below the pinned
// minimum, older than the newest accepted for its strategy and kind, or
// equal to it for other content; AllowRollback waives the last two.
func (s *Sequences) Check(st Statement, keyID string) error {
	if m := s.pins.min(st.Strategy); st.Sequence < m {
		return &RefusedError{Reason: ReasonBelowMinimum, KeyID: keyID,
			Detail: fmt.Sprintf("%s %s sequence %d, pinned minimum %d", st.Strategy, st.Kind, st.Sequence, m)}
	}
	s.mu.Lock()
	prev, ok := s.accepted[seqKey{st.Kind, st.Strategy}]
	s.mu.Unlock()
	if !ok || s.pins.rollbackAllowed(st.Strategy) {
		return nil
	}
	switch {
	case st.Sequence < prev.Sequence:
		return &RefusedError{Reason: ReasonRollback, KeyID: keyID,
			Detail: fmt.Sprintf("%s %s sequence %d, newest accepted %d (%s, sha256 %s)", st.Strategy, st.Kind, st.Sequence, prev.Sequence, prev.File, short(prev.SHA256))}
	case st.Sequence == prev.Sequence && st.SHA256 != prev.SHA256:
		return &RefusedError{Reason: ReasonRollback, KeyID: keyID,
			Detail: fmt.Sprintf("%s %s sequence %d was accepted for other content (sha256 %s): sign new content with a higher sequence", st.Strategy, st.Kind, st.Sequence, short(prev.SHA256))}
	}
	return nil
}

// Accept records statements that now serve (a module, and its settings
// if signed) and writes the state file if anything changed. An accepted
// rollback (AllowRollback) is recorded too, and logged: from then on the
// older sequence is the newest accepted. The memory changes even when the
// write fails, so this run stays protected; the error says the file did
// not.
func (s *Sequences) Accept(keyID string, sts ...Statement) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, st := range sts {
		k := seqKey{st.Kind, st.Strategy}
		prev, ok := s.accepted[k]
		if ok && prev.Sequence == st.Sequence && prev.SHA256 == st.SHA256 && prev.File == st.File {
			continue
		}
		if ok && st.Sequence < prev.Sequence {
			s.log.Warn("Strategy rollback accepted (--plugin-allow-rollback)", "strategy", st.Strategy, "kind", string(st.Kind),
				"sequence", st.Sequence, "newest_before", prev.Sequence, "file", st.File, "sha256", st.SHA256)
		}
		s.accepted[k] = Accepted{Kind: st.Kind, Strategy: st.Strategy, Sequence: st.Sequence, SHA256: st.SHA256,
			File: st.File, KeyID: keyID, At: time.Now().UTC().Truncate(time.Second)}
		changed = true
	}
	if !changed || s.path == "" {
		return nil
	}
	all := make([]Accepted, 0, len(s.accepted))
	for _, a := range s.accepted {
		all = append(all, a)
	}
	slices.SortFunc(all, func(a, b Accepted) int {
		if c := strings.Compare(a.Strategy, b.Strategy); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return s.save(all)
}

// Newest returns the newest accepted statement for strategy and kind.
func (s *Sequences) Newest(kind Kind, strategy string) (Accepted, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accepted[seqKey{kind, strategy}]
	return a, ok
}

func (s *Sequences) save(all []Accepted) error {
	if all == nil {
		all = []Accepted{}
	}
	data, err := json.MarshalIndent(stateFile{Version: stateVersion, Accepted: all}, "", "  ")
	if err != nil {
		return err
	}
	if err := datadir.WriteFile(s.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("strategy signature state: %w", err)
	}
	return nil
}
