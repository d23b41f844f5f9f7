package election

import "time"

// Clock is where the controller reads the time. It keeps the two clocks a
// device has apart, because they disagree on edge devices: one without a
// battery boots in 1970 (or at its last saved time) and NTP steps its wall
// clock by years or minutes once it answers, while the monotonic clock
// only ever moves forward at the rate time passes.
//
//   - Now reads the wall clock. It is used only for what the controller
//     writes or shows: a grant's renewTime and acquireTime, pingTime, the
//     time of a decision record, the times a strategy sees.
//   - Monotonic reads the monotonic clock, as an instant that is compared
//     only with other instants Monotonic returned. Every judgement and
//     every wait is measured on it: a lease's expiry (when the controller
//     saw the holder renew, plus leaseDurationSeconds, never the holder's
//     renewTime against our wall clock: kube-apiserver's leases carry the
//     holder's wall time), a candidate's liveness and validity, ping
//     windows, grant waits, strategy backoff, decision reuse.
//
// A step of the wall clock therefore moves no deadline: a holder renewing
// on time keeps its lease, and an expired one is replaced when its
// duration has passed, whatever the wall clock did meanwhile. The timers
// the controller arms run for durations measured between two Monotonic
// readings.
type Clock interface {
	Now() time.Time
	Monotonic() time.Time
}

// SystemClock is the machine's clock: time.Now for both, since Go's
// time.Now carries a monotonic reading that Sub, Before and After use
// whenever both operands have one (package time, "Monotonic Clocks").
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Monotonic returns time.Now(), whose monotonic reading is what the
// controller's comparisons use.
func (SystemClock) Monotonic() time.Time { return time.Now() }

// funcClock adapts Options.Now (one function for both clocks, the form
// before Clock existed): a jump of it moves the monotonic clock too, which
// is what a test simulating time passing wants.
type funcClock func() time.Time

func (f funcClock) Now() time.Time       { return f() }
func (f funcClock) Monotonic() time.Time { return f() }

// wallAt maps instant, a Monotonic reading, to the wall clock as it reads
// now: wall - (mono - instant). Times shown to a strategy are all mapped
// through one (wall, mono) pair, so they stay consistent with each other
// and with the input's NowUs across a step of the wall clock.
func wallAt(instant, wall, mono time.Time) time.Time {
	if instant.IsZero() {
		return time.Time{}
	}
	return wall.Add(instant.Sub(mono))
}
