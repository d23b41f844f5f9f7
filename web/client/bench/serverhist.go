package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// ServerLatency is the server's own view of the renewals' halves over the
// measured window: the difference of its request-duration histogram
// (leasehold_http_request_duration_seconds, /metrics) between the
// window's ends. Beside the client's latencies it tells the time spent in
// the server from the time spent in the network and the load generator.
// Quantiles are interpolated within buckets, as PromQL's
// histogram_quantile does, so they are estimates.
type ServerLatency struct {
	Gets     uint64  `json:"gets"`
	GetP99Ms float64 `json:"get_p99_ms"`
	Puts     uint64  `json:"puts"`
	PutP99Ms float64 `json:"put_p99_ms"`
}

// promHistogram is one verb's cumulative buckets: upper bound (seconds) to
// count.
type promHistogram map[float64]uint64

// leaseHistograms reads the server's lease GET and PUT histograms.
func leaseHistograms(cfg *Config, hc *fasthttp.HostClient) (get, put promHistogram, err error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	code, err := do(hc, cfg, fasthttp.MethodGet, "/metrics", nil, req, resp)
	if err != nil {
		return nil, nil, err
	}
	if code != fasthttp.StatusOK {
		return nil, nil, fmt.Errorf("GET /metrics: HTTP %d", code)
	}
	get, put = promHistogram{}, promHistogram{}
	sc := bufio.NewScanner(bytes.NewReader(resp.Body()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	const prefix = "leasehold_http_request_duration_seconds_bucket{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, `group="coordination.k8s.io"`) ||
			!strings.Contains(line, `resource="leases"`) {
			continue
		}
		var h promHistogram
		switch {
		case strings.Contains(line, `verb="GET"`):
			h = get
		case strings.Contains(line, `verb="PUT"`):
			h = put
		default:
			continue
		}
		le, count, ok := promBucket(line)
		if ok {
			h[le] = count
		}
	}
	return get, put, sc.Err()
}

// promBucket parses `...,le="0.025"} 1861` into its bound and count.
func promBucket(line string) (le float64, count uint64, ok bool) {
	i := strings.Index(line, `le="`)
	if i < 0 {
		return 0, 0, false
	}
	rest := line[i+4:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return 0, 0, false
	}
	if rest[:j] == "+Inf" {
		le = math.Inf(1)
	} else if le, _ = strconv.ParseFloat(rest[:j], 64); le == 0 && rest[:j] != "0" {
		return 0, 0, false
	}
	k := strings.LastIndexByte(rest, ' ')
	if k < 0 {
		return 0, 0, false
	}
	c, err := strconv.ParseFloat(rest[k+1:], 64)
	if err != nil {
		return 0, 0, false
	}
	return le, uint64(c), true
}

// quantile is histogram_quantile(q) of after minus before, in
// milliseconds, with the number of observations between them.
func quantile(q float64, before, after promHistogram) (ms float64, n uint64) {
	bounds := make([]float64, 0, len(after))
	for le := range after {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0, 0
	}
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	if total == 0 {
		return 0, 0
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, le := range bounds {
		c := after[le] - before[le]
		if float64(c) >= rank {
			if math.IsInf(le, 1) { // beyond the last bound: report that bound
				return lower * 1000, total
			}
			in := c - below
			if in == 0 {
				return le * 1000, total
			}
			return (lower + (le-lower)*(rank-float64(below))/float64(in)) * 1000, total
		}
		lower, below = le, c
	}
	return lower * 1000, total
}

// serverLatency compares two scrapes.
func serverLatency(get0, put0, get1, put1 promHistogram) *ServerLatency {
	s := &ServerLatency{}
	s.GetP99Ms, s.Gets = quantile(0.99, get0, get1)
	s.PutP99Ms, s.Puts = quantile(0.99, put0, put1)
	return s
}
