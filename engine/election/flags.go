package election

import (
	"flag"
	"fmt"
	"time"
)

// Flags are serve's flags for the election controller.
type Flags struct {
	// FirstGrantWait is Options.FirstGrantWait once Validate ran
	// (negative: none).
	FirstGrantWait time.Duration
}

// RegisterFlags adds the election controller's flags to fs.
func (f *Flags) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&f.FirstGrantWait, "election-first-grant-wait", DefaultFirstGrantWait, "how long the election controller waits, once the first candidate of a missing or vacant coordinated lease appears, for the others to register or answer a ping before it grants the lease, so that the best of candidates starting together gets it; also the most it waits for the ack of a holder whose lease expired (0: no wait)")
}

// Validate checks the parsed flags and turns them into Options' terms.
func (f *Flags) Validate() error {
	if f.FirstGrantWait < 0 {
		return fmt.Errorf("invalid --election-first-grant-wait %s: must not be negative", f.FirstGrantWait)
	}
	if f.FirstGrantWait == 0 {
		f.FirstGrantWait = -1 // the flag's "no wait" is Options' negative; its zero is the default
	}
	return nil
}
