package etcd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestMemberZapLoggerFatal: a fatal error of the embedded member (etcd
// failing to write its database on a full disk) is logged as the member's,
// followed by what it means and what to do, and then the process exits
// with code 1, as etcd's own logger would.
func TestMemberZapLoggerFatal(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	exited := -1
	zl := newMemberZapLogger(log, func(code int) { exited = code })
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
		`level=WARN msg="etcd member: slow fdatasync"`,
		`level=ERROR msg="etcd member: failed to commit tx" error="write db: no space left on device"`,
		`level=ERROR msg="The embedded etcd member cannot go on and stops this process`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want it to contain %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[2], `etcd_error="failed to commit tx"`) || !strings.Contains(lines[2], "free space") {
		t.Errorf("the explanation names neither etcd's error nor the remedy: %s", lines[2])
	}

	// The client's logger keeps its prefix and has no such hook.
	buf.Reset()
	newZapLogger(log).Warn("retrying")
	if !strings.Contains(buf.String(), `msg="etcd client: retrying"`) {
		t.Errorf("client log line = %s", buf.String())
	}
}
