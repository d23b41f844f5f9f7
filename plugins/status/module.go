package status

import "time"

// Module describes one loaded (or refused) strategy module with its call
// statistics: plugins/host reports it, the web UI and /metrics show it.
// Its JSON is the modules list of the UI's system endpoint (which
// `leasehold plugin list` reads), so field names do not change.
type Module struct {
	Name        string `json:"name"`
	File        string `json:"file"`
	SHA256      string `json:"sha256"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Builtin     bool   `json:"builtin"`
	// Active is true when Lookup(Name) returns this module (false for a
	// built-in overridden by a file, or a file that never loaded).
	Active      bool          `json:"active"`
	LoadedAt    time.Time     `json:"loadedAt"`
	Calls       uint64        `json:"calls"`
	Errors      uint64        `json:"errors"`
	LastError   string        `json:"lastError,omitempty"`
	LastErrorAt time.Time     `json:"lastErrorAt,omitzero"`
	LatencyP50  time.Duration `json:"latencyP50"`
	LatencyP99  time.Duration `json:"latencyP99"`
	LatencySum  time.Duration `json:"latencySum"`
	// LoadError is why the file's current content is not serving (the
	// previous good version, if any, still is).
	LoadError string `json:"loadError,omitempty"`
	// ABIVersion is what the module's lease_strategy_abi_version answered
	// ("" for a file that was never loaded: a refused module is never run,
	// so it has not said).
	ABIVersion string `json:"abiVersion,omitempty"`
	// SignerKeyID is the key id whose signature the host verified before
	// loading the module (server run with trust keys). For a refused file
	// it is the key id its signature file claims, if readable. Empty for
	// built-ins and when the server verifies no signatures.
	SignerKeyID string `json:"signerKeyId,omitempty"`
	// State is StateLoaded for a module that serves (or a built-in a file
	// overrides), or StateRefusedPrefix+REASON for a file that never
	// loaded: missing signature, bad signature, untrusted key id, digest
	// mismatch, or the check or self-test error.
	State string `json:"state,omitempty"`
	// RefusedSHA256 is set when a loaded file's current content was
	// refused (LoadError says why): the sha256 of that content, while
	// SHA256 is the previous good version that keeps serving.
	RefusedSHA256 string `json:"refusedSha256,omitempty"`
	// SettingsFile and SettingsSHA256 name the settings document the
	// module serves with (NAME.json beside NAME.wasm), if any.
	SettingsFile   string `json:"settingsFile,omitempty"`
	SettingsSHA256 string `json:"settingsSha256,omitempty"`
	// ABIMinor is the ABI revision the module declared it needs.
	ABIMinor int `json:"abiMinor,omitempty"`
	// SignedSequence is the sequence of the signed statement the serving
	// module was accepted with (server run with trust keys).
	SignedSequence uint64 `json:"signedSequence,omitempty"`
}

// Module states (Module.State).
const (
	StateLoaded        = "loaded"
	StateRefusedPrefix = "refused: "
)
