package cluster

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/leasehold/leasehold/internal/cli"
)

// CommandWith is "leasehold cluster" (Command) with offline subcommands
// besides: each works on a stopped member's data directory ("cluster
// reset"), so it lives with the storage code, and runs with the arguments
// after its name. "cluster --help" lists them; each has its own --help.
func CommandWith(offline ...cli.Command) cli.Command {
	c := Command
	about := commandAbout
	for _, o := range offline {
		c.Synopsis += "\n" + o.Synopsis
		c.Summary = strings.TrimSuffix(c.Summary, ")") + ", " + o.Name + ")"
		about += fmt.Sprintf("\n  %-13s %s\n  %-13s (no kubeconfig: \"leasehold cluster %s --help\")", o.Name, o.Summary, "", o.Name)
	}
	synopsis := c.Synopsis
	c.Run = func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		for _, o := range offline {
			if len(args) > 0 && args[0] == o.Name {
				return o.Run(ctx, args[1:], stdout, stderr)
			}
		}
		// "cluster --help" shows every form, "cluster status --help"
		// those of the server's subcommands.
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			return run(ctx, args, stdout, stderr)
		}
		return runAs(ctx, synopsis, about, args, stdout, stderr)
	}
	return c
}
