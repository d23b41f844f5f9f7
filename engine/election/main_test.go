package election

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to 8 tests at once unless -parallel says otherwise:
// the controller's tests mostly wait on its real timers (grant-ack
// waits, lease expiries), so on a 2-core machine the default of
// GOMAXPROCS parallel tests leaves the CPU idle and the package takes
// four times as long.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", "8"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
