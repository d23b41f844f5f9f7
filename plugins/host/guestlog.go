package host

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

const (
	maxGuestLine   = 4096 // bytes of one guest log line kept
	guestLogBurst  = 20   // lines a module may log at once
	guestLogPerSec = 5    // sustained lines per second per module
)

// guestLogger forwards a module's log calls and stdout/stderr to the
// server log, tagged with the module, and rate-limited per module: a
// strategy that logs in a loop must not flood the server's log.
type guestLogger struct {
	log *slog.Logger

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

func newGuestLogger(base *slog.Logger, name, sha string) *guestLogger {
	short := sha
	if len(short) > 12 {
		short = short[:12]
	}
	return &guestLogger{log: base.With("strategy", name, "module", short), tokens: guestLogBurst}
}

func (g *guestLogger) enabled(ctx context.Context, level int32) bool {
	return g.log.Enabled(ctx, slog.Level(level))
}

// allow takes a token; it returns how many lines were dropped before this
// one, or -1 when this line must be dropped too.
func (g *guestLogger) allow(now time.Time) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() {
		g.tokens += now.Sub(g.last).Seconds() * guestLogPerSec
		if g.tokens > guestLogBurst {
			g.tokens = guestLogBurst
		}
	}
	g.last = now
	if g.tokens < 1 {
		g.dropped++
		return -1
	}
	g.tokens--
	d := g.dropped
	g.dropped = 0
	return d
}

func (g *guestLogger) write(ctx context.Context, level int32, stream string, line []byte) {
	if g == nil || !g.enabled(ctx, level) {
		return
	}
	dropped := g.allow(time.Now())
	if dropped < 0 {
		return
	}
	if dropped > 0 {
		g.log.Warn("guest log lines dropped by rate limit", "dropped", dropped)
	}
	g.log.Log(ctx, slog.Level(level), excerptN(line, maxGuestLine), "stream", stream)
}

func excerptN(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(bytes.ToValidUTF8(bytes.TrimRight(b, "\r\n"), []byte("?")))
}

// stream returns a writer for a WASI stdout or stderr: each line becomes
// one log record (stdout at debug, stderr at info: Go guests print panics
// there).
func (g *guestLogger) stream(name string) io.Writer {
	if g == nil {
		return io.Discard
	}
	level := int32(slog.LevelDebug)
	if name == "stderr" {
		level = int32(slog.LevelInfo)
	}
	return streamWriter{g: g, name: name, level: level}
}

type streamWriter struct {
	g     *guestLogger
	name  string
	level int32
}

func (w streamWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) > 0 {
			w.g.write(context.Background(), w.level, w.name, line)
		}
	}
	return len(p), nil
}
