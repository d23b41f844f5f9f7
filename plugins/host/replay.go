package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/plugins/abi"
)

// History is a server's recorded decisions, as `leasehold plugin replay`
// fetches (and --save writes) them: for each lease, the records its
// decisions endpoint returns. Only the fields replay needs are decoded:
// this package reads the wire, not the server's Go types.
type History struct {
	Server string         `json:"server,omitempty"`
	Leases []LeaseHistory `json:"leases"`
}

// LeaseHistory is one lease's decision records, oldest first.
type LeaseHistory struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Items     []RecordedChoice `json:"items"`
}

// RecordedChoice is what replay reads of one decision record.
type RecordedChoice struct {
	Time     time.Time `json:"time"`
	Seq      int64     `json:"seq"`
	Trigger  string    `json:"trigger"`
	Strategy string    `json:"strategy"`
	Module   struct {
		Name           string `json:"name"`
		Version        string `json:"version"`
		SHA256         string `json:"sha256"`
		SettingsSHA256 string `json:"settingsSha256"`
		Builtin        bool   `json:"builtin"`
	} `json:"module"`
	Fallback bool          `json:"fallback"`
	Action   string        `json:"action"`
	Chosen   string        `json:"chosen"`
	Input    *abi.Input    `json:"input"`
	Decision *abi.Decision `json:"decision"`
}

// ExitDiffers is replay's exit status when a decision differs or the
// module failed on one (1 and 2 keep their meaning: failure, usage).
const ExitDiffers = 3

// Replay verdicts.
const (
	VerdictAgree  = "agree"
	VerdictDiffer = "differ"
	// VerdictError: the replayed module failed (the server would have
	// fallen back to the built-in).
	VerdictError = "error"
)

// ReplayedDecision is one recorded decision run again through a module.
type ReplayedDecision struct {
	Lease    string        `json:"lease"`
	Seq      int64         `json:"seq"`
	Time     time.Time     `json:"time"`
	Trigger  string        `json:"trigger"`
	Verdict  string        `json:"verdict"`
	Recorded *abi.Decision `json:"recorded"`
	// RecordedBy is the module that made the recorded decision
	// ("name@version", "(fallback)" after a failure of the lease's).
	RecordedBy string        `json:"recordedBy"`
	Replayed   *abi.Decision `json:"replayed,omitempty"`
	// Leader is who each decision would make leader now (the first acked
	// candidate of a prefer ranking), "" for nobody.
	RecordedLeader string `json:"recordedLeader"`
	ReplayedLeader string `json:"replayedLeader"`
	Differences    string `json:"differences,omitempty"`
	Error          string `json:"error,omitempty"`
}

// ReplaySummary counts the verdicts.
type ReplaySummary struct {
	Module    string `json:"module"`
	SHA256    string `json:"sha256"`
	Decisions int    `json:"decisions"`
	Agree     int    `json:"agree"`
	Differ    int    `json:"differ"`
	// LeaderChanges counts differing decisions that would have made
	// another candidate leader (the rest differ in ranking, reason or
	// preempt only).
	LeaderChanges int `json:"leaderChanges"`
	Errors        int `json:"errors"`
	// Skipped counts records without an input to replay: conflicts and
	// the like, and records from servers that did not keep inputs.
	Skipped int `json:"skipped"`
}

// ReplayReport is what replay prints with -o json.
type ReplayReport struct {
	Decisions []ReplayedDecision `json:"decisions"`
	Summary   ReplaySummary      `json:"summary"`
}

// Replay runs wasm offline, in the sandbox `plugin test` uses, on the
// input of every recorded strategy decision of hist, and compares its
// answer with the one recorded. settings, if not nil, replace the
// settings each recorded input carries (to try a settings change);
// otherwise each decision sees the settings it was made with.
func Replay(ctx context.Context, wasm, settings []byte, hist History) (ReplayReport, error) {
	var rep ReplayReport
	if settings != nil {
		if err := abi.ValidateSettings(settings); err != nil {
			return rep, err
		}
	}
	logger := slog.New(slog.DiscardHandler)
	r, err := newRunner(ctx, Options{Logger: logger}.withDefaults(), offlineCache())
	if err != nil {
		return rep, err
	}
	defer r.close(ctx)
	m, err := r.loadUnchecked(ctx, wasm, settings, logger)
	if err != nil {
		return rep, err
	}
	defer m.release()
	rep.Summary.Module, rep.Summary.SHA256 = m.info.Name+"@"+m.info.Version, m.sha
	rep.Decisions = []ReplayedDecision{}
	for _, lh := range hist.Leases {
		for _, rec := range lh.Items {
			if rec.Input == nil || rec.Decision == nil {
				rep.Summary.Skipped++
				continue
			}
			rd := m.replayOne(ctx, lh.Namespace+"/"+lh.Name, rec)
			rep.Summary.Decisions++
			switch rd.Verdict {
			case VerdictAgree:
				rep.Summary.Agree++
			case VerdictDiffer:
				rep.Summary.Differ++
				if rd.RecordedLeader != rd.ReplayedLeader {
					rep.Summary.LeaderChanges++
				}
			default:
				rep.Summary.Errors++
			}
			rep.Decisions = append(rep.Decisions, rd)
		}
	}
	return rep, nil
}

// replayOne decides rec's input as the server would have asked this
// module: under the module's own strategy name, with the server's
// default deadline, the answer validated against the input.
func (m *module) replayOne(ctx context.Context, lease string, rec RecordedChoice) ReplayedDecision {
	rd := ReplayedDecision{Lease: lease, Seq: rec.Seq, Time: rec.Time, Trigger: rec.Trigger, Recorded: rec.Decision,
		RecordedBy: rec.Module.Name, RecordedLeader: leaderOf(rec.Decision, rec.Input)}
	if rec.Module.Version != "" {
		rd.RecordedBy += "@" + rec.Module.Version
	}
	if rec.Fallback {
		rd.RecordedBy += " (fallback)"
	}
	in := *rec.Input
	in.Strategy = m.info.Name
	limit := DefaultDecisionTimeout(false)
	dctx, cancel := context.WithTimeoutCause(ctx, limit,
		fmt.Errorf("no decision within %v (the server's default --plugin-timeout)", limit))
	d, _, err := m.decide(dctx, &in)
	cancel()
	if err == nil {
		err = d.Validate(&in)
	}
	if err != nil {
		rd.Verdict, rd.Error = VerdictError, err.Error()
		return rd
	}
	rd.Replayed, rd.ReplayedLeader = d, leaderOf(d, &in)
	if diff := differences(rec.Decision, d); diff != "" {
		rd.Verdict, rd.Differences = VerdictDiffer, diff
	} else {
		rd.Verdict = VerdictAgree
	}
	return rd
}

// leaderOf is the candidate d would make leader of a vacant lease: the
// first acked candidate of its ranking when it prefers, else nobody.
func leaderOf(d *abi.Decision, in *abi.Input) string {
	if d == nil || in == nil || d.Action != abi.ActionPrefer {
		return ""
	}
	for _, name := range d.Ranking {
		for _, c := range in.Candidates {
			if c.Name == name && c.Acked {
				return name
			}
		}
	}
	return ""
}

// differences names what differs between two decisions: action, ranking
// and preempt (the reason is free text and not compared).
func differences(rec, got *abi.Decision) string {
	var parts []string
	if rec.Action != got.Action {
		parts = append(parts, fmt.Sprintf("action %s -> %s", rec.Action, got.Action))
	}
	if !slices.Equal(rec.Ranking, got.Ranking) {
		parts = append(parts, fmt.Sprintf("ranking %s -> %s", rankingString(rec.Ranking), rankingString(got.Ranking)))
	}
	if rec.Preempt != got.Preempt {
		parts = append(parts, fmt.Sprintf("preempt %t -> %t", rec.Preempt, got.Preempt))
	}
	return strings.Join(parts, ", ")
}

func rankingString(r []string) string { return "[" + strings.Join(r, " ") + "]" }

// ReplayMain is the replay step of `leasehold plugin replay`, after its
// caller fetched (or read) the history: it replays the module file on it
// and prints each decision and a summary as text, or the ReplayReport as
// JSON (output "json"). It exits 0 when every decision agrees,
// ExitDiffers when any differs or fails (so that a rollout script can
// gate on it), 1 when it could not replay at all.
func ReplayMain(ctx context.Context, modulePath string, history []byte, settingsPath, output string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "leasehold plugin replay: %v\n", err)
		return cli.ExitFailure
	}
	wasm, err := readModuleFile(modulePath)
	if err != nil {
		return fail(err)
	}
	var settings []byte
	if settingsPath != "" {
		if settings, err = readLimitedBytes(settingsPath, abi.MaxSettingsBytes, true); err != nil {
			return fail(err)
		}
	}
	var hist History
	if err := json.Unmarshal(history, &hist); err != nil {
		return fail(fmt.Errorf("not a decision history (leasehold plugin replay --save writes one): %w", err))
	}
	rep, err := Replay(ctx, wasm, settings, hist)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", modulePath, err))
	}
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		writeReplay(stdout, rep)
	}
	if rep.Summary.Differ > 0 || rep.Summary.Errors > 0 {
		return ExitDiffers
	}
	if rep.Summary.Decisions == 0 {
		fmt.Fprintln(stderr, "leasehold plugin replay: no recorded decision with an input to replay")
	}
	return 0
}

// writeReplay prints one line per decision and the summary.
func writeReplay(w io.Writer, rep ReplayReport) {
	for _, d := range rep.Decisions {
		head := fmt.Sprintf("%-6s %s #%d %s %s", d.Verdict, d.Lease, d.Seq, d.Time.UTC().Format(time.RFC3339), d.Trigger)
		switch d.Verdict {
		case VerdictAgree:
			fmt.Fprintf(w, "%s: %s %s, leader %s\n", head, d.Replayed.Action, rankingString(d.Replayed.Ranking), dash(d.ReplayedLeader))
		case VerdictDiffer:
			fmt.Fprintf(w, "%s: %s (recorded by %s); leader %s -> %s\n", head, d.Differences, d.RecordedBy,
				dash(d.RecordedLeader), dash(d.ReplayedLeader))
		default:
			fmt.Fprintf(w, "%s: module failed (the server would fall back): %s\n", head, d.Error)
		}
	}
	s := rep.Summary
	fmt.Fprintf(w, "summary: %s (sha256 %.12s): %d decisions replayed, %d agree, %d differ (%d with another leader), %d errors, %d records skipped (no input)\n",
		s.Module, s.SHA256, s.Decisions, s.Agree, s.Differ, s.LeaderChanges, s.Errors, s.Skipped)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
