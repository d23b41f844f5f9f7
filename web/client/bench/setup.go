package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// setup creates the leases that do not exist yet, the way client-go's
// LeaseLock.Create does, with the same User-Agent (so the renewals come
// from the field manager that created them).
func setup(ctx context.Context, cfg *Config, hc *fasthttp.HostClient) (created int, err error) {
	const workers = 32
	next := make(chan int)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	now := time.Now().UTC().Format(microLayout)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for i := range next {
				body := fmt.Appendf(nil, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q,"namespace":%q},`+
					`"spec":{"holderIdentity":"loadgen-%d","leaseDurationSeconds":15,"acquireTime":%q,"renewTime":%q,"leaseTransitions":0}}`,
					cfg.leaseName(i), cfg.Namespace, i%cfg.Clients, now, now)
				code, err := createRetrying(ctx, hc, cfg, body, req, resp)
				if err == nil && code != fasthttp.StatusCreated && code != fasthttp.StatusConflict {
					err = statusError("POST", cfg.leasesPath(), code, resp.Body())
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if code == fasthttp.StatusCreated {
					created++
				}
				mu.Unlock()
			}
		})
	}
	for i := 0; i < cfg.Leases; i++ {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return created, fmt.Errorf("create leases: %w", firstErr)
	}
	return created, nil
}

// setupAttempts is how often setup tries one create that is answered
// 429 or 5xx: a cluster drops raft proposals while its leadership moves
// (as it does off the controller's member after the start), which a
// setup of 10,000 leases for --noise meets.
const setupAttempts = 6

// createRetrying posts body, again after a 429 or 5xx answer with a
// growing pause (0.1 s doubling), as client-go's elector would try again.
// A retried create that had been stored is answered 409, which setup
// accepts.
func createRetrying(ctx context.Context, hc *fasthttp.HostClient, cfg *Config, body []byte, req *fasthttp.Request, resp *fasthttp.Response) (int, error) {
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		code, err := do(hc, cfg, fasthttp.MethodPost, cfg.leasesPath(), body, req, resp)
		transient := err == nil && (code == fasthttp.StatusTooManyRequests || code >= 500)
		if !transient || attempt == setupAttempts {
			return code, err
		}
		select {
		case <-ctx.Done():
			return code, err
		case <-time.After(pause):
		}
		pause *= 2
	}
}
