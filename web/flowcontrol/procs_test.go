package flowcontrol

import (
	"flag"
	"runtime"
	"testing"
)

// TestReserveProcs: the server runs DefaultSpareProcs Go processors
// beyond the runtime's default, counted from the default each time (not
// from the previous call), and leaves a GOMAXPROCS from the environment
// or a spare of 0 alone.
func TestReserveProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "") // an empty variable is no setting
	runtime.SetDefaultGOMAXPROCS()
	base := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.SetDefaultGOMAXPROCS() })

	for i := range 2 {
		if got := ReserveProcs(DefaultSpareProcs); got != base+DefaultSpareProcs {
			t.Fatalf("call %d: ReserveProcs(%d) = %d, want the default %d plus %d", i+1, DefaultSpareProcs, got, base, DefaultSpareProcs)
		}
		if got := runtime.GOMAXPROCS(0); got != base+DefaultSpareProcs {
			t.Fatalf("call %d: GOMAXPROCS is %d after ReserveProcs, want %d", i+1, got, base+DefaultSpareProcs)
		}
	}

	runtime.SetDefaultGOMAXPROCS()
	if got := ReserveProcs(0); got != base || runtime.GOMAXPROCS(0) != base {
		t.Fatalf("ReserveProcs(0) = %d (GOMAXPROCS %d), want the default %d untouched", got, runtime.GOMAXPROCS(0), base)
	}

	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1) // as the runtime sets it from the variable at start
	if got := ReserveProcs(DefaultSpareProcs); got != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("with GOMAXPROCS=1 in the environment ReserveProcs = %d (GOMAXPROCS %d), want the operator's 1", got, runtime.GOMAXPROCS(0))
	}
}

func TestSpareProcsFlag(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if c.SpareProcs != DefaultSpareProcs {
		t.Fatalf("default --flowcontrol-spare-procs = %d, want %d", c.SpareProcs, DefaultSpareProcs)
	}
	if err := fs.Parse([]string{"--flowcontrol-spare-procs=0"}); err != nil || c.SpareProcs != 0 || c.Validate() != nil {
		t.Fatalf("--flowcontrol-spare-procs=0: parse %v, value %d, validate %v; want 0 accepted (the runtime's default)", err, c.SpareProcs, c.Validate())
	}
	for _, bad := range []int{-1, maxSpareProcs + 1} {
		c.SpareProcs = bad
		if c.Validate() == nil {
			t.Errorf("--flowcontrol-spare-procs=%d was accepted, want an error", bad)
		}
	}
}
