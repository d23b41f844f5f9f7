package sdk

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/plugins/abi"
)

// TestDecideNative: natively, Register records the strategy and Decide
// runs it with the host's validation, so authors can unit-test without
// building a module.
func TestDecideNative(t *testing.T) {
	// Register is once per process; start from none, so the test can
	// run again in the same process (go test -count=N).
	registered, info = nil, abi.Info{}
	t.Cleanup(func() { registered, info = nil, abi.Info{} })
	in := abi.SampleInput("example.com/test")
	if _, err := Decide(in); err == nil {
		t.Fatal("Decide without Register succeeded")
	}
	var answer *abi.Decision
	var fail error
	Register(abi.Info{Name: "example.com/test", Version: "1"}, func(*abi.Input) (*abi.Decision, error) { return answer, fail })
	if Registered().Name != "example.com/test" {
		t.Fatalf("Registered() = %+v", Registered())
	}
	answer = &abi.Decision{Ranking: []string{"kcm-c"}, Action: abi.ActionPrefer}
	if d, err := Decide(in); err != nil || d.Ranking[0] != "kcm-c" {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	answer = &abi.Decision{Action: abi.ActionKeep}
	if d, err := Decide(in); err != nil || d.Ranking == nil {
		t.Fatalf("nil ranking not normalised: %+v, %v", d, err)
	}
	answer = &abi.Decision{Ranking: []string{"stranger"}, Action: abi.ActionPrefer}
	if _, err := Decide(in); !errors.Is(err, abi.ErrInvalidDecision) {
		t.Fatalf("invalid decision: err = %v", err)
	}
	answer, fail = nil, errors.New("boom")
	if _, err := Decide(in); err == nil || err.Error() != "boom" {
		t.Fatalf("strategy error: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("second Register did not panic")
		}
	}()
	Register(abi.Info{}, nil)
}
