package flowcontrol

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// SeatBytes is how much LIST response one seat stands for: a LIST's width
// is its estimated size over SeatBytes (about 80 leases a seat), so its
// cost in the class follows the objects it touches.
const SeatBytes = 32 << 10

// BodySeatBytes is how much request body one seat stands for, for writes
// beyond SmallBodyBytes: a 200 KB patch takes 98 of the workload class's
// 115 default seats, so one such write runs at a time. Decoding, merging
// and encoding it is CPU-bound for milliseconds; two at once on a 2-core
// device left renewals queued behind them for the CPU (renewal p99 under
// 16 loops of 200 KB patches: 290-350 ms at 4 KiB a seat, 120-130 ms at
// 2 KiB, same machine and load), while the patches got through at
// nearly the same rate.
const BodySeatBytes = 2 << 10

// Controller admits requests by class, seats and fair queues, and holds
// the LIST byte budget. Create it with New.
type Controller struct {
	levels [numClasses]*level
	bytes  byteBudget
	wait   time.Duration
	sizes  estimator
}

// New builds a controller from cfg (defaults filled in).
func New(cfg Config) *Controller {
	cfg = cfg.withDefaults()
	c := &Controller{wait: cfg.QueueWait, bytes: byteBudget{limit: cfg.ListBytes}}
	seats := cfg.seatsPerClass()
	for i := range c.levels {
		c.levels[i] = newLevel(Class(i), seats[i], cfg.QueueLengths[i])
	}
	c.sizes.known = map[string]int64{}
	return c
}

// Rejected is the error of a request turned away: answer it 429 with
// Retry-After.
type Rejected struct {
	Class  Class
	Reason string
	// RetryAfter is the Retry-After header's seconds.
	RetryAfter int
}

func (r *Rejected) Error() string {
	return fmt.Sprintf("flow control: %s request rejected (%s)", r.Class, r.Reason)
}

// Ticket is an admitted request. Done gives its seats back; the byte
// budget taken for a LIST is given back by ReleaseBytes, once the
// response is written.
type Ticket struct {
	c      *Controller
	Class  Class
	width  int
	bytes  int64
	key    string
	doneMu sync.Once
}

// Admit classifies r and waits for its seats (and, for a LIST, its bytes).
func (c *Controller) Admit(ctx context.Context, r *Request) (*Ticket, error) {
	class := Classify(r)
	l := c.levels[class]
	width := 1
	var estimate int64
	switch {
	case class == List && r.FullList:
		estimate = c.sizes.estimate(r.Path, c.bytes.limit)
		width = int((estimate + SeatBytes - 1) / SeatBytes)
	case class == List && r.Limit > 0:
		estimate = min(c.sizes.estimate(r.Path, c.bytes.limit), r.Limit*4<<10)
		width = int((estimate + SeatBytes - 1) / SeatBytes)
	case class == List:
		estimate = SeatBytes
	case r.BodyBytes > SmallBodyBytes:
		// A large write costs in proportion to its body: decoding,
		// encoding, fsync, fan-out.
		width = 1 + r.BodyBytes/BodySeatBytes
	case r.BodyBytes < 0: // chunked: size unknown until read
		width = SmallBodyBytes / BodySeatBytes
	}
	start := time.Now()
	width, reason := l.acquire(ctx, r.Flow(), width, c.wait)
	if reason != "" {
		return nil, &Rejected{Class: class, Reason: reason, RetryAfter: 1}
	}
	t := &Ticket{c: c, Class: class, width: width}
	if r.IsList() {
		left := c.wait - time.Since(start)
		n, ok := c.bytes.acquire(ctx, estimate, max(left, 0))
		if !ok {
			t.Done()
			l.rejected[1].Add(1)
			return nil, &Rejected{Class: class, Reason: ReasonTimeout, RetryAfter: 1}
		}
		t.bytes = n
		if r.FullList && !r.Selective {
			t.key = r.Path
		}
	}
	return t, nil
}

// Done gives the request's seats back; safe to call more than once.
func (t *Ticket) Done() {
	t.doneMu.Do(func() { t.c.levels[t.Class].release(t.width) })
}

// Observe records the size of a complete LIST response, the estimate of
// the next LIST of the same collection.
func (t *Ticket) Observe(size int) {
	if t.key != "" {
		t.c.sizes.observe(t.key, int64(size))
	}
}

// ReleaseBytes gives the LIST byte budget back (once the response has
// been written); safe to call more than once.
func (t *Ticket) ReleaseBytes() {
	if n := t.bytes; n > 0 {
		t.bytes = 0
		t.c.bytes.release(n)
	}
}

// HoldsBytes reports whether the ticket still holds LIST budget.
func (t *Ticket) HoldsBytes() bool { return t.bytes > 0 }

// estimator remembers the size of the last full LIST of each collection.
// An unknown collection is assumed as large as the whole budget: its
// first LIST runs alone, and the next ones are weighed by what it
// returned.
type estimator struct {
	mu    sync.Mutex
	known map[string]int64
}

// maxKnown bounds the remembered collections; beyond it the memory starts
// over (namespaces come and go).
const maxKnown = 4096

func (e *estimator) estimate(key string, unknown int64) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.known[key]; ok {
		return n
	}
	return unknown
}

func (e *estimator) observe(key string, n int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.known[key]; !ok && len(e.known) >= maxKnown {
		clear(e.known)
	}
	e.known[key] = n
}

// WritePrometheus writes the flow-control series.
func (c *Controller) WritePrometheus(w io.Writer) {
	type series struct {
		name, typ, help string
		value           func(*level, levelStats) float64
	}
	for _, s := range []series{
		{"apiserver_flowcontrol_nominal_limit_seats", "gauge", "Seats of each priority level (its share of --max-requests-inflight).",
			func(_ *level, st levelStats) float64 { return float64(st.seats) }},
		{"apiserver_flowcontrol_current_executing_seats", "gauge", "Seats occupied by requests being served, by priority level.",
			func(_ *level, st levelStats) float64 { return float64(st.used) }},
		{"apiserver_flowcontrol_current_executing_requests", "gauge", "Requests being served, by priority level.",
			func(_ *level, st levelStats) float64 { return float64(st.executing) }},
		{"apiserver_flowcontrol_current_inqueue_requests", "gauge", "Requests waiting in the queues, by priority level.",
			func(_ *level, st levelStats) float64 { return float64(st.queued) }},
		{"apiserver_flowcontrol_dispatched_requests_total", "counter", "Requests admitted to be served, by priority level.",
			func(l *level, _ levelStats) float64 { return float64(l.dispatched.Load()) }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", s.name, s.help, s.name, s.typ)
		for _, l := range c.levels {
			fmt.Fprintf(w, "%s{priority_level=%q} %g\n", s.name, l.class.String(), s.value(l, l.stats()))
		}
	}
	const rej = "apiserver_flowcontrol_rejected_requests_total"
	fmt.Fprintf(w, "# HELP %s Requests answered 429, by priority level and reason.\n# TYPE %s counter\n", rej, rej)
	for _, l := range c.levels {
		for i, reason := range [...]string{ReasonQueueFull, ReasonTimeout, ReasonCancelled} {
			fmt.Fprintf(w, "%s{priority_level=%q,reason=%q} %d\n", rej, l.class.String(), reason, l.rejected[i].Load())
		}
	}
	fmt.Fprintf(w, "# HELP leasehold_flowcontrol_list_bytes_inflight Estimated bytes of LIST responses being built or written.\n# TYPE leasehold_flowcontrol_list_bytes_inflight gauge\nleasehold_flowcontrol_list_bytes_inflight %d\n", c.bytes.inUse())
	fmt.Fprintf(w, "# HELP leasehold_flowcontrol_list_bytes_limit The budget of leasehold_flowcontrol_list_bytes_inflight (--max-list-bytes-inflight).\n# TYPE leasehold_flowcontrol_list_bytes_limit gauge\nleasehold_flowcontrol_list_bytes_limit %d\n", c.bytes.limit)
}
