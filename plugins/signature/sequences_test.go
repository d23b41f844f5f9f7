package signature

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func stmt(kind Kind, strategy string, seq uint64, content string) Statement {
	file := "a.wasm"
	if kind == KindSettings {
		file = "a.json"
	}
	return Statement{Kind: kind, File: file, Strategy: strategy, SHA256: shaHex([]byte(content)), Sequence: seq}
}

func refusedFor(t *testing.T, err error) Reason {
	t.Helper()
	if err == nil {
		return ""
	}
	var r *RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a *RefusedError", err)
	}
	return r.Reason
}

// TestSequencesState: the newest accepted statement per strategy and kind
// survives a reopen of the state file (0600); older sequences, and the
// same sequence for other content, are refused; a newer one is taken. A
// missing file is logged once as a warning and created; a damaged one
// stops the start with an error naming it.
func TestSequencesState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "plugin-sequences.json")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := OpenSequences(path, Pins{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"Strategy signature state is missing"); n != 1 {
		t.Fatalf("missing state logged %d warnings, want 1:\n%s", n, logs.String())
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file after open: %v, %v (want created 0600)", info, err)
	}
	const name = "example.com/a"
	if err := s.Check(stmt(KindModule, name, 3, "v3"), "k"); err != nil {
		t.Fatalf("first statement: %v", err)
	}
	if err := s.Accept("k", stmt(KindModule, name, 5, "v5"), stmt(KindSettings, name, 2, "s2")); err != nil {
		t.Fatal(err)
	}

	logs.Reset()
	s, err = OpenSequences(path, Pins{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "missing") {
		t.Fatalf("an existing state file was reported missing: %s", logs.String())
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v after a write, want 0600", info.Mode().Perm())
	}
	for _, c := range []struct {
		st   Statement
		want Reason
	}{
		{stmt(KindModule, name, 4, "v4"), ReasonRollback},
		{stmt(KindModule, name, 5, "v5"), ""},
		{stmt(KindModule, name, 5, "other"), ReasonRollback},
		{stmt(KindModule, name, 6, "v6"), ""},
		{stmt(KindSettings, name, 1, "s1"), ReasonRollback},
		{stmt(KindSettings, name, 2, "s2"), ""},
		{stmt(KindModule, "example.com/b", 1, "b1"), ""},
	} {
		if got := refusedFor(t, s.Check(c.st, "k")); got != c.want {
			t.Errorf("%s %s sequence %d: refused %q, want %q", c.st.Strategy, c.st.Kind, c.st.Sequence, got, c.want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the data directory holds %d files, want the state file alone (no temporary left)", len(entries))
	}

	if err := os.WriteFile(path, []byte(`{"version":1,"accepted":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSequences(path, Pins{}, log); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged state file: %v, want an error naming it", err)
	}
}

// TestSequencesPins: a pinned minimum refuses older statements even with
// no state at all (the state file deleted); --plugin-allow-rollback lets
// an older statement through for the strategies it names, records it,
// and the minimum still applies.
func TestSequencesPins(t *testing.T) {
	pins, err := ParsePins("10, example.com/b=20", "example.com/a")
	if err != nil {
		t.Fatal(err)
	}
	if pins.Min != 10 || pins.MinByStrategy["example.com/b"] != 20 || len(pins.AllowRollback) != 1 {
		t.Fatalf("ParsePins = %+v", pins)
	}
	for _, bad := range []string{"x", "example.com/a=", "-1"} {
		if _, err := ParsePins(bad, ""); err == nil {
			t.Errorf("ParsePins(%q) accepted", bad)
		}
	}
	var logs bytes.Buffer
	s, err := OpenSequences(filepath.Join(t.TempDir(), "state.json"), pins, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "min_sequence=10") {
		t.Errorf("the missing-state warning does not show the pinned minimum: %s", logs.String())
	}
	for _, c := range []struct {
		st   Statement
		want Reason
	}{
		{stmt(KindModule, "example.com/a", 9, "a9"), ReasonBelowMinimum},
		{stmt(KindModule, "example.com/a", 10, "a10"), ""},
		{stmt(KindSettings, "example.com/b", 19, "b19"), ReasonBelowMinimum},
		{stmt(KindSettings, "example.com/b", 20, "b20"), ""},
	} {
		if got := refusedFor(t, s.Check(c.st, "k")); got != c.want {
			t.Errorf("%s %s sequence %d: refused %q, want %q", c.st.Strategy, c.st.Kind, c.st.Sequence, got, c.want)
		}
	}

	// Rollback allowed for example.com/a only.
	for _, name := range []string{"example.com/a", "example.com/c"} {
		if err := s.Accept("k", stmt(KindModule, name, 15, "new")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Check(stmt(KindModule, "example.com/a", 12, "old"), "k"); err != nil {
		t.Errorf("rollback allowed for example.com/a: %v", err)
	}
	if got := refusedFor(t, s.Check(stmt(KindModule, "example.com/c", 12, "old"), "k")); got != ReasonRollback {
		t.Errorf("rollback of example.com/c: refused %q, want rollback", got)
	}
	if err := s.Accept("k", stmt(KindModule, "example.com/a", 12, "old")); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Newest(KindModule, "example.com/a"); a.Sequence != 12 {
		t.Errorf("after an allowed rollback the newest accepted is %d, want 12", a.Sequence)
	}
	if !strings.Contains(logs.String(), "Strategy rollback accepted") {
		t.Errorf("an allowed rollback was not logged: %s", logs.String())
	}
	all, err := ParsePins("", "*")
	if err != nil || !all.rollbackAllowed("anything.example/x") {
		t.Errorf("--plugin-allow-rollback '*': %+v, %v", all, err)
	}
}
