package etcd

import (
	"context"
	"log/slog"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger routes the etcd client's zap logging into slog, so that
// leasehold has one log stream. Only warnings and errors pass: the client
// logs every connection and retry at lower levels.
func newZapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log, prefix: "etcd client: "})
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	log *slog.Logger
	// prefix says which part of etcd speaks: its client, or the
	// embedded member's server.
	prefix string
	attrs  []any
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, prefix: c.prefix, attrs: append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelWarn
	if e.Level > zapcore.WarnLevel {
		level = slog.LevelError
	}
	args := append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)
	c.log.Log(context.Background(), level, c.prefix+e.Message, args...)
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

// NewZapLogger is newZapLogger for the embedded etcd member's clients
// (storage/cluster).
func NewZapLogger(log *slog.Logger) *zap.Logger { return newZapLogger(log) }

// NewMemberZapLogger is the logger of an embedded etcd member's server
// (storage/cluster). etcd ends its process (a zap Fatal) when it cannot
// write its log or database, a full disk above all, so that it never
// serves from a store it failed to write; the member's log then says,
// after etcd's own error, that this is what happened and what to do.
func NewMemberZapLogger(log *slog.Logger) *zap.Logger {
	return newMemberZapLogger(log, os.Exit)
}

func newMemberZapLogger(log *slog.Logger, exit func(int)) *zap.Logger {
	return zap.New(&slogCore{log: log, prefix: "etcd member: "}, zap.WithFatalHook(fatalHook{log: log, exit: exit}))
}

// fatalHook explains a fatal error of the member, then exits as etcd
// would have.
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
