package etcd

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPacer: the burst passes at once; a write whose turn would come
// after its context's deadline fails at once and takes nothing, so the
// next write is not delayed by it; one without a deadline waits its turn.
func TestPacer(t *testing.T) {
	p := newPacer(100<<10, 100<<10) // 100 KiB/s, 100 KiB burst
	ctx := context.Background()
	if err := p.wait(ctx, 100<<10); err != nil {
		t.Fatalf("the burst: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.wait(short, 100<<10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write due in about a second under a 50 ms deadline = %v, want DeadlineExceeded at once", err)
	}
	p.mu.Lock()
	tokens := p.tokens
	p.mu.Unlock()
	if tokens < 0 {
		t.Errorf("the refused write took %f bytes from the bucket", -tokens)
	}
	if err := p.wait(ctx, 10<<10); err != nil {
		t.Fatalf("a write without a deadline: %v", err)
	}
}
