package flowcontrol

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config sets the classes' shares and queues. Zero fields get the
// defaults (DefaultConfig).
type Config struct {
	// TotalSeats is divided among the classes by Shares: the server's
	// --max-requests-inflight (400).
	TotalSeats int
	// Shares are the classes' relative concurrency shares, by Class.
	Shares [numClasses]int
	// QueueLengths are the requests one flow may have waiting in each
	// class; a class holds at most 16 times that.
	QueueLengths [numClasses]int
	// QueueWait is the longest a request waits for its seats before it
	// is answered 429 (kube-apiserver's: a quarter of its 60-second
	// request timeout).
	QueueWait time.Duration
	// ListBytes is the budget of LIST response bytes being built or
	// written at once.
	ListBytes int64
	// SpareProcs is how many Go processors the server runs beyond the
	// CPUs it may use (ReserveProcs): a renewal back from fsync then
	// finds an idle one instead of queueing behind bulk work. 0 keeps
	// the runtime's default.
	SpareProcs int
}

// DefaultConfig: leader election has the largest share (its requests
// mostly wait on fsync, not on the CPU), LIST the smallest next to the
// operator classes, as one LIST of 10,000 leases costs as much CPU as
// thousands of renewals.
func DefaultConfig() Config {
	return Config{
		TotalSeats:   400,
		Shares:       [numClasses]int{LeaderElection: 40, Workload: 30, List: 15, UI: 5, Metrics: 5, Admin: 5},
		QueueLengths: [numClasses]int{LeaderElection: 100, Workload: 50, List: 50, UI: 50, Metrics: 10, Admin: 10},
		QueueWait:    15 * time.Second,
		ListBytes:    DefaultListBytes,
		SpareProcs:   DefaultSpareProcs,
	}
}

// maxSpareProcs bounds --flowcontrol-spare-procs: each P costs memory
// (its allocation caches) and a thread when busy.
const maxSpareProcs = 16

// DefaultListBytes is the default LIST byte budget: about eight LISTs of
// 10,000 leases.
const DefaultListBytes = 32 << 20

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.TotalSeats <= 0 {
		c.TotalSeats = d.TotalSeats
	}
	for i := range c.Shares {
		if c.Shares[i] <= 0 {
			c.Shares[i] = d.Shares[i]
		}
		if c.QueueLengths[i] <= 0 {
			c.QueueLengths[i] = d.QueueLengths[i]
		}
	}
	if c.QueueWait <= 0 {
		c.QueueWait = d.QueueWait
	}
	if c.ListBytes <= 0 {
		c.ListBytes = d.ListBytes
	}
	return c
}

// seatsPerClass divides TotalSeats by the shares, rounding up, as
// kube-apiserver's nominal concurrency limits do.
func (c Config) seatsPerClass() [numClasses]int {
	sum := 0
	for _, s := range c.Shares {
		sum += s
	}
	var out [numClasses]int
	for i, s := range c.Shares {
		out[i] = max(1, (c.TotalSeats*s+sum-1)/sum)
	}
	return out
}

// RegisterFlags adds the flow-control flags of "leasehold serve" to fs,
// over the defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	c.Shares, c.QueueLengths, c.QueueWait, c.ListBytes, c.SpareProcs = d.Shares, d.QueueLengths, d.QueueWait, d.ListBytes, d.SpareProcs
	fs.Var((*classInts)(&c.Shares), "flowcontrol-shares",
		"concurrency `shares` of the request classes, of --max-requests-inflight: class=N,... over "+(*classInts)(&d.Shares).String())
	fs.Var((*classInts)(&c.QueueLengths), "flowcontrol-queue-lengths",
		"requests one client may have queued per class before more get 429: class=N,... over "+(*classInts)(&d.QueueLengths).String())
	fs.DurationVar(&c.QueueWait, "flowcontrol-queue-wait", d.QueueWait, "longest a request waits in its class's queue before it gets 429")
	fs.Int64Var(&c.ListBytes, "max-list-bytes-inflight", d.ListBytes, "estimated `bytes` of LIST responses being built or written at once; more LISTs wait")
	fs.IntVar(&c.SpareProcs, "flowcontrol-spare-procs", d.SpareProcs, "Go processors to run beyond the CPUs, so that a write back from fsync never waits for one behind LIST or watch encoding (0: the runtime's default; a GOMAXPROCS in the environment wins)")
}

// Validate checks values given as flags.
func (c Config) Validate() error {
	for i := range c.Shares {
		if c.Shares[i] <= 0 || c.QueueLengths[i] <= 0 {
			return fmt.Errorf("--flowcontrol-shares and --flowcontrol-queue-lengths must be positive (class %s)", Class(i))
		}
	}
	if c.QueueWait <= 0 || c.ListBytes <= 0 {
		return errors.New("--flowcontrol-queue-wait and --max-list-bytes-inflight must be positive")
	}
	if c.SpareProcs < 0 || c.SpareProcs > maxSpareProcs {
		return fmt.Errorf("--flowcontrol-spare-procs must be 0 to %d", maxSpareProcs)
	}
	return nil
}

// classInts is a flag of "class=N" pairs; classes not named keep their
// value.
type classInts [numClasses]int

func (v *classInts) String() string {
	var b strings.Builder
	for i, n := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", Class(i), n)
	}
	return b.String()
}

func (v *classInts) Set(s string) error {
	for _, pair := range strings.Split(s, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(pair), "=")
		c, known := ParseClass(name)
		if !ok || !known {
			return fmt.Errorf("%q: want class=N with class one of %s", pair, strings.Join(classNames[:], ", "))
		}
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: want a positive number", pair)
		}
		v[c] = n
	}
	return nil
}
