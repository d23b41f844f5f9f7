package run

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRenewTimeAfterPing: an ack is written after the ping it answers,
// even when our wall clock reads minutes before the ping (stepped back by
// NTP, or behind the coordinator's): else our own watch would see the
// ping pending in our ack's echo and ack again and again.
func TestRenewTimeAfterPing(t *testing.T) {
	now := time.Date(2027, 5, 1, 12, 0, 0, 123456789, time.UTC)
	if got := renewTimeFor(now, nil); !got.Time.Equal(now.Truncate(time.Microsecond)) {
		t.Errorf("no ping: %v, want now", got.Time)
	}
	earlier := metav1.NewMicroTime(now.Add(-time.Second))
	if got := renewTimeFor(now, &earlier); !got.Time.Equal(now.Truncate(time.Microsecond)) {
		t.Errorf("ping before now: %v, want now", got.Time)
	}
	ahead := metav1.NewMicroTime(now.Add(7 * time.Minute).Truncate(time.Microsecond))
	got := renewTimeFor(now, &ahead)
	if !got.After(ahead.Time) || got.Sub(ahead.Time) != time.Microsecond {
		t.Errorf("ping 7 min ahead of our clock: renewTime %v, want 1µs after the ping %v", got.Time, ahead.Time)
	}
	same := metav1.NewMicroTime(now.Truncate(time.Microsecond))
	if got := renewTimeFor(now, &same); !got.After(same.Time) {
		t.Errorf("ping at now: renewTime %v not after it", got.Time)
	}
}
