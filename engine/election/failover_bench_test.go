package election

import (
	"testing"
	"time"
)

// BenchmarkFailover kills the holder of a lease renewed with 4 s leases,
// with the default timings (the kube-apiserver measurement: ~9.5 s), and
// reports the time from the kill to the new leader's first renewal
// (failover-s). Each op is one election of three candidates and one
// failover, about 7 s: run it with -benchtime=1x or 3x.
func BenchmarkFailover(b *testing.B) {
	var total time.Duration
	for range b.N {
		total += failoverOnce(b)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "failover-s")
}

func failoverOnce(b *testing.B) time.Duration {
	env := newEnv(b, Options{})
	var ms []*member
	for _, v := range []struct{ name, emu string }{{"a", "1.30.0"}, {"b", "1.31.0"}, {"c", "1.32.0"}} {
		m := env.join(v.name, "kcm", v.emu, "1.32.0")
		m.leaseDur.Store(4)
		m.elect.Store(true)
		ms = append(ms, m)
	}
	env.run()
	env.eventually(8*time.Second, "a leads", ms[0].leading.Load)
	renewed := ms[0].renewedOnce.Load()
	env.eventually(time.Second, "a renews", func() bool { return ms[0].renewedOnce.Load() > renewed })
	ms[0].stop()
	killed := time.Now()
	env.eventually(10*time.Second, "b leads", ms[1].leading.Load)
	return time.Since(killed)
}
