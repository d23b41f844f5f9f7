package sdk

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/plugins/abi"
)

// DecideFunc ranks the candidates of in. Returning an error makes the
// host fall back to the built-in strategy for this decision.
type DecideFunc func(in *abi.Input) (*abi.Decision, error)

var (
	registered DecideFunc
	info       abi.Info
)

// Register installs the strategy; call it once, from init.
func Register(i abi.Info, fn DecideFunc) {
	if registered != nil {
		panic("sdk: Register called twice")
	}
	info, registered = i, fn
}

// Decide runs the registered strategy on in, as the host would, and
// checks the answer with abi's rules; for native unit tests.
func Decide(in *abi.Input) (*abi.Decision, error) {
	if registered == nil {
		return nil, errors.New("sdk: no strategy registered")
	}
	d, err := registered(in)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("sdk: strategy returned no decision")
	}
	if d.Ranking == nil {
		d.Ranking = []string{}
	}
	if err := d.Validate(in); err != nil {
		return nil, fmt.Errorf("sdk: %w", err)
	}
	return d, nil
}

// Settings decodes the strategy's settings document (NAME.json beside
// NAME.wasm in the server's plugins directory, abi.Input.Settings) into v
// and reports whether there was one. A strategy that needs settings
// declares abi.Info{ABIMinor: 1} when it registers, so that hosts from
// before settings refuse to load it instead of running it without them.
func Settings(in *abi.Input, v any) (bool, error) {
	if len(in.Settings) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(in.Settings, v); err != nil {
		return true, fmt.Errorf("sdk: decode settings: %w", err)
	}
	return true, nil
}

// checkHost reports why this host cannot serve the registered strategy:
// it gives an older ABI revision than the strategy declared it needs.
func checkHost(in *abi.Input) error {
	if info.ABIMinor > in.ABIMinor {
		return fmt.Errorf("sdk: strategy needs lease-strategy ABI %d.%d, the host gives %d.%d",
			abi.ABIVersion, info.ABIMinor, in.ABIVersion, in.ABIMinor)
	}
	return nil
}

// Registered returns the registered Info.
func Registered() abi.Info { return info }
