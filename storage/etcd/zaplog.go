package etcd

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger routes the etcd client's zap logging into slog, so that
// leasehold has one log stream. Only warnings and errors pass: the client
// logs every connection and retry at lower levels.
func newZapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log})
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	log   *slog.Logger
	attrs []any
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, attrs: append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)}
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
	c.log.Log(context.Background(), level, "etcd client: "+e.Message, args...)
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

// NewZapLogger is newZapLogger for the embedded etcd member
// (storage/cluster), whose server logs through zap as its client does.
func NewZapLogger(log *slog.Logger) *zap.Logger { return newZapLogger(log) }
