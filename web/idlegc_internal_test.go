package web

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads GOGC (debug.SetGCPercent only reads by setting).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestIdleGCLowersGOGCWhileQuietAndRestoresIt(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name              string
		start, whileQuiet int
	}{
		{"default", 100, quietGCPercent},
		{"set higher", 400, quietGCPercent},
		{"already lower", 10, 10},
		{"off", -1, -1},
	} {
		debug.SetGCPercent(tc.start)
		var g idleGC
		g.quiet()
		if got := gcPercent(); got != tc.whileQuiet {
			t.Errorf("%s: GOGC %d while quiet, want %d", tc.name, got, tc.whileQuiet)
		}
		g.quiet() // a second quiet interval keeps what the first saved
		g.busy()
		if got := gcPercent(); got != tc.start {
			t.Errorf("%s: GOGC %d once busy again, want the starting %d", tc.name, got, tc.start)
		}
		g.busy() // busy twice changes nothing
		if got := gcPercent(); got != tc.start {
			t.Errorf("%s: GOGC %d after a second busy, want %d", tc.name, got, tc.start)
		}
	}
}
