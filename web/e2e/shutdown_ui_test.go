package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/leasehold/leasehold/internal/testneeds"
)

// shutdownBound is what the README promises for a stop with open watches
// ("in about two seconds"), plus slack for a busy machine; it stays under
// the 5 s drain grace, whose expiry ("Shutdown did not complete in time")
// is the failure this test is for.
const shutdownBound = 4500 * time.Millisecond

// TestE2EShutdownWithUITabAndWatch stops the real binary with SIGTERM while
// a Chromium tab shows the UI (its informers' watch streams, keep-alive
// connections for its other requests) and a kubectl-style watch is open:
// it must exit 0 within the README's bound, and the drain must complete
// (no "Shutdown did not complete in time" in the log).
func TestE2EShutdownWithUITabAndWatch(t *testing.T) {
	chromium := testneeds.Chromium(t)
	bin := leaseholdBinary(t)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var logMu sync.Mutex
	var log strings.Builder
	logDone := make(chan struct{})
	urlc := make(chan string, 1)
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			var line struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "Serving the Lease API" {
				urlc <- line.URL
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not start within 30s")
	}
	createLease(t, url, "default", "shutdown-ui", "device-1")

	ctx, closeBrowser := openBrowser(t, chromium, 90*time.Second)
	defer closeBrowser()
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/ui/#/lease/default/shutdown-ui")); err != nil {
		t.Fatalf("open the lease page: %v", err)
	}
	eventually(t, 20*time.Second, "the UI tab live (its watches open)", func() (bool, string) {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('conn').dataset.state || ''`))
		if err != nil {
			return false, err.Error()
		}
		return state == "live", "connection state " + state
	})
	w := openWatch(t, url)
	defer w.Close()
	// Browsers open spare connections ahead of requests (Chromium's
	// preconnect): one that has sent nothing yet must not hold the drain.
	spare, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 30*time.Second)
	<-logDone
	logMu.Lock()
	defer logMu.Unlock()
	if code != 0 {
		t.Errorf("SIGTERM with a UI tab and a watch open: exit %d after %s, want 0; log:\n%s", code, took.Round(time.Millisecond), log.String())
	}
	t.Logf("SIGTERM with a UI tab and a watch open: exit %d after %s", code, took.Round(time.Millisecond))
	timingTarget(t, took <= shutdownBound, "SIGTERM with a UI tab and a watch open: exit after %s, want within %s", took.Round(time.Millisecond), shutdownBound)
	if strings.Contains(log.String(), "Shutdown did not complete in time") {
		t.Errorf("the drain waited out its grace (a connection stayed open); log:\n%s", log.String())
	}
	if _, err := io.Copy(io.Discard, w); err != nil {
		t.Errorf("the watch did not end cleanly: %v", err)
	}
}
