package sdk

import (
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

// Registered returns the registered Info.
func Registered() abi.Info { return info }
