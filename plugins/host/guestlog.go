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

	// Bytes of stdout/stderr the host looks at: at most guestStreamPerCall
	// in one call, and guestStreamBurst then guestStreamPerSec per module
	// over time. The rest is dropped unread (counted, never split or
	// copied): one fd_write may name 60 MiB of guest memory, and many
	// iovecs may name it again and again.
	guestStreamPerCall = 64 << 10
	guestStreamBurst   = 256 << 10
	guestStreamPerSec  = 32 << 10
)

// guestLogger forwards a module's log calls and stdout/stderr to the
// server log, tagged with the module, and rate-limited per module: a
// strategy that logs in a loop must not flood the server's log, and a
// strategy that writes a flood must cost the host no more than the bytes
// it is allowed to have read.
type guestLogger struct {
	log *slog.Logger

	mu           sync.Mutex
	tokens       float64 // lines
	byteTokens   float64 // stdout/stderr bytes
	last         time.Time
	lastBytes    time.Time
	dropped      int   // lines dropped since the last line logged
	droppedBytes int64 // stream bytes dropped unread since then
}

func newGuestLogger(base *slog.Logger, name, sha string) *guestLogger {
	short := sha
	if len(short) > 12 {
		short = short[:12]
	}
	return &guestLogger{log: base.With("strategy", name, "module", short), tokens: guestLogBurst, byteTokens: guestStreamBurst}
}

func (g *guestLogger) enabled(ctx context.Context, level int32) bool {
	return g.log.Enabled(ctx, slog.Level(level))
}

// allow takes a token; it returns how many lines and stream bytes were
// dropped before this line, or -1 when this line must be dropped too.
func (g *guestLogger) allow(now time.Time) (int, int64) {
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
		return -1, 0
	}
	g.tokens--
	d, db := g.dropped, g.droppedBytes
	g.dropped, g.droppedBytes = 0, 0
	return d, db
}

// takeBytes grants up to n bytes of stream output to be read, and counts
// the rest as dropped.
func (g *guestLogger) takeBytes(now time.Time, n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.lastBytes.IsZero() {
		g.byteTokens += now.Sub(g.lastBytes).Seconds() * guestStreamPerSec
		if g.byteTokens > guestStreamBurst {
			g.byteTokens = guestStreamBurst
		}
	}
	g.lastBytes = now
	grant := min(n, int(g.byteTokens))
	g.byteTokens -= float64(grant)
	g.droppedBytes += int64(n - grant)
	return grant
}

// dropBytes counts n stream bytes dropped unread.
func (g *guestLogger) dropBytes(n int) {
	g.mu.Lock()
	g.droppedBytes += int64(n)
	g.mu.Unlock()
}

func (g *guestLogger) write(ctx context.Context, level int32, stream string, line []byte) {
	if g == nil || !g.enabled(ctx, level) {
		return
	}
	dropped, droppedBytes := g.allow(time.Now())
	if dropped < 0 {
		return
	}
	if dropped > 0 || droppedBytes > 0 {
		g.log.Warn("guest log lines dropped by rate limit", "dropped", dropped, "droppedBytes", droppedBytes)
	}
	g.log.Log(ctx, slog.Level(level), excerptN(line, maxGuestLine), "stream", stream)
}

func excerptN(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(bytes.ToValidUTF8(bytes.TrimRight(b, "\r\n"), []byte("?")))
}

// stream returns a writer for a WASI stdout or stderr of one call: each
// line becomes one log record (stdout at debug, stderr at info: Go guests
// print panics there). Bytes over the call's and the module's budgets are
// dropped before they are read.
func (g *guestLogger) stream(name string) io.Writer {
	if g == nil {
		return io.Discard
	}
	level := int32(slog.LevelDebug)
	if name == "stderr" {
		level = int32(slog.LevelInfo)
	}
	return &streamWriter{g: g, name: name, level: level, left: guestStreamPerCall}
}

type streamWriter struct {
	g     *guestLogger
	name  string
	level int32
	left  int // bytes this call may still have read
}

// Write reads at most the granted prefix of p, line by line in place: no
// copy of p, no slice of its lines. It always reports all of p written, as
// a terminal that drops output would: a guest retrying a short write
// would spin.
func (w *streamWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.left <= 0 {
		w.g.dropBytes(n)
		return n, nil
	}
	if !w.g.enabled(context.Background(), w.level) {
		return n, nil // nothing would be logged: nothing to read or count
	}
	grant := w.g.takeBytes(time.Now(), min(n, w.left))
	w.g.dropBytes(n - min(n, w.left))
	w.left -= min(n, w.left)
	p = p[:grant]
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			w.g.write(context.Background(), w.level, w.name, line)
		}
	}
	return n, nil
}
