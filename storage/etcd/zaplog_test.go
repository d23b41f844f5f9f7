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
