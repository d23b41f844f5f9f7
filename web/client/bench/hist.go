package bench

import (
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram: 64 linear sub-buckets per power
// of two of microseconds (under 1.6% error), fixed size, no allocation
// per sample. Each goroutine records into its own and they are merged at
// the end, so recording needs no lock.
type hist struct {
	counts [40 * subBuckets]uint64
	n      uint64
	max    time.Duration
}

const subBits = 6
const subBuckets = 1 << subBits

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	exp := bits.Len64(us) - subBits // >= 1
	idx := exp*subBuckets + int(us>>uint(exp-1)) - subBuckets
	return idx
}

// lowerBound is the smallest microsecond value of bucket i.
func lowerBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	exp := i / subBuckets
	off := uint64(i%subBuckets + subBuckets)
	return off << uint(exp-1)
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	i := bucketOf(uint64(d / time.Microsecond))
	if i >= len(h.counts) {
		i = len(h.counts) - 1
	}
	h.counts[i]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the q-quantile (0 < q <= 1), as the lower bound of its
// bucket.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(lowerBound(i)) * time.Microsecond
		}
	}
	return h.max
}

// Latency summarises a histogram in milliseconds, for the JSON report.
type Latency struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func (h *hist) summary() Latency {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Latency{Count: h.n, P50: ms(h.quantile(0.50)), P99: ms(h.quantile(0.99)), P999: ms(h.quantile(0.999)), Max: ms(h.max)}
}
