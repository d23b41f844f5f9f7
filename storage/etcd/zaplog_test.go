package etcd

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
)

// TestZapLoggerLevelsAndLabels: etcd's zap lines reach slog labelled, at
// serve's level: info only at debug, expected warnings and a closing
// member's errors at debug, other warnings and errors as such.
func TestZapLoggerLevelsAndLabels(t *testing.T) {
	var buf bytes.Buffer
	info := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	quiet := new(atomic.Bool)
	member := NewZapLogger(info.With("component", "etcd"), ZapLog{Quiet: quiet})
	client := NewZapLogger(info.With("component", "storage"), ZapLog{Label: "etcd client"})

	member.Info("became leader at term 2")
	member.Warn("simple token is not cryptographically signed")
	client.Warn("retrying of unary invoker failed", zap.Int("attempt", 3))
	member.Warn("lost TCP streaming connection with remote peer", zap.String("local-member-id", "8e9e05c52164694d"))
	client.Error("dial failed", zap.Error(bytes.ErrTooLarge))
	quiet.Store(true)
	member.Error("setting up serving from embedded etcd failed.")

	got := buf.String()
	for _, absent := range []string{"became leader", "simple token", "retrying of unary", "setting up serving"} {
		if strings.Contains(got, absent) {
			t.Errorf("logged %q at info:\n%s", absent, got)
		}
	}
	for _, want := range []string{
		`level=WARN msg="lost TCP streaming connection with remote peer" component=etcd local-member-id=8e9e05c52164694d`,
		`level=ERROR msg="etcd client: dial failed" component=storage error=`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}

	buf.Reset()
	debug := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	NewZapLogger(debug.With("component", "etcd"), ZapLog{}).Info("became leader at term 2")
	if !strings.Contains(buf.String(), `level=DEBUG msg="became leader at term 2" component=etcd`) {
		t.Errorf("etcd's info at --log-level debug: %q", buf.String())
	}
}

// TestMemberZapLoggerFatal: a fatal error of the embedded member (etcd
// failing to write its database on a full disk) is logged as the member's,
// followed by what it means and what to do, and then the process exits
// with code 1, as etcd's own logger would.
func TestMemberZapLoggerFatal(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil)).With("component", "etcd")
	exited := -1
	zl := NewZapLogger(log, ZapLog{Exit: func(code int) { exited = code }})
	zl.Info("below warnings: not logged")
	zl.Warn("slow fdatasync")
	zl.Fatal("failed to commit tx", zap.String("error", "write db: no space left on device"))
	if exited != 1 {
		t.Fatalf("exit code %d, want 1", exited)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3 (the warning, etcd's error, the explanation):\n%s", len(lines), out)
	}
	for i, want := range []string{
		`level=WARN msg="slow fdatasync" component=etcd`,
		`level=ERROR msg="failed to commit tx" component=etcd error="write db: no space left on device"`,
		`level=ERROR msg="The embedded etcd member cannot go on and stops this process`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want it to contain %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[2], `etcd_error="failed to commit tx"`) || !strings.Contains(lines[2], "free space") {
		t.Errorf("the explanation names neither etcd's error nor the remedy: %s", lines[2])
	}
}

// TestZapPanicExplained: etcd panics where it cannot go on (a raft
// snapshot it could not write on a full disk, in its apply loop); the
// member then ends as on a Fatal, with the explanation, not a goroutine
// dump.
func TestZapPanicExplained(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil)).With("component", "etcd")
	exited := -1
	zl := NewZapLogger(log, ZapLog{Exit: func(code int) { exited = code }})
	zl.Panic("failed to save snapshot", zap.String("error", "write member/snap/x.snap: no space left on device"))
	if exited != 1 {
		t.Fatalf("exit code %d, want 1", exited)
	}
	out := buf.String()
	if !strings.Contains(out, "no space left on device") || !strings.Contains(out, "The embedded etcd member cannot go on and stops this process") ||
		!strings.Contains(out, `etcd_error="failed to save snapshot"`) {
		t.Errorf("the panic is not explained:\n%s", out)
	}
}
