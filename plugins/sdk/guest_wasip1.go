//go:build wasip1

package sdk

import (
	"encoding/json"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/leasehold/leasehold/plugins/abi"
)

//go:wasmimport lease_strategy read_input
func readInput(buf unsafe.Pointer, limit uint32) uint32

//go:wasmimport lease_strategy write_output
func writeOutput(buf unsafe.Pointer, n uint32)

//go:wasmimport lease_strategy log
func hostLog(level int32, buf unsafe.Pointer, n uint32)

//go:wasmimport lease_strategy log_enabled
func hostLogEnabled(level int32) int32

//go:wasmexport lease_strategy_abi_version
func abiVersion() int32 { return abi.ABIVersion }

//go:wasmexport lease_strategy_info
func exportInfo() int32 {
	b, err := json.Marshal(info)
	if err != nil {
		return fail(err)
	}
	output(b)
	return 0
}

//go:wasmexport lease_strategy_decide
func exportDecide() int32 {
	// Leave the scheduler a chance to run the GC's background work before
	// returning to the host: a c-shared Go guest only runs its goroutines
	// while an export is executing. Harmless otherwise.
	defer runtime.Gosched()
	if registered == nil {
		return fail(fmt.Errorf("sdk: no strategy registered (call sdk.Register from init)"))
	}
	n := readInput(nil, 0)
	buf := make([]byte, n)
	if n > 0 && readInput(unsafe.Pointer(&buf[0]), n) != n {
		return fail(fmt.Errorf("sdk: input changed size"))
	}
	var in abi.Input
	if err := json.Unmarshal(buf, &in); err != nil {
		return fail(fmt.Errorf("sdk: decode input: %w", err))
	}
	if err := checkHost(&in); err != nil {
		return fail(err)
	}
	d, err := Decide(&in)
	if err != nil {
		return fail(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return fail(err)
	}
	output(b)
	return 0
}

func output(b []byte) {
	if len(b) == 0 {
		writeOutput(nil, 0)
		return
	}
	writeOutput(unsafe.Pointer(&b[0]), uint32(len(b)))
}

// fail reports err as the strategy's error message and returns the
// non-zero code that tells the host the decision failed.
func fail(err error) int32 {
	output([]byte(err.Error()))
	return 1
}

// Log sends a line to the server's log at an abi.Log* level, if the host
// logs that level (the check avoids formatting lines nobody reads).
func Log(level int32, format string, args ...any) {
	if hostLogEnabled(level) == 0 {
		return
	}
	b := []byte(fmt.Sprintf(format, args...))
	if len(b) == 0 {
		return
	}
	hostLog(level, unsafe.Pointer(&b[0]), uint32(len(b)))
}
