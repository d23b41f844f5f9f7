package clockcheck

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate valid from notBefore to
// notAfter to dir/name and returns its path.
func writeCert(t *testing.T, dir, name string, notBefore, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func buildInfo(vcsTime string) func() (*debug.BuildInfo, bool) {
	return func() (*debug.BuildInfo, bool) {
		bi := &debug.BuildInfo{}
		if vcsTime != "" {
			bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: vcsTime}}
		}
		return bi, true
	}
}

func TestBuildFloor(t *testing.T) {
	if f := BuildFloor(buildInfo("2026-11-20T10:00:00Z")); !f.At.Equal(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)) || f.Why != "this build" {
		t.Errorf("with vcs.time: %+v", f)
	}
	if f := BuildFloor(buildInfo("")); !f.At.Equal(MinBuildTime) {
		t.Errorf("without vcs.time: %+v, want MinBuildTime", f)
	}
	if f := BuildFloor(buildInfo("2001-01-01T00:00:00Z")); !f.At.Equal(MinBuildTime) {
		t.Errorf("vcs.time before MinBuildTime: %+v, want MinBuildTime", f)
	}
	if f := BuildFloor(func() (*debug.BuildInfo, bool) { return nil, false }); !f.At.Equal(MinBuildTime) {
		t.Errorf("no build info: %+v", f)
	}
}

func TestCertFloorAndBehind(t *testing.T) {
	dir := t.TempDir()
	early := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	late := early.Add(48 * time.Hour)
	a := writeCert(t, dir, "ca.crt", early, early.AddDate(10, 0, 0))
	b := writeCert(t, dir, "member.crt", late, late.AddDate(1, 0, 0))
	f := CertFloor(a, filepath.Join(dir, "missing.crt"), b)
	if !f.At.Equal(late) || f.Why != "the certificate "+b {
		t.Fatalf("CertFloor = %+v, want the member certificate's NotBefore %v", f, late)
	}
	f = Latest(BuildFloor(buildInfo("")), f)
	if f.At != late {
		t.Fatalf("Latest = %+v", f)
	}
	epoch := time.Unix(12, 0)
	err := f.Behind(epoch)
	if !errors.Is(err, ErrBehind) {
		t.Fatalf("Behind(1970) = %v, want ErrBehind", err)
	}
	for _, want := range []string{"1970-01-01T00:00:12Z", b, late.Format(time.RFC3339), "NTP"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Behind's message %q does not say %q", err, want)
		}
	}
	if n := f.Note(epoch); !strings.Contains(n, "looks unset") || !strings.Contains(n, "1970-01-01T00:00:12Z") || f.Note(late) != "" {
		t.Errorf("Note = %q before the floor, %q at it", n, f.Note(late))
	}
	if err := f.Behind(late); err != nil {
		t.Errorf("Behind(floor) = %v, want nil", err)
	}
	if err := (Floor{}).Behind(epoch); err != nil {
		t.Errorf("a zero floor: %v", err)
	}
}

// syncBuffer is a log destination Wait's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWaitUntilSet: a clock in 1970 waits, saying why in the log and the
// status, and goes on once the clock is stepped past the floor.
func TestWaitUntilSet(t *testing.T) {
	floor := Floor{At: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Why: "this build"}
	var wall atomic.Int64 // unix nanoseconds
	wall.Store(time.Unix(5, 0).UnixNano())
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var mu sync.Mutex
	var statuses []string
	done := make(chan error, 1)
	go func() {
		done <- Wait(context.Background(), floor, log, Options{
			Now:  func() time.Time { return time.Unix(0, wall.Load()) },
			Poll: 10 * time.Millisecond, LogEvery: 50 * time.Millisecond,
			Status: func(s string) { mu.Lock(); statuses = append(statuses, s); mu.Unlock() },
		})
	}()
	// The clock is stepped only once the wait was logged again: on a
	// loaded machine the goroutine may start well after a fixed sleep
	// began, and a fixed 200 ms stepped it before the first repeat.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "Still waiting"); {
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v with the clock in 1970", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no \"Still waiting\" within 10 s of waiting (LogEvery 50ms):\n%s", logs.String())
		}
	}
	wall.Store(floor.At.Add(time.Hour).UnixNano()) // NTP answered
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still waiting 10 s after the clock was set")
	}
	out := logs.String()
	for _, want := range []string{"Waiting for the wall clock to be set", "1970-01-01T00:00:05Z", "this build", "Still waiting", "The wall clock was set"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not say %q:\n%s", want, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(statuses) < 2 || !strings.Contains(statuses[0], "has not been set") || statuses[len(statuses)-1] != "" {
		t.Errorf("statuses = %q, want the reason, then \"\" once set", statuses)
	}
}

func TestWaitReturnsAtOnceOrOnCancel(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	floor := Floor{At: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Why: "this build"}
	if err := Wait(context.Background(), floor, log, Options{Now: func() time.Time { return floor.At }}); err != nil || logs.String() != "" {
		t.Errorf("a set clock: err %v, log %q; want nil and silence", err, logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, floor, log, Options{Now: func() time.Time { return time.Unix(0, 0) }, Poll: time.Millisecond}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestExpired(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2028, 6, 1, 0, 0, 0, 0, time.UTC)
	valid := writeCert(t, dir, "ca.crt", now.AddDate(-2, 0, 0), now.AddDate(8, 0, 0))
	old := writeCert(t, dir, "member.crt", now.AddDate(-2, 0, 0), now.AddDate(-1, 0, 0))
	if err := Expired(now, valid, filepath.Join(dir, "missing.crt")); err != nil {
		t.Errorf("valid or missing: %v", err)
	}
	err := Expired(now, valid, old)
	if err == nil || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), "expired at 2027-06-01") {
		t.Errorf("Expired = %v, want the member certificate named with its expiry", err)
	}
}
