package bench

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// renewTimeKey precedes spec.renewTime's value in a Lease's JSON; the
// managedFields key is "f:renewTime", so it never matches there.
var renewTimeKey = []byte(`"renewTime":"`)

// microLayout is metav1.MicroTime's JSON form (always UTC, 27 bytes).
const microLayout = "2006-01-02T15:04:05.000000Z07:00"

// counters are one client's results.
type counters struct {
	renewals, conflicts, errors uint64
	firstErr                    string
	pair, get, put              hist
}

// window says when results count: renewals that start inside it.
type window struct{ start, end time.Time }

func (w window) in(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// renewer is one client: it renews its leases round-robin.
type renewer struct {
	cfg    *Config
	hc     *fasthttp.HostClient
	names  []string
	paths  []string
	req    *fasthttp.Request
	resp   *fasthttp.Response
	body   []byte
	stamp  []byte
	c      counters
	puts   *atomic.Uint64 // successful PUTs since the load began (watch check)
	pace   time.Duration  // 0: closed loop
	offset time.Duration
}

func newRenewer(cfg *Config, hc *fasthttp.HostClient, idx int, puts *atomic.Uint64) *renewer {
	r := &renewer{cfg: cfg, hc: hc, req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse(), puts: puts}
	for i := idx; i < cfg.Leases; i += cfg.Clients {
		name := cfg.leaseName(i)
		r.names = append(r.names, name)
		r.paths = append(r.paths, cfg.leasesPath()+"/"+name)
	}
	if cfg.Rate > 0 {
		r.pace = time.Duration(float64(cfg.Clients) / cfg.Rate * float64(time.Second))
		r.offset = r.pace * time.Duration(idx) / time.Duration(cfg.Clients)
	}
	return r
}

func (r *renewer) fail(err error) {
	r.c.errors++
	if r.c.firstErr == "" {
		r.c.firstErr = err.Error()
	}
}

// run renews until stop, counting only renewals that start inside w.
func (r *renewer) run(stop <-chan struct{}, w window, wg *sync.WaitGroup) {
	defer wg.Done()
	defer fasthttp.ReleaseRequest(r.req)
	defer fasthttp.ReleaseResponse(r.resp)
	begin := time.Now()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		if r.pace > 0 {
			next := begin.Add(r.offset + time.Duration(n)*r.pace)
			if d := time.Until(next); d > 0 {
				select {
				case <-stop:
					return
				case <-time.After(d):
				}
			}
		}
		i := n % len(r.paths)
		t0 := time.Now()
		count := w.in(t0)
		ok, conflict, getD, putD, err := r.renew(i)
		switch {
		case !count:
		case err != nil:
			r.fail(err)
		case conflict:
			r.c.conflicts++
		case ok:
			r.c.renewals++
			r.c.pair.record(getD + putD)
			r.c.get.record(getD)
			r.c.put.record(putD)
		}
	}
}

// renew is one client-go LeaseLock renewal: GET, then PUT of the object
// read with spec.renewTime set to now.
func (r *renewer) renew(i int) (ok, conflict bool, getD, putD time.Duration, err error) {
	t0 := time.Now()
	code, err := do(r.hc, r.cfg, fasthttp.MethodGet, r.paths[i], nil, r.req, r.resp)
	if err != nil {
		return false, false, 0, 0, err
	}
	if code != fasthttp.StatusOK {
		return false, false, 0, 0, statusError("GET", r.paths[i], code, r.resp.Body())
	}
	r.body = append(r.body[:0], r.resp.Body()...)
	t1 := time.Now()
	getD = t1.Sub(t0)
	at := bytes.Index(r.body, renewTimeKey)
	if at < 0 {
		return false, false, getD, 0, fmt.Errorf("GET %s: the lease has no spec.renewTime", r.paths[i])
	}
	at += len(renewTimeKey)
	end := bytes.IndexByte(r.body[at:], '"')
	if end < 0 {
		return false, false, getD, 0, errors.New("malformed renewTime")
	}
	r.stamp = t1.UTC().AppendFormat(r.stamp[:0], microLayout)
	if end == len(r.stamp) {
		copy(r.body[at:], r.stamp) // the usual case: no allocation
	} else {
		tail := append([]byte(nil), r.body[at+end:]...)
		r.body = append(append(r.body[:at], r.stamp...), tail...)
	}
	code, err = do(r.hc, r.cfg, fasthttp.MethodPut, r.paths[i], r.body, r.req, r.resp)
	putD = time.Since(t1)
	if err != nil {
		return false, false, getD, putD, err
	}
	switch code {
	case fasthttp.StatusOK:
		r.puts.Add(1)
		return true, false, getD, putD, nil
	case fasthttp.StatusConflict:
		return false, true, getD, putD, nil
	}
	return false, false, getD, putD, statusError("PUT", r.paths[i], code, r.resp.Body())
}

func statusError(method, path string, code int, body []byte) error {
	if len(body) > 300 {
		body = body[:300]
	}
	return fmt.Errorf("%s %s: HTTP %d: %s", method, path, code, bytes.TrimSpace(body))
}
