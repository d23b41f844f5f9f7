package e2e

import (
	"fmt"
	"os"
	"testing"
)

// timingTarget checks a timing target of the cluster (a pause while a
// member is cut off, a request's bound on a replica, a stop's seconds).
// Under make fault-suite (LEASEHOLD_FAULT_DURATION set), on a machine given
// to it, a missed target fails the test; in make test, which runs beside
// every other test on a busy 2-core CI machine, the miss is logged with
// the figure (MISSED TARGET) and the test goes on: there the machine's
// scheduling decides such seconds, not the property the test checks.
// Correctness (a lost write, two holders, a failed request) fails in both.
func timingTarget(t *testing.T, met bool, format string, args ...any) {
	t.Helper()
	if met {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(faultDurationEnv) != "" {
		t.Errorf("%s", msg)
		return
	}
	t.Logf("MISSED TARGET (enforced by make fault-suite): %s", msg)
}
