package sdnotify

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listen opens a unixgram socket as systemd would and points
// $NOTIFY_SOCKET at it.
func listen(t *testing.T, abstract bool) *net.UnixConn {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	if abstract {
		name = "@leasehold-sdnotify-test-" + strconv.Itoa(os.Getpid()) + "-" + t.Name()
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("read notification: %v", err)
	}
	return string(buf[:n])
}

func TestInactiveWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if n.Active() {
		t.Fatal("active without NOTIFY_SOCKET")
	}
	if err := n.Ready("x"); err != nil {
		t.Fatalf("Ready on an inactive notifier: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.Watchdog(ctx, nil) // returns at once
}

func TestReadyAndStopping(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run("abstract="+strconv.FormatBool(abstract), func(t *testing.T) {
			conn := listen(t, abstract)
			n, err := FromEnv()
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Ready("serving on 127.0.0.1:8080"); err != nil {
				t.Fatal(err)
			}
			got := receive(t, conn)
			for _, want := range []string{"READY=1\n", "STATUS=serving on 127.0.0.1:8080\n", "MAINPID=" + strconv.Itoa(os.Getpid())} {
				if !strings.Contains(got, want) {
					t.Errorf("ready message %q lacks %q", got, want)
				}
			}
			if err := n.Stopping(); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, conn); !strings.HasPrefix(got, "STOPPING=1\n") {
				t.Errorf("stopping message %q", got)
			}
		})
	}
}

func TestWatchdogSettings(t *testing.T) {
	listen(t, false)
	t.Setenv("WATCHDOG_USEC", "not-a-number")
	if _, err := FromEnv(); err == nil {
		t.Error("malformed WATCHDOG_USEC accepted")
	}
	t.Setenv("WATCHDOG_USEC", "2000000")
	t.Setenv("WATCHDOG_PID", "1") // another process's watchdog
	n, err := FromEnv()
	if err != nil || n.WatchdogInterval() != 0 {
		t.Errorf("watchdog for pid 1 taken by this process: %v %v", n.WatchdogInterval(), err)
	}
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	n, err = FromEnv()
	if err != nil || n.WatchdogInterval() != 2*time.Second {
		t.Errorf("interval = %v, %v; want 2s", n.WatchdogInterval(), err)
	}
}

// TestWatchdogPingsOnlyWhileAlive: pings flow while the liveness check
// passes and stop while it fails, so that systemd restarts a wedged server.
func TestWatchdogPingsOnlyWhileAlive(t *testing.T) {
	conn := listen(t, false)
	t.Setenv("WATCHDOG_USEC", "40000") // pings every 20 ms
	t.Setenv("WATCHDOG_PID", "")
	n, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Watchdog(ctx, func() error {
			if failing.Load() {
				return errors.New("storage wedged")
			}
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	for i := 0; i < 3; i++ {
		if got := receive(t, conn); got != "WATCHDOG=1" {
			t.Fatalf("ping %d = %q", i, got)
		}
	}
	failing.Store(true)
	// Drain what was sent before the switch, then expect silence for
	// several intervals.
	time.Sleep(60 * time.Millisecond)
	buf := make([]byte, 64)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		if _, err := conn.Read(buf); err != nil {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("pinged %q while the liveness check failed", buf[:n])
	}
	failing.Store(false)
	if got := receive(t, conn); got != "WATCHDOG=1" {
		t.Fatalf("no ping after recovery: %q", got)
	}
}
