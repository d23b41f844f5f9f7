package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// pacer spaces the writes of large values to a byte rate
// (Options.LargeWriteBytesPerSec): a token bucket holding up to burst
// bytes, refilled at rate bytes per second. Writers take their bytes in
// the order they come; one that has to wait waits behind those before it.
type pacer struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	burst  float64
	tokens float64 // may be negative: bytes promised to waiting writers
	last   time.Time
}

func newPacer(rate int64, burst int) *pacer {
	return &pacer{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// wait takes n bytes, waiting until the bucket holds them. When ctx would
// end first it fails at once and takes nothing; when ctx ends while it
// waits, it gives them back.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	now := time.Now()
	p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	p.last = now
	var delay time.Duration
	if need := float64(n) - p.tokens; need > 0 {
		delay = time.Duration(need / p.rate * float64(time.Second))
	}
	if deadline, ok := ctx.Deadline(); ok && now.Add(delay).After(deadline) {
		p.mu.Unlock()
		return fmt.Errorf("its turn comes in %s: %w", delay.Round(time.Millisecond), context.DeadlineExceeded)
	}
	p.tokens -= float64(n)
	p.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.tokens += float64(n)
		p.mu.Unlock()
		return ctx.Err()
	}
}
