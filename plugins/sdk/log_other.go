//go:build !wasip1

package sdk

import (
	"context"
	"fmt"
	"log/slog"
)

// Log sends a line to the server's log at an abi.Log* level; natively it
// goes to slog.Default, for unit tests.
func Log(level int32, format string, args ...any) {
	slog.Default().Log(context.Background(), slog.Level(level), fmt.Sprintf(format, args...))
}
