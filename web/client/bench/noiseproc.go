package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// noiseRunner is a running neighbour: in this process (*noise) or in a
// child process (*noiseProcess). finish stops it and reports what it did
// over secs.
type noiseRunner interface {
	finish(secs float64) *NoiseResult
}

// noiseProcess is the neighbour run by a child "leasehold bench
// --noise-only", so that it does not share this process's Go runtime with
// the renewals it disturbs: a neighbour decoding megabytes of lists would
// otherwise delay the renewers' goroutines and add its own garbage
// collections to their latency, which says nothing about the server. On
// separate machines, as in the field, the two would not share a runtime
// either; here they still share the CPUs, as the server does.
type noiseProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer
	stderr bytes.Buffer
	waited chan struct{} // closed once the child has been reaped
	mode   string
}

// noiseOnlyEnv carries the bearer token to the child, so that it is not
// on a command line that other users of the machine can read.
const noiseOnlyEnv = "LEASEHOLD_TOKEN"

// startNoiseProcess starts the child and waits until its neighbour runs
// (its first line on stderr).
func startNoiseProcess(ctx context.Context, cfg *Config) (*noiseProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("noise process: %w", err)
	}
	args := []string{"bench", "--noise-only", "--no-setup", "--output", "json",
		"--server", cfg.Server,
		"--noise", cfg.Noise,
		"--noise-namespace", cfg.NoiseNamespace,
		"--noise-objects", strconv.Itoa(cfg.NoiseObjects),
		"--noise-clients", strconv.Itoa(cfg.NoiseClients),
		"--noise-bytes", strconv.Itoa(cfg.NoiseBytes),
	}
	p := &noiseProcess{mode: cfg.Noise, waited: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, exe, args...)
	p.cmd.Env = append(os.Environ(), noiseOnlyEnv+"="+cfg.Token)
	p.cmd.Stdout = &p.stdout
	ready, readyW := io.Pipe()
	p.cmd.Stderr = io.MultiWriter(&p.stderr, readyW)
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("noise process: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("noise process: %w", err)
	}
	started := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := ready.Read(b[:]) // the child's "noise: ..." line
		started <- err
		_, _ = io.Copy(io.Discard, ready)
	}()
	go func() {
		_ = p.cmd.Wait()
		readyW.Close()
		close(p.waited)
	}()
	select {
	case err := <-started:
		if err != nil {
			<-p.waited
			return nil, fmt.Errorf("noise process ended before its neighbour ran: %s", p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.waited
		return nil, fmt.Errorf("noise process did not start its neighbour in 30s: %s", p.stderr.String())
	}
	return p, nil
}

// finish closes the child's stdin, which ends its neighbour, and reads its
// report.
func (p *noiseProcess) finish(float64) *NoiseResult {
	p.stdin.Close()
	deadline := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() })
	defer deadline.Stop()
	<-p.waited
	var r NoiseResult
	if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
		return &NoiseResult{Mode: p.mode, Errors: 1, FirstError: fmt.Sprintf("noise process: %v; stderr: %s", err, p.stderr.String())}
	}
	return &r
}

// runNoiseOnly is "bench --noise-only": run the neighbour until stdin
// closes (or ctx ends) and print its report as JSON on stdout.
func runNoiseOnly(ctx context.Context, cfg Config, stdin io.Reader, stdout, progress io.Writer) error {
	if cfg.Token == "" {
		cfg.Token = os.Getenv(noiseOnlyEnv)
	}
	nz, err := startNoise(ctx, &cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(progress, "noise: %s, %d clients\n", cfg.Noise, cfg.NoiseClients)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	res := nz.finish(time.Since(start).Seconds())
	return json.NewEncoder(stdout).Encode(res)
}
