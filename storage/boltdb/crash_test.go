package boltdb

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashEnv tells a re-executed test binary to act as the crashing writer;
// crashDelayEnv gives its Options.CommitDelay.
const (
	crashEnv      = "LEASEHOLD_BOLTDB_CRASH_CHILD"
	crashDelayEnv = "LEASEHOLD_BOLTDB_CRASH_COMMIT_DELAY"
)

// TestCrashRecovery kills a writer process with SIGKILL mid-stream several
// times and checks that every write it acknowledged survived.
func TestCrashRecovery(t *testing.T) { crashRecovery(t, "TestCrashRecovery", 0) }

// TestCrashRecoveryCommitDelay is TestCrashRecovery with a group commit
// window: a write is acknowledged only once the round it waited in is
// synced, so every acknowledged write survives SIGKILL all the same.
func TestCrashRecoveryCommitDelay(t *testing.T) {
	crashRecovery(t, "TestCrashRecoveryCommitDelay", 20*time.Millisecond)
}

func crashRecovery(t *testing.T, name string, delay time.Duration) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	path := t.TempDir() + "/crash.db"
	latest := make(map[string]ack) // highest acknowledged write per key
	for round := range 4 {
		acks := runAndKill(t, path, name, delay, 150+100*round)
		for _, a := range acks {
			if a.rev > latest[a.key].rev {
				latest[a.key] = a
			}
		}
		// The previous round's Close left a clean-close marker; the
		// killed child removed it before its first write, so this Open
		// must walk every page.
		if markerExists(t, path) {
			t.Fatalf("round %d: a clean-close marker survived SIGKILL", round)
		}
		s, check := openChecked(t, path)
		if check != "pages walked" {
			t.Fatalf("round %d: reopen after SIGKILL: fileCheck %q, want every page walked", round, check)
		}
		if err := s.Verify(context.Background()); err != nil {
			t.Fatalf("round %d: integrity: %v", round, err)
		}
		for key, a := range latest {
			kv, err := s.Get(context.Background(), key)
			if err != nil {
				t.Fatalf("round %d: acknowledged %s@%d lost: %v", round, key, a.rev, err)
			}
			if kv.ModRevision < a.rev {
				t.Fatalf("round %d: %s at revision %d, acknowledged %d", round, key, kv.ModRevision, a.rev)
			}
			if kv.ModRevision == a.rev && string(kv.Value) != a.value {
				t.Fatalf("round %d: %s@%d = %q, acknowledged %q", round, key, a.rev, kv.Value, a.value)
			}
		}
		rev, _ := s.CurrentRevision(context.Background())
		t.Logf("round %d: %d acks, %d keys, revision %d", round, len(acks), len(latest), rev)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if !markerExists(t, path) {
			t.Fatalf("round %d: Close left no clean-close marker", round)
		}
	}
}

type ack struct {
	key   string
	rev   int64
	value string
}

// runAndKill starts the child, lets it acknowledge at least n writes, kills
// it, and returns every acknowledgement it printed (including those still
// in the pipe when it died).
func runAndKill(t *testing.T, path, name string, delay time.Duration, n int) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path, crashDelayEnv+"="+delay.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var acks []ack
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "ack" {
			continue // test framework chatter
		}
		rev, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatalf("bad ack line %q", sc.Text())
		}
		acks = append(acks, ack{key: f[1], rev: rev, value: f[3]})
		if len(acks) >= n && !killed {
			killed = true
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("child ended after %d acks without being killed", len(acks))
	}
	return acks
}

// crashChild writes from 16 goroutines until killed, printing every
// acknowledged write. Each goroutine owns its keys, so there are no
// conflicts; the values encode the writer and a counter.
func crashChild(path string) {
	ctx := context.Background()
	delay, err := time.ParseDuration(os.Getenv(crashDelayEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	s, err := Open(ctx, path, Options{Logger: quietLogger, CommitDelay: delay})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	for g := range 16 {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("/crash/g%02d/k%d", g, i%8)
				value := fmt.Sprintf("g%d-i%d-%d", g, i, time.Now().UnixNano())
				kv, err := s.Get(ctx, key)
				if err == nil {
					kv, err = s.Update(ctx, key, []byte(value), kv.ModRevision)
				} else {
					kv, err = s.Create(ctx, key, []byte(value))
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "child write:", err)
					os.Exit(3)
				}
				line := fmt.Sprintf("ack %s %d %s\n", key, kv.ModRevision, value)
				mu.Lock()
				_, _ = os.Stdout.WriteString(line) // unbuffered: printed means acknowledged
				mu.Unlock()
			}
		}()
	}
	time.Sleep(20 * time.Second) // the parent kills us long before this
	os.Exit(4)
}
