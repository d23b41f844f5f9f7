package abi

import "encoding/json"

// ABIVersion is the version of the strategy contract (Input/Decision) that
// this package defines. WASM modules report theirs from the
// lease_strategy_abi_version export; the host rejects any other value.
// Additive changes (new optional Input fields, new optional exports) keep
// the number; anything a v1 module could misread bumps it.
const ABIVersion = 1

// ABIMinor is the additive revision of ABIVersion this package defines.
// A host puts it in Input.ABIMinor, so that a guest can tell whether a
// field it relies on is filled; a guest declares the revision it needs in
// Info.ABIMinor, and a host refuses a module that needs a newer one than
// its own, with a reason that names both.
//
//   - 0: the original contract.
//   - 1: per-strategy settings (Input.Settings), Input.ABIMinor and
//     Info.ABIMinor. ModuleStatus (and its StateLoaded,
//     StateRefusedPrefix) is deprecated within 1.1: it is the host's
//     report, now plugins/status.Module, and is removed in the next
//     minor revision, together with that revision's additions.
//   - 2: Candidate.Drained (an operator took the candidate's identity out
//     of service: the host never grants it a lease, whatever the ranking).
//     ModuleStatus, StateLoaded and StateRefusedPrefix are removed (use
//     plugins/status.Module); signature files become signed statements
//     (host side only: modules are unchanged).
const ABIMinor = 2

// MaxSettingsBytes bounds a strategy's settings document (NAME.json beside
// NAME.wasm): it is copied into every decision's input and recorded with
// it, so it is meant for a few parameters, not data.
const MaxSettingsBytes = 16 << 10

// Reason says why a decision is being made.
type Reason string

// Decision reasons.
const (
	ReasonLeaseMissing     Reason = "lease_missing"
	ReasonLeaseExpired     Reason = "lease_expired"
	ReasonNoHolder         Reason = "no_holder"
	ReasonCandidateChanged Reason = "candidate_changed"
	ReasonPeriodic         Reason = "periodic"
	ReasonHolderReleased   Reason = "holder_released"
	ReasonSelfTest         Reason = "self_test"
)

// Version is a semantic version parsed by the host, so that every strategy
// compares versions the same way and modules need no semver parser.
type Version struct {
	Raw        string   `json:"raw"`
	Valid      bool     `json:"valid"`
	Major      uint64   `json:"major"`
	Minor      uint64   `json:"minor"`
	Patch      uint64   `json:"patch"`
	Prerelease []string `json:"prerelease,omitempty"`
}

// LeaseState is the lease under decision. Times are Unix microseconds
// (0 = unset) taken from the server's view.
type LeaseState struct {
	Namespace         string `json:"namespace"`
	Name              string `json:"name"`
	Exists            bool   `json:"exists"`
	Holder            string `json:"holder"`
	PreferredHolder   string `json:"preferredHolder"`
	Strategy          string `json:"strategy"`
	AcquireTimeUs     int64  `json:"acquireTimeUs"`
	RenewTimeUs       int64  `json:"renewTimeUs"`
	LeaseDurationS    int32  `json:"leaseDurationSeconds"`
	Transitions       int32  `json:"transitions"`
	Expired           bool   `json:"expired"`
	HolderIsCandidate bool   `json:"holderIsCandidate"`
	HolderSinceUs     int64  `json:"holderSinceUs"`
}

// Candidate is one LeaseCandidate for the lease, as the host sees it.
type Candidate struct {
	Name             string  `json:"name"`
	UID              string  `json:"uid,omitempty"`
	CreationTimeUs   int64   `json:"creationTimeUs"`
	BinaryVersion    Version `json:"binaryVersion"`
	EmulationVersion Version `json:"emulationVersion"`
	Strategy         string  `json:"strategy"`
	RenewTimeUs      int64   `json:"renewTimeUs,omitempty"`
	PingTimeUs       int64   `json:"pingTimeUs,omitempty"`
	// Acked reports that the candidate answered this round's ping; only
	// acked candidates can be granted a lease.
	Acked  bool              `json:"acked"`
	Labels map[string]string `json:"labels,omitempty"`
	// Drained reports that an operator drained the candidate's identity
	// (maintenance mode): the host never grants it a lease and hands a
	// lease it holds over to the best other ranked candidate, whatever
	// the decision says; a strategy may rank around it. Since ABIMinor 2;
	// omitted when false.
	Drained bool `json:"drained,omitempty"`
}

// HistoryEntry is one earlier decision on the same lease.
type HistoryEntry struct {
	Seq    int64  `json:"seq"`
	TimeUs int64  `json:"timeUs"`
	Chosen string `json:"chosen"`
	Holder string `json:"holder"`
	Reason string `json:"reason"`
}

// Input is the deterministic snapshot a strategy decides on. Candidates are
// sorted by name; everything a module may depend on is in here (no clocks,
// no randomness beyond Seed).
type Input struct {
	ABIVersion int `json:"abiVersion"`
	// ABIMinor is the host's ABIMinor (absent, so 0, from hosts before
	// revision 1).
	ABIMinor    int            `json:"abiMinor,omitempty"`
	Strategy    string         `json:"strategy"`
	NowUs       int64          `json:"nowUs"`
	DecisionSeq int64          `json:"decisionSeq"`
	Seed        uint64         `json:"seed"`
	Reason      Reason         `json:"reason"`
	Lease       LeaseState     `json:"lease"`
	Candidates  []Candidate    `json:"candidates"`
	History     []HistoryEntry `json:"history,omitempty"`
	// Settings is the strategy's settings document (the JSON of NAME.json
	// beside NAME.wasm, at most MaxSettingsBytes), absent when the module
	// has none. Since ABIMinor 1; older guests ignore it.
	Settings json.RawMessage `json:"settings,omitempty"`
}

// Action is what a strategy asks the host to do.
type Action string

// Actions.
const (
	// ActionKeep leaves the lease as it is.
	ActionKeep Action = "keep"
	// ActionPrefer grants a free or expired lease to the first eligible
	// ranked candidate, or asks a live holder to step down for it when
	// Preempt is set.
	ActionPrefer Action = "prefer"
	// ActionAbstain leaves the lease to someone else.
	ActionAbstain Action = "abstain"
)

// Decision is a strategy's answer.
type Decision struct {
	// Ranking orders candidate names best first; names not listed are
	// ineligible. Every name must be a candidate of the Input and appear
	// once: the host rejects the whole Decision otherwise (a module that
	// invents names is broken, and guessing what it meant is unsafe).
	Ranking []string `json:"ranking"`
	Action  Action   `json:"action"`
	// Preempt allows asking a live holder to step down (preferredHolder).
	Preempt bool `json:"preempt"`
	// Reason is a short human explanation, recorded with the decision.
	Reason string `json:"reason"`
}

// WebAssembly names of the ABI (version 1).
const (
	// ExportABIVersion is the guest export `() -> i32` returning ABIVersion.
	ExportABIVersion = "lease_strategy_abi_version"
	// ExportDecide is the guest export `() -> i32`: 0 when a Decision was
	// written with write_output, non-zero for a strategy error.
	ExportDecide = "lease_strategy_decide"
	// ExportInfo is the guest export `() -> i32`: writes an Info document
	// with write_output and returns 0. It runs once per load, so a module
	// names itself instead of the host trusting its file name.
	ExportInfo = "lease_strategy_info"
	// ExportMemory is the guest's linear memory, which the host reads and
	// writes for the calls below.
	ExportMemory = "memory"
	// ExportInitialize is the optional reactor initializer (Go c-shared,
	// wasi-libc -mexec-model=reactor); the host runs it once per instance.
	ExportInitialize = "_initialize"
	// ImportModule is the module name of the host functions below.
	ImportModule = "lease_strategy"
	// ImportReadInput is `(buf i32, limit i32) -> i32`: copies the Input JSON
	// into guest memory if it fits within limit; always returns its length.
	ImportReadInput = "read_input"
	// ImportWriteOutput is `(buf i32, len i32)`: hands the Decision JSON to
	// the host (the last call wins).
	ImportWriteOutput = "write_output"
	// ImportLog is `(level i32, buf i32, len i32)`: a log line for the
	// server's log; level is a log/slog level (LogDebug..LogError).
	ImportLog = "log"
	// ImportLogEnabled is `(level i32) -> i32`: whether a level is logged.
	ImportLogEnabled = "log_enabled"
)

// Log levels for the log and log_enabled imports: the numeric values of
// log/slog levels, so that the host passes them through unchanged.
const (
	LogDebug int32 = -4
	LogInfo  int32 = 0
	LogWarn  int32 = 4
	LogError int32 = 8
)

// Info is what a module says about itself (lease_strategy_info).
type Info struct {
	// Name is the strategy name candidates declare: the built-in
	// "OldestEmulationVersion" or a qualified name ("example.com/name").
	Name string `json:"name"`
	// Version is the module's own version, free-form (e.g. "1.2.0").
	Version string `json:"version"`
	// Description is one human sentence for UIs and `plugin vet`.
	Description string `json:"description,omitempty"`
	// ABIMinor is the ABIMinor the module needs (0: any host of its
	// ABIVersion). A host with an older ABIMinor refuses to load it.
	ABIMinor int `json:"abiMinor,omitempty"`
}
