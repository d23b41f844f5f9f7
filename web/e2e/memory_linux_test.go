package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// statusKB reads one "kB" line (RssAnon, RssFile, ...) of a process's
// /proc/<pid>/status.
func statusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// processCPU is the CPU time (user and system) a process has used so far,
// from /proc/<pid>/stat, in clock ticks of 10 ms (USER_HZ is 100 on Linux
// wherever Go runs). Unlike a wall-clock duration it does not grow when
// other work loads the machine: a bound on it holds beside CPU burners.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after it (state is field 3, utime 14, stime 15).
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q: %v", pid, data, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// TestE2EIdleServerReleasesMemory checks what the footprint figure in the
// README relies on: a server that stops getting requests returns its free
// heap and unmaps its executable's start-up pages within a few seconds,
// and answers the next request as before.
func TestE2EIdleServerReleasesMemory(t *testing.T) {
	testneeds.Slow(t, "waits for an idle server to release memory")
	ts := startServer(t)
	for i := range 200 {
		createLease(t, ts.URL, "default", fmt.Sprintf("idle-%03d", i), "holder")
	}
	get := func(path string) {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
	}
	get("/apis/coordination.k8s.io/v1/leases")
	busyFile := statusKB(t, ts.Pid(), "RssFile")
	// The idle check runs every 3 s and needs one full quiet interval.
	eventually(t, 15*time.Second, "idle memory release", func() (bool, string) {
		f := statusKB(t, ts.Pid(), "RssFile")
		return f < busyFile/2, fmt.Sprintf("RssFile %d kB, %d kB while busy", f, busyFile)
	})
	t.Logf("RssFile %d kB busy, %d kB idle; RssAnon %d kB idle", busyFile, statusKB(t, ts.Pid(), "RssFile"), statusKB(t, ts.Pid(), "RssAnon"))
	// Dropped pages come back on use.
	get("/apis/coordination.k8s.io/v1/namespaces/default/leases/idle-007")
	get("/apis/coordination.k8s.io/v1/leases?limit=50")
	createLease(t, ts.URL, "default", "after-idle", "holder")
}

// TestE2EUnauthenticatedBodiesTakeNoMemory is the reproducer of a server
// that reserved every announced body before authenticating: 300
// connections without credentials, each announcing a 6 MB body and
// sending its first 8 KiB, must raise the server's RSS by less than 50 MB,
// get 401, and leave the server serving.
func TestE2EUnauthenticatedBodiesTakeNoMemory(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("s3cret,admin,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, "--token-auth-file", tokens)
	before := statusKB(t, ts.Pid(), "VmRSS")
	const conns = 300
	var peak int
	var wg sync.WaitGroup
	codes := make(chan string, conns)
	open := make([]net.Conn, 0, conns)
	for range conns {
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		fmt.Fprintf(c, "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\n"+
			"Content-Type: application/json\r\nContent-Length: 6291456\r\n\r\n%s", strings.Repeat(" ", 8<<10))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			status, _ := bufio.NewReader(c).ReadString('\n')
			codes <- strings.TrimSpace(status)
		}()
	}
	wg.Wait()
	peak = statusKB(t, ts.Pid(), "VmRSS")
	for _, c := range open {
		c.Close()
	}
	close(codes)
	for s := range codes {
		if !strings.Contains(s, " 401 ") {
			t.Errorf("a connection got %q, want 401", s)
			break
		}
	}
	if grew := peak - before; grew > 50<<10 {
		t.Errorf("RSS grew by %d MB (from %d to %d kB) for %d unauthenticated connections; bound 50 MB", grew>>10, before, peak, conns)
	}
	t.Logf("RSS %d kB before, %d kB with %d unauthenticated 6 MB announcements", before, peak, conns)
	req, _ := http.NewRequest("GET", ts.URL+"/version", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the server no longer serves: %v %v", resp, err)
	}
	resp.Body.Close()
}
