// Command readytime starts a server and measures the time from its exec to
// the first 200 of its /readyz, polling every millisecond (a shell loop of
// curl cannot resolve tens of milliseconds on a busy machine). It prints
// the server's pid, that time and the CPU time the server used until then
// (summed over its threads from /proc/PID/task/*/schedstat), both in
// milliseconds, on one line, then exits and leaves the server running: the
// caller measures it and stops it. On a busy machine the wall time grows
// with the load; the CPU time does not, and on an idle machine with as
// many cores as the server keeps busy the wall time approaches it.
// docs/footprint.sh runs it.
//
//	go run ./.ci/readytime -url http://127.0.0.1:18451 -log FILE -- leasehold serve ...
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "", "server URL whose /readyz is polled")
	logPath := flag.String("log", os.DevNull, "file receiving the server's output")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up (and stop the server) after this long")
	flag.Parse()
	if *url == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: readytime -url URL [-log FILE] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	if err := run(*url, *logPath, *timeout, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "readytime:", err)
		os.Exit(1)
	}
}

func run(url, logPath string, timeout time.Duration, argv []string) error {
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// Fresh connections: a kept-alive one dialled before the server
	// listened does not exist, and one to a previous server must not
	// answer for this one.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if ready(ctx, client, url+"/readyz") {
			wall := time.Since(start)
			fmt.Printf("%d %.1f %.1f\n", cmd.Process.Pid, float64(wall.Microseconds())/1000, float64(cpuTime(cmd.Process.Pid))/1e6)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("server exited before it was ready (%v); see %s", err, logPath)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return fmt.Errorf("server not ready within %s; see %s", timeout, logPath)
		case <-time.After(time.Millisecond):
		}
	}
}

func ready(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// cpuTime is the CPU time, in nanoseconds, the threads of pid have run so
// far (the first field of each thread's schedstat; threads that already
// exited are not counted, and the Go runtime keeps its threads).
func cpuTime(pid int) int64 {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}
