package bench

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// churnRenewals is how many renewals a candidate makes before it is
// deleted and created again, and churnPeriod the time between them: a
// fast version of client-go's LeaseCandidate (which renews every few
// minutes), so that creates, deletes and the election controller's
// reactions run during the load.
const (
	churnRenewals = 5
	churnPeriod   = 100 * time.Millisecond
)

// churner is one LeaseCandidate (v1beta1) that keeps being created,
// renewed (GET + PUT, as client-go) and deleted, for a lease only the
// candidates contend for.
type churner struct {
	cfg  *Config
	hc   *fasthttp.HostClient
	name string
	ops  uint64
	errs uint64
	err  string
}

func (c *churner) path() string {
	return "/apis/coordination.k8s.io/v1beta1/namespaces/" + c.cfg.Namespace + "/leasecandidates"
}

func (c *churner) fail(err error) {
	c.errs++
	if c.err == "" {
		c.err = err.Error()
	}
}

func (c *churner) run(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	item := c.path() + "/" + c.name
	tick := time.NewTicker(churnPeriod)
	defer tick.Stop()
	var body []byte
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now().UTC().Format(microLayout)
		switch n % (churnRenewals + 2) {
		case 0: // create
			b := fmt.Appendf(nil, `{"apiVersion":"coordination.k8s.io/v1beta1","kind":"LeaseCandidate","metadata":{"name":%q},`+
				`"spec":{"leaseName":"loadgen-election","renewTime":%q,"binaryVersion":"1.37.0","emulationVersion":"1.37.0","strategy":"OldestEmulationVersion"}}`,
				c.name, now)
			code, err := do(c.hc, c.cfg, fasthttp.MethodPost, c.path(), b, req, resp)
			c.count(err, code, fasthttp.StatusCreated, fasthttp.StatusConflict)
		case churnRenewals + 1: // delete
			code, err := do(c.hc, c.cfg, fasthttp.MethodDelete, item, nil, req, resp)
			c.count(err, code, fasthttp.StatusOK, fasthttp.StatusNotFound)
		default: // renew
			code, err := do(c.hc, c.cfg, fasthttp.MethodGet, item, nil, req, resp)
			if c.count(err, code, fasthttp.StatusOK) != nil {
				continue
			}
			body = append(body[:0], resp.Body()...)
			if body, err = setRenewTime(body, now); err != nil {
				c.fail(err)
				continue
			}
			code, err = do(c.hc, c.cfg, fasthttp.MethodPut, item, body, req, resp)
			c.count(err, code, fasthttp.StatusOK, fasthttp.StatusConflict)
		}
	}
}

// count records one operation; codes are the acceptable statuses.
func (c *churner) count(err error, code int, codes ...int) error {
	c.ops++
	if err != nil {
		c.fail(err)
		return err
	}
	for _, ok := range codes {
		if code == ok {
			return nil
		}
	}
	err = fmt.Errorf("candidate %s: HTTP %d", c.name, code)
	c.fail(err)
	return err
}

// setRenewTime replaces the value of the first "renewTime" in a JSON
// object.
func setRenewTime(body []byte, stamp string) ([]byte, error) {
	at := bytes.Index(body, renewTimeKey)
	if at < 0 {
		return nil, fmt.Errorf("no renewTime in %.80s", body)
	}
	at += len(renewTimeKey)
	end := at
	for end < len(body) && body[end] != '"' {
		end++
	}
	out := append([]byte(nil), body[:at]...)
	out = append(out, stamp...)
	return append(out, body[end:]...), nil
}
