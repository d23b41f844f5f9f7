package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLog says how etcd's zap logging reaches slog. etcd logs through zap,
// leasehold through slog: every line etcd writes goes into the one slog
// stream, labelled, at serve's --log-level.
type ZapLog struct {
	// Label prefixes each message ("etcd client: ..."); empty leaves the
	// message as is, for a logger whose attributes already say it is
	// etcd's (the embedded member's, with component=etcd).
	Label string
	// Quiet, when it reports true, lowers every line to debug: a member
	// that is being closed logs its listeners' "use of closed network
	// connection" as errors, which are the expected end, not a fault.
	Quiet *atomic.Bool
	// Exit, when set, is how a fatal entry ends the process, after the
	// entry and an explanation are logged: etcd's server ends its process
	// (a zap Fatal) when it cannot write its log or database, a full disk
	// above all, so that it never serves from a store it failed to write.
	// The embedded member's log then says what happened and what to do.
	Exit func(code int)
}

// NewZapLogger is a zap logger writing to log as z says.
//
// zap's levels map to slog's: debug and info to debug (etcd's info is a
// running commentary of raft and connections, dozens of lines a minute,
// that --log-level debug shows), warn to warn, error and above to error.
// A few warnings go to debug too (see expectedWarnings): an operator can
// do nothing about them, or learns the same from leasehold's own lines.
func NewZapLogger(log *slog.Logger, z ZapLog) *zap.Logger {
	var opts []zap.Option
	if z.Exit != nil {
		// etcd panics (zap's Panic level) where it cannot go on, as it
		// exits where it logs Fatal: a raft snapshot it could not write
		// on a full disk panics in its apply loop. Both end the process
		// with the explanation, not a goroutine dump.
		hook := fatalHook{log: log, exit: z.Exit}
		opts = append(opts, zap.WithFatalHook(hook), zap.WithPanicHook(hook))
	}
	return zap.New(&slogCore{log: log, z: z}, opts...)
}

// fatalHook explains a fatal error of the embedded member, then exits as
// etcd would have.
type fatalHook struct {
	log  *slog.Logger
	exit func(int)
}

func (h fatalHook) OnWrite(ce *zapcore.CheckedEntry, _ []zapcore.Field) {
	h.log.Error("The embedded etcd member cannot go on and stops this process (etcd exits when it cannot write its log or database, e.g. on a full disk: it never serves from a store it failed to write). "+
		"Fix the cause (free space in the data directory) and start leasehold again: the member recovers from its data directory and catches up with the others",
		"etcd_error", ce.Message)
	h.exit(1)
}

// newZapLogger is the store's client logger.
func newZapLogger(log *slog.Logger) *zap.Logger {
	return NewZapLogger(log, ZapLog{Label: "etcd client"})
}

// expectedWarnings are etcd warnings about settings leasehold chooses on
// purpose: client and gRPC gateway share the client listener (one port a
// member needs), and etcd's auth is off (mutual TLS admits clients). The
// client's retries of one request, tens a second while a member has no
// leader, end in the request's error, which the caller reports. An
// embedded member's etcd listens for peers on loopback without TLS, behind
// storage/cluster's peer gate, and keeps its certificate for dialing them.
var expectedWarnings = map[string]bool{
	"scheme is HTTP while key and cert files are present; ignoring key and cert files":     true,
	"retrying of unary invoker failed":                                                     true,
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	log   *slog.Logger
	z     ZapLog
	attrs []any
}

// level maps an entry to its slog level.
func (c *slogCore) level(l zapcore.Level, msg string) slog.Level {
	switch {
	case c.z.Quiet != nil && c.z.Quiet.Load():
		return slog.LevelDebug
	case l <= zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.WarnLevel:
		if expectedWarnings[msg] {
			return slog.LevelDebug
		}
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// Enabled passes what could be logged at some mapping: the exact level is
// decided per entry in Check, which sees the message.
func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), c.level(l, ""))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, z: c.z, attrs: append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.log.Enabled(context.Background(), c.level(e.Level, e.Message)) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	args := append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)
	msg := e.Message
	if c.z.Label != "" {
		msg = c.z.Label + ": " + msg
	}
	c.log.Log(context.Background(), c.level(e.Level, e.Message), msg, args...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// fieldAttrs renders zap fields as slog key-value pairs.
func fieldAttrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, k, v)
	}
	return out
}

var grpcLogOnce sync.Once

// RouteGRPCLogs sends gRPC's own logging, which by default writes its
// errors unlabelled to standard error, to log (component=grpc): info and
// warnings at debug (a member that is down makes gRPC warn at every
// reconnection attempt, which the storage's own errors already say),
// errors at warn. Only the first call counts: gRPC allows its logger to
// be set once, before it is used.
func RouteGRPCLogs(log *slog.Logger) {
	// clientv3.SetLogger is grpclog.SetLoggerV2, reached through the etcd
	// client so that gRPC stays an indirect dependency.
	grpcLogOnce.Do(func() { clientv3.SetLogger(&grpcLogger{log: log.With("component", "grpc")}) })
}

// grpcLogger is a grpclog.LoggerV2 writing to slog.
type grpcLogger struct{ log *slog.Logger }

func (g *grpcLogger) at(l slog.Level, msg string) { g.log.Log(context.Background(), l, msg) }

func (g *grpcLogger) Info(args ...any)   { g.at(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Infoln(args ...any) { g.at(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Infof(format string, args ...any) {
	g.at(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Warning(args ...any)   { g.at(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Warningln(args ...any) { g.at(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Warningf(format string, args ...any) {
	g.at(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Error(args ...any)   { g.at(slog.LevelWarn, fmt.Sprint(args...)) }
func (g *grpcLogger) Errorln(args ...any) { g.at(slog.LevelWarn, fmt.Sprint(args...)) }
func (g *grpcLogger) Errorf(format string, args ...any) {
	g.at(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Fatal(args ...any)                 { g.fatal(fmt.Sprint(args...)) }
func (g *grpcLogger) Fatalln(args ...any)               { g.fatal(fmt.Sprint(args...)) }
func (g *grpcLogger) Fatalf(format string, args ...any) { g.fatal(fmt.Sprintf(format, args...)) }

// V reports whether verbosity level l is on: gRPC's verbose logging is
// its debugging aid, shown only at debug.
func (g *grpcLogger) V(l int) bool {
	return l <= 0 || g.log.Enabled(context.Background(), slog.LevelDebug-slog.Level(l))
}

// fatal logs and exits, as grpclog's contract for Fatal requires.
func (g *grpcLogger) fatal(msg string) {
	g.at(slog.LevelError, msg)
	os.Exit(1)
}
