package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/internal/cli"
)

// Result is the report of one run; the JSON field names are stable for
// scripts.
type Result struct {
	Config         Config  `json:"config"`
	Seconds        float64 `json:"seconds"`
	Renewals       uint64  `json:"renewals"`
	RenewalsPerSec float64 `json:"renewals_per_sec"`
	Conflicts      uint64  `json:"conflicts"`
	Errors         uint64  `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	// Latency is the GET+PUT pair; Get and Put its halves.
	Latency Latency `json:"latency"`
	Get     Latency `json:"get"`
	Put     Latency `json:"put"`
	// Server figures need Config.ServerPID.
	ServerCPUSeconds      float64 `json:"server_cpu_seconds,omitempty"`
	ServerCPUPerRenewalUS float64 `json:"server_cpu_per_renewal_us,omitempty"`
	ServerCores           float64 `json:"server_cores,omitempty"`
	ServerRSSBytes        int64   `json:"server_rss_bytes,omitempty"`
	// ServerPeakRSSBytes is the server's VmHWM at the end: the most it
	// was ever resident, since it started.
	ServerPeakRSSBytes int64 `json:"server_peak_rss_bytes,omitempty"`
	// Members are the other members' figures (Config.MemberPIDs), and
	// the Cluster figures sum the CPU of the server and of every member.
	Members                []MemberResult `json:"members,omitempty"`
	ClusterCPUPerRenewalUS float64        `json:"cluster_cpu_per_renewal_us,omitempty"`
	ClusterCores           float64        `json:"cluster_cores,omitempty"`
	// Offered is the renewals the rate cap offered in the measured
	// window (Rate x Duration), DoneRatio the share of them done.
	Offered                float64 `json:"offered,omitempty"`
	DoneRatio              float64 `json:"done_ratio,omitempty"`
	ServerThreads          int     `json:"server_threads,omitempty"`
	LoadgenCPUPerRenewalUS float64 `json:"loadgen_cpu_per_renewal_us"`
	// Machine context: the measurements share the machine.
	NumCPU      int     `json:"num_cpu"`
	LoadAvg     string  `json:"loadavg_at_end,omitempty"`
	CPUPressure string  `json:"cpu_pressure_at_end,omitempty"`
	SetupSec    float64 `json:"setup_seconds"`
	Created     int     `json:"leases_created"`

	Watch      *WatchResult     `json:"watch,omitempty"`
	Candidates *CandidateResult `json:"candidates,omitempty"`
	List       *ListResult      `json:"list,omitempty"`
	Noise      *NoiseResult     `json:"noise,omitempty"`
	// Server is the server's own latency for the renewals' GETs and PUTs
	// (from its /metrics), when it could be read.
	Server *ServerLatency `json:"server_latency,omitempty"`
}

// WatchResult says whether every watcher saw every renewal, and how late.
type WatchResult struct {
	Watchers int `json:"watchers"`
	// Expected is the number of successful PUTs after the watches began;
	// MinEvents the fewest events any watcher received of them.
	Expected  uint64  `json:"expected_events_per_watcher"`
	MinEvents uint64  `json:"min_events_per_watcher"`
	Complete  int     `json:"watchers_complete"`
	Lag       Latency `json:"lag"`
	Error     string  `json:"first_error,omitempty"`
}

// CandidateResult counts the LeaseCandidate churn.
type CandidateResult struct {
	Candidates int    `json:"candidates"`
	Ops        uint64 `json:"ops"`
	Errors     uint64 `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
}

// ListResult times LIST of the whole namespace.
type ListResult struct {
	Items   int     `json:"items"`
	Bytes   int     `json:"bytes"`
	Latency Latency `json:"latency"`
}

// Command is "leasehold bench".
var Command = cli.Command{
	Name:     "bench",
	Synopsis: synopsis,
	Summary:  "measure renewals/s, latency and server CPU against a server\n" + `(see "leasehold bench --help" and docs/bench.sh)`,
	Run:      benchCommand,
}

// benchCommand parses flags, runs, prints the report and returns the exit
// code (1 when the run had errors or conflicts).
func benchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold bench: %v\n%s\n", err, cli.HelpHint("leasehold bench"))
		return cli.ExitUsage
	}
	if cfg.NoiseOnly {
		if err := runNoiseOnly(ctx, cfg, os.Stdin, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "leasehold bench: %v\n", err)
			return 1
		}
		return 0
	}
	res, err := Run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold bench: %v\n", err)
		return 1
	}
	if cfg.Output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		res.WriteText(stdout)
	}
	if res.Errors > 0 || res.Conflicts > 0 {
		return 1
	}
	return 0
}

// Run runs one load. progress, when not nil, gets one line per phase.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	res := &Result{Config: cfg, NumCPU: runtime.NumCPU()}
	hc := newClient(&cfg, cfg.Clients+cfg.Candidates+8)
	defer hc.CloseIdleConnections()

	if !cfg.NoSetup {
		if err := setupAll(ctx, &cfg, hc, res, progress); err != nil {
			return nil, err
		}
	}
	var nz noiseRunner
	if cfg.Noise != "" {
		var err error
		where := "in this process"
		if cfg.NoiseProcess {
			nz, err = startNoiseProcess(ctx, &cfg)
			where = "in a child process"
		} else {
			nz, err = startNoise(ctx, &cfg)
		}
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "noise: %s, %d clients, %s\n", cfg.Noise, cfg.NoiseClients, where)
	}
	noiseStart := time.Now()

	loadStart := time.Now()
	var watchers []*watcher
	var watchDone sync.WaitGroup
	if cfg.Watchers > 0 {
		var err error
		if watchers, err = startWatchers(ctx, &cfg, hc, loadStart, &watchDone); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "watch: %d watchers connected in %.1fs\n", cfg.Watchers, time.Since(loadStart).Seconds())
		// The load starts once every watcher is connected, and their
		// latencies are measured from then on.
		loadStart = time.Now()
		for _, w := range watchers {
			w.since.Store(loadStart.UnixNano())
		}
	}

	var puts atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	win := window{start: loadStart.Add(cfg.Warmup), end: loadStart.Add(cfg.Warmup + cfg.Duration)}
	renewers, churners := startLoad(&cfg, hc, win, stop, &wg, &puts)
	fmt.Fprintf(progress, "load: %d clients over %d leases, warmup %s, measuring %s\n", cfg.Clients, cfg.Leases, cfg.Warmup, cfg.Duration)

	var cpu cpuSamples
	var hist [4]promHistogram // GET, PUT at the window's start; GET, PUT at its end
	var histErr error
	scrape := func(end bool) {
		i := 0
		if end {
			i = 2
		}
		var err error
		if hist[i], hist[i+1], err = leaseHistograms(&cfg, hc); err != nil && histErr == nil {
			histErr = err
		}
	}
	if !cpu.sample(ctx, cfg.ServerPID, cfg.MemberPIDs, win, scrape) {
		close(stop)
		wg.Wait()
		if nz != nil {
			nz.finish(0)
		}
		return nil, ctx.Err()
	}
	close(stop)
	wg.Wait()
	res.Seconds = cfg.Duration.Seconds()
	if nz != nil {
		res.Noise = nz.finish(time.Since(noiseStart).Seconds())
	}

	if err := res.addRenewals(&cfg, renewers, &cpu); err != nil {
		return nil, err
	}
	if histErr == nil {
		res.Server = serverLatency(hist[0], hist[1], hist[2], hist[3])
	} else {
		fmt.Fprintf(progress, "server latency: not read: %v\n", histErr)
	}
	if cfg.Candidates > 0 {
		res.Candidates = sumCandidates(churners)
	}
	if len(watchers) > 0 {
		res.Watch = finishWatch(watchers, &watchDone, puts.Load())
	}
	if cfg.ListRuns > 0 {
		lr, err := timeList(&cfg, cfg.ListRuns)
		if err != nil {
			return nil, err
		}
		res.List = lr
	}
	return res, nil
}

// setupAll creates the leases (and, with noise, the noise leases) before
// the load, and records how long that took.
func setupAll(ctx context.Context, cfg *Config, hc *fasthttp.HostClient, res *Result, progress io.Writer) error {
	t := time.Now()
	n, err := setup(ctx, cfg, hc)
	res.Created, res.SetupSec = n, time.Since(t).Seconds()
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "setup: %d leases (%d created) in %.1fs\n", cfg.Leases, n, res.SetupSec)
	if cfg.Noise != "" {
		t := time.Now()
		n, err := setupNoise(ctx, cfg, hc)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "setup: %d noise leases in %s (%d created) in %.1fs\n", cfg.NoiseObjects, cfg.NoiseNamespace, n, time.Since(t).Seconds())
	}
	return nil
}

// startWatchers connects cfg.Watchers watches from the current
// resourceVersion and runs each under done; when one fails to connect,
// the ones already connected are closed.
func startWatchers(ctx context.Context, cfg *Config, hc *fasthttp.HostClient, since time.Time, done *sync.WaitGroup) ([]*watcher, error) {
	rv, err := listRV(cfg, hc)
	if err != nil {
		return nil, err
	}
	var watchers []*watcher
	for i := 0; i < cfg.Watchers; i++ {
		w, err := startWatch(ctx, cfg, rv, localAddr(cfg, i), since)
		if err != nil {
			for _, w := range watchers {
				w.conn.Close()
			}
			return nil, fmt.Errorf("watcher %d: %w", i, err)
		}
		watchers = append(watchers, w)
		done.Go(w.run)
	}
	return watchers, nil
}

// startLoad starts the renewers (measuring within win) and the
// LeaseCandidate churners, each under wg until stop is closed.
func startLoad(cfg *Config, hc *fasthttp.HostClient, win window, stop <-chan struct{}, wg *sync.WaitGroup, puts *atomic.Uint64) ([]*renewer, []*churner) {
	renewers := make([]*renewer, cfg.Clients)
	for i := range renewers {
		renewers[i] = newRenewer(cfg, hc, i, puts)
		wg.Add(1)
		go renewers[i].run(stop, win, wg)
	}
	churners := make([]*churner, cfg.Candidates)
	for i := range churners {
		churners[i] = &churner{cfg: cfg, hc: hc, name: fmt.Sprintf("%scandidate-%03d", cfg.Prefix, i)}
		wg.Add(1)
		go churners[i].run(stop, wg)
	}
	return renewers, churners
}

// sample waits for win to start and samples the CPU times of the server
// (pid), of the other members and of this process at both of its ends,
// calling atEdge at each. It reports false, with nothing sampled, when ctx
// ends before win starts.
func (c *cpuSamples) sample(ctx context.Context, pid int, members []int, win window, atEdge func(end bool)) bool {
	if !sleepUntil(ctx, win.start) {
		return false
	}
	c.server0, c.serverErr0 = procCPU(pid)
	c.members0 = make([]time.Duration, len(members))
	for i, m := range members {
		var err error
		c.members0[i], err = procCPU(m)
		c.serverErr0 = errors.Join(c.serverErr0, err)
	}
	c.self0, _ = procCPU(0)
	atEdge(false)
	sleepUntil(ctx, win.end)
	c.server1, c.serverErr1 = procCPU(pid)
	c.members1 = make([]time.Duration, len(members))
	for i, m := range members {
		var err error
		c.members1[i], err = procCPU(m)
		c.serverErr1 = errors.Join(c.serverErr1, err)
	}
	c.self1, _ = procCPU(0)
	atEdge(true)
	c.measured = time.Since(win.start)
	return true
}

// cpuSamples are the CPU times of the server and of this process at both
// ends of the measured window.
type cpuSamples struct {
	server0, server1       time.Duration
	members0, members1     []time.Duration // Config.MemberPIDs'
	serverErr0, serverErr1 error
	self0, self1           time.Duration
	measured               time.Duration
}

// MemberResult is one other member of a cluster over the measured window.
type MemberResult struct {
	PID          int     `json:"pid"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes,omitempty"`
}

// addRenewals sums the renewers' counters and latencies into r, with the
// CPU cost per renewal and the server's resource use.
func (r *Result) addRenewals(cfg *Config, renewers []*renewer, cpu *cpuSamples) error {
	var all counters
	for _, rn := range renewers {
		all.renewals += rn.c.renewals
		all.conflicts += rn.c.conflicts
		all.errors += rn.c.errors
		if all.firstErr == "" {
			all.firstErr = rn.c.firstErr
		}
		all.pair.merge(&rn.c.pair)
		all.get.merge(&rn.c.get)
		all.put.merge(&rn.c.put)
	}
	r.Renewals, r.Conflicts, r.Errors, r.FirstError = all.renewals, all.conflicts, all.errors, all.firstErr
	r.RenewalsPerSec = float64(all.renewals) / r.Seconds
	if cfg.Rate > 0 {
		r.Offered = cfg.Rate * r.Seconds
		r.DoneRatio = float64(all.renewals) / r.Offered
	}
	r.Latency, r.Get, r.Put = all.pair.summary(), all.get.summary(), all.put.summary()
	if all.renewals > 0 {
		r.LoadgenCPUPerRenewalUS = float64((cpu.self1 - cpu.self0).Microseconds()) / float64(all.renewals)
	}
	if cfg.ServerPID > 0 {
		if cpu.serverErr0 != nil || cpu.serverErr1 != nil {
			return errors.Join(cpu.serverErr0, cpu.serverErr1)
		}
		used := cpu.server1 - cpu.server0
		r.ServerCPUSeconds = used.Seconds()
		r.ServerCores = used.Seconds() / cpu.measured.Seconds()
		if all.renewals > 0 {
			r.ServerCPUPerRenewalUS = float64(used.Microseconds()) / float64(all.renewals)
		}
		r.ServerRSSBytes, _ = procStatusBytes(cfg.ServerPID, "VmRSS")
		r.ServerPeakRSSBytes, _ = procStatusBytes(cfg.ServerPID, "VmHWM")
		r.ServerThreads = procThreads(cfg.ServerPID)
		if len(cfg.MemberPIDs) > 0 {
			for i, pid := range cfg.MemberPIDs {
				m := cpu.members1[i] - cpu.members0[i]
				used += m
				peak, _ := procStatusBytes(pid, "VmHWM")
				r.Members = append(r.Members, MemberResult{PID: pid, CPUSeconds: m.Seconds(), PeakRSSBytes: peak})
			}
			r.ClusterCores = used.Seconds() / cpu.measured.Seconds()
			if all.renewals > 0 {
				r.ClusterCPUPerRenewalUS = float64(used.Microseconds()) / float64(all.renewals)
			}
		}
	}
	r.LoadAvg = firstLine("/proc/loadavg")
	r.CPUPressure = firstLine("/proc/pressure/cpu")
	return nil
}

// sumCandidates totals the LeaseCandidate churners' operations.
func sumCandidates(churners []*churner) *CandidateResult {
	cr := &CandidateResult{Candidates: len(churners)}
	for _, c := range churners {
		cr.Ops += c.ops
		cr.Errors += c.errs
		if cr.FirstError == "" {
			cr.FirstError = c.err
		}
	}
	return cr
}

// finishWatch waits (up to 10 s) for every watcher to receive every
// renewal, then closes them.
func finishWatch(ws []*watcher, done *sync.WaitGroup, expected uint64) *WatchResult {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		for _, w := range ws {
			if w.events.Load() < expected && w.failed() == nil {
				all = false
				break
			}
		}
		if all {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range ws {
		w.conn.Close()
	}
	done.Wait()
	wr := &WatchResult{Watchers: len(ws), Expected: expected, MinEvents: ^uint64(0)}
	var lag hist
	for _, w := range ws {
		n := w.events.Load()
		wr.MinEvents = min(wr.MinEvents, n)
		if n >= expected {
			wr.Complete++
		} else if err := w.failed(); wr.Error == "" && err != nil {
			wr.Error = err.Error()
		}
		lag.merge(&w.lag)
	}
	wr.Lag = lag.summary()
	return wr
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// listRV returns the namespace's current list resourceVersion.
func listRV(cfg *Config, hc *fasthttp.HostClient) (string, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	code, err := do(hc, cfg, fasthttp.MethodGet, cfg.leasesPath()+"?limit=1", nil, req, resp)
	if err != nil {
		return "", err
	}
	if code != fasthttp.StatusOK {
		return "", statusError("GET", cfg.leasesPath(), code, resp.Body())
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(resp.Body(), &l); err != nil || l.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("list %s: no resourceVersion (%v)", cfg.leasesPath(), err)
	}
	return l.Metadata.ResourceVersion, nil
}

// timeList lists the whole namespace n times, sequentially, on a fresh
// connection.
func timeList(cfg *Config, n int) (*ListResult, error) {
	hc := newClient(cfg, 1)
	defer hc.CloseIdleConnections()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var h hist
	lr := &ListResult{}
	for i := 0; i < n; i++ {
		t := time.Now()
		code, err := do(hc, cfg, fasthttp.MethodGet, cfg.leasesPath(), nil, req, resp)
		if err != nil {
			return nil, err
		}
		if code != fasthttp.StatusOK {
			return nil, statusError("GET", cfg.leasesPath(), code, resp.Body())
		}
		h.record(time.Since(t))
		lr.Bytes = len(resp.Body())
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(resp.Body(), &l); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	lr.Items = len(l.Items)
	lr.Latency = h.summary()
	return lr, nil
}

// WriteText prints the report for people.
func (r *Result) WriteText(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "workload: GET+PUT renewals, %d clients over %d leases, %s measured", c.Clients, c.Leases, c.Duration)
	if c.Rate > 0 {
		fmt.Fprintf(w, ", rate cap %.0f/s", c.Rate)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "renewals:  %d (%.0f/s), conflicts %d, errors %d\n", r.Renewals, r.RenewalsPerSec, r.Conflicts, r.Errors)
	if r.Offered > 0 {
		fmt.Fprintf(w, "offered:   %.0f, done %.1f%%\n", r.Offered, 100*r.DoneRatio)
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	lat := func(name string, l Latency) {
		fmt.Fprintf(w, "%-9s  p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n", name, l.P50, l.P99, l.P999, l.Max)
	}
	lat("pair:", r.Latency)
	lat("get:", r.Get)
	lat("put:", r.Put)
	if c.ServerPID > 0 {
		fmt.Fprintf(w, "server:    %.1f us CPU per renewal (%.2f cores), RSS %.1f MiB (peak %.1f MiB), %d threads\n",
			r.ServerCPUPerRenewalUS, r.ServerCores, float64(r.ServerRSSBytes)/(1<<20), float64(r.ServerPeakRSSBytes)/(1<<20), r.ServerThreads)
	}
	if len(r.Members) > 0 {
		fmt.Fprintf(w, "cluster:   %.1f us CPU per renewal (%.2f cores) over the server and %d other members", r.ClusterCPUPerRenewalUS, r.ClusterCores, len(r.Members))
		for _, m := range r.Members {
			fmt.Fprintf(w, "; pid %d %.2f s, peak RSS %.1f MiB", m.PID, m.CPUSeconds, float64(m.PeakRSSBytes)/(1<<20))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "loadgen:   %.1f us CPU per renewal\n", r.LoadgenCPUPerRenewalUS)
	if wr := r.Watch; wr != nil {
		fmt.Fprintf(w, "watch:     %d watchers, %d/%d complete (min %d of %d events), lag p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
			wr.Watchers, wr.Complete, wr.Watchers, wr.MinEvents, wr.Expected, wr.Lag.P50, wr.Lag.P99, wr.Lag.Max)
		if wr.Error != "" {
			fmt.Fprintf(w, "watch error: %s\n", wr.Error)
		}
	}
	if cr := r.Candidates; cr != nil {
		fmt.Fprintf(w, "candidates: %d churners, %d ops, %d errors %s\n", cr.Candidates, cr.Ops, cr.Errors, cr.FirstError)
	}
	if lr := r.List; lr != nil {
		fmt.Fprintf(w, "list:      %d items (%d bytes), p50 %.2f ms, p99 %.2f ms\n", lr.Items, lr.Bytes, lr.Latency.P50, lr.Latency.P99)
	}
	if sl := r.Server; sl != nil {
		fmt.Fprintf(w, "server:    its own p99 (histogram estimate): GET %.1f ms over %d, PUT %.1f ms over %d\n", sl.GetP99Ms, sl.Gets, sl.PutP99Ms, sl.Puts)
	}
	if nr := r.Noise; nr != nil {
		fmt.Fprintf(w, "noise:     %s, %d clients over %d leases: %d requests (%.1f/s), %d rejected (429), %d errors, %.1f MiB read %s\n",
			nr.Mode, nr.Clients, nr.Objects, nr.Ops, nr.OpsPerSec, nr.Rejected, nr.Errors, float64(nr.Bytes)/(1<<20), nr.FirstError)
	}
	fmt.Fprintf(w, "machine:   %d CPUs, loadavg %s, cpu pressure %s\n", r.NumCPU, r.LoadAvg, r.CPUPressure)
}
